"""``kvplan perf`` and ``kvplan compare``: speed bounds, throughput against concurrency, models
side by side. No arithmetic beyond unit conversion for display."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from rich.table import Table
from rich.text import Text

from kvplan.answers.performance import Alternative, Comparison, DecodeStep, Perf, ReplicaStep
from kvplan.model.spec import ModelSpec
from kvplan.units import format_bytes
from kvplan.views import SCHEMA_VERSION
from kvplan.views.estimate import kv_per_token_legend
from kvplan.views.provenance import resolution_line, resolution_to_dict
from kvplan.views.table import Column, table


def _ms(seconds: Fraction) -> str:
    return f"{float(seconds) * 1000:,.2f} ms"


def _rate(value: Fraction) -> str:
    return f"{float(value):,.1f}"


def _step_dict(step: DecodeStep, no_speed_reason: str | None = None) -> dict[str, Any]:
    """One decode step; with ``no_speed_reason`` (its sequences do not fit) the bytes and
    FLOPs it would move, but null times and rates: the step never runs."""
    timed = no_speed_reason is None
    return {
        "batch_size": step.batch_size,
        "context_tokens": step.context_tokens,
        "weight_read_bytes": step.weight_read_bytes,
        "kv_read_bytes": step.kv_read_bytes,
        "kv_write_bytes": step.kv_write_bytes,
        "flops": step.flops,
        "memory_bound_seconds": float(step.memory_seconds) if timed else None,
        "compute_bound_seconds": float(step.compute_seconds) if timed else None,
        "bound": step.bound,
        "bound_tokens_per_second": float(step.tokens_per_second()) if timed else None,
        "estimated_seconds": float(step.estimate_seconds) if timed else None,
        "estimated_tokens_per_second": (
            float(step.tokens_per_second(estimated=True)) if timed else None
        ),
        "fits": timed,
        "no_speed_reason": no_speed_reason,
    }


def perf_to_dict(
    result: Perf, alternatives: list[Alternative], spec: ModelSpec | None = None
) -> dict[str, Any]:
    """The ``kvplan perf --format json`` document; with ``spec``, how its name was read."""
    doc = _perf_doc(result, alternatives)
    return doc if spec is None else {**doc, **resolution_to_dict(spec)}


def _perf_doc(result: Perf, alternatives: list[Alternative]) -> dict[str, Any]:
    d, p = result.decode, result.prefill
    no_prefill = _prefill_reason(result)
    no_round = None if result.replica is None else result.no_speed_reason(result.replica.batch_size)
    return {
        "schema_version": SCHEMA_VERSION,
        "model": result.model,
        "gpu": result.gpu.name,
        "tensor_parallel_size": result.tensor_parallel_size,
        "kv_cache_dtype": result.kv_dtype,
        "kv_cache_dtype_reason": result.kv_dtype_reason,
        "model_dtype": result.model_dtype,
        "weights_format": result.weights_format or result.model_dtype,
        "engine": result.engine,
        "bandwidth_bytes_per_second": result.gpu.bandwidth_bytes_per_s,
        "peak_flops": result.gpu.bf16_flops,
        "bandwidth_efficiency": float(d.bandwidth_efficiency),
        "compute_efficiency": float(d.compute_efficiency),
        "decode": _step_dict(d, result.no_speed_reason(d.batch_size)),
        "prefill": {
            "prompt_tokens": p.prompt_tokens,
            "linear_flops": p.linear_flops,
            "attention_flops": p.attention_flops,
            "weight_read_bytes": p.weight_read_bytes,
            "bound_seconds": None if no_prefill else float(p.bound_seconds),
            "estimated_seconds": None if no_prefill else float(p.estimate_seconds),
            "no_speed_reason": no_prefill,
        },
        "max_concurrency": result.max_concurrency,
        "compute_bound_from": result.compute_bound_from,
        "curve": [_step_dict(s, result.no_speed_reason(s.batch_size)) for s in result.curve],
        "alternatives": [
            {
                "label": a.label,
                "context_tokens": a.context_tokens,
                "kv_cache_dtype": a.kv_cache_dtype,
                "resolved_kv_cache_dtype": a.kv_dtype,
                "kv_cache_dtype_reason": a.kv_dtype_reason,
                "max_concurrency": a.max_concurrency,
                "decode": _step_dict(a.step) if a.step else None,
                "no_speed_reason": None if a.step else _none_fit(a, result.who_fits),
            }
            for a in alternatives
        ],
        "not_modelled": list(result.not_modelled),
        "pipeline_parallel_size": result.pipeline_parallel_size,
        "expert_parallel_size": result.expert_parallel_size,
        "system": result.system,
        "matmul_precision": result.matmul_precision,
        "matmul_peak_flops": result.matmul_peak_flops,
        "replica": None if result.replica is None else _replica_dict(result.replica, no_round),
        "leaves_out": result.leaves_out,
    }


def _none_fit(a: Alternative, who: str) -> str:
    return f"0 sequences of {a.context_tokens:,} tokens fit ({who})"


def _prefill_reason(result: Perf) -> str | None:
    """Why the prefill has no time: not one sequence of the context fits, and the prompt is
    no shorter than it (a shorter prompt may still fit)."""
    if result.max_concurrency == 0 and result.prefill.prompt_tokens >= result.decode.context_tokens:
        return result.no_speed_reason(1)
    return None


def _replica_dict(r: ReplicaStep, no_speed_reason: str | None = None) -> dict[str, Any]:
    if no_speed_reason is not None:
        timed = (
            "compute_bound_seconds",
            "compute_estimated_seconds",
            "bound_seconds",
            "estimated_seconds",
            "bound_tokens_per_second_per_gpu",
            "estimated_tokens_per_second_per_gpu",
        )
        return {
            **{k: v for k, v in _replica_dict(r).items() if k not in timed},
            **dict.fromkeys(timed),
            "no_speed_reason": no_speed_reason,
        }
    return {
        "batch_size": r.batch_size,
        "gpus_per_batch": r.gpus_per_batch,
        "compute_bound_seconds": float(r.compute_bound_seconds),
        "compute_estimated_seconds": float(r.compute_estimate_seconds),
        "tensor_parallel_seconds": float(r.communication.tensor_parallel_seconds),
        "pipeline_seconds": float(r.communication.pipeline_seconds),
        "expert_parallel_seconds": float(r.communication.expert_parallel_seconds),
        "communication_seconds": float(r.communication_seconds),
        "bound_seconds": float(r.bound_seconds),
        "estimated_seconds": float(r.estimate_seconds),
        "bound_tokens_per_second_per_gpu": float(r.tokens_per_second_per_gpu()),
        "estimated_tokens_per_second_per_gpu": float(r.tokens_per_second_per_gpu(True)),
        "no_speed_reason": None,
    }


def _replica_line(result: Perf) -> Text:
    r = result.replica
    if r is None:
        return Text("")
    shape = f"TP {result.tensor_parallel_size} x PP {result.pipeline_parallel_size}"
    if result.expert_parallel_size > 1:
        shape = f"DP-attention + EP {result.expert_parallel_size}"
    where = f" over {result.system}" if result.system else ""
    c = r.communication
    reason = result.no_speed_reason(r.batch_size)
    if reason is not None:
        return Text(f"replica ({shape}{where}): no speed, the round never runs: {reason}")
    return Text(
        f"replica ({shape}{where}): round {_ms(r.compute_estimate_seconds)} + communication"
        f" {_ms(c.seconds)} (TP {_ms(c.tensor_parallel_seconds)}, PP"
        f" {_ms(c.pipeline_seconds)}, EP {_ms(c.expert_parallel_seconds)}) ->"
        f" {_rate(r.tokens_per_second_per_gpu(True))} tok/s per GPU (estimate), at most"
        f" {_rate(r.tokens_per_second_per_gpu())} (bound)\nleaves out: {result.leaves_out}"
    )


def _not_modelled(items: tuple[str, ...]) -> Text:
    return Text("\n".join(["not modelled (the bounds leave out):", *(f"  - {i}" for i in items)]))


def perf_view(
    result: Perf, alternatives: list[Alternative], spec: ModelSpec | None = None
) -> list[Any]:
    """The ``kvplan perf`` view: one decode step, the prefill, the curve, what changes it;
    with ``spec``, headed by how its name was read."""
    view = _perf_tables(result, alternatives)
    return view if spec is None else [*resolution_line(spec), *view]


def _perf_tables(result: Perf, alternatives: list[Alternative]) -> list[Any]:
    p, gpu = result.prefill, result.gpu
    why = f" ({result.kv_dtype_reason})" if result.kv_dtype_reason else ""
    head = Text(
        f"{result.model} on {gpu.display_name} x{result.tensor_parallel_size} (per rank:"
        f" {float(gpu.bandwidth_bytes_per_s) / 1e12:.2f} TB/s, {gpu.bf16_flops / 1e12:,.0f}"
        f" dense bf16 TFLOP/s; FLOPs at the {result.matmul_precision} peak,"
        f" {result.matmul_peak_flops / 1e12:,.0f} TFLOP/s)\nKV cache {result.kv_dtype}{why},"
        f" weights {result.weights_format or result.model_dtype}"
    )
    no_prefill = _prefill_reason(result)
    prefill = Text(
        f"prefill of {p.prompt_tokens:,} tokens: {p.flops:,} FLOPs"
        f" ({p.attention_flops:,} attention) -> "
        + (
            f"no time to first token: {no_prefill}"
            if no_prefill
            else f"time to first token >= {_ms(p.bound_seconds)},"
            f" about {_ms(p.estimate_seconds)} at {float(p.compute_efficiency):.0%} of peak"
        )
    )
    items: list[Any] = [head, _decode_table(result), _replica_line(result), prefill]
    items.append(_curve_table(result))
    if alternatives:
        items.append(_alternatives_table(alternatives, result.tensor_parallel_size))
    items.append(_not_modelled(result.not_modelled))
    return items


def _decode_table(result: Perf) -> Table:
    """One decode step: bytes, FLOPs and times per rank; the rates are the batch's, which the
    ranks of a tensor-parallel group produce together (one token a sequence a step)."""
    d, tp = result.decode, result.tensor_parallel_size
    together = f" ({tp} ranks together)" if tp > 1 else ""
    rows = [
        ("weights read", format_bytes(d.weight_read_bytes)),
        ("KV read (every sequence)", format_bytes(d.kv_read_bytes)),
        ("KV written", format_bytes(d.kv_write_bytes)),
        ("FLOPs", f"{d.flops:,}"),
    ]
    title = f"decode: {d.batch_size} x {d.context_tokens:,} tokens, one step"
    reason = result.no_speed_reason(d.batch_size)
    if reason is not None:
        rows.append(("time per token", "-"))
        title += f"; no speed, the step never runs: {reason}"
    else:
        rows += [
            ("memory bound", _ms(d.memory_seconds)),
            ("compute bound", _ms(d.compute_seconds)),
            (
                f"time per token (bound: {d.bound})",
                f"{_ms(d.bound_seconds)} -> {_rate(d.tokens_per_second())} tok/s{together}",
            ),
            (
                f"estimate at {float(d.bandwidth_efficiency):.0%} bandwidth,"
                f" {float(d.compute_efficiency):.0%} compute",
                f"{_ms(d.estimate_seconds)} -> {_rate(d.tokens_per_second(True))} tok/s{together}",
            ),
            (
                "per sequence",
                f"{_rate(d.tokens_per_second(True) / d.batch_size)} tok/s (estimate)",
            ),
        ]
    return table([("", "left"), ("per rank", "right")], rows, simple=False, title=title)


def _right(*names: str) -> list[Column]:
    return [(name, "right") for name in names]


def _curve_table(result: Perf) -> Table:
    rows = []
    for s in result.curve:
        share = s.kv_read_bytes * 100 // max(1, s.bytes_moved)
        if not result.fits(s.batch_size):
            # a batch beyond the pool never runs: no time, no rate
            rows.append((f"{s.batch_size:,}", "-", "-", "-", f"{share}%", "does not fit"))
            continue
        mark = " <- compute-bound from here" if s.batch_size == result.compute_bound_from else ""
        if s.batch_size == result.max_concurrency:
            mark += " <- the most that fit"
        rows.append(
            (
                f"{s.batch_size:,}",
                f"{float(s.estimate_seconds) * 1000:,.2f}",
                _rate(s.tokens_per_second(True)),
                _rate(s.tokens_per_second(True) / s.batch_size),
                f"{share}%",
                s.bound + mark,
            )
        )
    total = "tok/s total" if result.tensor_parallel_size == 1 else "tok/s (TP group)"
    columns = _right("sequences", "ms / token", total, "tok/s each", "KV share", "bound")
    title = "decode throughput against concurrency (estimate)"
    return table(columns, rows, simple=False, title=title)


def _alternatives_table(alternatives: list[Alternative], tensor_parallel_size: int = 1) -> Table:
    rows = [
        (
            a.label,
            f"{a.context_tokens:,}",
            a.kv_dtype or a.kv_cache_dtype or "model",
            f"{a.max_concurrency:,}",
            _rate(a.step.tokens_per_second(True)) if a.step else "-",
        )
        for a in alternatives
    ]
    total = "tok/s total" if tensor_parallel_size == 1 else "tok/s (TP group)"
    columns = _right("case", "context", "KV dtype", "max sequences", total)
    title = "what changes the ceiling (maximum concurrency that fits, estimate)"
    return table(columns, rows, simple=False, title=title)


def compare_to_dict(
    context_tokens: int,
    gpu: str | None,
    rows: list[Comparison],
    *,
    engine: str = "ideal",
    tensor_parallel_size: int = 1,
) -> dict[str, Any]:
    """The ``kvplan compare --format json`` document."""
    system = next((r.system for r in rows if r.system), None)
    return {
        "schema_version": SCHEMA_VERSION,
        "context_tokens": context_tokens,
        "gpu": gpu,
        "engine": engine,
        "tensor_parallel_size": tensor_parallel_size,
        "system": system,
        "models": [
            {
                "model": r.model,
                "kv_cache_dtype": r.kv_dtype,
                "kv_cache_dtype_reason": r.kv_dtype_reason,
                "model_dtype": r.model_dtype,
                "weights_format": r.weights_format,
                "bytes_per_token": r.bytes_per_token,
                "kv_cache_bytes": r.kv_cache_bytes,
                "max_concurrency": r.max_concurrency,
                "decode_tokens_per_second": (
                    None
                    if r.decode_tokens_per_second is None
                    else float(r.decode_tokens_per_second)
                ),
                "decode_tokens_per_second_with_communication": _number(
                    r.decode_tokens_per_second_with_communication
                ),
                "no_speed_reason": r.no_speed_reason,
                "note": r.note,
            }
            for r in rows
        ],
    }


def _number(value: Fraction | None) -> float | None:
    return None if value is None else float(value)


def compare_view(
    context_tokens: int, gpu: str | None, rows: list[Comparison], *, linked: bool = False
) -> list[Any]:
    """The table, with only the columns some model has a value in (``linked``: the speed with
    communication too), then why each cache dtype."""
    columns: list[tuple[str, list[str]]] = [
        ("model", [r.model for r in rows]),
        ("KV dtype", [r.kv_dtype for r in rows]),
        ("KV/token", [format_bytes(r.bytes_per_token) for r in rows]),
        ("KV / sequence", [format_bytes(r.kv_cache_bytes) for r in rows]),
    ]
    if any(r.max_concurrency is not None for r in rows):
        columns.append(
            (
                "max sequences",
                ["-" if r.max_concurrency is None else f"{r.max_concurrency:,}" for r in rows],
            )
        )
    if any(r.decode_tokens_per_second is not None for r in rows):
        columns.append(
            (
                "decode tok/s (1 seq, est.)",
                [
                    "-" if r.decode_tokens_per_second is None else _rate(r.decode_tokens_per_second)
                    for r in rows
                ],
            )
        )
    if linked and any(r.decode_tokens_per_second is not None for r in rows):
        speeds = [r.decode_tokens_per_second_with_communication for r in rows]
        columns.append(("with comm. (est.)", ["-" if s is None else _rate(s) for s in speeds]))
    if any(r.note for r in rows):
        columns.append(("note", [r.note for r in rows]))
    where = f" on {gpu}" if gpu else ""
    left = ("model", "KV dtype", "note")
    shown = table(
        [(name, "left" if name in left else "right") for name, _ in columns],
        zip(*(values for _, values in columns), strict=True),
        simple=False,
        title=f"side by side at {context_tokens:,} tokens a sequence{where}",
    )
    legend = [kv_per_token_legend(context_tokens), *_no_speed(rows), *_dtype_reasons(rows)]
    return [shown, Text("\n".join(legend))]


def _no_speed(rows: list[Comparison]) -> list[str]:
    """Why a model on the GPU has no decode speed ("-"): not one sequence fits, no weights."""
    return [
        f"{r.model}: no decode speed, {r.no_speed_reason}"
        for r in rows
        if r.max_concurrency == 0 and r.no_speed_reason
    ]


def _dtype_reasons(rows: list[Comparison]) -> list[str]:
    reasons = {(r.kv_dtype, r.kv_dtype_reason) for r in rows}
    if len(reasons) == 1:
        ((kv, why),) = reasons
        return [f"KV cache {kv} for every model: {why}"]
    width = max(len(r.model) for r in rows)
    lines = ["why each cache dtype:"]
    lines += [f"  {r.model:<{width}}  {r.kv_dtype}: {r.kv_dtype_reason}" for r in rows]
    return lines
