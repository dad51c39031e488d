"""llama.cpp's own flags on ``kvplan plan --engine llama.cpp``, spelled as llama-server spells
them, and the ``LlamaCppAsk`` they make."""

from typing import TYPE_CHECKING, Annotated, Any

import typer

from kvplan.cli.common import option

if TYPE_CHECKING:
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
    int, typer.Option("--ubatch-size", "-ub", min=1, help="llama.cpp: physical batch (tokens).")
]
LlamaBatchOpt = Annotated[
    int, typer.Option("--batch-size", "-b", min=1, help="llama.cpp: logical batch (tokens).")
]
FlashAttnOpt = Annotated[
    str, typer.Option("--flash-attn", "-fa", help="llama.cpp: flash attention on, off or auto.")
]
CacheTypeKOpt = Annotated[
    str | None,
    _opt("--cache-type-k", "-ctk", help="llama.cpp: K cache type (f16, q8_0, q4_0...)."),
]
CacheTypeVOpt = Annotated[
    str | None,
    _opt("--cache-type-v", "-ctv", help="llama.cpp: V cache type (quantized needs -fa on)."),
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
    bool, typer.Option("--mmap/--no-mmap", help="llama.cpp: map the file's host weights.")
]
KvUnifiedOpt = Annotated[
    bool, typer.Option("--kv-unified", help="llama.cpp: one cache for all sequences.")
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
    split = option("--tensor-split", _split, a["tensor_split"]) if a["tensor_split"] else None
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
    )
