"""How a spec was reached (a typed name read as a variant, a figure computed), for every
view that names the model: one JSON pair and one dim line. Kept apart and light, so that
plan, perf and the engine views need not import the calc views."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import RenderableType

    from kvplan.model.spec import ModelSpec


def resolution_to_dict(spec: ModelSpec) -> dict[str, Any]:
    """How a typed name was read: ``resolved_from`` (the text, or null when it was a catalog
    name, HF id, alias or file) and ``provenance`` (one line per step)."""
    return {"resolved_from": spec.resolved_from, "provenance": list(spec.provenance)}


def resolution_line(spec: ModelSpec) -> list[RenderableType]:
    """One line saying how the typed name was read, or nothing for a plain catalog name."""
    if not spec.provenance:
        return []
    typed = f" {spec.resolved_from!r}" if spec.resolved_from else ""
    return [f"[dim]model{typed}: {'; '.join(spec.provenance)}[/dim]"]
