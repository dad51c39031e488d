"""The ``kvplan`` command: parse arguments, call the library, render. Errors become exit codes.

Kept light on purpose: importing this module must not import every spec, torch or anything
heavy, so that ``kvplan --help`` and a ``calc`` start about as fast as typer itself.
"""

import json
import os
import sys
from collections.abc import Callable
from enum import Enum, IntEnum
from typing import Annotated, Any, NoReturn, TypeVar

import typer

from kvplan import __version__
from kvplan.errors import KvplanError
from kvplan.progress import progress, set_quiet

# kvplan validates with pydantic but uses none of its plugins; looking them up scans every
# installed distribution's entry points on a `calc`'s start-up path. Set for this process and
# the children it starts (git for `kvplan diff`), which do not use pydantic plugins either.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")


class ExitCode(IntEnum):
    """Exit codes of every kvplan command."""

    OK = 0
    CHECK_FAILED = 1
    USAGE = 2
    UNAVAILABLE = 3


class OutputFormat(str, Enum):
    table = "table"
    json = "json"


EXIT_CODES_HELP = (
    "Exit codes: 0 ok; 1 a budget check failed; 2 bad usage or bad input (a spec, a size,"
    " an unknown model); 3 an optional component or device is unavailable."
)

#: What each command's exit codes mean; shown under its --help and in docs/cli.md.
COMMAND_EXIT_CODES: dict[str, str] = {
    "calc": "0 printed; 2 bad input",
    "models": "0 printed",
    "show": "0 printed; 2 unknown model or invalid spec",
    "gpus": "0 printed",
    "plan": "0 the target fits; 1 it does not (the message says what to change); 2 bad input",
    "reconcile": "0 every figure reproduces; 1 one does not; 2 unreadable log or bad input",
    "flags": "0 at least one engine holds the target (or the one asked for does); 1 none does;"
    " 2 bad input",
    "check": "0 every assertion holds; 1 one fails; 2 invalid budget file, model or GPU",
    "diff": "0 printed (a difference is not a failure); 2 unreadable or invalid side",
    "import": "0 written or printed; 2 invalid config, or the output exists without --force;"
    " 3 huggingface_hub missing or the Hub unreachable",
    "schema": "0 printed; 2 unknown schema",
    "probe": "0 measured within tolerance; 1 outside it; 2 bad input; 3 torch, transformers"
    " or the device unavailable",
    "perf": "0 printed; 2 bad input",
    "compare": "0 printed; 2 bad input",
    "chart": "0 drawn or written; 2 bad input, or the output exists without --force;"
    " 3 matplotlib missing for a PNG or SVG file",
}


def exit_codes_epilog(command: str) -> str:
    """The ``--help`` epilog of ``command``: its exit codes."""
    return f"Exit codes: {COMMAND_EXIT_CODES[command]}."


app = typer.Typer(
    name="kvplan",
    help="How much GPU memory does the KV cache take, and what fits? "
    "Exact KV-cache sizes from model specs.\n\n" + EXIT_CODES_HELP,
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)

def complete_model(incomplete: str) -> list[str]:
    """Shell completion: bundled model names starting with what was typed (reads file names
    only, so it answers at once)."""
    from kvplan.catalog import bundled_names

    key = incomplete.lower()
    return [name for name in bundled_names() if name.startswith(key)]


def complete_gpu(incomplete: str) -> list[str]:
    """Shell completion: catalog GPU names and aliases starting with what was typed."""
    from kvplan.hardware import list_gpus

    key = incomplete.lower()
    names = (label for gpu in list_gpus() for label in (gpu.name, *gpu.aliases))
    return sorted({n for n in names if n.lower().startswith(key)})


ModelArg = Annotated[
    str,
    typer.Argument(
        autocompletion=complete_model,
        help="A catalog name (llama-3.1-8b), a Hugging Face id (meta-llama/Llama-3.1-8B, any"
        " case), an alias, a path to a spec YAML, or a Hugging Face config.json or model"
        " folder (read as `kvplan import` reads it).",
        show_default=False,
    ),
]
FormatOpt = Annotated[
    OutputFormat,
    typer.Option("--format", "-f", help="table for people, json (with schema_version) for tools."),
]

T = TypeVar("T")


def _fail(message: str, code: ExitCode = ExitCode.USAGE) -> NoReturn:
    for line in message.splitlines() or [message]:
        typer.echo(f"kvplan: error: {line}", err=True)
    raise typer.Exit(int(code))


def _guard(fn: Callable[[], T]) -> T:
    """Run ``fn``; a KvplanError becomes a message on stderr and exit code 2 (3 when an
    optional component or device is unavailable)."""
    from kvplan.errors import UnavailableError

    try:
        return fn()
    except UnavailableError as e:
        _fail(str(e), ExitCode.UNAVAILABLE)
    except KvplanError as e:
        _fail(str(e))


def _option(name: str, parse: Callable[[str], T], value: str) -> T:
    """``parse(value)``; a UnitError is re-raised naming the option it came from."""
    from kvplan.errors import UnitError

    try:
        return parse(value)
    except UnitError as e:
        raise UnitError(f"{name}: {e}") from None


def _print_json(doc: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(doc, indent=2) + "\n")


def _print_rich(items: list[Any]) -> None:
    from rich.console import Console

    # A terminal sets its own width; piped output (CI logs, files) gets room for every column.
    console = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 120)
    for item in items:
        console.print(item)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"kvplan {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
    quiet: Annotated[
        bool,
        typer.Option(
            "--quiet",
            help="No progress lines on stderr (they appear only on a terminal, for work"
            " slower than a second: probe, chart files, imports of large folders).",
        ),
    ] = False,
) -> None:
    """How much GPU memory does the KV cache take, and what fits?"""
    if quiet:
        set_quiet(True)


@app.command(epilog=exit_codes_epilog("calc"))
def calc(
    model: ModelArg,
    context: Annotated[
        str | None,
        typer.Option(
            "--context",
            "-c",
            help="Tokens cached per sequence: 32768, 32k (=32,000) or 32K (=32,768)."
            " Default: the model's max_position_embeddings.",
            show_default=False,
        ),
    ] = None,
    batch: Annotated[int, typer.Option("--batch", "-b", min=1, help="Concurrent sequences.")] = 1,
    kv_dtype: Annotated[
        str,
        typer.Option(
            "--kv-dtype",
            "--kv-cache-dtype",
            help="Cache dtype for K and V: auto (the dtype the model is served in: a float32"
            " checkpoint in bfloat16, as the engines' --dtype auto), float16, bfloat16, float32,"
            " fp8 (e4m3), fp8_e5m2, int8, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, nvfp4, mxfp4.",
        ),
    ] = "auto",
    k_dtype: Annotated[
        str | None,
        typer.Option("--k-dtype", help="K cache dtype, overriding --kv-dtype (llama.cpp -ctk)."),
    ] = None,
    v_dtype: Annotated[
        str | None,
        typer.Option("--v-dtype", help="V cache dtype, overriding --kv-dtype (llama.cpp -ctv)."),
    ] = None,
    output: FormatOpt = OutputFormat.table,
    explain: Annotated[
        bool,
        typer.Option("--explain", help="Work the formula with the model's numbers substituted."),
    ] = False,
    engine: Annotated[
        str,
        typer.Option(
            "--engine",
            "-e",
            help="ideal (the formula), or llama.cpp / ik_llama.cpp: their cells, padding,"
            " sliding-window cache and log lines (--context is then -c, --batch is -np).",
        ),
    ] = "ideal",
    engine_version: Annotated[
        str | None,
        typer.Option(
            "--engine-version",
            help="llama.cpp build number (b5781 or 5781), or transformers version (4.57, 5.24);"
            " default: the newest modelled.",
            show_default=False,
        ),
    ] = None,
    ubatch_size: Annotated[
        int,
        typer.Option("--ubatch-size", "-ub", min=1, help="llama.cpp -ub: sizes the SWA cache."),
    ] = 512,
    swa_full: Annotated[
        bool, typer.Option("--swa-full", help="llama.cpp: full-size cache for sliding layers.")
    ] = False,
    flash_attn: Annotated[
        bool,
        typer.Option("--flash-attn/--no-flash-attn", help="llama.cpp: flash attention (-fa)."),
    ] = True,
    kv_unified: Annotated[
        bool,
        typer.Option("--kv-unified", help="llama.cpp: one cache shared by all sequences."),
    ] = False,
    cache_implementation: Annotated[
        str,
        typer.Option(
            "--cache-implementation",
            help="transformers: dynamic (DynamicCache) or static (StaticCache, pre-allocated).",
        ),
    ] = "dynamic",
) -> None:
    """KV-cache bytes for a context and batch: total, per token, by layer kind and K/V."""
    from kvplan.catalog import load_model
    from kvplan.errors import UnitError
    from kvplan.estimator import estimate
    from kvplan.estimator import explain as explain_lines
    from kvplan.units import parse_tokens, resolve_dtype

    def run() -> None:
        spec = load_model(model)
        if context is None:
            if spec.max_position_embeddings is None:
                _fail(f"{spec.name}: no max_position_embeddings in the spec; pass --context")
            tokens = spec.max_position_embeddings
        else:
            tokens = _option("--context", parse_tokens, context)
        for name, dtype in (
            ("--kv-dtype", kv_dtype),
            ("--k-dtype", k_dtype),
            ("--v-dtype", v_dtype),
        ):
            if dtype is not None and dtype.strip().lower() != "auto":
                _option(name, resolve_dtype, dtype)
        if engine == "transformers":
            from kvplan import render
            from kvplan.engines import transformers

            if cache_implementation not in ("dynamic", "static"):
                raise UnitError(
                    f"--cache-implementation: {cache_implementation!r}; allowed: dynamic, static"
                )
            result = transformers.kv_cache(
                spec,
                context_tokens=tokens,
                batch_size=batch,
                cache="static" if cache_implementation == "static" else "dynamic",
                dtype=None if kv_dtype.strip().lower() == "auto" else kv_dtype,
                version=engine_version,
            )
            doc = render.engine_result_to_dict(
                result, spec, context_tokens=tokens, batch_size=batch
            )
            if output is OutputFormat.json:
                _print_json(doc)
            else:
                _print_rich(render.engine_result_view(doc))
            return
        if engine != "ideal":
            _calc_with_engine(
                spec,
                engine,
                n_ctx=tokens,
                n_seq_max=batch,
                k_type=k_dtype or (None if kv_dtype.strip().lower() == "auto" else kv_dtype),
                v_type=v_dtype or (None if kv_dtype.strip().lower() == "auto" else kv_dtype),
                n_ubatch=ubatch_size,
                swa_full=swa_full,
                flash_attn=flash_attn,
                kv_unified=kv_unified,
                version=engine_version,
                output=output,
            )
            return
        est = estimate(
            spec, tokens, batch_size=batch, kv_dtype=kv_dtype, k_dtype=k_dtype, v_dtype=v_dtype
        )
        from kvplan import render
        from kvplan.dtypes import cache_dtypes

        reason = cache_dtypes(
            spec, kv_cache_dtype=kv_dtype, k_dtype=k_dtype, v_dtype=v_dtype
        ).reason
        if output is OutputFormat.json:
            doc = render.estimate_to_dict(est, spec, dtype_reason=reason)
            if explain:
                doc["explain"] = explain_lines(est)
            _print_json(doc)
        else:
            _print_rich(render.estimate_view(est, spec, with_explain=explain, dtype_reason=reason))

    _guard(run)


@app.command(epilog=exit_codes_epilog("models"))
def models(output: FormatOpt = OutputFormat.table) -> None:
    """The bundled catalog: one row per model, with its KV bytes per token."""
    from kvplan import render
    from kvplan.catalog import list_models
    from kvplan.estimator import bytes_per_token

    def run() -> None:
        rows = [(spec, bytes_per_token(spec)) for spec in list_models()]
        if output is OutputFormat.json:
            _print_json(render.models_to_dict(rows))
        else:
            _print_rich(render.models_view(rows))

    _guard(run)


@app.command(epilog=exit_codes_epilog("show"))
def show(model: ModelArg, output: FormatOpt = OutputFormat.table) -> None:
    """A spec's fields and its resolved per-layer cache schedule."""
    from kvplan import render
    from kvplan.catalog import load_model

    def run() -> None:
        spec = load_model(model)
        if output is OutputFormat.json:
            _print_json(render.spec_to_dict(spec))
        else:
            _print_rich(render.spec_view(spec))

    _guard(run)


@app.command(epilog=exit_codes_epilog("gpus"))
def gpus(output: FormatOpt = OutputFormat.table) -> None:
    """The accelerator catalog: runtime-reported memory, bandwidth, dense peak FLOP/s."""
    from kvplan import render
    from kvplan.hardware import list_gpus

    def run() -> None:
        catalog = list_gpus()
        if output is OutputFormat.json:
            _print_json(render.gpus_to_dict(catalog))
        else:
            _print_rich(render.gpus_view(catalog))

    _guard(run)


@app.command(name="plan", epilog=exit_codes_epilog("plan"))
def plan_command(
    model: ModelArg,
    gpu: Annotated[
        str | None,
        typer.Option(
            "--gpu",
            "-g",
            autocompletion=complete_gpu,
            help="A catalog GPU (`kvplan gpus`): h100 (the H100 SXM 80GB), h200, a100-80gb,"
            " l40s, rtx-4090, mi300x, ...",
            show_default=False,
        ),
    ] = None,
    gpu_memory: Annotated[
        str | None,
        typer.Option(
            "--gpu-memory",
            help="Memory of the device as the runtime reports it (24GiB, 80GB); alone it"
            " describes any device, with --gpu it replaces that GPU's memory.",
            show_default=False,
        ),
    ] = None,
    tensor_parallel_size: Annotated[
        int | None,
        typer.Option(
            "--tensor-parallel-size",
            "-tp",
            min=1,
            help="GPUs sharding each layer.",
            show_default=False,
        ),
    ] = None,
    pipeline_parallel_size: Annotated[
        int | None,
        typer.Option(
            "--pipeline-parallel-size",
            "-pp",
            min=1,
            help="Pipeline stages (layers split).",
            show_default=False,
        ),
    ] = None,
    max_model_len: Annotated[
        str | None,
        typer.Option(
            "--max-model-len",
            "-c",
            help="Tokens per request (prompt + output): 32768, 32k (=32,000) or 32K (=32,768).",
            show_default=False,
        ),
    ] = None,
    concurrency: Annotated[
        int | None,
        typer.Option("--concurrency", "-n", min=1, help="Concurrent requests.", show_default=False),
    ] = None,
    gpu_memory_utilization: Annotated[
        str,
        typer.Option(
            "--gpu-memory-utilization",
            help="Share of the GPU's total memory the engine may use (vLLM's default 0.9).",
        ),
    ] = "0.9",
    kv_cache_dtype: Annotated[
        str,
        typer.Option(
            "--kv-cache-dtype",
            "--kv-dtype",
            help="auto (the model dtype), fp8, fp8_e5m2, bfloat16, float16, int8, q8_0, nvfp4...",
        ),
    ] = "auto",
    dtype: Annotated[
        str | None,
        typer.Option(
            "--dtype",
            help="Model dtype in place of the spec's (bfloat16, float16...).",
            show_default=False,
        ),
    ] = None,
    quantization: Annotated[
        str | None,
        typer.Option(
            "--quantization",
            "-q",
            help="Weight format for the linear layers: fp8, int8, int4, awq, gptq, mxfp4,"
            " nvfp4 (group scales counted). Default: the checkpoint's own formats.",
            show_default=False,
        ),
    ] = None,
    overhead: Annotated[
        str | None,
        typer.Option(
            "--overhead",
            help="Per-GPU memory besides weights and KV cache (3GiB), replacing the estimate.",
            show_default=False,
        ),
    ] = None,
    kv_cache_memory: Annotated[
        str | None,
        typer.Option(
            "--kv-cache-memory",
            help="KV pool per GPU (40GiB), skipping the budget (vLLM --kv-cache-memory).",
            show_default=False,
        ),
    ] = None,
    block_size: Annotated[
        int, typer.Option("--block-size", min=1, help="Tokens per KV page.")
    ] = 16,
    shared_prefix: Annotated[
        str,
        typer.Option(
            "--shared-prefix",
            help="Tokens of a prompt prefix every request shares, stored once (whole blocks).",
        ),
    ] = "0",
    lengths: Annotated[
        str | None,
        typer.Option(
            "--lengths",
            help="JSONL or CSV of prompt and output lengths: concurrency for that mix.",
            show_default=False,
        ),
    ] = None,
    mean_length: Annotated[
        str | None,
        typer.Option(
            "--mean-length", help="Mean request length (tokens) for the mix.", show_default=False
        ),
    ] = None,
    p99_length: Annotated[
        str | None,
        typer.Option(
            "--p99-length", help="99th-percentile request length (tokens).", show_default=False
        ),
    ] = None,
    max_num_batched_tokens: Annotated[
        int,
        typer.Option(
            "--max-num-batched-tokens",
            min=1,
            help="Tokens per forward pass; sizes the activation estimate.",
        ),
    ] = 8192,
    max_num_seqs: Annotated[
        int,
        typer.Option("--max-num-seqs", min=1, help="vLLM: sequences per step (sampler size)."),
    ] = 1024,
    engine: Annotated[
        str,
        typer.Option(
            "--engine",
            "-e",
            help="ideal (kvplan's own paged planner), vllm (vLLM V1's budget, groups and"
            " printed figures), sglang (its token pool and log line) or trtllm (a fraction of"
            " free memory, 32-token blocks; --gpu-memory-utilization is its"
            " free_gpu_memory_fraction).",
        ),
    ] = "ideal",
    mem_fraction_static: Annotated[
        str | None,
        typer.Option(
            "--mem-fraction-static",
            help="SGLang: share of GPU memory for weights and KV pool (default: its automatic"
            " value).",
            show_default=False,
        ),
    ] = None,
    max_total_tokens: Annotated[
        int | None,
        typer.Option(
            "--max-total-tokens", min=1, help="SGLang: cap on the token pool.", show_default=False
        ),
    ] = None,
    page_size: Annotated[
        int, typer.Option("--page-size", min=1, help="SGLang: tokens per page.")
    ] = 1,
    engine_version: Annotated[
        str | None,
        typer.Option(
            "--engine-version",
            help="Engine version to model (default: the newest modelled).",
            show_default=False,
        ),
    ] = None,
    output: FormatOpt = OutputFormat.table,
) -> None:
    """Will it fit, and how much? Max concurrency, max context, or the fewest GPUs.

    Give --max-model-len for the concurrency at that length, --concurrency for the longest
    context that many requests reach, both (without -tp/-pp) for the smallest deployment.
    """
    from kvplan.catalog import load_model
    from kvplan.hardware import custom_gpu, find_gpu
    from kvplan.planner import parse_utilization, plan
    from kvplan.units import parse_bytes, parse_tokens
    from kvplan.workload import load_lengths

    def run() -> None:
        spec = load_model(model)
        if gpu is None and gpu_memory is None:
            _fail("give --gpu NAME (see `kvplan gpus`) or --gpu-memory SIZE")
        device = find_gpu(gpu) if gpu is not None else None
        if gpu_memory is not None:
            device = custom_gpu(_option("--gpu-memory", parse_bytes, gpu_memory), device)
        assert device is not None
        length = _option("--max-model-len", parse_tokens, max_model_len) if max_model_len else None
        mix = load_lengths(lengths) if lengths is not None else None
        mean = _option("--mean-length", parse_tokens, mean_length) if mean_length else None
        p99 = _option("--p99-length", parse_tokens, p99_length) if p99_length else None
        utilization = _option("--gpu-memory-utilization", parse_utilization, gpu_memory_utilization)
        if tensor_parallel_size is not None:
            from kvplan.arguments import as_tensor_parallel_size

            tp_text = str(tensor_parallel_size)
            _option("-tp", lambda tp: as_tensor_parallel_size(spec, int(tp)), tp_text)
        if engine == "trtllm":
            _plan_with_trtllm(
                spec,
                device,
                max_model_len=length or spec.max_position_embeddings or 0,
                tp=tensor_parallel_size or 1,
                pp=pipeline_parallel_size or 1,
                fraction=float(utilization),
                kv_cache_dtype=None if kv_cache_dtype.strip().lower() == "auto" else kv_cache_dtype,
                output=output,
            )
            return
        if engine == "sglang":
            _plan_with_sglang(
                spec,
                device,
                max_model_len=length or spec.max_position_embeddings or 0,
                tp=tensor_parallel_size or 1,
                pp=pipeline_parallel_size or 1,
                mem_fraction_static=mem_fraction_static,
                max_total_tokens=max_total_tokens,
                page_size=page_size,
                kv_cache_dtype=None if kv_cache_dtype.strip().lower() == "auto" else kv_cache_dtype,
                output=output,
            )
            return
        if engine != "ideal":
            _plan_with_engine(
                engine,
                spec,
                device,
                max_model_len=length or spec.max_position_embeddings or 0,
                utilization=utilization,
                tp=tensor_parallel_size or 1,
                pp=pipeline_parallel_size or 1,
                kv_cache_dtype=None if kv_cache_dtype.strip().lower() == "auto" else kv_cache_dtype,
                dtype=dtype,
                quantization=quantization,
                kv_cache_memory=(
                    _option("--kv-cache-memory", parse_bytes, kv_cache_memory)
                    if kv_cache_memory
                    else None
                ),
                block_size=block_size,
                max_num_batched_tokens=max_num_batched_tokens,
                max_num_seqs=max_num_seqs,
                version=engine_version,
                output=output,
            )
            return
        result = plan(
            spec,
            device,
            tensor_parallel_size=tensor_parallel_size,
            pipeline_parallel_size=pipeline_parallel_size,
            max_model_len=length,
            concurrency=concurrency,
            gpu_memory_utilization=utilization,
            kv_cache_dtype=None if kv_cache_dtype.strip().lower() == "auto" else kv_cache_dtype,
            dtype=dtype,
            quantization=quantization,
            overhead_bytes=_option("--overhead", parse_bytes, overhead) if overhead else None,
            kv_cache_memory_bytes=(
                _option("--kv-cache-memory", parse_bytes, kv_cache_memory)
                if kv_cache_memory
                else None
            ),
            block_size=block_size,
            shared_prefix_tokens=_option("--shared-prefix", parse_tokens, shared_prefix),
            lengths=mix,
            mean_length=mean,
            p99_length=p99,
            max_num_batched_tokens=max_num_batched_tokens,
        )
        from kvplan import render

        if output is OutputFormat.json:
            _print_json(render.plan_to_dict(result))
        else:
            _print_rich(render.plan_view(result))
        if not result.fits:
            raise typer.Exit(int(ExitCode.CHECK_FAILED))

    _guard(run)


def _plan_with_engine(
    engine: str,
    spec: Any,
    device: Any,
    *,
    max_model_len: int,
    utilization: Any,
    tp: int,
    pp: int,
    kv_cache_dtype: str | None,
    dtype: str | None,
    quantization: str | None,
    kv_cache_memory: int | None,
    block_size: int,
    max_num_batched_tokens: int,
    max_num_seqs: int,
    version: str | None,
    output: OutputFormat,
) -> None:
    """``kvplan plan --engine NAME``: the engine's own budget and printed figures."""
    from kvplan import render
    from kvplan.engines.base import ENGINE_NAMES, UnknownEngineError

    if engine != "vllm":
        modelled = "ideal, vllm, sglang, trtllm"
        if engine in ENGINE_NAMES:
            raise UnknownEngineError(
                f"--engine {engine}: its plan profile is not modelled yet; modelled: {modelled}"
            )
        raise UnknownEngineError(f"--engine: unknown engine {engine!r}; modelled: {modelled}")
    from kvplan.engines import vllm

    cfg = vllm.VllmConfig(
        max_model_len=max_model_len,
        gpu_memory_utilization=utilization,
        max_num_batched_tokens=max_num_batched_tokens,
        max_num_seqs=max_num_seqs,
        block_size=block_size,
        kv_cache_dtype=kv_cache_dtype,
        kv_cache_memory_bytes=kv_cache_memory,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        dtype=dtype,
        quantization=quantization,
        version=version or vllm.DEFAULT_VERSION,
    )
    result = vllm.profile(spec, device, cfg)
    doc = render.vllm_to_dict(result, spec, device, vllm.estimated_max_model_len(result))
    if output is OutputFormat.json:
        _print_json(doc)
    else:
        _print_rich(render.vllm_view(doc))
    if not doc["fits"]:
        raise typer.Exit(int(ExitCode.CHECK_FAILED))


def _calc_with_engine(
    spec: Any,
    engine: str,
    *,
    n_ctx: int,
    n_seq_max: int,
    k_type: str | None,
    v_type: str | None,
    n_ubatch: int,
    swa_full: bool,
    flash_attn: bool,
    kv_unified: bool,
    version: str | None,
    output: OutputFormat,
) -> None:
    """``kvplan calc --engine llama.cpp``: what llama.cpp allocates, and its log lines."""
    from kvplan import render
    from kvplan.engines.base import UnknownEngineError

    if engine not in ("llama.cpp", "ik_llama.cpp"):
        raise UnknownEngineError(
            f"--engine {engine}: calc models ideal, llama.cpp, ik_llama.cpp and transformers"
            " (use `kvplan plan --engine vllm` for vLLM)"
        )
    from kvplan.engines import llamacpp
    from kvplan.errors import UnitError

    build = None
    if version is not None:
        digits = version.strip().lower().removeprefix("b")
        if not digits.isdigit():
            raise UnitError(f"--engine-version: a llama.cpp build number (b5781), got {version!r}")
        build = int(digits)
    result = llamacpp.kv_cache(
        spec,
        n_ctx=n_ctx,
        n_seq_max=n_seq_max,
        n_ubatch=n_ubatch,
        cache_type_k=k_type or "f16",
        cache_type_v=v_type or "f16",
        swa_full=swa_full,
        flash_attn=flash_attn,
        kv_unified=kv_unified,
        build=build,
        fork=engine,
    )
    doc = render.engine_result_to_dict(result, spec, context_tokens=n_ctx, batch_size=n_seq_max)
    if output is OutputFormat.json:
        _print_json(doc)
    else:
        _print_rich(render.engine_result_view(doc))


@app.command(epilog=exit_codes_epilog("reconcile"))
def reconcile(
    logfile: Annotated[
        str,
        typer.Argument(
            help="A vLLM, SGLang or llama.cpp start-up log ('-' reads stdin).", show_default=False
        ),
    ],
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            "-m",
            help="The model, when the log does not name a bundled one.",
            show_default=False,
        ),
    ] = None,
    gpu: Annotated[
        str | None,
        typer.Option(
            "--gpu",
            "-g",
            autocompletion=complete_gpu,
            help="The GPU, when the log's total memory is ambiguous.",
            show_default=False,
        ),
    ] = None,
    output: FormatOpt = OutputFormat.table,
) -> None:
    """Recompute an engine's printed KV-cache figures from its own log, component by component.

    Exits 1 when a rule did not reproduce (blocks, tokens, concurrency, cells, MiB lines).
    """

    from kvplan import render
    from kvplan.reconcile import reconcile as run_reconcile

    def run() -> None:
        from kvplan.reconcile import read_log

        text = read_log(logfile)
        result = run_reconcile(text, model=model, gpu=gpu, path=logfile)
        doc = render.reconciliation_to_dict(result)
        if output is OutputFormat.json:
            _print_json(doc)
        else:
            _print_rich(render.reconciliation_view(doc))
        if not result.reproduced:
            raise typer.Exit(int(ExitCode.CHECK_FAILED))

    _guard(run)


@app.command(epilog=exit_codes_epilog("flags"))
def flags(
    model: ModelArg,
    gpu: Annotated[
        str,
        typer.Option(
            "--gpu", "-g", autocompletion=complete_gpu, help="A catalog GPU (`kvplan gpus`)."
        ),
    ],
    max_model_len: Annotated[
        str,
        typer.Option("--max-model-len", "-c", help="Tokens per request: 32768, 32k or 32K."),
    ],
    concurrency: Annotated[
        int, typer.Option("--concurrency", "-n", min=1, help="Concurrent requests to hold.")
    ],
    tensor_parallel_size: Annotated[
        int,
        typer.Option(
            "--tensor-parallel-size",
            "-tp",
            min=1,
            help="GPUs per replica (llama.cpp: GPUs it splits the layers over).",
        ),
    ] = 1,
    kv_cache_dtype: Annotated[
        str, typer.Option("--kv-cache-dtype", help="auto, fp8, ... (llama.cpp: q8_0 for fp8).")
    ] = "auto",
    quantization: Annotated[
        str | None,
        typer.Option(
            "--quantization",
            "-q",
            help="Weight format for the linear layers: fp8, int8, int4, awq, gptq, mxfp4,"
            " nvfp4 (group scales counted). Default: the checkpoint's own formats.",
            show_default=False,
        ),
    ] = None,
    engine: Annotated[
        str,
        typer.Option(
            "--engine",
            "-e",
            help="all, or one of vllm, sglang, llama.cpp, tgi: exit 1 when it does not fit.",
        ),
    ] = "all",
    output: FormatOpt = OutputFormat.table,
) -> None:
    """The flags that make vLLM, SGLang, llama.cpp and TGI hold a target, engine by engine.

    Each engine's verdict counts the weights on each GPU, the cache and the engine's
    overhead; an engine that does not fit gets the reason and no flags.
    """
    from kvplan import render
    from kvplan.catalog import load_model
    from kvplan.errors import UnitError
    from kvplan.hardware import find_gpu
    from kvplan.recommend import ENGINES, recommend
    from kvplan.units import parse_tokens, resolve_dtype
    from kvplan.weights import QUANTIZATIONS, quantization_names

    def run() -> None:
        length = _option("--max-model-len", parse_tokens, max_model_len)
        if length < 1:
            raise UnitError(f"--max-model-len: must be at least 1 token, got {max_model_len!r}")
        kv = None if kv_cache_dtype.strip().lower() == "auto" else kv_cache_dtype
        if kv is not None:
            _option("--kv-cache-dtype", resolve_dtype, kv)
        if quantization is not None and quantization.strip().lower() not in QUANTIZATIONS:
            raise UnitError(
                f"--quantization: unknown format {quantization!r}; allowed:"
                f" {quantization_names()}"
            )
        chosen = engine.strip().lower()
        if chosen != "all" and chosen not in ENGINES:
            raise UnitError(
                f"--engine: unknown engine {engine!r}; allowed: all, {', '.join(ENGINES)}"
            )
        spec = load_model(model)
        results = recommend(
            spec,
            find_gpu(gpu),
            max_model_len=length,
            concurrency=concurrency,
            tensor_parallel_size=tensor_parallel_size,
            kv_cache_dtype=kv,
            quantization=quantization,
            engines=None if chosen == "all" else (chosen,),
        )
        doc = render.flags_to_dict(
            spec.name,
            gpu,
            length,
            concurrency,
            results,
            tensor_parallel_size=tensor_parallel_size,
            quantization=quantization,
        )
        if output is OutputFormat.json:
            _print_json(doc)
        else:
            _print_rich(render.flags_view(doc))
        if not any(r.fits for r in results):
            raise typer.Exit(int(ExitCode.CHECK_FAILED))

    _guard(run)


def _plan_with_sglang(
    spec: Any,
    device: Any,
    *,
    max_model_len: int,
    tp: int,
    pp: int,
    mem_fraction_static: str | None,
    max_total_tokens: int | None,
    page_size: int,
    kv_cache_dtype: str | None,
    output: OutputFormat,
) -> None:
    """``kvplan plan --engine sglang``: its token pool, concurrency and log line."""
    from kvplan.engines import sglang
    from kvplan.planner import parse_utilization

    fraction = None
    if mem_fraction_static is not None:
        fraction = float(_option("--mem-fraction-static", parse_utilization, mem_fraction_static))
    result = sglang.kv_cache(
        spec,
        device,
        tp=tp,
        pp=pp,
        mem_fraction_static=fraction,
        kv_cache_dtype=kv_cache_dtype,
        page_size=page_size,
        max_total_tokens=max_total_tokens,
    )
    _print_token_pool(result, spec, device, tp, pp, max_model_len, output, "sglang", "")


def _print_token_pool(
    result: Any,
    spec: Any,
    device: Any,
    tp: int,
    pp: int,
    max_model_len: int,
    output: OutputFormat,
    engine: str,
    detail: str,
) -> None:
    """Print a token-pool engine's plan (SGLang, TensorRT-LLM): how many requests of
    ``max_model_len`` its pool holds, and its log lines; exit 1 when not even one fits."""
    from kvplan import render

    doc = render.engine_result_to_dict(result, spec, context_tokens=max_model_len, batch_size=1)
    tokens = result.kv_cache_tokens or 0
    doc.update(
        {
            "gpu": device.name,
            "tensor_parallel_size": tp,
            "pipeline_parallel_size": pp,
            "max_model_len": max_model_len,
            "max_concurrency": tokens // max_model_len if max_model_len else 0,
            "fits": tokens >= max_model_len,
        }
    )
    if output is OutputFormat.json:
        _print_json(doc)
    else:
        _print_rich(
            [
                *render.engine_result_view(doc)[:2],
                f"token pool: {tokens:,} tokens; {doc['max_concurrency']} requests of"
                f" {max_model_len:,} tokens{detail}",
                f"what {engine} prints:",
                *(f"  {line}" for line in doc["log_lines"]),
            ]
        )
    if not doc["fits"]:
        raise typer.Exit(int(ExitCode.CHECK_FAILED))


def _plan_with_trtllm(
    spec: Any,
    device: Any,
    *,
    max_model_len: int,
    tp: int,
    pp: int,
    fraction: float,
    kv_cache_dtype: str | None,
    output: OutputFormat,
) -> None:
    """``kvplan plan --engine trtllm``: its token pool and log lines (peak taken as weights)."""
    from kvplan.engines import trtllm

    result = trtllm.kv_cache(
        spec,
        device,
        tp=tp,
        pp=pp,
        free_gpu_memory_fraction=fraction,
        kv_cache_dtype=kv_cache_dtype,
        max_seq_len=max_model_len or None,
    )
    detail = f" (free_gpu_memory_fraction {fraction:g}, the dry run's peak taken as the weights)"
    _print_token_pool(result, spec, device, tp, pp, max_model_len, output, "TensorRT-LLM", detail)


@app.command(epilog=exit_codes_epilog("check"))
def check(
    budgets: Annotated[
        list[str],
        typer.Argument(help="One or more budget YAML files (docs/ci.md).", show_default=False),
    ],
    output: FormatOpt = OutputFormat.table,
    junit_xml: Annotated[
        str | None,
        typer.Option(
            "--junit-xml",
            help="Also write a JUnit XML report (one test case per assertion) to this path.",
            show_default=False,
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option("--force", help="Overwrite --junit-xml even if kvplan did not write it."),
    ] = False,
) -> None:
    """Check every deployment of budget files against their assertions; fail CI when one fails.

    Exit 0 when all hold, 1 when any fails, 2 when a file or a model is invalid. With
    GITHUB_ACTIONS=true, failures are also annotated on their lines and a summary is appended
    to $GITHUB_STEP_SUMMARY.
    """
    from kvplan import render
    from kvplan.budget import check_budget, load_budget
    from kvplan.files import write_atomic

    def run() -> None:
        checked = []
        for path in budgets:
            parsed, text = load_budget(path)
            checked.append((path, check_budget(parsed, text, path)))
        if junit_xml is not None:
            write_atomic(junit_xml, render.junit_xml(checked), force=force, ours=_our_junit)
        if output is OutputFormat.json:
            _print_json(render.check_to_dict(checked))
        else:
            _print_rich(
                [item for path, results in checked for item in render.check_view(path, results)]
            )
        if os.environ.get("GITHUB_ACTIONS") == "true":
            for path, results in checked:
                for line in render.github_annotations(path, results):
                    sys.stdout.write(line + "\n")
            summary = os.environ.get("GITHUB_STEP_SUMMARY")
            if summary:
                with open(summary, "a", encoding="utf-8") as f:
                    for path, results in checked:
                        f.write(render.github_summary(path, results))
        if not all(r.passed for _, results in checked for r in results):
            raise typer.Exit(int(ExitCode.CHECK_FAILED))

    _guard(run)


def _our_junit(path: Any) -> bool:
    """A JUnit report an earlier ``kvplan check`` wrote: reruns may replace it. Reads the
    first 400 bytes of a regular file only (never a FIFO or a device)."""
    from kvplan.files import head_contains

    return head_contains(path, '<testsuites name="kvplan check')


@app.command(name="import", epilog=exit_codes_epilog("import"))
def import_(
    path: Annotated[
        str | None,
        typer.Argument(
            help="A Hugging Face config.json, or a model folder holding one (its safetensors"
            " headers or index give the exact parameter count).",
            show_default=False,
        ),
    ] = None,
    out: Annotated[
        str | None,
        typer.Option("--output", "-o", help="Write the spec YAML here instead of stdout."),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Overwrite --output if it exists.")
    ] = False,
    name: Annotated[
        str | None, typer.Option("--name", help="The spec's name (default: the folder's name).")
    ] = None,
    hub: Annotated[
        str | None,
        typer.Option(
            "--hub",
            help="Download config.json and the safetensors index (never weights) of ORG/NAME"
            " from the Hugging Face Hub; needs pip install 'kvplan[hub]'.",
        ),
    ] = None,
) -> None:
    """Turn a Hugging Face config.json or model folder into a kvplan spec YAML.

    Maps the KV geometry of each supported model_type with its config quirks (nested
    text_config, omitted defaults, multi_query, attn_config, hybrid layer patterns) and
    refuses the others. The spec records its source and every derived value.
    """
    from kvplan import hfconfig
    from kvplan.files import write_atomic

    def run() -> None:
        if (path is None) == (hub is None):
            raise UnitError("give a config.json or model folder, or --hub ORG/NAME (one of them)")
        if hub is not None:
            with progress(f"downloading the config and index of {hub}"):
                folder = hfconfig.download_from_hub(hub)
            imported = hfconfig.import_config(folder, name, hf_id=hub)
        else:
            with progress(f"reading {path}"):
                imported = hfconfig.import_config(path or "", name)
        text = hfconfig.spec_yaml(imported)
        if out is None:
            sys.stdout.write(text)
        else:
            write_atomic(out, text, force=force)
            typer.echo(
                f"wrote {out} ({imported.spec.name}, {imported.spec.num_hidden_layers} layers)",
                err=True,
            )

    from kvplan.errors import UnitError

    _guard(run)


class SchemaKind(str, Enum):
    spec = "spec"
    budget = "budget"


@app.command(epilog=exit_codes_epilog("schema"))
def schema(
    kind: Annotated[SchemaKind, typer.Argument(help="spec or budget.", show_default=False)],
) -> None:
    """The JSON Schema of spec or budget files, for editors (yaml-language-server)."""
    from kvplan.schemas import json_schema

    _guard(lambda: _print_json(json_schema(kind.value)))


@app.command(epilog=exit_codes_epilog("diff"))
def diff(
    old: Annotated[
        str,
        typer.Argument(
            help="A spec (catalog name, path, or REV:path from git) or a budget file.",
            show_default=False,
        ),
    ],
    new: Annotated[str, typer.Argument(help="The same kind of file, changed.", show_default=False)],
    output: FormatOpt = OutputFormat.table,
) -> None:
    """What changed between two specs or two budget files, and what it does to the answers."""
    from kvplan import render
    from kvplan.diffing import diff_files

    def run() -> None:
        result = diff_files(old, new)
        if output is OutputFormat.json:
            _print_json(render.diff_to_dict(result))
        else:
            _print_rich(render.diff_view(result))

    _guard(run)


@app.command(epilog=exit_codes_epilog("probe"))
def probe(
    model: ModelArg,
    context: Annotated[
        str, typer.Option("--context", "-c", help="Prefill tokens per sequence: 512, 4K...")
    ] = "512",
    batch: Annotated[int, typer.Option("--batch", "-b", min=1, help="Sequences.")] = 1,
    decode_steps: Annotated[
        int, typer.Option("--decode-steps", min=0, help="Decode steps after the prefill.")
    ] = 0,
    device: Annotated[str, typer.Option("--device", help="cpu or cuda (cuda:N).")] = "cpu",
    kv_dtype: Annotated[
        str, typer.Option("--kv-dtype", help="Model and cache dtype: auto, float32, bfloat16...")
    ] = "auto",
    tolerance: Annotated[
        str,
        typer.Option(
            "--tolerance",
            help="Allowed difference from the transformers estimate: bytes (4KiB) or percent (1%).",
        ),
    ] = "0",
    paged: Annotated[
        bool,
        typer.Option("--paged", help="Also allocate a vLLM-shaped paged pool and compare."),
    ] = False,
    blocks: Annotated[
        int, typer.Option("--blocks", min=1, help="Blocks of the --paged pool.")
    ] = 64,
    output: FormatOpt = OutputFormat.table,
) -> None:
    """Build a real transformers model with the spec's KV geometry and measure its cache.

    Needs the probe extra (pip install 'kvplan[probe]'); exits 3 without it, 1 when the
    measured cache differs from kvplan's transformers estimate by more than --tolerance.
    """
    from kvplan.catalog import load_model
    from kvplan.units import parse_bytes, parse_tokens

    def run() -> None:
        spec = load_model(model)
        tokens = _option("--context", parse_tokens, context)
        from kvplan import render
        from kvplan.probe import family_of, run_probe

        family_of(spec)  # an unsupported model is a usage error, before torch is needed
        text = tolerance.strip()
        percent = None
        if text.endswith("%"):
            from fractions import Fraction

            from kvplan.arguments import as_fraction

            percent = as_fraction(text[:-1], "--tolerance", low=Fraction(-1), high=Fraction(100))
        with progress(f"probing {spec.name} on {device} with transformers"):
            result = run_probe(
                spec,
                context_tokens=tokens,
                batch_size=batch,
                decode_steps=decode_steps,
                device=device,
                dtype=None if kv_dtype.strip().lower() == "auto" else kv_dtype,
                paged_blocks=blocks if paged else None,
            )
        if percent is not None:
            estimate_bytes = result.transformers_estimate_bytes
            allowed = estimate_bytes * percent.numerator // (100 * percent.denominator)
        else:
            allowed = _option("--tolerance", parse_bytes, text)
        within = abs(result.difference_bytes) <= allowed
        if output is OutputFormat.json:
            _print_json(render.probe_to_dict(result, within, allowed))
        else:
            _print_rich(render.probe_view(result, within, allowed))
        if not within:
            raise typer.Exit(int(ExitCode.CHECK_FAILED))

    _guard(run)


# perf, compare and chart live in their own module; importing it registers them on ``app``.
from kvplan import cli_perf  # noqa: E402, F401
