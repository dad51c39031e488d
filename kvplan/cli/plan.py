"""``kvplan plan`` and ``kvplan gpus``: will it fit, and on what."""

from typing import TYPE_CHECKING, Annotated, Any

import typer

from kvplan.cli.cluster_options import (
    ClusterAsk,
    DisaggregateOpt,
    GpusPerNodeOpt,
    NodesOpt,
    ObjectiveOpt,
    PriceOpt,
    PricesFileOpt,
    SystemOpt,
    TopOpt,
)
from kvplan.cli.common import (
    FormatOpt,
    ModelArg,
    OutputFormat,
    QuantizationOpt,
    auto_none,
    calibration_option,
    check_failed_unless,
    command,
    command_line,
    emit,
    given_options,
    guard,
    option,
)
from kvplan.cli.llamacpp_options import (
    LLAMACPP_OPTIONS,
    BackendOpt,
    CacheTypeKDraftOpt,
    CacheTypeKOpt,
    CacheTypeVDraftOpt,
    CacheTypeVOpt,
    CpuMoeOpt,
    DraftMaxOpt,
    FlashAttnOpt,
    GpuLayersDraftOpt,
    KvUnifiedOpt,
    LlamaBatchOpt,
    LoraOpt,
    MmapOpt,
    ModelDraftOpt,
    NCpuMoeOpt,
    NglOpt,
    NoKvOffloadOpt,
    OverrideTensorOpt,
    ParallelOpt,
    SplitModeOpt,
    SwaFullOpt,
    TensorSplitOpt,
    UbatchOpt,
    WiredLimitOpt,
)
from kvplan.cli.lora_options import (
    LORA_OPTIONS,
    EnableLoraOpt,
    FullyShardedLorasOpt,
    LoraTargetModulesOpt,
    MaxLoraRankOpt,
    MaxLorasOpt,
    MaxLorasPerBatchOpt,
)
from kvplan.cli.options import (
    CalibrationOpt,
    DtypeOpt,
    EngineOpt,
    EngineVersionOpt,
    HfOverridesOpt,
    KvCacheDtypeOpt,
    OptionalGpuMemoryUtilizationOpt,
    OptionalGpuOpt,
    OptionalMaxModelLenOpt,
    OptionalPpOpt,
    OptionalTpOpt,
    SpeculativeConfigOpt,
)
from kvplan.cli.reports import (
    HtmlForceOpt,
    HtmlOpt,
    check_html_path,
    with_report_figures,
    write_report,
)
from kvplan.errors import UnitError

if TYPE_CHECKING:
    from kvplan.hardware.gpus import GPU
    from kvplan.model.spec import ModelSpec


def _opt(*names: str, help: str, min: int | None = None) -> Any:
    """An option of ``kvplan plan`` whose default is None, shown as no default."""
    return typer.Option(*names, help=help, min=min, show_default=False)


GpuMemoryOpt = Annotated[
    str | None,
    _opt(
        "--gpu-memory",
        help="Memory of the device as the runtime reports it (24GiB, 80GB); alone it"
        " describes any device, with --gpu it replaces that GPU's memory.",
    ),
]
ConcurrencyOpt = Annotated[
    int | None, _opt("--concurrency", "-n", min=1, help="Concurrent requests.")
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
BlockSizeOpt = Annotated[
    int | None, _opt("--block-size", min=1, help="Tokens per KV page (default 16).")
]
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
    int | None,
    _opt(
        "--max-num-batched-tokens",
        min=1,
        help="Tokens per forward pass; sizes the activation estimate (default 8192).",
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
EnforceEagerOpt = Annotated[
    bool | None,
    typer.Option(
        "--enforce-eager",
        help="vLLM: run without CUDA graphs; from v0.21.0 no graph memory is then taken from"
        " the KV cache budget.",
        show_default=False,
    ),
]
LimitMmOpt = Annotated[
    str | None,
    _opt(
        "--limit-mm-per-prompt",
        help="vLLM 0.32, multimodal models: items a prompt may hold, JSON as vLLM takes it"
        ' (\'{"image": 2, "video": 0}\'; 999 for one not named). The encoder cache holds the'
        " largest item's embeddings while vLLM profiles; a tower whose modalities are all 0"
        " loads no weights.",
    ),
]
LanguageModelOnlyOpt = Annotated[
    bool | None,
    typer.Option(
        "--language-model-only",
        help="vLLM 0.32, multimodal models: text only; every modality's limit is 0, the"
        " encoder loads no weights and nothing is profiled for it.",
        show_default=False,
    ),
]
SpeculativeAlgorithmOpt = Annotated[
    str | None,
    _opt(
        "--speculative-algorithm",
        help="SGLang 0.5.3-0.5.9: EAGLE, EAGLE3, NEXTN (the model's MTP layers), STANDALONE"
        " or NGRAM; the draft worker's pool takes as many tokens as the target's, in the"
        " drafter's cell size.",
    ),
]
SpeculativeDraftTokensOpt = Annotated[
    int | None,
    _opt("--speculative-num-draft-tokens", min=1, help="SGLang: draft tokens a step."),
]
SpeculativeDraftModelOpt = Annotated[
    str | None,
    _opt(
        "--speculative-draft-model-path",
        help="SGLang: the drafter (a catalog name, config.json or Hub id) for EAGLE, EAGLE3"
        " and STANDALONE.",
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
    int | None,
    _opt(
        "--max-num-seqs",
        min=1,
        help="vLLM: sequences per step (default: 1024 on a GPU of 70 GiB or more, else 256, A100s"
        " 256); a concurrency above it does not fit.",
    ),
]
MemFractionStaticOpt = Annotated[
    str | None,
    _opt(
        "--mem-fraction-static",
        help="SGLang: share of GPU memory for weights and KV pool (default: its automatic value).",
    ),
]
MaxTotalTokensOpt = Annotated[
    int | None, _opt("--max-total-tokens", min=1, help="SGLang: cap on the token pool.")
]
PageSizeOpt = Annotated[
    int | None, _opt("--page-size", min=1, help="SGLang: tokens per page (default 1).")
]


def _device(gpu: str | None, gpu_memory: str | None) -> "GPU":
    """The device ``--gpu`` and ``--gpu-memory`` describe."""
    from kvplan.errors import UnitError
    from kvplan.hardware.gpus import custom_gpu
    from kvplan.hardware.lookup import find_gpu
    from kvplan.units import parse_bytes

    device = find_gpu(gpu) if gpu is not None else None
    if gpu_memory is not None:
        return custom_gpu(option("--gpu-memory", parse_bytes, gpu_memory), device)
    if device is None:
        raise UnitError("give --gpu NAME (see `kvplan gpus`) or --gpu-memory SIZE")
    return device


def _tensor_parallel_size(spec: "ModelSpec", tp: int | None) -> int | None:
    """``-tp``, checked against the model's heads."""
    from kvplan.model.stages import as_tensor_parallel_size

    if tp is not None:
        option("-tp", lambda text: as_tensor_parallel_size(spec, int(text)), str(tp))
    return tp


@command("plan")
def plan_command(
    ctx: typer.Context,
    model: ModelArg,
    gpu: OptionalGpuOpt = None,
    gpu_memory: GpuMemoryOpt = None,
    tensor_parallel_size: OptionalTpOpt = None,
    pipeline_parallel_size: OptionalPpOpt = None,
    max_model_len: OptionalMaxModelLenOpt = None,
    concurrency: ConcurrencyOpt = None,
    gpu_memory_utilization: OptionalGpuMemoryUtilizationOpt = None,
    kv_cache_dtype: KvCacheDtypeOpt = "auto",
    dtype: DtypeOpt = None,
    quantization: QuantizationOpt = None,
    overhead: OverheadOpt = None,
    kv_cache_memory: KvCacheMemoryOpt = None,
    block_size: BlockSizeOpt = None,
    shared_prefix: SharedPrefixOpt = "0",
    lengths: LengthsOpt = None,
    mean_length: MeanLengthOpt = None,
    p99_length: P99LengthOpt = None,
    max_num_batched_tokens: BatchedTokensOpt = None,
    max_num_seqs: MaxNumSeqsOpt = None,
    mamba_ssm_cache_dtype: MambaSsmDtypeOpt = "auto",
    enable_prefix_caching: PrefixCachingOpt = None,
    async_scheduling: AsyncSchedulingOpt = None,
    mamba_cache_mode: MambaCacheModeOpt = None,
    num_gpu_blocks_override: GpuBlocksOverrideOpt = None,
    enforce_eager: EnforceEagerOpt = None,
    limit_mm_per_prompt: LimitMmOpt = None,
    language_model_only: LanguageModelOnlyOpt = None,
    speculative_config: SpeculativeConfigOpt = None,
    speculative_algorithm: SpeculativeAlgorithmOpt = None,
    speculative_num_draft_tokens: SpeculativeDraftTokensOpt = None,
    speculative_draft_model_path: SpeculativeDraftModelOpt = None,
    enable_lora: EnableLoraOpt = None,
    max_loras: MaxLorasOpt = None,
    max_loras_per_batch: MaxLorasPerBatchOpt = None,
    max_lora_rank: MaxLoraRankOpt = None,
    lora_target_modules: LoraTargetModulesOpt = None,
    fully_sharded_loras: FullyShardedLorasOpt = None,
    calibration: CalibrationOpt = None,
    engine: EngineOpt = "ideal",
    mem_fraction_static: MemFractionStaticOpt = None,
    max_total_tokens: MaxTotalTokensOpt = None,
    page_size: PageSizeOpt = None,
    engine_version: EngineVersionOpt = None,
    hf_overrides: HfOverridesOpt = None,
    system: SystemOpt = None,
    gpus_per_node: GpusPerNodeOpt = None,
    nodes: NodesOpt = None,
    objective: ObjectiveOpt = None,
    top: TopOpt = None,
    price: PriceOpt = None,
    prices: PricesFileOpt = None,
    disaggregate: DisaggregateOpt = None,
    n_gpu_layers: NglOpt = None,
    tensor_split: TensorSplitOpt = None,
    split_mode: SplitModeOpt = "layer",
    ubatch_size: UbatchOpt = 512,
    batch_size: LlamaBatchOpt = 2048,
    flash_attn: FlashAttnOpt = "auto",
    cache_type_k: CacheTypeKOpt = None,
    cache_type_v: CacheTypeVOpt = None,
    parallel: ParallelOpt = 1,
    swa_full: SwaFullOpt = False,
    mmap: MmapOpt = True,
    kv_unified: KvUnifiedOpt = False,
    no_kv_offload: NoKvOffloadOpt = False,
    device: BackendOpt = "cuda",
    wired_limit_mb: WiredLimitOpt = None,
    cpu_moe: CpuMoeOpt = False,
    n_cpu_moe: NCpuMoeOpt = 0,
    override_tensor: OverrideTensorOpt = None,
    model_draft: ModelDraftOpt = None,
    gpu_layers_draft: GpuLayersDraftOpt = None,
    cache_type_k_draft: CacheTypeKDraftOpt = None,
    cache_type_v_draft: CacheTypeVDraftOpt = None,
    draft_max: DraftMaxOpt = None,
    lora: LoraOpt = None,
    html: HtmlOpt = None,
    force: HtmlForceOpt = False,
    output: FormatOpt = OutputFormat.table,
) -> None:
    """Will it fit, and how much? Max concurrency, max context, or the fewest GPUs.

    Give --max-model-len for the concurrency at that length, --concurrency for the longest
    context that many requests reach, both (without -tp/-pp) for the smallest deployment:
    in whole nodes of the GPU's system (TP inside its NVLink domain, PP across nodes, replicas,
    DP attention with expert parallelism for MoE models), ranked by --objective, with cost.
    Several GPUs (--gpu h100,h200,mi300x) are compared under the objective.

    --engine: ideal (kvplan's own paged planner), vllm (vLLM V1's budget, groups and printed
    figures), sglang (its token pool and log line), trtllm (a fraction of free memory, 32-token
    blocks; --gpu-memory-utilization is its free_gpu_memory_fraction) or llama.cpp (its
    buffers per device, -ngl and -c). --engine-version: a release line of the engine (default:
    the newest modelled, vLLM 0.32).

    Every engine answers the same three questions from its own rules (the fewest GPUs too,
    over tensor parallel sizes and replicas); a setting an engine does not read is refused
    by name, and so is a --max-model-len past the model's trained length where the engine
    refuses it. Exit code 1 when the answer is "does not fit".
    """
    args = dict(locals())
    context = args.pop("ctx")
    args["_given"] = given_options(context)
    args["_command"] = command_line(context, leave_out=("html", "force", "output"))
    guard(lambda: _plan(args))


def _tokens(name: str, text: str | None) -> int | None:
    from kvplan.units import parse_tokens

    return option(name, parse_tokens, text) if text is not None else None


#: plan's options of the search in whole nodes (kvplan's own planner only)
_CLUSTER_OPTIONS = {
    "system": "--system",
    "gpus_per_node": "--gpus-per-node",
    "nodes": "--nodes",
    "objective": "--objective",
    "top": "--top",
    "price": "--price",
    "prices": "--prices",
    "disaggregate": "--disaggregate",
}


def _common(a: dict[str, Any]) -> dict[str, Any]:
    """The settings every planner takes, parsed from plan's options ``a`` (None: not given)."""
    from kvplan.planner import parse_utilization
    from kvplan.units import parse_bytes, parse_tokens

    utilization = a["gpu_memory_utilization"]
    return {
        "max_model_len": _tokens("--max-model-len", a["max_model_len"]),
        "concurrency": a["concurrency"],
        "gpu_memory_utilization": option("--gpu-memory-utilization", parse_utilization, utilization)
        if utilization is not None
        else None,
        "kv_cache_dtype": auto_none(a["kv_cache_dtype"]),
        "dtype": a["dtype"],
        "quantization": a["quantization"],
        "overhead_bytes": option("--overhead", parse_bytes, a["overhead"])
        if a["overhead"] is not None
        else None,
        "block_size": a["block_size"],
        "shared_prefix_tokens": option("--shared-prefix", parse_tokens, a["shared_prefix"]),
        "max_num_batched_tokens": a["max_num_batched_tokens"],
    }


def _question(a: dict[str, Any], spec: "ModelSpec", common: dict[str, Any]) -> Any:
    """The ``Question`` of plan's options ``a`` for one deployment on one GPU."""
    from kvplan.answers.question import Question, parse_hf_overrides
    from kvplan.answers.workload import count_lengths
    from kvplan.cli.llamacpp_options import llamacpp_ask
    from kvplan.planner import parse_utilization
    from kvplan.units import parse_bytes

    engine = a["engine"]
    given = a.get("_given", frozenset())
    llama = [flag for name, flag in LLAMACPP_OPTIONS.items() if name in given]
    if llama and engine != "llama.cpp":
        raise UnitError(f"{llama[0]}: a llama.cpp option; it applies with --engine llama.cpp")
    if "parallel" in given and common.get("concurrency") is None:
        # llama.cpp's -np N is the question's concurrency: N requests, each of -c tokens
        common = {**common, "concurrency": a["parallel"]}
    fraction = a["mem_fraction_static"]
    overrides = a.get("hf_overrides")
    return Question(
        engine=engine,
        **common,
        lengths=count_lengths(a["lengths"]) if a["lengths"] is not None else None,
        mean_length=_tokens("--mean-length", a["mean_length"]),
        p99_length=_tokens("--p99-length", a["p99_length"]),
        tensor_parallel_size=_tensor_parallel_size(spec, a["tensor_parallel_size"]),
        pipeline_parallel_size=a["pipeline_parallel_size"],
        kv_cache_memory_bytes=(
            option("--kv-cache-memory", parse_bytes, a["kv_cache_memory"])
            if a["kv_cache_memory"] is not None
            else None
        ),
        max_num_seqs=a["max_num_seqs"],
        mamba_ssm_cache_dtype=auto_none(a["mamba_ssm_cache_dtype"]),
        mem_fraction_static=(
            option("--mem-fraction-static", parse_utilization, fraction)
            if fraction is not None
            else None
        ),
        max_total_tokens=a["max_total_tokens"],
        page_size=a["page_size"],
        version=a["engine_version"],
        llamacpp=llamacpp_ask(a, common) if engine == "llama.cpp" else None,
        max_position_embeddings=(
            option("--hf-overrides", parse_hf_overrides, overrides)
            if overrides is not None
            else None
        ),
        device_fixed=a["gpu_memory"] is not None,
        speculative_algorithm=a["speculative_algorithm"],
        speculative_num_draft_tokens=a["speculative_num_draft_tokens"],
        speculative_draft_model=a["speculative_draft_model_path"],
        calibration=calibration_option(a["calibration"]),
        **{name: a[name] for name in (*_VLLM_FLAGS, *LORA_OPTIONS)},
    )


_VLLM_FLAGS = (
    "enable_prefix_caching",
    "async_scheduling",
    "mamba_cache_mode",
    "num_gpu_blocks_override",
    "enforce_eager",
    "limit_mm_per_prompt",
    "language_model_only",
    "speculative_config",
)


def _plan(a: dict[str, Any]) -> None:
    """``kvplan plan`` with its options ``a``: one question asked of one engine, or the
    ranked deployments in whole nodes (kvplan's own planner)."""
    from kvplan.answers.plans import answer
    from kvplan.catalog.lookup import load_model
    from kvplan.views import plan as views

    spec = load_model(a["model"])
    common = _common(a)
    keys = tuple(_CLUSTER_OPTIONS)
    cluster = ClusterAsk(*(a[k] for k in keys))
    asked = [flag for name, flag in _CLUSTER_OPTIONS.items() if a[name] not in (None, [], ())]
    several = a["gpu"] is not None and "," in a["gpu"]
    if (asked or several) and a["engine"] != "ideal":
        what = asked[0] if asked else "--gpu with several GPUs"
        raise UnitError(
            f"{what}: the search in whole nodes is kvplan's own planner's (--engine ideal);"
            f" --engine {a['engine']} answers on one GPU type, with -tp or the fewest GPUs"
        )
    if cluster.wanted(a):
        from kvplan.answers.plans import cluster_verdict

        shared = {k: v for k, v in common.items() if v is not None}
        found = cluster.plan(spec, a["gpu"], **shared)
        q = _question(a, spec, common)
        doc = views.with_answer(views.cluster_to_dict(found), q, cluster_verdict(found))
        if a["html"] is not None:
            with_report_figures(doc, spec, auto_none(a["kv_cache_dtype"]))
            write_report(a["html"], doc, a["_command"], a["force"])
        emit(a["output"], lambda: doc, lambda: views.cluster_view(found))
        check_failed_unless(found.fits)
        return
    if a["html"] is not None:
        check_html_path(a["html"])
    q = _question(a, spec, common)
    ans = answer(spec, _device(a["gpu"], a["gpu_memory"]), q)
    to_dict, view = _views(ans.result)
    doc = views.with_answer(to_dict(ans.result, spec), q, ans.verdict)
    if a["html"] is not None:
        with_report_figures(doc, spec, auto_none(a["kv_cache_dtype"]))
        write_report(a["html"], doc, a["_command"], a["force"])
    emit(
        a["output"],
        lambda: doc,
        lambda: [*view(ans.result, spec), *views.verdict_lines(ans.result, ans.verdict)],
    )
    check_failed_unless(ans.fits)


def _views(result: Any) -> tuple[Any, Any]:
    """The JSON and table views of an engine's plan (llama.cpp's buffers and the search in
    nodes have their own). By class name: neither module is imported unless used."""
    from kvplan.views import plan as views

    match type(result).__name__:
        case "LlamaCppPlan":
            from kvplan.views import engines

            return engines.llamacpp_plan_to_dict, engines.llamacpp_plan_view
        case "ClusterPlan":
            return (lambda r, _: views.cluster_to_dict(r)), (lambda r, _: views.cluster_view(r))
    return views.plan_result_to_dict, views.plan_result_view


@command("gpus")
def gpus(output: FormatOpt = OutputFormat.table) -> None:
    """The accelerator catalog: runtime-reported memory, bandwidth, dense peak FLOP/s."""
    from kvplan.hardware.gpus import list_gpus
    from kvplan.views import hardware as views

    def run() -> None:
        catalog = list_gpus()
        emit(output, lambda: views.gpus_to_dict(catalog), lambda: views.gpus_view(catalog))

    guard(run)
