"""``kvplan perf``, ``compare`` and ``chart``: what the cache costs in speed, side by side, drawn.

Heavy work (planner, curves, matplotlib) is imported inside the commands.
"""

from enum import Enum
from typing import Annotated

import typer

from kvplan.cli.common import (
    auto_none,
    command,
    command_line,
    complete_model,
    emit,
    gpu_option,
    guard,
    tokens_option,
)
from kvplan.cli.options import (
    EngineOpt,
    FormatOpt,
    GpuOpt,
    ModelArg,
    OutputFormat,
    PpOpt,
    TpOpt,
)
from kvplan.cli.options import OptionalKvCacheDtypeOpt as KvDtypeOpt


def _efficiency(name: str, text: str) -> float:
    from kvplan.answers.performance import efficiency

    return float(efficiency(f"{name}:", text))  # "--bandwidth-efficiency: must be in ..."


PerfContextOpt = Annotated[
    str, typer.Option("--context", "-c", help="Tokens each sequence holds while decoding.")
]
ConcurrencyOpt = Annotated[
    int, typer.Option("--concurrency", "-n", min=1, help="Sequences decoding together.")
]
PromptOpt = Annotated[
    str | None,
    typer.Option("--prompt", help="Prompt tokens for the prefill bound (default: --context)."),
]
BandwidthOpt = Annotated[
    str,
    typer.Option(
        "--bandwidth-efficiency",
        help="Achieved fraction of HBM bandwidth in decode (0.8 or 80%); the pure bound is"
        " shown too.",
    ),
]
PerfSystemOpt = Annotated[
    str | None,
    typer.Option(
        "--system",
        help="A catalog system (hgx-h100, gb200-nvl72, mi300x-platform...) whose links carry"
        " the communication per step (default with more than one GPU: the GPU's first"
        " system).",
        show_default=False,
    ),
]
EpOpt = Annotated[
    int,
    typer.Option(
        "--expert-parallel-size",
        min=1,
        help="MoE models: data-parallel attention with the routed experts split over this"
        " many GPUs; --concurrency is then per GPU.",
    ),
]
ComputeOpt = Annotated[
    str,
    typer.Option(
        "--compute-efficiency", help="Achieved fraction of dense bf16 peak in matmuls (0.6 or 60%)."
    ),
]


@command("perf")
def perf(
    model: ModelArg,
    gpu: GpuOpt,
    tensor_parallel_size: TpOpt = 1,
    pipeline_parallel_size: PpOpt = 1,
    expert_parallel_size: EpOpt = 1,
    system: PerfSystemOpt = None,
    context: PerfContextOpt = "8K",
    concurrency: ConcurrencyOpt = 1,
    prompt: PromptOpt = None,
    kv_cache_dtype: KvDtypeOpt = None,
    engine: EngineOpt = "ideal",
    bandwidth_efficiency: BandwidthOpt = "0.8",
    compute_efficiency: ComputeOpt = "0.6",
    output: FormatOpt = OutputFormat.table,
) -> None:
    """Decode and prefill speed bounds: bytes per step over HBM bandwidth, FLOPs over peak.

    Every decode step reads the weights once and every sequence's retained cache; the table
    shows which bound binds, tokens/s per sequence and in total, throughput from 1 to the
    planner's maximum concurrency, and what an fp8 KV cache or half the context changes.
    FLOPs run at the fp8 or fp4 tensor peak where the weights allow; with more than one GPU
    the replica line adds the all-reduce, pipeline sends and expert all-to-all of each step
    over the system's links, and says what it still leaves out.
    """

    def run() -> None:
        from kvplan.answers.curves import perf_report
        from kvplan.catalog.lookup import load_model
        from kvplan.hardware.lookup import find_gpu
        from kvplan.views import perf as views

        spec = load_model(model)
        device = find_gpu(gpu)
        result, alts = perf_report(
            spec,
            device,
            context_tokens=tokens_option("--context", context),
            concurrency=concurrency,
            prompt_tokens=tokens_option("--prompt", prompt) if prompt is not None else None,
            tensor_parallel_size=tensor_parallel_size,
            kv_cache_dtype=auto_none(kv_cache_dtype),
            bandwidth_efficiency=_efficiency("--bandwidth-efficiency", bandwidth_efficiency),
            compute_efficiency=_efficiency("--compute-efficiency", compute_efficiency),
            engine=engine,
            pipeline_parallel_size=pipeline_parallel_size,
            expert_parallel_size=expert_parallel_size,
            system=system,
        )
        emit(
            output,
            lambda: views.perf_to_dict(result, alts, spec),
            lambda: views.perf_view(result, alts, spec),
        )

    guard(run)


CompareHtmlOpt = Annotated[
    str | None,
    typer.Option(
        "--html",
        help="Also write the comparison as one self-contained HTML page (no network, no"
        " script): the table and a chart of each model's KV cache and most sequences.",
        show_default=False,
    ),
]
CompareForceOpt = Annotated[
    bool, typer.Option("--force", help="Overwrite --html's file when kvplan did not write it.")
]


@command("compare")
def compare(
    ctx: typer.Context,
    models: Annotated[
        list[str],
        typer.Argument(
            autocompletion=complete_model, help="Two or more models.", show_default=False
        ),
    ],
    context: Annotated[str, typer.Option("--context", "-c", help="Tokens per sequence.")] = "32K",
    gpu: Annotated[
        str | None, gpu_option("Adds max concurrency and the decode bound on it.")
    ] = None,
    tensor_parallel_size: TpOpt = 1,
    system: PerfSystemOpt = None,
    kv_cache_dtype: KvDtypeOpt = None,
    engine: EngineOpt = "ideal",
    html: CompareHtmlOpt = None,
    force: CompareForceOpt = False,
    output: FormatOpt = OutputFormat.table,
) -> None:
    """Models side by side: the cache dtype each is served in (and why), KV bytes per token and
    per sequence at --context, and with --gpu the most sequences that fit and one sequence's
    decode speed (estimate at 80% bandwidth); with -tp or --system also that speed with the
    all-reduce of each step over the system's links."""

    command = command_line(ctx, leave_out=("html", "force", "output"))

    def run() -> None:
        from kvplan.answers.performance import compare as compare_models
        from kvplan.cli.reports import check_html_path, write_page
        from kvplan.hardware.lookup import find_gpu
        from kvplan.views import perf as views
        from kvplan.views.report import compare_report

        if html is not None:
            check_html_path(html)
        tokens = tokens_option("--context", context)
        device = find_gpu(gpu) if gpu else None
        rows = compare_models(
            models,
            tokens,
            device,
            tensor_parallel_size=tensor_parallel_size,
            kv_cache_dtype=auto_none(kv_cache_dtype),
            engine=engine,
            system=system,
        )
        name, shown = (device.name, device.display_name) if device else (None, None)
        doc = views.compare_to_dict(
            tokens, name, rows, engine=engine, tensor_parallel_size=tensor_parallel_size
        )
        if html is not None:
            write_page(html, compare_report(doc, command), force)
        emit(
            output,
            lambda: doc,
            lambda: views.compare_view(
                tokens, shown, rows, linked=_linked(system, tensor_parallel_size)
            ),
        )

    guard(run)


def _linked(system: str | None, tensor_parallel_size: int) -> bool:
    """Whether the compare table shows the speed with communication."""
    return system is not None or tensor_parallel_size > 1


class ChartKind(str, Enum):
    memory = "memory"
    throughput = "throughput"


KindOpt = Annotated[
    ChartKind,
    typer.Option(
        "--kind",
        help="memory: KV of one sequence against context, with each model's KV pool on"
        " the GPU as a line (the maximum context is where they cross); throughput: decode"
        " tokens/s against concurrency.",
    ),
]
ChartDtypesOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--kv-cache-dtype",
        help="KV dtype; repeat it to draw one curve per dtype (auto, fp8, ...).",
        show_default=False,
    ),
]
ChartContextOpt = Annotated[
    str, typer.Option("--context", "-c", help="Context of the throughput chart.")
]
ChartOutOpt = Annotated[
    str | None,
    typer.Option(
        "--output", "-o", help="Write a .png or .svg instead (needs pip install 'kvplan[plot]')."
    ),
]
ForceOpt = Annotated[bool, typer.Option("--force", help="Overwrite --output.")]
WidthOpt = Annotated[int, typer.Option("--width", min=30, max=1000, help="Terminal chart columns.")]
HeightOpt = Annotated[int, typer.Option("--height", min=8, max=500, help="Terminal chart rows.")]


@command("chart")
def chart(
    models: Annotated[list[str], typer.Argument(help="One or more models.", show_default=False)],
    gpu: GpuOpt,
    kind: KindOpt = ChartKind.memory,
    kv_cache_dtype: ChartDtypesOpt = None,
    context: ChartContextOpt = "8K",
    tensor_parallel_size: TpOpt = 1,
    engine: EngineOpt = "ideal",
    out: ChartOutOpt = None,
    force: ForceOpt = False,
    width: WidthOpt = 72,
    height: HeightOpt = 18,
) -> None:
    """Draw KV memory against context, or decode throughput against concurrency.

    Each model's KV pool is drawn in its own marker (colour in files); throughput curves stop
    at the most sequences that fit. Notes under the chart say where each curve stops and why
    each cache has its dtype.
    """

    def run() -> None:
        from kvplan.answers.curves import memory_curves, throughput_curves
        from kvplan.catalog.lookup import load_model
        from kvplan.hardware.lookup import find_gpu
        from kvplan.progress import progress
        from kvplan.views import charts as views

        device = find_gpu(gpu)
        specs = [load_model(m) for m in models]
        dtypes = [auto_none(d) for d in (kv_cache_dtype or ["auto"])]
        tp = tensor_parallel_size
        if kind is ChartKind.memory:
            curves = memory_curves(specs, device, dtypes, tp, engine)
            drawn = views.memory_chart(curves, device, tp, num_dtypes=len(dtypes), engine=engine)
        else:
            tokens = tokens_option("--context", context)
            found = throughput_curves(specs, device, dtypes, tokens, tp, engine)
            drawn = views.throughput_chart(found, device, tp, tokens, engine)
        if out is None:
            typer.echo(views.render_text(drawn, width=width, height=height))
        else:
            with progress(f"drawing {out} with matplotlib"):
                views.save_chart(drawn, out, force=force)
            typer.echo(f"wrote {out}", err=True)

    guard(run)
