"""Results -> rich tables for a terminal, or JSON-ready dicts with stable keys. No arithmetic.

Every JSON document carries ``schema_version``: keys are only ever added within a version;
a removed or renamed key bumps it. docs/json.md describes each document.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvplan.estimate import Estimate, explain
from kvplan.spec import ModelSpec
from kvplan.units import format_bytes, format_tokens

if TYPE_CHECKING:
    from rich.console import RenderableType

SCHEMA_VERSION = 1


def estimate_to_dict(est: Estimate, spec: ModelSpec) -> dict[str, Any]:
    """The ``kvplan calc --format json`` document."""
    return {
        "schema_version": SCHEMA_VERSION,
        "model": est.model,
        "hf_id": spec.hf_id,
        "context_tokens": est.context_tokens,
        "batch_size": est.batch_size,
        "kv_dtype": est.kv_dtype,
        "k_dtype": est.k_dtype.name,
        "v_dtype": est.v_dtype.name,
        "kv_cache_bytes": est.kv_cache_bytes,
        "bytes_per_token": est.bytes_per_token,
        "breakdown": [
            {
                "kind": row.kind,
                "num_layers": row.num_layers,
                "tokens_retained": row.tokens_retained,
                "k_bytes": row.k_bytes,
                "v_bytes": row.v_bytes,
                "state_bytes": row.state_bytes,
                "bytes": row.bytes,
                "layer": row.layer.describe(),
            }
            for row in est.breakdown
        ],
    }


def estimate_view(est: Estimate, spec: ModelSpec, *, with_explain: bool) -> list[RenderableType]:
    """The ``kvplan calc`` table, headed by what was asked and footed by the totals."""
    from rich import box
    from rich.table import Table

    name = f"{est.model}" + (f" ({spec.hf_id})" if spec.hf_id else "")
    heading = (
        f"[bold]{name}[/bold]: {format_tokens(est.context_tokens)} tokens x {est.batch_size}"
        f" sequence{'s' if est.batch_size != 1 else ''}, KV dtype {est.kv_dtype}"
    )
    table = Table(box=box.SIMPLE_HEAD)
    with_state = any(row.state_bytes for row in est.breakdown)
    table.add_column("layer kind", no_wrap=True)
    table.add_column("layers", justify="right", no_wrap=True)
    table.add_column("tokens kept", justify="right", no_wrap=True)
    table.add_column("K", justify="right", no_wrap=True)
    table.add_column("V", justify="right", no_wrap=True)
    if with_state:
        table.add_column("state", justify="right", no_wrap=True)
    table.add_column("total", justify="right", no_wrap=True)
    for row in est.breakdown:
        cells = [
            row.kind,
            str(row.num_layers),
            format_tokens(row.tokens_retained),
            format_bytes(row.k_bytes),
            format_bytes(row.v_bytes),
        ]
        if with_state:
            cells.append(format_bytes(row.state_bytes))
        table.add_row(*cells, format_bytes(row.bytes))
    out: list[RenderableType] = [heading, table]
    out.append(
        f"KV cache: [bold]{format_bytes(est.kv_cache_bytes)}[/bold] ({est.kv_cache_bytes:,} bytes)"
    )
    out.append(
        f"Per token: {format_bytes(est.bytes_per_token)} ({est.bytes_per_token:,} bytes)"
        " per sequence at this context"
    )
    if with_explain:
        out.append("")
        out.extend(explain(est))
    return out


def models_to_dict(rows: list[tuple[ModelSpec, int]]) -> dict[str, Any]:
    """The ``kvplan models --format json`` document: each spec with its bytes per token."""
    return {
        "schema_version": SCHEMA_VERSION,
        "models": [
            {
                "name": spec.name,
                "hf_id": spec.hf_id,
                "aliases": list(spec.aliases),
                "model_type": spec.model_type,
                "num_hidden_layers": spec.num_hidden_layers,
                "layer_kinds": _kind_counts(spec),
                "max_position_embeddings": spec.max_position_embeddings,
                "num_parameters": spec.num_parameters,
                "num_active_parameters": spec.num_active_parameters,
                "bytes_per_token": per_token,
            }
            for spec, per_token in rows
        ],
    }


def models_view(rows: list[tuple[ModelSpec, int]]) -> list[RenderableType]:
    """The ``kvplan models`` table."""
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD)
    for name, justify in (
        ("name", "left"),
        ("layers", "left"),
        ("params (active)", "right"),
        ("max ctx", "right"),
        ("KV/token", "right"),
    ):
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for spec, per_token in rows:
        table.add_row(
            spec.name,
            ", ".join(f"{n} {_SHORT_KIND.get(k, k)}" for k, n in _kind_counts(spec).items()),
            _params(spec),
            format_tokens(spec.max_position_embeddings) if spec.max_position_embeddings else "",
            format_bytes(per_token),
        )
    return [
        f"{len(rows)} bundled models; KV/token in the model's dtype at a short context;"
        " `kvplan show NAME` for the rest",
        table,
    ]


_SHORT_KIND = {
    "full_attention": "full",
    "sliding_attention": "sliding",
    "chunked_attention": "chunked",
    "mla_latent": "mla",
    "linear_attention": "linear",
    "no_cache": "none",
}


def spec_to_dict(spec: ModelSpec) -> dict[str, Any]:
    """The ``kvplan show --format json`` document: the spec as given, and its schedule."""
    return {
        "schema_version": SCHEMA_VERSION,
        "spec": spec.model_dump(mode="json", exclude_none=True),
        "schedule": [
            {
                "first_layer": first,
                "last_layer": last,
                "kind": layer.kind,
                "layer": layer.describe(),
            }
            for first, last, layer in spec.layer_runs()
        ],
    }


def spec_view(spec: ModelSpec) -> list[RenderableType]:
    """The ``kvplan show`` view: the spec's fields, then its resolved per-layer schedule."""
    from rich.table import Table

    fields = Table(title=spec.name, title_justify="left", show_header=False)
    fields.add_column("key", style="bold")
    fields.add_column("value")
    for key, value in spec.model_dump(exclude_none=True).items():
        if key in ("layer_types", "layer_types_pattern"):
            value = ", ".join(value)
        elif isinstance(value, tuple):
            value = ", ".join(map(str, value))
        fields.add_row(key, str(value))
    schedule = Table(title="per-layer cache schedule", title_justify="left")
    schedule.add_column("layers", justify="right")
    schedule.add_column("kind")
    schedule.add_column("what it keeps")
    for first, last, layer in spec.layer_runs():
        span = str(first) if first == last else f"{first}-{last}"
        schedule.add_row(span, layer.kind, layer.describe())
    counts = ", ".join(f"{n} {k}" for k, n in _kind_counts(spec).items())
    return [fields, schedule, f"{spec.num_hidden_layers} layers: {counts}"]


def _kind_counts(spec: ModelSpec) -> dict[str, int]:
    counts: dict[str, int] = {}
    for layer, num_layers in spec.layer_groups:
        counts[layer.kind] = counts.get(layer.kind, 0) + num_layers
    return counts


def _params(spec: ModelSpec) -> str:
    if spec.num_parameters is None:
        return ""
    total = f"{spec.num_parameters / 1e9:.1f}B"
    if spec.num_active_parameters:
        return f"{total} ({spec.num_active_parameters / 1e9:.1f}B)"
    return total
