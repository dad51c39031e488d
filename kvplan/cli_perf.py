"""``kvplan perf``, ``compare`` and ``chart``: what the cache costs in speed, side by side, drawn.

Registered on ``kvplan.cli.app`` when that module loads; kept apart so that cli.py stays
readable. Heavy work (planner, charts, matplotlib) is imported inside the commands.
"""

from __future__ import annotations

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
)

if TYPE_CHECKING:
    from kvplan.charts import Chart
    from kvplan.hardware import GPU
    from kvplan.spec import ModelSpec

GpuOpt = Annotated[
    str,
    typer.Option("--gpu", "-g", help="A catalog GPU (`kvplan gpus`): h100, h200, a100-80gb..."),
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
    from kvplan.errors import UnitError

    try:
        value = float(text.rstrip("%")) / (100 if text.endswith("%") else 1)
    except ValueError:
        raise UnitError(f"{name}: {text!r} is not a fraction (0.8) or a percentage (80%)") from None
    if not 0 < value <= 1:
        raise UnitError(f"{name}: must be in (0, 1], got {text}")
    return value


def _kv(text: str | None) -> str | None:
    return None if text is None or text.strip().lower() == "auto" else text


@app.command()
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
        from kvplan.units import parse_tokens

        spec = load_model(model)
        device = find_gpu(gpu)
        tokens = _option("--context", parse_tokens, context)
        prompt_tokens = _option("--prompt", parse_tokens, prompt) if prompt else None
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
        )
        if output is OutputFormat.json:
            _print_json(perfview.perf_to_dict(result, alts))
        else:
            _print_rich(perfview.perf_view(result, alts))

    _guard(run)


@app.command()
def compare(
    models: Annotated[list[str], typer.Argument(help="Two or more models.", show_default=False)],
    context: Annotated[str, typer.Option("--context", "-c", help="Tokens per sequence.")] = "32K",
    gpu: Annotated[
        str | None,
        typer.Option("--gpu", "-g", help="Adds max concurrency and the decode bound on it."),
    ] = None,
    tensor_parallel_size: TpOpt = 1,
    kv_cache_dtype: KvDtypeOpt = None,
    engine: EngineOpt = "ideal",
    output: FormatOpt = OutputFormat.table,
) -> None:
    """Models side by side: KV bytes per token, at --context, and with --gpu the most sequences
    that fit and one sequence's decode speed (estimate at 80% bandwidth)."""

    def run() -> None:
        from kvplan import perfview
        from kvplan.catalog import load_model
        from kvplan.estimator import bytes_per_token, estimate
        from kvplan.hardware import find_gpu
        from kvplan.perf import fit_concurrency
        from kvplan.perf import perf as perf_bounds
        from kvplan.units import parse_tokens

        tokens = _option("--context", parse_tokens, context)
        device = find_gpu(gpu) if gpu else None
        kv = _kv(kv_cache_dtype)
        rows = []
        for name in models:
            spec = load_model(name)
            fit = speed = None
            note = ""
            if device is not None and spec.num_parameters is not None:
                fit = fit_concurrency(spec, device, tokens, tensor_parallel_size, kv, engine)
                speed = perf_bounds(
                    spec,
                    device,
                    context_tokens=tokens,
                    tensor_parallel_size=tensor_parallel_size,
                    kv_cache_dtype=kv,
                ).decode.tokens_per_second(estimated=True)
            elif device is not None:
                note = "no num_parameters: weights unknown"
            trained = spec.max_position_embeddings
            if trained is not None and tokens > trained:
                note = f"beyond its {trained:,}-token maximum" + (f"; {note}" if note else "")
            rows.append(
                perfview.CompareRow(
                    spec.name,
                    bytes_per_token(spec, kv),
                    estimate(spec, tokens, kv_dtype=kv).kv_cache_bytes,
                    fit,
                    speed,
                    note,
                )
            )
        shown = device.display_name if device else None
        if output is OutputFormat.json:
            _print_json(perfview.compare_to_dict(tokens, device.name if device else None, rows))
        else:
            _print_rich([perfview.compare_view(tokens, shown, rows)])

    _guard(run)


class ChartKind(str, Enum):
    memory = "memory"
    throughput = "throughput"


@app.command()
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
    """Draw KV memory against context, or decode throughput against concurrency."""

    def run() -> None:
        from kvplan.catalog import load_model
        from kvplan.charts import render_text, save_chart
        from kvplan.hardware import find_gpu
        from kvplan.units import parse_tokens

        device = find_gpu(gpu)
        specs = [load_model(m) for m in models]
        dtypes = [_kv(d) for d in (kv_cache_dtype or ["auto"])]
        if kind is ChartKind.memory:
            drawn = _memory_chart(specs, device, dtypes, tensor_parallel_size)
        else:
            tokens = _option("--context", parse_tokens, context)
            drawn = _throughput_chart(specs, device, dtypes, tensor_parallel_size, tokens, engine)
        if out is None:
            typer.echo(render_text(drawn, width=width, height=height))
        else:
            save_chart(drawn, out, force=force)
            typer.echo(f"wrote {out}", err=True)

    _guard(run)


def _label(name: str, dtype: str | None, dtypes: list[str | None]) -> str:
    return name if len(dtypes) == 1 else f"{name} ({dtype or 'auto'})"


def _memory_chart(specs: list[ModelSpec], device: GPU, dtypes: list[str | None], tp: int) -> Chart:
    from kvplan.charts import Chart, HLine, Series
    from kvplan.perf import memory_curve
    from kvplan.planner import plan

    gib = 2**30
    series, lines = [], []
    for spec in specs:
        top = spec.max_position_embeddings or 131072
        contexts = [2**k for k in range(10, 40) if 2**k <= top] or [top]
        for dtype in dtypes:
            ys = memory_curve(spec, contexts, dtype)
            series.append(
                Series(
                    _label(spec.name, dtype, dtypes),
                    tuple(map(float, contexts)),
                    tuple(y / gib for y in ys),
                )
            )
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
                lines.append(HLine(f"KV pool: {_label(spec.name, dtype, dtypes)}", pool / gib))
    return Chart(
        title=f"KV cache of one sequence against context on {device.display_name} x{tp} (GiB)",
        x_label="context tokens",
        y_label="GiB",
        series=tuple(series),
        hlines=tuple(lines),
        log_x=True,
    )


def _throughput_chart(
    specs: list[ModelSpec],
    device: GPU,
    dtypes: list[str | None],
    tp: int,
    tokens: int,
    engine: str,
) -> Chart:
    from kvplan.charts import Chart, Series
    from kvplan.perf import fit_concurrency
    from kvplan.perf import perf as perf_bounds

    series = []
    for spec in specs:
        for dtype in dtypes:
            fit = fit_concurrency(spec, device, tokens, tp, dtype, engine) or 1
            result = perf_bounds(
                spec,
                device,
                context_tokens=tokens,
                tensor_parallel_size=tp,
                kv_cache_dtype=dtype,
                max_concurrency=fit,
            )
            series.append(
                Series(
                    _label(spec.name, dtype, dtypes),
                    tuple(float(s.batch_size) for s in result.curve),
                    tuple(float(s.tokens_per_second(estimated=True)) for s in result.curve),
                )
            )
    return Chart(
        title=f"decode tokens/s against concurrency at {tokens:,} tokens on"
        f" {device.display_name} x{tp} (estimate)",
        x_label="concurrent sequences",
        y_label="tokens/s",
        series=tuple(series),
        log_x=True,
    )
