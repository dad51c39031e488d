"""``kvplan gpus``: the accelerator catalog."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvplan.units import format_bytes
from kvplan.views import SCHEMA_VERSION
from kvplan.views.table import Column, table

if TYPE_CHECKING:
    from rich.console import RenderableType

    from kvplan.hardware.gpus import GPU


def gpus_to_dict(gpus: tuple[GPU, ...]) -> dict[str, Any]:
    """The ``kvplan gpus --format json`` document."""
    return {
        "schema_version": SCHEMA_VERSION,
        "gpus": [
            {
                "name": g.name,
                "display_name": g.display_name,
                "vendor": g.vendor,
                "aliases": list(g.aliases),
                "memory_bytes": g.memory_bytes,
                "bandwidth_bytes_per_s": g.bandwidth_bytes_per_s,
                "bf16_flops": g.bf16_flops,
                "fp8_flops": g.fp8_flops,
                "unified_memory": g.unified_memory,
                "source": g.source,
            }
            for g in gpus
        ],
    }


_COLUMNS: tuple[Column, ...] = (
    ("name", "left"),
    ("memory", "right"),
    ("TB/s", "right"),
    ("bf16 TFLOP/s", "right"),
    ("fp8 TFLOP/s", "right"),
    ("aliases", "left"),
)


def gpus_view(gpus: tuple[GPU, ...]) -> list[RenderableType]:
    """The ``kvplan gpus`` table."""
    rows = [
        (
            g.name,
            format_bytes(g.memory_bytes),
            f"{g.bandwidth_bytes_per_s / 1e12:.2f}",
            f"{g.bf16_flops / 1e12:,.0f}",
            f"{g.fp8_flops / 1e12:,.0f}" if g.fp8_flops else "",
            ", ".join(g.aliases),
        )
        for g in gpus
    ]
    return [
        f"{len(gpus)} accelerators; memory is the total the runtime reports (binary units);"
        " rates are dense peaks (bandwidth decimal); `--format json` adds sources",
        table(_COLUMNS, rows, no_wrap=True),
    ]
