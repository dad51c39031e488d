"""llama.cpp's own flags, spelled as llama-server spells them and meaning what they mean there,
in every command that takes them (``kvplan plan --engine llama.cpp``, ``kvplan calc``): ``-c``
the context of all sequences together (``kvplan.cli.options``), ``-np`` the sequences, ``-b``
the logical batch in tokens, ``-ub`` the physical batch, ``-fa on|off|auto``, ``-ctk``/``-ctv``
the cache types, ``-ngl`` the layers on the GPUs. And the ``LlamaCppAsk`` plan's make."""

from typing import TYPE_CHECKING, Annotated, Any

import typer

from kvplan.cli.common import option

if TYPE_CHECKING:
    from kvplan.engines.llamacpp_draft import LlamaCppDraft
    from kvplan.engines.llamacpp_plan import LlamaCppAsk


def _opt(*names: str, help: str, min: int | None = None) -> Any:
    return typer.Option(*names, help=help, min=min, show_default=False)


NglOpt = Annotated[
    int | None,
    _opt(
        "--n-gpu-layers",
        "-ngl",
        min=0,
        help="llama.cpp: layers on the GPUs (the output layer is the last: n_layer + 1 puts"
        " all on them). Default: the largest that fits.",
    ),
]
TensorSplitOpt = Annotated[
    str | None,
    _opt("--tensor-split", "-ts", help="llama.cpp: each GPU's share of the layers (3,1)."),
]
SplitModeOpt = Annotated[
    str, typer.Option("--split-mode", "-sm", help="llama.cpp: layer, row or none.")
]
UbatchOpt = Annotated[
    int,
    typer.Option(
        "--ubatch-size",
        "-ub",
        min=1,
        help="llama.cpp: the physical batch (tokens), at most -b; sizes the sliding-window"
        " cache and the compute buffers.",
    ),
]
_BATCH = typer.Option(
    "--batch-size",
    "-b",
    min=1,
    help="llama.cpp: the logical batch (tokens; default 2048); -ub is taken at most this."
    " Not the number of sequences: that is -np.",
    show_default=False,
)
LlamaBatchOpt = Annotated[int, _BATCH]
OptionalLlamaBatchOpt = Annotated[int | None, _BATCH]
FlashAttnOpt = Annotated[
    str,
    typer.Option(
        "--flash-attn",
        "-fa",
        help="llama.cpp: flash attention on, off or auto (on where the modelled backends take it).",
    ),
]
NoFlashAttnOpt = Annotated[
    bool, typer.Option("--no-flash-attn", help="The same as -fa off (an older spelling).")
]
CacheTypeKOpt = Annotated[
    str | None,
    _opt(
        "--cache-type-k",
        "-ctk",
        "--k-dtype",
        help="K cache type in place of --kv-cache-dtype (llama.cpp -ctk): f16, q8_0, q4_0...",
    ),
]
CacheTypeVOpt = Annotated[
    str | None,
    _opt(
        "--cache-type-v",
        "-ctv",
        "--v-dtype",
        help="V cache type in place of --kv-cache-dtype (llama.cpp -ctv; quantized needs -fa on).",
    ),
]
ParallelOpt = Annotated[
    int, typer.Option("--parallel", "-np", min=1, help="llama.cpp: sequences (server slots).")
]
SwaFullOpt = Annotated[
    bool,
    typer.Option(
        "--swa-full/--no-swa-full",
        help="llama.cpp: full-size cache for sliding-window layers (llama-server's default:"
        " off; llama_context_default_params: on).",
    ),
]
MmapOpt = Annotated[
    bool,
    typer.Option(
        "--mmap/--no-mmap",
        help="llama.cpp with a .gguf file: map the host weights (CPU_Mapped) or copy them (CPU).",
    ),
]
KvUnifiedOpt = Annotated[
    bool, typer.Option("--kv-unified", help="llama.cpp: one cache shared by all sequences.")
]
NoKvOffloadOpt = Annotated[
    bool, typer.Option("--no-kv-offload", help="llama.cpp: keep the KV cache in host memory.")
]
BackendOpt = Annotated[
    str,
    typer.Option("--device", help="llama.cpp: the backend's rules: cuda, metal or cpu."),
]
WiredLimitOpt = Annotated[
    int | None,
    _opt(
        "--wired-limit-mb",
        min=1,
        help="llama.cpp on Apple silicon: the GPU limit set with sysctl iogpu.wired_limit_mb"
        " (MB = MiB as macOS counts it), in place of the default working set.",
    ),
]

CpuMoeOpt = Annotated[
    bool,
    typer.Option(
        "--cpu-moe", "-cmoe", help="llama.cpp: keep every routed expert tensor on the host."
    ),
]
NCpuMoeOpt = Annotated[
    int,
    typer.Option(
        "--n-cpu-moe",
        "-ncmoe",
        min=0,
        help="llama.cpp: keep the routed expert tensors of the first N layers on the host.",
    ),
]
OverrideTensorOpt = Annotated[
    list[str] | None,
    _opt(
        "--override-tensor",
        "-ot",
        help="llama.cpp: PATTERN=DEVICE, tensors whose name matches the regular expression go"
        " to DEVICE (exps=CPU); repeatable, or comma-separated.",
    ),
]


#: plan's options that only llama.cpp reads, as llama.cpp spells them
LLAMACPP_OPTIONS = {
    "n_gpu_layers": "-ngl",
    "tensor_split": "-ts",
    "split_mode": "--split-mode",
    "ubatch_size": "-ub",
    "batch_size": "-b",
    "flash_attn": "-fa",
    "cache_type_k": "-ctk",
    "cache_type_v": "-ctv",
    "parallel": "-np",
    "swa_full": "--swa-full",
    "mmap": "--mmap",
    "kv_unified": "--kv-unified",
    "no_kv_offload": "--no-kv-offload",
    "device": "--device",
    "wired_limit_mb": "--wired-limit-mb",
    "cpu_moe": "--cpu-moe",
    "n_cpu_moe": "--n-cpu-moe",
    "override_tensor": "-ot",
    "model_draft": "-md",
    "gpu_layers_draft": "-ngld",
    "cache_type_k_draft": "-ctkd",
    "cache_type_v_draft": "-ctvd",
    "draft_max": "--draft-max",
    "lora": "--lora",
}
#: the draft model's settings, each meaning nothing without -md
DRAFT_OPTIONS = ("gpu_layers_draft", "cache_type_k_draft", "cache_type_v_draft", "draft_max")

ModelDraftOpt = Annotated[
    str | None,
    _opt(
        "--model-draft",
        "-md",
        help="llama.cpp: a draft model for speculative decoding (a catalog name, config.json,"
        " Hub id or .gguf): its weights, its own context of -c cells and its compute buffers"
        " join the target's on each device.",
    ),
]
GpuLayersDraftOpt = Annotated[
    int | None,
    _opt("--gpu-layers-draft", "-ngld", min=0, help="llama.cpp: the draft's layers on the GPUs"
         " (default: all)."),
]  # fmt: skip
CacheTypeKDraftOpt = Annotated[
    str | None, _opt("--cache-type-k-draft", "-ctkd", help="llama.cpp: the draft's K cache type"
                     " (default f16).")
]  # fmt: skip
CacheTypeVDraftOpt = Annotated[
    str | None, _opt("--cache-type-v-draft", "-ctvd", help="llama.cpp: the draft's V cache type"
                     " (default f16).")
]  # fmt: skip
DraftMaxOpt = Annotated[
    int | None,
    _opt("--draft-max", "--draft", min=1, help="llama.cpp: tokens drafted a step (default 3;"
         " sizes no buffer).")
]  # fmt: skip


LoraOpt = Annotated[
    list[str] | None,
    _opt(
        "--lora",
        help="llama.cpp: a LoRA adapter .gguf, repeatable: its tensors go on the devices of the"
        " weights they adapt (read from the file's header).",
    ),
]


def _draft(a: dict[str, Any]) -> "LlamaCppDraft | None":
    """The draft model of plan's options ``a``; a draft setting without -md is refused."""
    from kvplan.engines.llamacpp_draft import DEFAULT_DRAFT_MAX, LlamaCppDraft
    from kvplan.errors import UnitError

    if a.get("model_draft") is None:
        given = [LLAMACPP_OPTIONS[n] for n in DRAFT_OPTIONS if a.get(n) is not None]
        if given:
            raise UnitError(f"{given[0]}: a setting of the draft model; it needs -md MODEL")
        return None
    from kvplan.catalog.lookup import load_model

    return LlamaCppDraft(
        spec=load_model(a["model_draft"]),
        model=str(a["model_draft"]),
        n_gpu_layers=a.get("gpu_layers_draft"),
        type_k=a.get("cache_type_k_draft") or "f16",
        type_v=a.get("cache_type_v_draft") or "f16",
        draft_max=a.get("draft_max") or DEFAULT_DRAFT_MAX,
    )


def flash_attn_on(text: str, no_flash_attn: bool = False) -> bool:
    """``-fa on|off|auto`` as llama.cpp resolves it for the modelled backends: auto is on;
    ``--no-flash-attn`` is off. A UnitError names the allowed values."""
    from kvplan.errors import UnitError

    chosen = text.strip().lower()
    if chosen not in ("on", "off", "auto"):
        raise UnitError(f"-fa {text!r}: allowed on, off, auto")
    return chosen != "off" and not no_flash_attn


def _split(text: str) -> tuple[Any, ...]:
    from fractions import Fraction

    from kvplan.errors import UnitError

    try:
        shares = tuple(Fraction(part.strip()) for part in text.split(","))
    except (ValueError, ZeroDivisionError):
        raise UnitError(f"{text!r}: comma-separated shares (3,1 or 0.6,0.4)") from None
    return shares


def llamacpp_ask(a: dict[str, Any], common: dict[str, Any]) -> "LlamaCppAsk":
    """The ``LlamaCppAsk`` of plan's options ``a`` (``common``: the parsed shared ones)."""
    from kvplan.engines.llamacpp_plan import LlamaCppAsk
    from kvplan.units import MiB

    kv = common["kv_cache_dtype"]
    wired = a["wired_limit_mb"]
    ts = a["tensor_split"]
    split = option("--tensor-split", _split, ts) if ts is not None else None
    return LlamaCppAsk(
        model=str(a["model"]),
        n_ctx=common["max_model_len"],
        n_gpu_layers=a["n_gpu_layers"],
        num_gpus=a["tensor_parallel_size"] or (len(split) if split else 1),
        tensor_split=split,
        split_mode=a["split_mode"],
        n_ubatch=a["ubatch_size"],
        n_batch=a["batch_size"],
        flash_attn=a["flash_attn"],
        type_k=a["cache_type_k"] or kv or "f16",
        type_v=a["cache_type_v"] or kv or "f16",
        n_seq_max=a["parallel"],
        kv_unified=a["kv_unified"],
        swa_full=a["swa_full"],
        use_mmap=a["mmap"],
        no_kv_offload=a["no_kv_offload"],
        backend=a["device"],
        overhead_bytes=common["overhead_bytes"],
        wired_limit_bytes=wired * MiB if wired is not None else None,
        tensor_overrides=tuple(a.get("override_tensor") or ()),
        cpu_moe=bool(a.get("cpu_moe", False)),
        n_cpu_moe=int(a.get("n_cpu_moe", 0) or 0),
        draft=_draft(a),
        loras=tuple(a.get("lora") or ()),
    )
