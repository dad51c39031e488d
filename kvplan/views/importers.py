"""``kvplan architectures``: the model_types ``kvplan import`` reads, and how."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kvplan.views import SCHEMA_VERSION, SHORT_KIND
from kvplan.views.table import Column, table

if TYPE_CHECKING:
    from rich.console import RenderableType

    from kvplan.importers import Architecture

#: model_type -> the catalog names of the bundled specs of that model_type.
ModelsByType = Mapping[str, Sequence[str]]


def architectures_to_dict(
    architectures: tuple[Architecture, ...], models: ModelsByType | None = None
) -> dict[str, Any]:
    """The ``kvplan architectures --format json`` document."""
    models = models or {}
    return {
        "schema_version": SCHEMA_VERSION,
        "architectures": [
            {
                "model_type": a.model_type,
                "family": a.family,
                "layer_kinds": list(a.layer_kinds),
                "notes": a.notes,
                "architectures": list(a.architectures),
                "engines": list(a.engines),
                "models": list(models.get(a.model_type, ())),
            }
            for a in architectures
        ],
        "num_model_classes": len({c for a in architectures for c in a.architectures}),
    }


def architectures_view(
    architectures: tuple[Architecture, ...], models: ModelsByType | None = None
) -> list[RenderableType]:
    """The ``kvplan architectures`` table: one row per model_type."""
    models = models or {}
    rows = [
        (
            a.model_type,
            a.family,
            ", ".join(SHORT_KIND.get(k, k) for k in a.layer_kinds),
            ", ".join(a.architectures) or "-",
            ", ".join(a.engines) or "-",
            ", ".join(models.get(a.model_type, ())) or "-",
        )
        for a in architectures
    ]
    columns: list[Column] = [
        ("model_type", "left"),
        ("family", "left"),
        ("layer kinds", "left"),
        ("architectures", "left"),
        ("engines", "left"),
        ("catalog models", "left"),
    ]
    num_classes = len({c for a in architectures for c in a.architectures})
    return [
        f"{len(architectures)} model_types ({num_classes} model classes) that `kvplan import`"
        " reads; family: the rules module; layer kinds: those its rule can produce;"
        " architectures: the config.json classes, as vLLM's registry names them; engines:"
        " vllm (vLLM 0.32's registry, or 0.33's where the note says so) or vllm-transformers"
        " (its Transformers backend);"
        " --format json adds each rule's notes",
        table(columns, rows),
    ]
