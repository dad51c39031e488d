"""``kvplan tiers``: what each KV-cache tier holds and reload against recompute, as JSON-ready
dicts, rich tables and a chart (kvplan.views.charts)."""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING, Any

from kvplan.units import format_bytes
from kvplan.views import SCHEMA_VERSION
from kvplan.views.table import Column, table

if TYPE_CHECKING:
    from rich.console import RenderableType

    from kvplan.answers.tiers import ReloadVsRecompute, TierCapacity
    from kvplan.views.charts import Chart

#: How each tier is named in tables and on the chart.
TIER_LABELS = {"gpu": "GPU", "cpu": "host memory", "disk": "local disk", "remote": "remote pool"}


def _seconds(value: Fraction | None) -> str | None:
    """Seconds as a decimal string, to the nanosecond (JSON keeps no Fraction)."""
    return None if value is None else f"{float(value):.9f}"


def tiers_to_dict(c: TierCapacity, r: ReloadVsRecompute) -> dict[str, Any]:
    """Both answers for ``--format json``: bytes and counts as integers, seconds and rates as
    decimal strings, a break-even as its token count or null with its verdict."""
    return {
        "schema_version": SCHEMA_VERSION,
        "model": c.model,
        "gpu": c.gpu,
        "system": c.system,
        "engine": c.engine,
        "tensor_parallel_size": c.tensor_parallel_size,
        "kv_dtype": c.kv_dtype,
        "token_bytes": c.token_bytes,
        "rank_token_bytes": c.rank_token_bytes,
        "prefix_tokens": c.prefix_tokens,
        "host_memory_bytes": c.host_memory_bytes,
        "host_bytes": c.host_bytes,
        "tiers": [
            {
                "tier": t.name,
                "unit": t.unit_name,
                "unit_tokens": t.unit_tokens,
                "num_units": t.num_units,
                "tokens": t.tokens,
                "num_prefixes": t.num_prefixes,
                "rank_bytes": t.rank_bytes,
                "host_bytes": t.host_bytes,
                "link_bytes_per_s": t.link_bytes_per_s,
                "setting": t.setting,
            }
            for t in c.tiers
        ],
        "reload": _reload_dict(r),
    }


def _reload_dict(r: ReloadVsRecompute) -> dict[str, Any]:
    return {
        "compute_efficiency": str(float(r.compute_efficiency)),
        "matmul_peak_flops": r.matmul_peak_flops,
        "max_tokens": r.max_tokens,
        "links": [
            {"tier": link.tier, "bytes_per_s": link.bytes_per_s, "shared_by": link.shared_by}
            for link in r.links
        ],
        "break_even": [
            {"tier": b.tier, "prefix_tokens": b.prefix_tokens, "verdict": b.verdict}
            for b in r.break_even
        ],
        "rows": [
            {
                "prefix_tokens": row.prefix_tokens,
                "rank_bytes": row.rank_bytes,
                "recompute_seconds": _seconds(row.recompute_seconds),
                "reload_seconds": {
                    link.tier: _seconds(s)
                    for link, s in zip(r.links, row.reload_seconds, strict=True)
                },
            }
            for row in r.rows
        ],
    }


def _ms(text: str | None) -> str:
    return "not known" if text is None else f"{float(text) * 1000:,.2f} ms"


def _rate(bytes_per_s: int) -> str:
    return "not known" if not bytes_per_s else f"{bytes_per_s / 10**9:,.2f} GB/s"


def _verdict(b: dict[str, Any]) -> str:
    match b["verdict"]:
        case "from":
            return f"reload faster from {b['prefix_tokens']:,} tokens"
        case "always":
            return "reload faster at every length"
        case "never":
            return "recompute faster at every length searched"
        case _:
            return "link not known"


def tiers_view(doc: dict[str, Any]) -> list[RenderableType]:
    """The ``kvplan tiers`` tables, from its JSON document (no arithmetic but units)."""
    columns: list[Column] = [
        ("tier", "left"),
        ("units x tokens", "right"),
        ("tokens", "right"),
        (f"prefixes of {doc['prefix_tokens']:,}", "right"),
        ("host memory", "right"),
    ]
    rows = [
        (
            f"{TIER_LABELS[t['tier']]} ({t['unit']}s)",
            f"{t['num_units']:,} x {t['unit_tokens']:,}",
            f"{t['tokens']:,}",
            f"{t['num_prefixes']:,}",
            format_bytes(t["host_bytes"]),
        )
        for t in doc["tiers"]
    ]
    settings = "; ".join(
        f"{TIER_LABELS[t['tier']]}: {t['setting']}, {format_bytes(t['rank_bytes'])} a rank"
        for t in doc["tiers"]
    )
    head = (
        f"[bold]{doc['model']}[/bold] on {doc['engine']}, {doc['tensor_parallel_size']} x"
        f" {doc['gpu']} ({doc['system']}), KV dtype {doc['kv_dtype']}:"
        f" {doc['token_bytes']:,} B a token ({doc['rank_token_bytes']:,} B on one rank)"
    )
    host = (
        f"host memory taken: {format_bytes(doc['host_bytes'])} of the node's"
        f" {format_bytes(doc['host_memory_bytes'])} (binary units)"
    )
    return [head, table(columns, rows), host, settings, *_reload_view(doc)]


def _reload_view(doc: dict[str, Any]) -> list[RenderableType]:
    r = doc["reload"]
    links = r["links"]
    columns: list[Column] = [("prefix tokens", "right"), ("recompute", "right")]
    columns += [(f"from {TIER_LABELS[link['tier']]}", "right") for link in links]
    rows = [
        (
            f"{row['prefix_tokens']:,}",
            _ms(row["recompute_seconds"]),
            *(_ms(row["reload_seconds"][link["tier"]]) for link in links),
        )
        for row in r["rows"]
    ]
    rates = ", ".join(
        f"{TIER_LABELS[link['tier']]} {_rate(link['bytes_per_s'])}"
        + (f" shared by {link['shared_by']} GPUs" if link["shared_by"] > 1 else "")
        for link in links
    )
    verdicts = "; ".join(f"{TIER_LABELS[b['tier']]}: {_verdict(b)}" for b in r["break_even"])
    return [
        table(columns, rows, title="reload against recompute, one rank"),
        f"links: {rates}",
        f"break-even: {verdicts}",
        f"recompute: the prefix's prefill FLOPs at the matmul peak x {r['compute_efficiency']}"
        " (kvplan perf's model, the weight read left out); reload: its KV bytes over the link",
    ]


def reload_chart(doc: dict[str, Any]) -> Chart:
    """Reload and recompute milliseconds against prefix length, one line per tier."""
    from kvplan.views.charts import Chart, Series

    r = doc["reload"]
    xs = tuple(float(row["prefix_tokens"]) for row in r["rows"])
    series = [
        Series("recompute", xs, tuple(float(row["recompute_seconds"]) * 1000 for row in r["rows"]))
    ]
    for link in r["links"]:
        times = [row["reload_seconds"][link["tier"]] for row in r["rows"]]
        if None not in times:
            label = f"reload from {TIER_LABELS[link['tier']]}"
            series.append(Series(label, xs, tuple(float(t) * 1000 for t in times)))
    verdicts = tuple(f"{TIER_LABELS[b['tier']]}: {_verdict(b)}" for b in r["break_even"])
    return Chart(
        title=f"{doc['model']} on {doc['gpu']} ({doc['system']}): reload against recompute",
        x_label="prefix tokens",
        y_label="milliseconds, one rank",
        series=tuple(series),
        log_x=True,
        notes=verdicts,
    )
