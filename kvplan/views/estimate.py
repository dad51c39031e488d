"""``kvplan calc``, ``models`` and ``show``: an estimate, the catalog, one spec."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvplan.model.dtypes import served_dtype
from kvplan.model.estimator import Estimate, explain
from kvplan.model.spec import ModelSpec
from kvplan.units import format_bytes, format_tokens
from kvplan.views import SCHEMA_VERSION, SHORT_KIND
from kvplan.views.engines import engine_result_to_dict, engine_result_view
from kvplan.views.provenance import resolution_line, resolution_to_dict
from kvplan.views.table import Column, table

if TYPE_CHECKING:
    from rich.console import RenderableType

    from kvplan.answers.calc import CalcRequest, Calculation
    from kvplan.catalog.query import CatalogQuery, CatalogRow
    from kvplan.engines.base import EngineResult


def kv_per_token_legend(context_tokens: int | None) -> str:
    """What "KV/token" means wherever a table shows it (``calc``, ``models``, ``compare``):
    one definition, at the question's context (None or 0: a short context)."""
    at = f"{context_tokens:,} tokens" if context_tokens else "a short context"
    return (
        f"KV/token: the bytes one more token of one sequence adds to the cache at {at}"
        " (a sliding or chunked layer adds nothing once its window is full, recurrent state"
        " never grows)"
    )


def estimate_to_dict(est: Estimate, spec: ModelSpec, *, dtype_reason: str = "") -> dict[str, Any]:
    """The ``kvplan calc --format json`` document."""
    return {
        "schema_version": SCHEMA_VERSION,
        "model": est.model,
        "hf_id": spec.hf_id,
        **resolution_to_dict(spec),
        "context_tokens": est.context_tokens,
        "batch_size": est.batch_size,
        "kv_dtype": est.kv_dtype,
        "kv_dtype_reason": dtype_reason,
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


def estimate_view(
    est: Estimate, spec: ModelSpec, *, with_explain: bool, dtype_reason: str = ""
) -> list[RenderableType]:
    """The ``kvplan calc`` table, headed by what was asked and footed by the totals."""
    name = f"{est.model}" + (f" ({spec.hf_id})" if spec.hf_id else "")
    heading = (
        f"[bold]{name}[/bold]: {format_tokens(est.context_tokens)} tokens x {est.batch_size}"
        f" sequence{'s' if est.batch_size != 1 else ''}, KV dtype {est.kv_dtype}"
        + (f" ({dtype_reason})" if dtype_reason else "")
    )
    with_state = any(row.state_bytes for row in est.breakdown)
    columns: list[Column] = [
        ("layer kind", "left"),
        ("layers", "right"),
        ("tokens kept", "right"),
        ("K", "right"),
        ("V", "right"),
        *((("state", "right"),) if with_state else ()),
        ("total", "right"),
    ]
    rows = [
        [
            row.kind,
            str(row.num_layers),
            format_tokens(row.tokens_retained),
            format_bytes(row.k_bytes),
            format_bytes(row.v_bytes),
            *([format_bytes(row.state_bytes)] if with_state else []),
            format_bytes(row.bytes),
        ]
        for row in est.breakdown
    ]
    out: list[RenderableType] = [heading, table(columns, rows, no_wrap=True)]
    out.append(
        f"KV cache: [bold]{format_bytes(est.kv_cache_bytes)}[/bold] ({est.kv_cache_bytes:,} bytes)"
    )
    # "Per token" is KV/token (``kv_per_token_legend``): what one more token adds at this context
    out.append(
        f"Per token: {format_bytes(est.bytes_per_token)} ({est.bytes_per_token:,} bytes)"
        " per sequence at this context"
    )
    if with_explain:
        out.append("")
        out.extend(explain(est))
    return out


def _query_to_dict(query: CatalogQuery) -> dict[str, Any]:
    return {
        "text": query.text,
        "kind": query.kind,
        "family": query.family,
        "sort": query.sort,
        "reverse": query.reverse,
    }


def models_to_dict(
    rows: list[CatalogRow],
    query: CatalogQuery | None = None,
    num_bundled: int | None = None,
    *,
    context_tokens: int | None = None,
) -> dict[str, Any]:
    """The ``kvplan models --format json`` document: each kept spec with its bytes per token
    at ``context_tokens`` (None: a short context, 0), the query that chose them and how many
    models the catalog holds."""
    from kvplan.catalog.query import CatalogQuery

    asked = query if query is not None else CatalogQuery()
    return {
        "schema_version": SCHEMA_VERSION,
        "query": _query_to_dict(asked),
        "context_tokens": context_tokens or 0,
        "num_bundled_models": len(rows) if num_bundled is None else num_bundled,
        "models": [
            {
                "name": row.spec.name,
                "hf_id": row.spec.hf_id,
                "aliases": list(row.spec.aliases),
                "model_type": row.spec.model_type,
                "family": row.family,
                "num_hidden_layers": row.spec.num_hidden_layers,
                "layer_kinds": _kind_counts(row.spec),
                "max_position_embeddings": row.spec.max_position_embeddings,
                "num_parameters": row.spec.num_parameters,
                "num_active_parameters": row.spec.num_active_parameters,
                "bytes_per_token": row.bytes_per_token,
                "torch_dtype": row.spec.torch_dtype,
                "kv_dtype": served_dtype(row.spec)[0].name,
            }
            for row in rows
        ],
    }


_MODEL_COLUMNS: tuple[Column, ...] = (
    ("name", "left"),
    ("layers", "left"),
    ("params (active)", "right"),
    ("max ctx", "right"),
    ("KV dtype", "left"),
    ("KV/token", "right"),
)


def _models_heading(
    rows: list[CatalogRow], query: CatalogQuery, num_bundled: int, families: list[str]
) -> str:
    if not query.is_filtered:
        return f"{len(rows)} bundled models"
    asked = [f"matching {query.text!r}"] if query.text else []
    asked += [f"--kind {query.kind}"] if query.kind else []
    asked += [f"--family {query.family}"] if query.family else []
    heading = f"{len(rows)} of {num_bundled} bundled models ({', '.join(asked)})"
    if query.family and query.family.lower() not in families and not rows:
        heading += f"; families: {', '.join(families)}"
    return heading


def models_view(
    rows: list[CatalogRow],
    query: CatalogQuery | None = None,
    num_bundled: int | None = None,
    families: list[str] | None = None,
    *,
    context_tokens: int | None = None,
) -> list[RenderableType]:
    """The ``kvplan models`` table; the heading says what was asked when a filter is set
    (and, for a family that matches nothing, which families there are) and what KV/token
    means at ``context_tokens`` (None: a short context)."""
    from kvplan.catalog.query import CatalogQuery

    asked = query if query is not None else CatalogQuery()
    total = len(rows) if num_bundled is None else num_bundled
    cells = [
        [
            row.spec.name,
            ", ".join(f"{n} {SHORT_KIND.get(k, k)}" for k, n in _kind_counts(row.spec).items()),
            _params(row.spec),
            format_tokens(row.spec.max_position_embeddings)
            if row.spec.max_position_embeddings
            else "",
            served_dtype(row.spec)[0].name,
            format_bytes(row.bytes_per_token),
        ]
        for row in rows
    ]
    return [
        f"{_models_heading(rows, asked, total, families or [])};"
        f" {kv_per_token_legend(context_tokens)}, in the dtype the model is served in (a"
        " float32 checkpoint in bfloat16, as the engines' --dtype auto); `kvplan show NAME`"
        " for the rest",
        table(_MODEL_COLUMNS, cells, no_wrap=True),
    ]


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


def _field_text(key: str, value: Any) -> str:
    if key in ("layer_types", "layer_types_pattern"):
        return ", ".join(value)
    if isinstance(value, tuple):
        return ", ".join(map(str, value))
    return str(value)


def spec_view(spec: ModelSpec) -> list[RenderableType]:
    """The ``kvplan show`` view: the spec's fields, then its resolved per-layer schedule."""
    fields = table(
        [("key", "left"), ("value", "left")],
        [(k, _field_text(k, v)) for k, v in spec.model_dump(exclude_none=True).items()],
        simple=False,
        title=spec.name,
        title_justify="left",
        show_header=False,
        key_style="bold",
    )
    schedule = table(
        [("layers", "right"), ("kind", "left"), ("what it keeps", "left")],
        [
            (str(first) if first == last else f"{first}-{last}", layer.kind, layer.describe())
            for first, last, layer in spec.layer_runs()
        ],
        simple=False,
        title="per-layer cache schedule",
        title_justify="left",
    )
    counts = ", ".join(f"{n} {k}" for k, n in _kind_counts(spec).items())
    return [fields, schedule, f"{spec.num_hidden_layers} layers: {counts}"]


def _kind_counts(spec: ModelSpec) -> dict[str, int]:
    """Layers of each cache kind, in the order the kinds first appear."""
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


def calc_to_dict(
    answer: Calculation | EngineResult,
    spec: ModelSpec,
    request: CalcRequest,
    *,
    with_explain: bool = False,
) -> dict[str, Any]:
    """``kvplan calc --format json``: the formula's estimate, or an engine's allocation."""
    from kvplan.answers.calc import Calculation

    if isinstance(answer, Calculation):
        doc = estimate_to_dict(answer.estimate, spec, dtype_reason=answer.dtype_reason)
        if with_explain:
            doc["explain"] = explain(answer.estimate)
        return doc
    doc = engine_result_to_dict(
        answer, spec, context_tokens=request.context_tokens, batch_size=request.batch_size
    )
    if answer.engine in ("llama.cpp", "ik_llama.cpp"):
        from kvplan.answers.calc import llamacpp_n_ctx

        doc["n_ctx"] = llamacpp_n_ctx(request)  # llama-server's -c: the cells of all -np
    return {**doc, **resolution_to_dict(spec)}


def calc_view(
    answer: Calculation | EngineResult,
    spec: ModelSpec,
    request: CalcRequest,
    *,
    with_explain: bool = False,
) -> list[RenderableType]:
    """The ``kvplan calc`` view: the formula's table, or what the engine allocates and prints."""
    from kvplan.answers.calc import Calculation

    if isinstance(answer, Calculation):
        reason = answer.dtype_reason
        view = estimate_view(answer.estimate, spec, with_explain=with_explain, dtype_reason=reason)
    else:
        view = engine_result_view(calc_to_dict(answer, spec, request))
    return [*resolution_line(spec), *view]
