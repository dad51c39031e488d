"""Fit one site's vLLM budget corrections from its own start-up logs (``kvplan calibrate``).

Each log is read as ``kvplan reconcile`` reads it (model, settings, GPU, version line), and
kvplan's modelled profile of its GPU is set beside what vLLM printed:

- ``Actual usage is W GiB for weight, A GiB for peak activation, N GiB for non-torch memory,
  and G GiB for CUDAGraph memory`` (the worker's DEBUG line), or the older INFO line ``model
  weights take W GiB; non_torch_memory takes N GiB; PyTorch activation peak memory takes A GiB``;
- ``Estimated CUDA graph memory: E GiB total`` (v0.21.0 on: what the pool gives up);
- ``Available KV cache memory: K GiB`` (required: the pool every residual is measured on).

The fit (``Calibration``, parts per million and bytes): the activation and CUDA-graph ratios
are the lower medians of printed / modelled over the logs that print them; non-torch memory
the lower median printed; then ``other_bytes`` the lower median of what the pool kvplan gives
with those still differs from the printed pool. One site is one GPU model, one release line
and one tensor-parallel size without pipeline parallelism: logs of several are refused, as is
a fit from fewer than ``MIN_LOGS`` logs. Each log's residual is reported before, after (in
sample) and held out (fitted on the other logs).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from statistics import median_low
from typing import TYPE_CHECKING, Any

from kvplan.arguments import as_path, as_sequence, as_str, wrong_type
from kvplan.engines.vllm_calibration import PPM, Calibration
from kvplan.errors import SpecError, UnitError
from kvplan.logs.rows import _DECIMAL, _find
from kvplan.logs.vllm import CONSUMED, read_start
from kvplan.units import GiB, abbreviate

if TYPE_CHECKING:
    from kvplan.engines.vllm_overhead import Overhead
    from kvplan.hardware.gpus import GPU
    from kvplan.logs.vllm import VllmStart
    from kvplan.model.spec import ModelSpec

__all__ = [
    "CALIBRATION_KIND",
    "MIN_LOGS",
    "CalibrationFit",
    "LogResidual",
    "calibrate",
    "calibration_from_dict",
    "calibration_to_dict",
    "calibration_yaml",
    "is_calibration_file",
    "load_calibration",
]

#: the fewest logs a site is fitted from: with fewer, a median is one log and nothing is held out
MIN_LOGS = 3
#: the ``kind`` a calibration file carries
CALIBRATION_KIND = "kvplan-vllm-calibration"
SCHEMA_VERSION = 1

_USAGE = re.compile(
    r"Actual usage is ([\d.]+) GiB for weight, ([\d.]+) GiB for peak activation,"
    r" ([\d.]+) GiB for non-torch memory, and ([\d.]+) GiB for CUDAGraph"
)
_PROFILING = re.compile(
    r"model weights take ([\d.]+)GiB; non_torch_memory takes ([\d.]+)GiB;"
    r" PyTorch activation peak memory takes ([\d.]+)GiB"
)


@dataclass(frozen=True, slots=True)
class _Log:
    """One log: its run, kvplan's modelled profile, and what it printed (bytes, None if not)."""

    name: str
    start: VllmStart
    modelled: Overhead
    activation_bytes: int | None
    non_torch_bytes: int | None
    cuda_graph_bytes: int | None
    available_bytes: int


@dataclass(frozen=True, slots=True)
class LogResidual:
    """One log's pool: printed, and kvplan's minus printed before, after and held out (bytes)."""

    name: str
    printed_bytes: int
    before_bytes: int
    after_bytes: int
    held_out_bytes: int


@dataclass(frozen=True, slots=True)
class CalibrationFit:
    """The fitted ``calibration`` and each log's residual (``residuals``, in the order given)."""

    calibration: Calibration
    residuals: tuple[LogResidual, ...]
    model_names: tuple[str, ...]


def _gib_bytes(text: str | None, name: str, path: str) -> int | None:
    """A figure printed in GiB (two decimals) as bytes, None when absent."""
    if text is None:
        return None
    if not _DECIMAL.fullmatch(text):
        raise SpecError(path, [f"{name} {abbreviate(text)} in the log: not a figure in GiB"])
    return round(Fraction(text) * GiB)


def _read(name: str, text: str, model: ModelSpec | str | None, gpu: GPU | str | None) -> _Log:
    from kvplan.engines import vllm

    start = read_start(text, model, gpu, name)
    if start.device is None:
        raise SpecError(
            name,
            [
                "prints no GPU memory (vLLM's DEBUG line 'Free memory on device'): pass --gpu"
                " NAME, or log at DEBUG level"
            ],
        )
    if start.config.kv_cache_memory_bytes is not None:
        raise SpecError(name, ["sets --kv-cache-memory: its pool was given, not profiled"])
    if start.config.pipeline_parallel_size > 1:
        raise SpecError(
            name,
            [
                f"pipeline_parallel_size {start.config.pipeline_parallel_size}: calibrate reads"
                " logs without pipeline parallelism (one worker prints its memory)"
            ],
        )
    available = _gib_bytes(
        _find(r"Available KV cache memory: ([\d.]+) GiB", text), "available KV cache memory", name
    )
    if available is None:
        raise SpecError(
            name, ["prints no 'Available KV cache memory: X GiB': nothing to calibrate on"]
        )
    usage, older, newer = _USAGE.search(text), _PROFILING.search(text), CONSUMED.search(text)
    activation = non_torch = None
    estimate = _find(r"Estimated CUDA graph memory: ([\d.]+) GiB total", text)
    graphs = _gib_bytes(estimate, "estimated CUDA graph memory", name)
    if usage is not None:
        activation = _gib_bytes(usage[2], "peak activation", name)
        non_torch = _gib_bytes(usage[3], "non-torch memory", name)
    elif older is not None:
        non_torch = _gib_bytes(older[2], "non-torch memory", name)
        activation = _gib_bytes(older[3], "peak activation", name)
    elif newer is not None:
        # 0.32's line: non-torch memory is what was consumed beyond the loaded weights, and the
        # peak holds the CUDA-graph estimate, separable only where the estimate is printed
        consumed = _gib_bytes(newer[1], "consumed memory", name)
        loaded = _gib_bytes(
            _find(r"Model loading took ([\d.]+) GiB", text), "model loading memory", name
        )
        if consumed is not None and loaded is not None and consumed >= loaded:
            non_torch = consumed - loaded
        peak = _gib_bytes(newer[2], "peak activation", name)
        if peak is not None and graphs is not None and peak >= graphs:
            activation = peak - graphs
    result = vllm.profile(start.spec, start.device, start.config)
    modelled = result.stages[-1].overhead
    return _Log(name, start, modelled, activation, non_torch, graphs, available)


def _site(log: _Log) -> tuple[str, str, int]:
    device = log.start.device
    return (
        "" if device is None else device.name,
        log.start.line,
        log.start.config.tensor_parallel_size,
    )


def _ratio(pairs: Sequence[tuple[int | None, int]]) -> int:
    """The lower median of printed / modelled in parts per million; 1 when no log prints it."""
    ratios = [
        printed * PPM // modelled
        for printed, modelled in pairs
        if printed is not None and modelled > 0
    ]
    return median_low(ratios) if ratios else PPM


def _pool(log: _Log, calibration: Calibration | None) -> int:
    """kvplan's pool for the log's run, with ``calibration`` (bytes)."""
    from kvplan.engines import vllm

    assert log.start.device is not None  # checked in _read
    cfg = replace(log.start.config, calibration=calibration)
    return vllm.profile(log.start.spec, log.start.device, cfg).available_bytes


def _fit(logs: Sequence[_Log]) -> Calibration:
    gpu, line, tp = _site(logs[0])
    printed = [log.non_torch_bytes for log in logs if log.non_torch_bytes is not None]
    terms = Calibration(
        gpu,
        line,
        tp,
        activation_ppm=_ratio(
            [(log.activation_bytes, log.modelled.activation_bytes) for log in logs]
        ),
        cuda_graph_ppm=_ratio(
            [(log.cuda_graph_bytes, log.modelled.cuda_graph_bytes) for log in logs]
        ),
        non_torch_bytes=median_low(printed) if printed else None,
        num_logs=len(logs),
    )
    other = median_low(_pool(log, terms) - log.available_bytes for log in logs)
    return replace(terms, other_bytes=other)


def calibrate(
    logs: Sequence[tuple[str, str]],
    *,
    model: ModelSpec | str | None = None,
    gpu: GPU | str | None = None,
) -> CalibrationFit:
    """Fit one site's ``Calibration`` from ``logs``, (name, text) pairs of vLLM start-up logs
    (see the module docstring); ``model`` and ``gpu`` replace what every log names. Raises
    SpecError naming the log that cannot be used, UnitError for too few logs or several sites."""
    what = "a list of (name, text) pairs of vLLM start-up logs"
    for pair in as_sequence(logs, "logs", what):
        if not isinstance(pair, tuple) or len(pair) != 2:
            raise wrong_type("logs", what, pair)
        as_str(pair[0], "logs", what)
        as_str(pair[1], "logs", what)
    if len(logs) < MIN_LOGS:
        raise UnitError(
            f"calibrate: {len(logs)} log{'s' if len(logs) != 1 else ''} given; a site is fitted"
            f" from at least {MIN_LOGS} start-up logs (one is held out at a time)"
        )
    read = [_read(name, text, model, gpu) for name, text in logs]
    first = _site(read[0])
    for log in read[1:]:
        if _site(log) != first:
            raise UnitError(
                f"calibrate: {log.name} ran {_words(_site(log))}, {read[0].name} {_words(first)};"
                " a calibration is one site's GPU, vLLM line and TP size"
            )
    calibration = _fit(read)
    residuals = []
    for i, log in enumerate(read):
        others = _fit([x for j, x in enumerate(read) if j != i])
        residuals.append(
            LogResidual(
                log.name,
                log.available_bytes,
                _pool(log, None) - log.available_bytes,
                _pool(log, calibration) - log.available_bytes,
                _pool(log, others) - log.available_bytes,
            )
        )
    models = tuple(dict.fromkeys(log.start.spec.name for log in read))
    return CalibrationFit(calibration, tuple(residuals), models)


def _words(site: tuple[str, str, int]) -> str:
    gpu, line, tp = site
    return f"vLLM {line} on {gpu or 'an unnamed GPU'} at TP {tp}"


_FIELDS: dict[str, tuple[int, int]] = {
    "tensor_parallel_size": (1, 1024),
    "activation_ppm": (0, 100 * PPM),
    "cuda_graph_ppm": (0, 100 * PPM),
    "non_torch_bytes": (0, 2**40),
    "other_bytes": (-(2**40), 2**40),
    "num_logs": (0, 10**6),
}


def calibration_to_dict(calibration: Calibration) -> dict[str, Any]:
    """The calibration file's content (``calibration_from_dict`` reads it back)."""
    c = calibration
    return {
        "kind": CALIBRATION_KIND,
        "schema_version": SCHEMA_VERSION,
        "gpu": c.gpu,
        "version_line": c.version_line,
        "tensor_parallel_size": c.tensor_parallel_size,
        "activation_ppm": c.activation_ppm,
        "cuda_graph_ppm": c.cuda_graph_ppm,
        "non_torch_bytes": c.non_torch_bytes,
        "other_bytes": c.other_bytes,
        "num_logs": c.num_logs,
    }


def calibration_from_dict(doc: object, path: str) -> Calibration:
    """A ``Calibration`` from a calibration file's parsed content; SpecError naming ``path``
    and the field for anything else (an unknown key, a wrong type, a figure out of range)."""
    if not isinstance(doc, dict):
        raise SpecError(path, ["expected a mapping of a kvplan calibration (kvplan calibrate)"])
    if doc.get("kind") != CALIBRATION_KIND:
        raise SpecError(
            path, [f"kind: expected {CALIBRATION_KIND!r} (written by kvplan calibrate)"]
        )
    if doc.get("schema_version") != SCHEMA_VERSION:
        raise SpecError(path, [f"schema_version: expected {SCHEMA_VERSION}"])
    allowed = {"kind", "schema_version", "gpu", "version_line", *_FIELDS}
    unknown = sorted(str(k) for k in doc if k not in allowed)
    if unknown:
        raise SpecError(
            path, [f"{abbreviate(unknown[0])}: unknown key; allowed: {', '.join(sorted(allowed))}"]
        )
    values: dict[str, Any] = {}
    for key in ("gpu", "version_line"):
        value = doc.get(key)
        if not isinstance(value, str) or not 0 < len(value) <= 64:
            raise SpecError(path, [f"{key}: expected a name of at most 64 characters"])
        values[key] = value
    for key, (low, high) in _FIELDS.items():
        value = doc.get(key)
        if value is None and key == "non_torch_bytes":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise SpecError(path, [f"{key}: expected an integer from {low:,} to {high:,}"])
        values[key] = value
    return Calibration(**values)


#: the first line of a calibration file kvplan writes (an earlier one is replaced without --force)
HEADER = (
    "# kvplan calibration of vLLM's budget terms (kvplan calibrate); plan --calibration reads it"
)


def calibration_yaml(fit: CalibrationFit) -> str:
    """The calibration file for ``fit``: YAML, one key a line, under a header naming the site."""
    lines = [HEADER, f"# {fit.calibration.site}; models: {', '.join(fit.model_names)}"]
    for key, value in calibration_to_dict(fit.calibration).items():
        shown = "null" if value is None else value if isinstance(value, int) else f"'{value}'"
        lines.append(f"{key}: {shown}")
    return "\n".join(lines) + "\n"


def load_calibration(path: str | Path) -> Calibration:
    """The ``Calibration`` in the file ``path`` (``calibration_yaml``'s format). Raises
    SpecError naming the file and the field."""
    from kvplan.validation import read_yaml

    doc, _ = read_yaml(as_path(path, "path"))
    return calibration_from_dict(doc, str(path))


def is_calibration_file(path: object) -> bool:
    """Whether ``path`` starts with the header kvplan writes (it may be replaced)."""
    from kvplan.files import head_contains

    return head_contains(str(path), HEADER)
