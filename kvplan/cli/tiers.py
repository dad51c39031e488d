"""``kvplan tiers``: what each KV-cache tier (GPU, host memory, disk) holds, and whether a
prefix reloads from a tier faster than it recomputes."""

from enum import Enum
from fractions import Fraction
from typing import TYPE_CHECKING, Annotated

import typer

from kvplan.cli.common import (
    command,
    complete_model,
    draw_chart,
    emit,
    guard,
    option,
    tokens_option,
)
from kvplan.cli.options import (
    FormatOpt,
    GpuMemoryUtilizationOpt,
    GpuOpt,
    KvCacheDtypeOpt,
    OptionalMaxModelLenOpt,
    OutputFormat,
    TpOpt,
)

if TYPE_CHECKING:
    pass


class TierEngine(str, Enum):
    vllm = "vllm"
    sglang = "sglang"
    lmcache = "lmcache"
    llamacpp = "llamacpp"


class OffloadingBackend(str, Enum):
    native = "native"
    lmcache = "lmcache"


TiersModelOpt = Annotated[
    str,
    typer.Option(
        "--model",
        "-m",
        autocompletion=complete_model,
        help="The model served (a catalog name, Hugging Face id, alias or spec path).",
        show_default=False,
    ),
]
TiersSystemOpt = Annotated[
    str | None,
    typer.Option(
        "--system",
        help="A catalog system (hgx-h100, gb200-nvl72, l40s-server...) whose host memory,"
        " host link, disk and network count (default: the GPU's first system).",
        show_default=False,
    ),
]
TierEngineOpt = Annotated[
    TierEngine,
    typer.Option("--engine", "-e", help="Whose tiers: vllm, sglang, lmcache or llamacpp."),
]
OffloadingSizeOpt = Annotated[
    str | None,
    typer.Option(
        "--kv-offloading-size",
        help="vLLM: GiB of host memory for offloaded KV, summed over all ranks (10, 0.5).",
        show_default=False,
    ),
]
OffloadingBackendOpt = Annotated[
    OffloadingBackend,
    typer.Option("--kv-offloading-backend", help="vLLM: native (blocks) or lmcache (chunks)."),
]
LmcacheCpuOpt = Annotated[
    str,
    typer.Option(
        "--lmcache-max-local-cpu-size",
        help="LMCache: LMCACHE_MAX_LOCAL_CPU_SIZE, GiB of host memory per rank.",
    ),
]
LmcacheDiskOpt = Annotated[
    str,
    typer.Option(
        "--lmcache-max-local-disk-size",
        help="LMCache: LMCACHE_MAX_LOCAL_DISK_SIZE, GiB of local disk per rank (0: none;"
        " LMCACHE_LOCAL_DISK names where).",
    ),
]
LmcacheChunkOpt = Annotated[
    int,
    typer.Option("--lmcache-chunk-size", min=1, help="LMCache: LMCACHE_CHUNK_SIZE, tokens."),
]
HicacheRatioOpt = Annotated[
    str,
    typer.Option("--hicache-ratio", help="SGLang: the host pool as a multiple of the device's."),
]
HicacheSizeOpt = Annotated[
    int,
    typer.Option(
        "--hicache-size", min=0, help="SGLang: GB of host pool per rank; replaces the ratio."
    ),
]
PageSizeOpt = Annotated[int, typer.Option("--page-size", min=1, help="SGLang: tokens a page.")]
PrefixTokensOpt = Annotated[
    str,
    typer.Option("--prefix-tokens", help="The shared prefix: tokens (4096, 4K, 32k)."),
]
HostMemoryOpt = Annotated[
    str | None,
    typer.Option(
        "--host-memory",
        help="The node's host memory in place of the system's: 512GiB, 1TB.",
        show_default=False,
    ),
]
PlotOpt = Annotated[
    str | None,
    typer.Option(
        "--plot",
        help="Also draw reload and recompute time against prefix length to a .png or .svg"
        " (needs pip install 'kvplan[plot]').",
        show_default=False,
    ),
]
ForceOpt = Annotated[bool, typer.Option("--force", help="Overwrite --plot.")]


def _gib(name: str, text: str) -> Fraction:
    """A GiB setting (or SGLang's ratio) as a decimal (5.0, 0.5); 0 passes for a disk size."""
    from kvplan.arguments import as_fraction

    if text.strip() == "0" and name == "--lmcache-max-local-disk-size":
        return Fraction(0)
    return as_fraction(text, name, high=Fraction(2**20))


@command("tiers")
def tiers(
    model: TiersModelOpt,
    gpu: GpuOpt,
    system: TiersSystemOpt = None,
    engine: TierEngineOpt = TierEngine.vllm,
    tensor_parallel_size: TpOpt = 1,
    max_model_len: OptionalMaxModelLenOpt = None,
    kv_cache_dtype: KvCacheDtypeOpt = "auto",
    gpu_memory_utilization: GpuMemoryUtilizationOpt = "0.9",
    kv_offloading_size: OffloadingSizeOpt = None,
    kv_offloading_backend: OffloadingBackendOpt = OffloadingBackend.native,
    lmcache_max_local_cpu_size: LmcacheCpuOpt = "5.0",
    lmcache_max_local_disk_size: LmcacheDiskOpt = "0",
    lmcache_chunk_size: LmcacheChunkOpt = 256,
    hicache_ratio: HicacheRatioOpt = "2.0",
    hicache_size: HicacheSizeOpt = 0,
    page_size: PageSizeOpt = 1,
    prefix_tokens: PrefixTokensOpt = "4096",
    host_memory: HostMemoryOpt = None,
    output: FormatOpt = OutputFormat.table,
    plot: PlotOpt = None,
    force: ForceOpt = False,
) -> None:
    """How many tokens and prefixes each KV-cache tier holds (the GPU pool, host memory,
    LMCache's disk) in the engine's units, the host memory it takes from the node, and for
    prefixes of 256 tokens up to the model's length the time to reload one from each tier
    (host memory, local disk, a remote pool) against recomputing it.

    A tier larger than the node's host memory is refused with the largest setting that fits.
    """
    from kvplan.answers.tiers import reload_vs_recompute, tier_capacity
    from kvplan.catalog.lookup import load_model
    from kvplan.cli.common import dtype_option
    from kvplan.hardware.lookup import find_gpu
    from kvplan.planner import parse_utilization
    from kvplan.units import parse_bytes
    from kvplan.views import tiers as views

    def run() -> None:
        prefix = tokens_option("--prefix-tokens", prefix_tokens)
        length = None if max_model_len is None else tokens_option("--max-model-len", max_model_len)
        host = None if host_memory is None else option("--host-memory", parse_bytes, host_memory)
        spec, device = load_model(model), find_gpu(gpu)
        kv = dtype_option("--kv-cache-dtype", kv_cache_dtype)
        capacity = tier_capacity(
            spec,
            device,
            system=system,
            engine=engine.value,
            prefix_tokens=prefix,
            max_model_len=length,
            tensor_parallel_size=tensor_parallel_size,
            kv_cache_dtype=kv,
            gpu_memory_utilization=option(
                "--gpu-memory-utilization", parse_utilization, gpu_memory_utilization
            ),
            kv_offloading_size=None
            if kv_offloading_size is None
            else _gib("--kv-offloading-size", kv_offloading_size),
            kv_offloading_backend=kv_offloading_backend.value,
            lmcache_max_local_cpu_size=_gib(
                "--lmcache-max-local-cpu-size", lmcache_max_local_cpu_size
            ),
            lmcache_max_local_disk_size=_gib(
                "--lmcache-max-local-disk-size", lmcache_max_local_disk_size
            ),
            lmcache_chunk_size=lmcache_chunk_size,
            hicache_ratio=_gib("--hicache-ratio", hicache_ratio),
            hicache_size=hicache_size,
            page_size=page_size,
            host_memory_bytes=host,
        )
        reload = reload_vs_recompute(
            spec,
            device,
            system=system,
            tensor_parallel_size=tensor_parallel_size,
            kv_cache_dtype=kv,
            engine=engine.value,
            prefix_tokens=[prefix],
            max_tokens=length,
        )
        doc = views.tiers_to_dict(capacity, reload)
        if plot is not None:
            draw_chart(views.reload_chart(doc), plot, force)
        emit(output, lambda: doc, lambda: views.tiers_view(doc))

    guard(run)
