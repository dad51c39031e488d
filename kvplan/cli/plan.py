"""``kvplan plan`` and ``kvplan gpus``: will it fit, and on what."""

from typing import TYPE_CHECKING, Annotated, Any

import typer

from kvplan.cli.common import (
    FormatOpt,
    ModelArg,
    OutputFormat,
    QuantizationOpt,
    auto_none,
    check_failed_unless,
    command,
    emit,
    gpu_option,
    guard,
    option,
)

if TYPE_CHECKING:
    from kvplan.hardware import GPU
    from kvplan.spec import ModelSpec


def _opt(*names: str, help: str, min: int | None = None) -> Any:
    """An option of ``kvplan plan`` whose default is None, shown as no default."""
    return typer.Option(*names, help=help, min=min, show_default=False)


GpuOpt = Annotated[
    str | None,
    gpu_option(
        "A catalog GPU (`kvplan gpus`): h100 (the H100 SXM 80GB), h200, a100-80gb,"
        " l40s, rtx-4090, mi300x, ...",
        show_default=False,
    ),
]
GpuMemoryOpt = Annotated[
    str | None,
    _opt(
        "--gpu-memory",
        help="Memory of the device as the runtime reports it (24GiB, 80GB); alone it"
        " describes any device, with --gpu it replaces that GPU's memory.",
    ),
]
TpOpt = Annotated[
    int | None,
    _opt("--tensor-parallel-size", "-tp", min=1, help="GPUs sharding each layer."),
]
PpOpt = Annotated[
    int | None,
    _opt("--pipeline-parallel-size", "-pp", min=1, help="Pipeline stages (layers split)."),
]
MaxModelLenOpt = Annotated[
    str | None,
    _opt(
        "--max-model-len",
        "-c",
        help="Tokens per request (prompt + output): 32768, 32k (=32,000) or 32K (=32,768).",
    ),
]
ConcurrencyOpt = Annotated[
    int | None, _opt("--concurrency", "-n", min=1, help="Concurrent requests.")
]
UtilizationOpt = Annotated[
    str,
    typer.Option(
        "--gpu-memory-utilization",
        help="Share of the GPU's total memory the engine may use (vLLM's default 0.9).",
    ),
]
KvDtypeOpt = Annotated[
    str,
    typer.Option(
        "--kv-cache-dtype",
        "--kv-dtype",
        help="auto (the model dtype), fp8, fp8_e5m2, bfloat16, float16, int8, q8_0, nvfp4...",
    ),
]
DtypeOpt = Annotated[
    str | None,
    _opt("--dtype", help="Model dtype in place of the spec's (bfloat16, float16...)."),
]
OverheadOpt = Annotated[
    str | None,
    _opt(
        "--overhead",
        help="Per-GPU memory besides weights and KV cache (3GiB), replacing the estimate.",
    ),
]
KvCacheMemoryOpt = Annotated[
    str | None,
    _opt(
        "--kv-cache-memory",
        help="KV pool per GPU (40GiB), skipping the budget (vLLM --kv-cache-memory).",
    ),
]
BlockSizeOpt = Annotated[int, typer.Option("--block-size", min=1, help="Tokens per KV page.")]
SharedPrefixOpt = Annotated[
    str,
    typer.Option(
        "--shared-prefix",
        help="Tokens of a prompt prefix every request shares, stored once (whole blocks).",
    ),
]
LengthsOpt = Annotated[
    str | None,
    _opt("--lengths", help="JSONL or CSV of prompt and output lengths: concurrency for that mix."),
]
MeanLengthOpt = Annotated[
    str | None, _opt("--mean-length", help="Mean request length (tokens) for the mix.")
]
P99LengthOpt = Annotated[
    str | None, _opt("--p99-length", help="99th-percentile request length (tokens).")
]
BatchedTokensOpt = Annotated[
    int,
    typer.Option(
        "--max-num-batched-tokens",
        min=1,
        help="Tokens per forward pass; sizes the activation estimate.",
    ),
]
MambaSsmDtypeOpt = Annotated[
    str,
    typer.Option(
        "--mamba-ssm-cache-dtype",
        help="vLLM: dtype of Mamba / linear-attention SSM state: auto (the model dtype; from"
        " 0.32 float32 for Nemotron-H), float32, bfloat16, float16.",
    ),
]
PrefixCachingOpt = Annotated[
    bool | None,
    typer.Option(
        "--enable-prefix-caching/--no-enable-prefix-caching",
        help="vLLM: prefix caching (default on); from 0.32 it puts Mamba / linear-attention"
        " state in its align mode, 2 blocks a request (Mamba2: 3) instead of 1.",
        show_default=False,
    ),
]
AsyncSchedulingOpt = Annotated[
    bool | None,
    typer.Option(
        "--async-scheduling/--no-async-scheduling",
        help="vLLM 0.32: async scheduling (default on, as on a GPU); sliding and chunked"
        " layers then reserve for twice --max-num-batched-tokens.",
        show_default=False,
    ),
]
MambaCacheModeOpt = Annotated[
    str | None,
    _opt(
        "--mamba-cache-mode",
        help="vLLM 0.32: none or align; vLLM sets it from prefix caching (align with it).",
    ),
]
GpuBlocksOverrideOpt = Annotated[
    int | None,
    _opt(
        "--num-gpu-blocks-override",
        min=1,
        help="vLLM: the pool in blocks, replacing what the memory budget gives.",
    ),
]
MaxNumSeqsOpt = Annotated[
    int, typer.Option("--max-num-seqs", min=1, help="vLLM: sequences per step (sampler size).")
]
EngineOpt = Annotated[
    str,
    typer.Option(
        "--engine",
        "-e",
        help="ideal (kvplan's own paged planner), vllm (vLLM V1's budget, groups and"
        " printed figures), sglang (its token pool and log line) or trtllm (a fraction of"
        " free memory, 32-token blocks; --gpu-memory-utilization is its"
        " free_gpu_memory_fraction).",
    ),
]
MemFractionStaticOpt = Annotated[
    str | None,
    _opt(
        "--mem-fraction-static",
        help="SGLang: share of GPU memory for weights and KV pool (default: its automatic"
        " value).",
    ),
]
MaxTotalTokensOpt = Annotated[
    int | None, _opt("--max-total-tokens", min=1, help="SGLang: cap on the token pool.")
]
PageSizeOpt = Annotated[int, typer.Option("--page-size", min=1, help="SGLang: tokens per page.")]
EngineVersionOpt = Annotated[
    str | None,
    _opt(
        "--engine-version",
        help="Engine version as the engine prints it (vLLM 0.19.1, v0.19, 0.32.0): its release"
        " line's rules; a release outside every modelled line takes the nearest and says so."
        " Default: the newest modelled.",
    ),
]


def _device(gpu: str | None, gpu_memory: str | None) -> "GPU":
    """The device ``--gpu`` and ``--gpu-memory`` describe."""
    from kvplan.errors import UnitError
    from kvplan.hardware import custom_gpu, find_gpu
    from kvplan.units import parse_bytes

    device = find_gpu(gpu) if gpu is not None else None
    if gpu_memory is not None:
        return custom_gpu(option("--gpu-memory", parse_bytes, gpu_memory), device)
    if device is None:
        raise UnitError("give --gpu NAME (see `kvplan gpus`) or --gpu-memory SIZE")
    return device


def _tensor_parallel_size(spec: "ModelSpec", tp: int | None) -> int | None:
    """``-tp``, checked against the model's heads."""
    from kvplan.arguments import as_tensor_parallel_size

    if tp is not None:
        option("-tp", lambda text: as_tensor_parallel_size(spec, int(text)), str(tp))
    return tp


@command("plan")
def plan_command(
    model: ModelArg,
    gpu: GpuOpt = None,
    gpu_memory: GpuMemoryOpt = None,
    tensor_parallel_size: TpOpt = None,
    pipeline_parallel_size: PpOpt = None,
    max_model_len: MaxModelLenOpt = None,
    concurrency: ConcurrencyOpt = None,
    gpu_memory_utilization: UtilizationOpt = "0.9",
    kv_cache_dtype: KvDtypeOpt = "auto",
    dtype: DtypeOpt = None,
    quantization: QuantizationOpt = None,
    overhead: OverheadOpt = None,
    kv_cache_memory: KvCacheMemoryOpt = None,
    block_size: BlockSizeOpt = 16,
    shared_prefix: SharedPrefixOpt = "0",
    lengths: LengthsOpt = None,
    mean_length: MeanLengthOpt = None,
    p99_length: P99LengthOpt = None,
    max_num_batched_tokens: BatchedTokensOpt = 8192,
    max_num_seqs: MaxNumSeqsOpt = 1024,
    mamba_ssm_cache_dtype: MambaSsmDtypeOpt = "auto",
    enable_prefix_caching: PrefixCachingOpt = None,
    async_scheduling: AsyncSchedulingOpt = None,
    mamba_cache_mode: MambaCacheModeOpt = None,
    num_gpu_blocks_override: GpuBlocksOverrideOpt = None,
    engine: EngineOpt = "ideal",
    mem_fraction_static: MemFractionStaticOpt = None,
    max_total_tokens: MaxTotalTokensOpt = None,
    page_size: PageSizeOpt = 1,
    engine_version: EngineVersionOpt = None,
    output: FormatOpt = OutputFormat.table,
) -> None:
    """Will it fit, and how much? Max concurrency, max context, or the fewest GPUs.

    Give --max-model-len for the concurrency at that length, --concurrency for the longest
    context that many requests reach, both (without -tp/-pp) for the smallest deployment.
    """
    from kvplan.catalog import load_model
    from kvplan.engine_plans import PlanRequest, plan_with
    from kvplan.planner import parse_utilization
    from kvplan.units import parse_bytes, parse_tokens
    from kvplan.views import plan as views
    from kvplan.workload import load_lengths

    def tokens(name: str, text: str | None) -> int | None:
        return option(name, parse_tokens, text) if text else None

    def run() -> None:
        from kvplan.engines.vllm_flags import refuse_other_engine

        vllm_flags = {
            "enable_prefix_caching": enable_prefix_caching,
            "async_scheduling": async_scheduling,
            "mamba_cache_mode": mamba_cache_mode,
            "num_gpu_blocks_override": num_gpu_blocks_override,
        }
        refuse_other_engine(engine, vllm_flags)
        spec = load_model(model)
        device = _device(gpu, gpu_memory)
        request = PlanRequest(
            max_model_len=tokens("--max-model-len", max_model_len),
            lengths=load_lengths(lengths) if lengths is not None else None,
            mean_length=tokens("--mean-length", mean_length),
            p99_length=tokens("--p99-length", p99_length),
            gpu_memory_utilization=option(
                "--gpu-memory-utilization", parse_utilization, gpu_memory_utilization
            ),
            tensor_parallel_size=_tensor_parallel_size(spec, tensor_parallel_size),
            pipeline_parallel_size=pipeline_parallel_size,
            concurrency=concurrency,
            kv_cache_dtype=auto_none(kv_cache_dtype),
            dtype=dtype,
            quantization=quantization,
            overhead_bytes=option("--overhead", parse_bytes, overhead) if overhead else None,
            kv_cache_memory_bytes=(
                option("--kv-cache-memory", parse_bytes, kv_cache_memory)
                if kv_cache_memory
                else None
            ),
            block_size=block_size,
            shared_prefix_tokens=option("--shared-prefix", parse_tokens, shared_prefix),
            max_num_batched_tokens=max_num_batched_tokens,
            max_num_seqs=max_num_seqs,
            mamba_ssm_cache_dtype=auto_none(mamba_ssm_cache_dtype),
            mem_fraction_static=(
                option("--mem-fraction-static", parse_utilization, mem_fraction_static)
                if mem_fraction_static is not None
                else None
            ),
            max_total_tokens=max_total_tokens,
            page_size=page_size,
            version=engine_version,
            enable_prefix_caching=enable_prefix_caching,
            async_scheduling=async_scheduling,
            mamba_cache_mode=mamba_cache_mode,
            num_gpu_blocks_override=num_gpu_blocks_override,
        )
        result = plan_with(spec, device, engine, request)
        emit(
            output,
            lambda: views.plan_result_to_dict(result, spec),
            lambda: views.plan_result_view(result, spec),
        )
        check_failed_unless(result.fits)

    guard(run)


@command("gpus")
def gpus(output: FormatOpt = OutputFormat.table) -> None:
    """The accelerator catalog: runtime-reported memory, bandwidth, dense peak FLOP/s."""
    from kvplan.hardware import list_gpus
    from kvplan.views import hardware as views

    def run() -> None:
        catalog = list_gpus()
        emit(output, lambda: views.gpus_to_dict(catalog), lambda: views.gpus_view(catalog))

    guard(run)
