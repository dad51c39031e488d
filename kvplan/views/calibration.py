"""``kvplan calibrate``: the fitted corrections and each log's pool residual."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvplan.units import GiB, format_bytes
from kvplan.views import SCHEMA_VERSION
from kvplan.views.table import Column, table

if TYPE_CHECKING:
    from rich.console import RenderableType

    from kvplan.logs.calibrate import CalibrationFit


def calibration_fit_to_dict(fit: CalibrationFit) -> dict[str, Any]:
    """The fit for ``--format json``: the calibration file's fields, the models, and each
    log's pool and kvplan's residual on it (kvplan minus printed, bytes) before, after and held
    out."""
    from kvplan.logs.calibrate import calibration_to_dict

    return {
        "schema_version": SCHEMA_VERSION,
        "calibration": calibration_to_dict(fit.calibration),
        "models": list(fit.model_names),
        "logs": [
            {
                "log": r.name,
                "printed_available_bytes": r.printed_bytes,
                "residual_before_bytes": r.before_bytes,
                "residual_after_bytes": r.after_bytes,
                "residual_held_out_bytes": r.held_out_bytes,
            }
            for r in fit.residuals
        ],
    }


def _residual(num_bytes: int, printed: int) -> str:
    share = f" ({100 * num_bytes / printed:+.1f}%)" if printed else ""
    return f"{num_bytes / GiB:+.2f} GiB{share}"


def _ratio(ppm: int) -> str:
    return f"x {ppm / 1_000_000:.3f}"


def calibration_view(doc: dict[str, Any]) -> list[RenderableType]:
    """The ``kvplan calibrate`` table: each log's printed pool and kvplan's residual on it."""
    c = doc["calibration"]
    rows = [
        (
            r["log"],
            f"{r['printed_available_bytes'] / GiB:.2f} GiB",
            _residual(r["residual_before_bytes"], r["printed_available_bytes"]),
            _residual(r["residual_after_bytes"], r["printed_available_bytes"]),
            _residual(r["residual_held_out_bytes"], r["printed_available_bytes"]),
        )
        for r in doc["logs"]
    ]
    names = ("log", "available (printed)", "kvplan before", "after", "held out")
    columns: list[Column] = [(name, "left" if name == "log" else "right") for name in names]
    non_torch = c["non_torch_bytes"]
    terms = ", ".join(
        (
            f"peak activation {_ratio(c['activation_ppm'])}",
            f"CUDA graphs {_ratio(c['cuda_graph_ppm'])}",
            "non-torch memory " + ("as modelled" if non_torch is None else format_bytes(non_torch)),
            f"other {c['other_bytes'] / GiB:+.2f} GiB",
        )
    )
    site = f"{c['gpu']}, vLLM {c['version_line']}, TP {c['tensor_parallel_size']}"
    return [
        f"[bold]calibration of {site}[/bold] from {c['num_logs']} logs"
        f" ({', '.join(doc['models'])}): {terms}",
        table(columns, rows, overflow="fold"),
        "residual: kvplan's pool minus the printed one; held out: fitted on the other logs",
    ]
