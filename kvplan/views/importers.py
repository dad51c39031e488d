"""``kvplan architectures``: the model_types ``kvplan import`` reads, and how."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvplan.views import SCHEMA_VERSION, SHORT_KIND
from kvplan.views.table import Column, table

if TYPE_CHECKING:
    from rich.console import RenderableType

    from kvplan.importers import Architecture


def architectures_to_dict(architectures: tuple[Architecture, ...]) -> dict[str, Any]:
    """The ``kvplan architectures --format json`` document."""
    return {
        "schema_version": SCHEMA_VERSION,
        "architectures": [
            {
                "model_type": a.model_type,
                "family": a.family,
                "layer_kinds": list(a.layer_kinds),
                "notes": a.notes,
            }
            for a in architectures
        ],
    }


def architectures_view(architectures: tuple[Architecture, ...]) -> list[RenderableType]:
    """The ``kvplan architectures`` table: one row per model_type."""
    rows = [
        (a.model_type, a.family, ", ".join(SHORT_KIND.get(k, k) for k in a.layer_kinds), a.notes)
        for a in architectures
    ]
    columns: list[Column] = [
        ("model_type", "left"),
        ("family", "left"),
        ("layer kinds", "left"),
        ("notes", "left"),
    ]
    return [
        f"{len(architectures)} model_types that `kvplan import` reads; family: the rules"
        " module; layer kinds: those its rule can produce",
        table(columns, rows),
    ]
