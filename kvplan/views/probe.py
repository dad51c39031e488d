"""``kvplan probe``: a measured cache next to kvplan's transformers estimate."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvplan.units import format_bytes, format_tokens
from kvplan.views import SCHEMA_VERSION
from kvplan.views.table import Column, table

if TYPE_CHECKING:
    from rich.console import RenderableType

    from kvplan.probe.measure import ProbeResult


def probe_to_dict(p: ProbeResult, within: bool, tolerance_bytes: int) -> dict[str, Any]:
    """``kvplan probe --format json``."""
    return {
        "schema_version": SCHEMA_VERSION,
        "model": p.model,
        "family": p.family,
        "device": p.device,
        "dtype": p.dtype,
        "context_tokens": p.context_tokens,
        "batch_size": p.batch_size,
        "decode_steps": p.decode_steps,
        "tensor_bytes": p.tensor_bytes,
        "storage_bytes": p.storage_bytes,
        "num_tensors": p.num_tensors,
        "by_kind": p.by_kind,
        "transformers_estimate_bytes": p.transformers_estimate_bytes,
        "estimate_by_kind": p.estimate_by_kind,
        "ideal_bytes": p.ideal_bytes,
        "difference_bytes": p.difference_bytes,
        "tolerance_bytes": tolerance_bytes,
        "within_tolerance": within,
        "allocator": p.allocator,
        "paged": p.paged,
    }


def probe_view(p: ProbeResult, within: bool, tolerance_bytes: int) -> list[RenderableType]:
    """The ``kvplan probe`` view: measured next to estimated, per layer kind."""
    rows = []
    for kind in dict.fromkeys([*p.by_kind, *p.estimate_by_kind]):
        measured, est = p.by_kind.get(kind, 0), p.estimate_by_kind.get(kind, 0)
        rows.append((kind, f"{measured:,} B", f"{est:,} B", f"{measured - est:+,} B"))
    share = (
        100 * p.difference_bytes / p.transformers_estimate_bytes
        if p.transformers_estimate_bytes
        else 0.0
    )
    rows.append(
        (
            "total",
            f"{p.tensor_bytes:,} B",
            f"{p.transformers_estimate_bytes:,} B",
            f"{p.difference_bytes:+,} B ({share:+.2f}%)",
        )
    )
    columns: list[Column] = [
        ("layer kind", "left"),
        ("measured", "right"),
        ("transformers estimate", "right"),
        ("difference", "right"),
    ]
    out: list[RenderableType] = [
        f"[bold]{p.model}[/bold] ({p.family}) on {p.device}, {p.dtype}:"
        f" {format_tokens(p.context_tokens)} tokens x {p.batch_size} + {p.decode_steps} decode"
        f" steps; {p.num_tensors} cache tensors",
        table(columns, rows, no_wrap=True),
        f"storage held (de-duplicated): {p.storage_bytes:,} B"
        f" ({format_bytes(p.storage_bytes)}); kvplan's ideal cache: {p.ideal_bytes:,} B",
    ]
    if p.allocator:
        out.append(
            "CUDA allocator: " + ", ".join(f"{k} {format_bytes(v)}" for k, v in p.allocator.items())
        )
    if p.paged:
        out.append(
            f"paged pool: {p.paged['num_blocks']} blocks, planned {p.paged['planned_bytes']:,} B,"
            f" allocated {p.paged['tensor_bytes']:,} B"
            + (
                f", allocator delta {p.paged['memory_allocated_delta']:,} B"
                if "memory_allocated_delta" in p.paged
                else ""
            )
        )
    out.append(
        "within tolerance"
        if within
        else f"[red]differs by more than the tolerance ({tolerance_bytes:,} B)[/red]"
    )
    return out
