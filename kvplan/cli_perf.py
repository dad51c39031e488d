"""``kvplan perf``, ``compare`` and ``chart``: what the cache costs in speed, side by side, drawn.

Registered on ``kvplan.cli.app`` when that module loads; kept apart so that cli.py stays
readable. Heavy work (planner, charts, matplotlib) is imported inside the commands.
"""

from enum import Enum
from typing import TYPE_CHECKING, Annotated

import typer

from kvplan.cli import (
    FormatOpt,
    ModelArg,
    OutputFormat,
    _guard,
    _option,
    _print_json,
    _print_rich,
    app,
    complete_gpu,
    complete_model,
    exit_codes_epilog,
)

if TYPE_CHECKING:
    from kvplan.charts import Chart
    from kvplan.hardware import GPU
    from kvplan.spec import ModelSpec

GpuOpt = Annotated[
    str,
    typer.Option(
        "--gpu",
        "-g",
        autocompletion=complete_gpu,
        help="A catalog GPU (`kvplan gpus`): h100, h200, a100-80gb...",
    ),
]
TpOpt = Annotated[
    int,
    typer.Option("--tensor-parallel-size", "-tp", min=1, help="GPUs sharding each layer."),
]
EngineOpt = Annotated[
    str,
    typer.Option(
        "--engine",
        "-e",
        help="Whose budget sets the maximum concurrency: ideal (kvplan's planner) or vllm"
        " (vLLM's block pool and its printed maximum concurrency).",
    ),
]
KvDtypeOpt = Annotated[
    str | None,
    typer.Option(
        "--kv-cache-dtype",
        help="KV cache dtype: auto (the model's), fp8, bfloat16...",
        show_default=False,
    ),
]


def _efficiency(name: str, text: str) -> float:
    from kvplan.perf import efficiency

    return float(efficiency(f"{name}:", text))  # "--bandwidth-efficiency: must be in ..."


def _tokens(name: str, text: str) -> int:
    """A token count of at least 1, as ``--context`` reads it; errors name the option."""
    from kvplan.errors import UnitError
    from kvplan.units import parse_tokens

    tokens = _option(name, parse_tokens, text)
    if tokens < 1:
        raise UnitError(f"{name}: must be at least 1 token, got {text}")
    return tokens


def _kv(text: str | None) -> str | None:
    return None if text is None or text.strip().lower() == "auto" else text


@app.command(epilog=exit_codes_epilog("perf"))
def perf(
    model: ModelArg,
    gpu: GpuOpt,
    tensor_parallel_size: TpOpt = 1,
    context: Annotated[
        str, typer.Option("--context", "-c", help="Tokens each sequence holds while decoding.")
    ] = "8K",
    concurrency: Annotated[
        int, typer.Option("--concurrency", "-n", min=1, help="Sequences decoding together.")
    ] = 1,
    prompt: Annotated[
        str | None,
        typer.Option("--prompt", help="Prompt tokens for the prefill bound (default: --context)."),
    ] = None,
    kv_cache_dtype: KvDtypeOpt = None,
    engine: EngineOpt = "ideal",
    bandwidth_efficiency: Annotated[
        str,
        typer.Option(
            "--bandwidth-efficiency",
            help="Achieved fraction of HBM bandwidth in decode (0.8 or 80%); the pure bound is"
            " shown too.",
        ),
    ] = "0.8",
    compute_efficiency: Annotated[
        str,
        typer.Option(
            "--compute-efficiency",
            help="Achieved fraction of dense bf16 peak in matmuls (0.6 or 60%).",
        ),
    ] = "0.6",
    output: FormatOpt = OutputFormat.table,
) -> None:
    """Decode and prefill speed bounds: bytes per step over HBM bandwidth, FLOPs over peak.

    Every decode step reads the weights once and every sequence's retained cache; the table
    shows which bound binds, tokens/s per sequence and in total, throughput from 1 to the
    planner's maximum concurrency, and what an fp8 KV cache or half the context changes.
    """

    def run() -> None:
        from kvplan import perfview
        from kvplan.catalog import load_model
        from kvplan.hardware import find_gpu
        from kvplan.perf import alternatives
        from kvplan.perf import perf as perf_bounds

        spec = load_model(model)
        device = find_gpu(gpu)
        tokens = _tokens("--context", context)
        prompt_tokens = _tokens("--prompt", prompt) if prompt else None
        bw = _efficiency("--bandwidth-efficiency", bandwidth_efficiency)
        ce = _efficiency("--compute-efficiency", compute_efficiency)
        kv = _kv(kv_cache_dtype)
        alts = alternatives(
            spec,
            device,
            context_tokens=tokens,
            tensor_parallel_size=tensor_parallel_size,
            kv_cache_dtype=kv,
            bandwidth_efficiency=bw,
            compute_efficiency=ce,
            engine=engine,
        )
        result = perf_bounds(
            spec,
            device,
            context_tokens=tokens,
            concurrency=concurrency,
            prompt_tokens=prompt_tokens,
            tensor_parallel_size=tensor_parallel_size,
            kv_cache_dtype=kv,
            bandwidth_efficiency=bw,
            compute_efficiency=ce,
            max_concurrency=alts[0].max_concurrency,  # "as given": the planner's answer
            engine=engine,
        )
        if output is OutputFormat.json:
            _print_json(perfview.perf_to_dict(result, alts))
        else:
            _print_rich(perfview.perf_view(result, alts))

    _guard(run)


@app.command(epilog=exit_codes_epilog("compare"))
def compare(
    models: Annotated[
        list[str],
        typer.Argument(
            autocompletion=complete_model, help="Two or more models.", show_default=False
        ),
    ],
    context: Annotated[str, typer.Option("--context", "-c", help="Tokens per sequence.")] = "32K",
    gpu: Annotated[
        str | None,
        typer.Option(
            "--gpu",
            "-g",
            autocompletion=complete_gpu,
            help="Adds max concurrency and the decode bound on it.",
        ),
    ] = None,
    tensor_parallel_size: TpOpt = 1,
    kv_cache_dtype: KvDtypeOpt = None,
    engine: EngineOpt = "ideal",
    output: FormatOpt = OutputFormat.table,
) -> None:
    """Models side by side: the cache dtype each is served in (and why), KV bytes per token and
    per sequence at --context, and with --gpu the most sequences that fit and one sequence's
    decode speed (estimate at 80% bandwidth)."""

    def run() -> None:
        from kvplan import perfview
        from kvplan.hardware import find_gpu
        from kvplan.perf import compare as compare_models

        tokens = _tokens("--context", context)
        device = find_gpu(gpu) if gpu else None
        rows = compare_models(
            models,
            tokens,
            device,
            tensor_parallel_size=tensor_parallel_size,
            kv_cache_dtype=_kv(kv_cache_dtype),
            engine=engine,
        )
        if output is OutputFormat.json:
            doc = perfview.compare_to_dict(
                tokens,
                device.name if device else None,
                rows,
                engine=engine,
                tensor_parallel_size=tensor_parallel_size,
            )
            _print_json(doc)
        else:
            shown = device.display_name if device else None
            _print_rich(perfview.compare_view(tokens, shown, rows))

    _guard(run)


class ChartKind(str, Enum):
    memory = "memory"
    throughput = "throughput"


@app.command(epilog=exit_codes_epilog("chart"))
def chart(
    models: Annotated[list[str], typer.Argument(help="One or more models.", show_default=False)],
    gpu: GpuOpt,
    kind: Annotated[
        ChartKind,
        typer.Option(
            "--kind",
            help="memory: KV of one sequence against context, with each model's KV pool on"
            " the GPU as a line (the maximum context is where they cross); throughput: decode"
            " tokens/s against concurrency.",
        ),
    ] = ChartKind.memory,
    kv_cache_dtype: Annotated[
        list[str] | None,
        typer.Option(
            "--kv-cache-dtype",
            help="KV dtype; repeat it to draw one curve per dtype (auto, fp8, ...).",
            show_default=False,
        ),
    ] = None,
    context: Annotated[
        str, typer.Option("--context", "-c", help="Context of the throughput chart.")
    ] = "8K",
    tensor_parallel_size: TpOpt = 1,
    engine: EngineOpt = "ideal",
    out: Annotated[
        str | None,
        typer.Option(
            "--output",
            "-o",
            help="Write a .png or .svg instead (needs pip install 'kvplan[plot]').",
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite --output.")] = False,
    width: Annotated[int, typer.Option("--width", min=30, help="Terminal chart columns.")] = 72,
    height: Annotated[int, typer.Option("--height", min=8, help="Terminal chart rows.")] = 18,
) -> None:
    """Draw KV memory against context, or decode throughput against concurrency.

    Each model's KV pool is drawn in its own marker (colour in files); throughput curves stop
    at the most sequences that fit. Notes under the chart say where each curve stops and why
    each cache has its dtype.
    """

    def run() -> None:
        from kvplan.catalog import load_model
        from kvplan.charts import render_text, save_chart
        from kvplan.hardware import find_gpu

        device = find_gpu(gpu)
        specs = [load_model(m) for m in models]
        dtypes = [_kv(d) for d in (kv_cache_dtype or ["auto"])]
        if kind is ChartKind.memory:
            drawn = _memory_chart(specs, device, dtypes, tensor_parallel_size, engine)
        else:
            tokens = _tokens("--context", context)
            drawn = _throughput_chart(specs, device, dtypes, tensor_parallel_size, tokens, engine)
        if out is None:
            typer.echo(render_text(drawn, width=width, height=height))
        else:
            from kvplan.progress import progress

            with progress(f"drawing {out} with matplotlib"):
                save_chart(drawn, out, force=force)
            typer.echo(f"wrote {out}", err=True)

    _guard(run)


def _series(spec: "ModelSpec", dtype: str | None, engine: str) -> tuple[str, str, str]:
    """A curve's label (``gemma-2-9b, KV bfloat16``), its cache dtype and why that dtype."""
    from kvplan.dtypes import cache_dtypes

    found = cache_dtypes(spec, engine, kv_cache_dtype=dtype)
    return f"{spec.name}, KV {found.kv_dtype}", found.kv_dtype, found.reason


def _dtype_notes(curves: list[tuple[str, str, str]]) -> list[str]:
    """Why each cache dtype: one line when every curve shares the dtype and the reason."""
    reasons = {(kv, why) for _, kv, why in curves}
    if len(reasons) == 1:
        ((kv, why),) = reasons
        return [f"KV cache {kv} for every curve: {why}"]
    return ["why each cache dtype:", *(f"  {label}: {why}" for label, _, why in curves)]


def _memory_chart(
    specs: "list[ModelSpec]", device: "GPU", dtypes: list[str | None], tp: int, engine: str
) -> "Chart":
    from kvplan.charts import Chart, HLine, Series
    from kvplan.perf import memory_curve
    from kvplan.planner import plan

    gib = 2**30
    series, lines, curves = [], [], []
    for spec in specs:
        top = spec.max_position_embeddings or 131072
        contexts = [2**k for k in range(10, 40) if 2**k <= top] or [top]
        for dtype in dtypes:
            curve = _series(spec, dtype, engine)
            curves.append(curve)
            label = curve[0]
            ys = memory_curve(spec, contexts, dtype, engine=engine)
            series.append(Series(label, tuple(map(float, contexts)), tuple(y / gib for y in ys)))
            if spec.num_parameters is not None:
                pool = (
                    plan(
                        spec,
                        device,
                        tensor_parallel_size=tp,
                        max_model_len=contexts[0],
                        kv_cache_dtype=dtype,
                    ).kv_cache_memory_bytes
                    * tp
                )
                pool_of = spec.name if len(dtypes) == 1 else label
                lines.append(HLine(f"KV pool: {pool_of}", pool / gib, series=label))
    return Chart(
        title=f"KV cache of one sequence against context on {device.display_name} x{tp} (GiB)",
        x_label="context tokens",
        y_label="GiB",
        series=tuple(series),
        hlines=tuple(lines),
        log_x=True,
        y_unit="GiB",
        notes=tuple(_dtype_notes(curves)),
    )


def _throughput_chart(
    specs: "list[ModelSpec]",
    device: "GPU",
    dtypes: list[str | None],
    tp: int,
    tokens: int,
    engine: str,
) -> "Chart":
    from kvplan.charts import Chart, Series
    from kvplan.perf import fit_concurrency
    from kvplan.perf import perf as perf_bounds
    from kvplan.units import format_count

    who = "vLLM's block pool" if engine == "vllm" else "kvplan's planner"
    series, stops, curves = [], [], []
    for spec in specs:
        for dtype in dtypes:
            curve = _series(spec, dtype, engine)
            curves.append(curve)
            label = curve[0]
            fit = fit_concurrency(spec, device, tokens, tp, dtype, engine)
            if not fit:
                series.append(Series(label, (), (), end_label=f"none fits at {tokens:,} tokens"))
                stops.append(f"  {label}: not one sequence of {tokens:,} tokens fits")
                continue
            result = perf_bounds(
                spec,
                device,
                context_tokens=tokens,
                tensor_parallel_size=tp,
                kv_cache_dtype=dtype,
                max_concurrency=fit,
                engine=engine,
            )
            series.append(
                Series(
                    label,
                    tuple(float(s.batch_size) for s in result.curve),
                    tuple(float(s.tokens_per_second(estimated=True)) for s in result.curve),
                    end_label=f"fits up to {fit:,}",
                )
            )
            stops.append(f"  {label}: stops at {format_count(fit, 'sequence')}, the most that fit")
    return Chart(
        title=f"decode tokens/s against concurrency at {tokens:,} tokens on"
        f" {device.display_name} x{tp} (estimate)",
        x_label="concurrent sequences",
        y_label="tokens/s",
        series=tuple(series),
        log_x=True,
        notes=(
            f"each curve stops where its KV pool is full ({who}):",
            *stops,
            *_dtype_notes(curves),
        ),
    )
