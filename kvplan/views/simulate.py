"""``kvplan simulate``: a trace's replay through vLLM's prefix cache and the tiers below it, as
tables and JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvplan.units import format_bytes
from kvplan.views import SCHEMA_VERSION
from kvplan.views.table import Column, table

if TYPE_CHECKING:
    from rich.console import RenderableType

    from kvplan.answers.simulate import CurvePoint, TraceReplay
    from kvplan.views.charts import Chart


def _tiers(r: TraceReplay) -> list[dict[str, Any]]:
    out = []
    for asked, got in zip(r.tiers, r.result.tiers, strict=True):
        out.append(
            {
                "name": got.name,
                "size_bytes": asked.size_bytes,
                "num_blocks": got.num_blocks,
                "link_bytes_per_s": asked.bytes_per_s,
                "hit_tokens": got.hit_tokens,
                "loaded_blocks": got.loaded_blocks,
                "loaded_bytes": got.loaded_blocks * r.block_bytes,
                "stored_blocks": got.stored_blocks,
                "stored_bytes": got.stored_blocks * r.block_bytes,
                "evicted_blocks": got.evicted_blocks,
            }
        )
    return out


def _curve(points: tuple[str, list[CurvePoint]]) -> dict[str, Any]:
    name, rows = points
    return {
        "tier": name,
        "points": [
            {
                "size_bytes": p.size_bytes,
                "num_blocks": p.num_blocks,
                "num_refused": p.result.num_refused,
                "hit_ratio": round(p.result.hit_ratio, 6),
                "reuse_ratio": round(p.result.reuse_ratio, 6),
            }
            for p in rows
        ],
    }


def replay_to_dict(
    r: TraceReplay, trace: str, curve: tuple[str, list[CurvePoint]] | None = None
) -> dict[str, Any]:
    """The replay for ``--format json``: the pool, the service rates, the totals (tokens,
    blocks, bytes, FLOPs and milliseconds as integers; the rates as decimal strings), each
    lower tier's and, asked for, the curve of the lowest tier's size. ``hit_tokens`` and
    ``hit_ratio`` are the GPU's; ``reused_tokens`` adds the tiers' loads, and
    ``computed_tokens`` is the rest."""
    s = r.result
    doc: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "trace": trace,
        "engine": r.engine,
        "model": r.model,
        "gpu": r.gpu,
        "num_blocks": r.num_blocks,
        "block_tokens": r.block_tokens,
        "block_bytes": r.block_bytes,
        "prefill_seconds_per_token": f"{float(r.prefill_seconds_per_token):.9f}",
        "decode_seconds_per_token": f"{float(r.decode_seconds_per_token):.9f}",
        "num_requests": s.num_requests,
        "num_refused": s.num_refused,
        "input_tokens": s.input_tokens,
        "hit_tokens": s.hit_tokens,
        "reused_tokens": s.reused_tokens,
        "computed_tokens": s.computed_tokens,
        "hit_ratio": round(s.hit_ratio, 6),
        "reuse_ratio": round(s.reuse_ratio, 6),
        "saved_prefill_flops": r.saved_flops,
        "evicted_blocks": s.evicted_blocks,
        "peak_running": s.peak_running,
        "wait_ms": s.wait_ms,
        "load_ms": s.load_ms,
        "max_load_ms": s.max_load_ms,
        "tiers": _tiers(r),
    }
    if curve is not None:
        doc["curve"] = _curve(curve)
    return doc


_ENGINES = {"vllm": "vLLM", "sglang": "SGLang"}
_UNITS = {"vllm": "blocks", "sglang": "pages"}


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.2f}%" if whole else "0.00%"


def _tier_table(doc: dict[str, Any]) -> RenderableType:
    columns: list[Column] = [
        ("tier", "left"),
        ("size", "right"),
        ("link", "right"),
        ("tokens found", "right"),
        ("loaded to GPU", "right"),
        ("written", "right"),
        ("blocks evicted", "right"),
    ]
    rows = [
        (
            t["name"],
            format_bytes(t["size_bytes"]),
            f"{t['link_bytes_per_s'] / 1e9:,.1f} GB/s",
            f"{t['hit_tokens']:,} ({_percent(t['hit_tokens'], doc['input_tokens'])})",
            format_bytes(t["loaded_bytes"]),
            format_bytes(t["stored_bytes"]),
            f"{t['evicted_blocks']:,}",
        )
        for t in doc["tiers"]
    ]
    return table(columns, rows)


def _curve_table(curve: dict[str, Any]) -> RenderableType:
    columns: list[Column] = [
        (f"{curve['tier']} size", "right"),
        ("blocks", "right"),
        ("refused", "right"),
        ("GPU hit rate", "right"),
        ("all tiers", "right"),
    ]
    rows = [
        (
            format_bytes(p["size_bytes"]),
            f"{p['num_blocks']:,}",
            f"{p['num_refused']:,}",
            f"{100 * p['hit_ratio']:.2f}%",
            f"{100 * p['reuse_ratio']:.2f}%",
        )
        for p in curve["points"]
    ]
    return table(columns, rows)


def replay_view(doc: dict[str, Any]) -> list[RenderableType]:
    """The ``kvplan simulate`` tables, from its JSON document (no arithmetic but shares)."""
    rows = [
        (
            "requests replayed",
            f"{doc['num_requests']:,} ({doc['num_refused']:,} longer than the pool)",
        ),
        ("input tokens", f"{doc['input_tokens']:,}"),
        (
            "found in the GPU's prefix cache",
            f"{doc['hit_tokens']:,} ({100 * doc['hit_ratio']:.2f}%)",
        ),
        ("prefilled", f"{doc['computed_tokens']:,} tokens"),
        ("prefill FLOPs saved", f"{doc['saved_prefill_flops']:.3e}"),
        ("blocks evicted from the GPU", f"{doc['evicted_blocks']:,}"),
        ("most requests at once", f"{doc['peak_running']:,}"),
        ("time waiting for blocks", f"{doc['wait_ms'] / 1000:,.1f} s, all requests"),
    ]
    if doc["tiers"]:
        rows.insert(
            3,
            (
                "found on the GPU or in a tier",
                f"{doc['reused_tokens']:,} ({100 * doc['reuse_ratio']:.2f}%)",
            ),
        )
        rows.append(("time loading from tiers", f"{doc['load_ms'] / 1000:,.1f} s, all requests"))
        rows.append(("longest load of one request", f"{doc['max_load_ms']:,} ms"))
    columns: list[Column] = [("", "left"), ("", "right")]
    out: list[RenderableType] = [
        f"[bold]{doc['model']}[/bold] on {_ENGINES[doc['engine']]}, 1 x {doc['gpu']}:"
        f" {doc['num_blocks']:,} {_UNITS[doc['engine']]} of"
        f" {doc['block_tokens']} token{'' if doc['block_tokens'] == 1 else 's'}"
        f" ({format_bytes(doc['block_bytes'])} each), trace {doc['trace']}",
        table(columns, rows, show_header=False, key_style="bold"),
    ]
    if doc["tiers"]:
        out.append(_tier_table(doc))
    if "curve" in doc:
        out.append(_curve_table(doc["curve"]))
    out.append(
        "each request held for its prefill (the tokens found nowhere), its loads and its"
        " decode, one request at a time at kvplan perf's rates; tiers written through, least"
        " recently used evicted"
    )
    return out


def curve_chart(doc: dict[str, Any]) -> Chart:
    """The hit rate (GPU, and all tiers together) against the size of the tier varied."""
    from kvplan.views.charts import Chart, Series

    curve = doc["curve"]
    points = curve["points"]
    xs = tuple(p["size_bytes"] / 2**30 for p in points)
    series = [Series("GPU", xs, tuple(100 * p["hit_ratio"] for p in points))]
    if doc["tiers"]:
        series.append(Series("GPU and tiers", xs, tuple(100 * p["reuse_ratio"] for p in points)))
    asked = next((t["size_bytes"] for t in doc["tiers"] if t["name"] == curve["tier"]), None)
    shown = format_bytes(asked if asked is not None else doc["num_blocks"] * doc["block_bytes"])
    return Chart(
        title=f"{doc['model']} on {_ENGINES[doc['engine']]}, 1 x {doc['gpu']}: prefix cache hit"
        f" rate against the {curve['tier']} tier's size",
        x_label=f"{curve['tier']} size (GiB)",
        y_label="input tokens found (%)",
        series=tuple(series),
        notes=(f"trace {doc['trace']}; the size asked: {shown}",),
    )
