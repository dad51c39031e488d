"""``kvplan simulate``: a request trace replayed through an engine's prefix cache and the
tiers below it."""

from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from kvplan.cli.common import command, draw_chart, emit, guard, option
from kvplan.cli.options import (
    EngineVersionOpt,
    FormatOpt,
    GpuOpt,
    KvCacheDtypeOpt,
    OptionalGpuMemoryUtilizationOpt,
    OutputFormat,
    TpOpt,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from kvplan.answers.simulate import TierSize

T = TypeVar("T")

TraceArg = Annotated[
    str,
    typer.Argument(
        help="A request trace: Mooncake JSONL (timestamp, input_length, output_length, hash_ids"
        " of 512-token blocks), JSONL of prompt token ids, or prefix groups (JSONL or CSV).",
        show_default=False,
    ),
]
SimulateModelOpt = Annotated[
    str, typer.Option("--model", "-m", help="The model served.", show_default=False)
]
TraceFormatOpt = Annotated[
    str,
    typer.Option(
        "--trace-format",
        help="auto (from the first line), mooncake, token-ids or prefix-groups.",
    ),
]
_TIER_HELP = (
    "KV cache kept in {where} below the GPU, for this GPU (e.g. 256GiB; {engines}): written"
    " through, least recently used evicted."
)
HostTierOpt = Annotated[
    str | None,
    typer.Option(
        "--host-tier",
        help=_TIER_HELP.format(
            where="host memory",
            engines="vLLM --kv-offloading-size, LMCache LMCACHE_MAX_LOCAL_CPU_SIZE, SGLang"
            " --hicache-size",
        ),
        show_default=False,
    ),
]
DiskTierOpt = Annotated[
    str | None,
    typer.Option(
        "--disk-tier",
        help=_TIER_HELP.format(where="local disk", engines="LMCache LMCACHE_MAX_LOCAL_DISK_SIZE"),
        show_default=False,
    ),
]
RemoteTierOpt = Annotated[
    str | None,
    typer.Option(
        "--remote-tier",
        help=_TIER_HELP.format(
            where="a remote pool", engines="LMCache remote, SGLang HiCache storage"
        ),
        show_default=False,
    ),
]
LinkOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--link",
        help="A tier's link to the GPU, one direction, as TIER=RATE (host=64GB/s); default:"
        " the GPU's system in the catalog (host: PCIe or NVLink-C2C, disk: the node's NVMe"
        " over its GPUs, remote: its network). Repeatable.",
        show_default=False,
    ),
]
SimulateEngineOpt = Annotated[
    str,
    typer.Option(
        "--engine",
        "-e",
        help="vllm (its block pool, an LRU of free blocks) or sglang (its radix tree, an LRU"
        " of leaves, on its token pool; its tiers HiCache's).",
    ),
]
PageSizeOpt = Annotated[
    int,
    typer.Option(
        "--page-size", min=1, max=512, help="SGLang's --page-size: tokens a page (default 1)."
    ),
]
PlotOpt = Annotated[
    str | None,
    typer.Option(
        "--plot",
        help="Also draw the curve (implies --curve) to a .png or .svg (needs pip install"
        " 'kvplan[plot]').",
        show_default=False,
    ),
]
ForceOpt = Annotated[bool, typer.Option("--force", help="Overwrite --plot.")]
CurveOpt = Annotated[
    bool,
    typer.Option(
        "--curve",
        help="Also replay the lowest tier (the GPU's pool without tiers) at 0 to 4 times its"
        " size: how the hit rate grows with it.",
    ),
]


@command("simulate")
def simulate(
    trace: TraceArg,
    model: SimulateModelOpt,
    gpu: GpuOpt,
    tensor_parallel_size: TpOpt = 1,
    gpu_memory_utilization: OptionalGpuMemoryUtilizationOpt = None,
    kv_cache_dtype: KvCacheDtypeOpt = "auto",
    engine_version: EngineVersionOpt = None,
    engine: SimulateEngineOpt = "vllm",
    page_size: PageSizeOpt = 1,
    trace_format: TraceFormatOpt = "auto",
    host_tier: HostTierOpt = None,
    disk_tier: DiskTierOpt = None,
    remote_tier: RemoteTierOpt = None,
    link: LinkOpt = None,
    curve: CurveOpt = False,
    plot: PlotOpt = None,
    force: ForceOpt = False,
    output: FormatOpt = OutputFormat.table,
) -> None:
    """Replay a request trace through vLLM's prefix cache on one GPU's pool and the tiers
    below it, or through SGLang's radix cache: the tokens found cached, loaded from each tier
    and prefilled, the FLOPs saved, the bytes moved, the blocks evicted.

    The pool is the one the engine gives the model on the GPU (kvplan plan --engine vllm or
    sglang); requests are admitted first come first served when their blocks fit, hit the
    longest run of their first blocks cached on the GPU and then in each tier, and evict the
    least recently freed blocks (SGLang: whole leaves of its tree, least recently accessed).
    """
    from kvplan.answers.simulate import hit_rate_curve, replay_trace
    from kvplan.catalog.lookup import load_model
    from kvplan.cli.common import dtype_option
    from kvplan.hardware.lookup import find_gpu
    from kvplan.planner import parse_utilization
    from kvplan.views import simulate as views

    def run() -> None:
        utilization = None
        if gpu_memory_utilization is not None:
            text = gpu_memory_utilization
            utilization = option("--gpu-memory-utilization", parse_utilization, text)
        kv = dtype_option("--kv-cache-dtype", kv_cache_dtype)
        tiers = _tiers({"host": host_tier, "disk": disk_tier, "remote": remote_tier}, link or [])
        spec, device = load_model(model), find_gpu(gpu)

        def ask(answer: "Callable[..., T]") -> T:
            return answer(
                spec,
                device,
                trace,
                gpu_memory_utilization=utilization,
                kv_cache_dtype=kv,
                version=engine_version,
                tiers=tiers,
                trace_format=trace_format,
                engine=engine.strip().lower(),
                page_size=page_size,
                tensor_parallel_size=tensor_parallel_size,
            )

        replay = ask(replay_trace)
        points = ask(hit_rate_curve) if curve or plot is not None else None
        doc = views.replay_to_dict(replay, trace, points)
        if plot is not None:
            draw_chart(views.curve_chart(doc), plot, force)
        emit(output, lambda: doc, lambda: views.replay_view(doc))

    guard(run)


def _tiers(sizes: dict[str, str | None], links: list[str]) -> list["TierSize"]:
    """The tiers asked for, with the links given by ``--link TIER=RATE``."""
    from kvplan.answers.simulate import TIER_NAMES, TierSize
    from kvplan.errors import UnitError
    from kvplan.units import parse_bytes, parse_rate

    rates: dict[str, int] = {}
    for text in links:
        name, sep, rate = text.partition("=")
        if not sep or name.strip() not in TIER_NAMES:
            raise UnitError(
                f"--link {text}: expected TIER=RATE with TIER one of {', '.join(TIER_NAMES)}"
                " (e.g. host=64GB/s)"
            )
        rates[name.strip()] = option(f"--link {name.strip()}", parse_rate, rate)
    for name in rates:
        if sizes[name] is None:
            raise UnitError(f"--link {name}: no --{name}-tier given")
    return [
        TierSize(name, option(f"--{name}-tier", parse_bytes, size), rates.get(name))
        for name, size in sizes.items()
        if size is not None
    ]
