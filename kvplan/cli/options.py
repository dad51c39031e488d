"""The options several commands share, defined once: each spelling, its aliases and one help
text. A command takes an option by annotating a parameter with its type here
(``kv_cache_dtype: KvCacheDtypeOpt = "auto"``); the default stays with the command.

Where a command may leave an option out while another requires it, the two types share
one ``typer.Option`` (``TpOpt`` and ``OptionalTpOpt``): the spellings and the help cannot
drift apart. Light on purpose, as ``kvplan.cli.common``: typer and nothing heavy.
"""

from enum import Enum
from typing import Annotated, Any

import typer

from kvplan.errors import KvplanError


class OutputFormat(str, Enum):
    table = "table"
    json = "json"


# -- completion -----------------------------------------------------------------------------------


def complete_model(incomplete: str) -> list[str]:
    """Shell completion: bundled model names starting with what was typed (reads file names
    only, so it answers at once)."""
    from kvplan.catalog.lookup import bundled_names

    key = incomplete.lower()
    return [name for name in bundled_names() if name.startswith(key)]


def complete_gpu(incomplete: str) -> list[str]:
    """Shell completion: catalog GPU names and aliases starting with what was typed."""
    from kvplan.hardware.gpus import list_gpus

    key = incomplete.lower()
    names = (label for gpu in list_gpus() for label in (gpu.name, *gpu.aliases))
    return sorted({n for n in names if n.lower().startswith(key)})


# -- the model ------------------------------------------------------------------------------------

ModelArg = Annotated[
    str,
    typer.Argument(
        autocompletion=complete_model,
        help="A catalog name (llama-3.1-8b), a Hugging Face id (meta-llama/Llama-3.1-8B, any"
        " case), an alias, a re-upload or quantized variant (Qwen/Qwen3-32B-AWQ), an Ollama"
        " tag (llama3.1:8b), a path to a spec YAML, or a Hugging Face config.json or model"
        " folder (read as `kvplan import` reads it).",
        show_default=False,
    ),
]

# -- output ---------------------------------------------------------------------------------------

FormatOpt = Annotated[
    OutputFormat,
    typer.Option("--format", "-f", help="table for people, json (with schema_version) for tools."),
]

# -- the hardware ---------------------------------------------------------------------------------

GPU_NAMES_HELP = (
    ' Also the name nvidia-smi or rocm-smi prints ("NVIDIA H100 80GB HBM3", "Tesla T4",'
    ' "AMD Instinct MI300X"), or local: the GPUs of this machine, as nvidia-smi or rocm-smi'
    " list them."
)


def _say_local_gpus(value: str | None) -> str | None:
    """``--gpu local``: say on stderr what was found."""
    from kvplan.hardware.gpus import LOCAL, normalize_gpu_name

    if value is not None and normalize_gpu_name(value) == LOCAL:
        from kvplan.hardware.local import local_gpus

        try:
            summary = local_gpus().summary
        except KvplanError:
            return value  # the lookup raises it again, inside the command's error guard
        typer.echo(f"kvplan: {summary}", err=True)
    return value


def gpu_option(help: str, *, show_default: bool = True) -> Any:
    """``--gpu`` / ``-g`` with GPU completion, worded by the caller; the driver names and
    ``local`` are added to ``help``. Prefer ``GpuOpt`` / ``OptionalGpuOpt``."""
    return typer.Option(
        "--gpu",
        "-g",
        autocompletion=complete_gpu,
        callback=_say_local_gpus,
        help=help + GPU_NAMES_HELP,
        show_default=show_default,
    )


_GPU = gpu_option(
    "A catalog GPU (`kvplan gpus`): h100 (the H100 SXM 80GB), h200, a100-80gb, l40s,"
    " rtx-4090, mi300x...; plan and compare take several, comma-separated (h100,h200).",
    show_default=False,
)
GpuOpt = Annotated[str, _GPU]
OptionalGpuOpt = Annotated[str | None, _GPU]

_UTILIZATION = typer.Option(
    "--gpu-memory-utilization",
    help="Share of the GPU's total memory the engine may use: 0.9 or 90% (default 0.9,"
    " vLLM's; TensorRT-LLM: its free_gpu_memory_fraction).",
    show_default=False,
)
GpuMemoryUtilizationOpt = Annotated[str, _UTILIZATION]
OptionalGpuMemoryUtilizationOpt = Annotated[str | None, _UTILIZATION]

# -- the deployment -------------------------------------------------------------------------------

_TP = typer.Option(
    "--tensor-parallel-size",
    "-tp",
    min=1,
    help="GPUs sharding each layer (llama.cpp: the GPUs it splits the layers over).",
)
TpOpt = Annotated[int, _TP]
OptionalTpOpt = Annotated[int | None, _TP]

_PP = typer.Option(
    "--pipeline-parallel-size", "-pp", min=1, help="Pipeline stages (the layers split)."
)
PpOpt = Annotated[int, _PP]
OptionalPpOpt = Annotated[int | None, _PP]

# -- the request ----------------------------------------------------------------------------------

_MAX_MODEL_LEN = typer.Option(
    "--max-model-len",
    "--context",
    "-c",
    help="Tokens per sequence, prompt and output (vLLM's --max-model-len): 32768, 32k"
    " (=32,000) or 32K (=32,768). The same with every engine: with llama.cpp, llama-server's"
    " -c (the cells of all sequences) is this times -np.",
    show_default=False,
)
MaxModelLenOpt = Annotated[str, _MAX_MODEL_LEN]
OptionalMaxModelLenOpt = Annotated[str | None, _MAX_MODEL_LEN]

# -- dtypes ---------------------------------------------------------------------------------------

_KV_CACHE_DTYPE = typer.Option(
    "--kv-cache-dtype",
    "--kv-dtype",
    help="KV cache dtype: auto (the dtype the model is served in: a float32 checkpoint in"
    " bfloat16, as the engines' --dtype auto), float16, bfloat16, float32, fp8 (e4m3),"
    " fp8_e5m2, int8, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, nvfp4, mxfp4 (llama.cpp: q8_0"
    " for fp8); vLLM's layouts int8_per_token_head, fp8_per_token_head (a scale per token"
    " and head) with plan --engine vllm.",
)
KvCacheDtypeOpt = Annotated[str, _KV_CACHE_DTYPE]
OptionalKvCacheDtypeOpt = Annotated[str | None, _KV_CACHE_DTYPE]
DtypeOpt = Annotated[
    str | None,
    typer.Option(
        "--dtype",
        help="Model dtype in place of the spec's: bfloat16, float16, float32 (auto: the spec's).",
        show_default=False,
    ),
]
QuantizationOpt = Annotated[
    str | None,
    typer.Option(
        "--quantization",
        "-q",
        help="Weight format for the linear layers: fp8, int8, int4, awq, gptq, mxfp4,"
        " nvfp4 (group scales counted). Default: the checkpoint's own formats.",
        show_default=False,
    ),
]

# -- the engine -----------------------------------------------------------------------------------

EngineOpt = Annotated[
    str,
    typer.Option(
        "--engine",
        "-e",
        help="Whose rules answer: ideal (kvplan's own formula and paged planner) or an"
        " engine, each with its own budget, blocks and printed figures. calc: llama.cpp,"
        " ik_llama.cpp, transformers; plan: vllm, sglang, trtllm, llama.cpp; flags: all or"
        " one of vllm, sglang, llama.cpp, tgi; perf, compare, chart: vllm.",
    ),
]
EngineVersionOpt = Annotated[
    str | None,
    typer.Option(
        "--engine-version",
        help="The engine's version as it prints it: vLLM 0.19.1, v0.19 or 0.32.0; a llama.cpp"
        " build, b5781 or 5781; transformers 4.57. Its release line's rules; one outside every"
        " modelled line takes the nearest and says so. Default: the newest modelled.",
        show_default=False,
    ),
]

HfOverridesOpt = Annotated[
    str | None,
    typer.Option(
        "--hf-overrides",
        help="The model's trained length extended as the engines take it (vLLM's"
        " --hf-overrides): a JSON object with max_position_embeddings, or rope_scaling"
        " (rope_type yarn, factor, original_max_position_embeddings).",
        show_default=False,
    ),
]
CalibrationOpt = Annotated[
    str | None,
    typer.Option(
        "--calibration",
        help="vLLM: a site's calibration file (kvplan calibrate): its fitted activation,"
        " CUDA-graph, non-torch and remaining terms replace kvplan's on that GPU, line and TP.",
        show_default=False,
    ),
]
SpeculativeConfigOpt = Annotated[
    str | None,
    typer.Option(
        "--speculative-config",
        show_default=False,
        help="vLLM 0.21 and later: speculative decoding, JSON as vLLM takes it"
        ' (\'{"method": "mtp", "num_speculative_tokens": 3}\'; methods mtp, eagle, eagle3,'
        ' draft_model with "model" the drafter\'s name, ngram, ngram_gpu, suffix). The'
        " drafter's layers join the pool, recurrent state holds k more blocks a request and"
        " the drafter's weights come out of the budget.",
    ),
]
