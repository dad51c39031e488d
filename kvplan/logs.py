"""Reconcile an engine's start-up log with kvplan: recover the settings, recompute, compare.

``reconcile(text)`` detects the engine (vLLM, SGLang, llama.cpp/ik_llama.cpp), reads the model,
the settings and the figures the engine printed, recomputes them with the engine profile, and
returns one row per component. A row is either a *rule* on a printed figure (reproduced, or
differs by how much: blocks from the printed memory, tokens and concurrency from the blocks,
cells, MiB), a printed figure kvplan recognises but could not check (*not read*, with the
reason), or a *modelled estimate* (weights, activation, non-torch memory, the pool), shown with
its residual. A log that checks nothing says so (``Reconciliation.status``): it is no proof.

A log is read with ``read_log``: a regular file (or standard input), its first 64 MiB (the
start-up lines come first), invalid UTF-8 replaced. Every number taken from it is checked
(digits, range) before use, so an edited or corrupted log is a SpecError naming the setting.
"""

from __future__ import annotations

import re
import sys
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Literal

from kvplan.arguments import as_gpu, as_spec
from kvplan.catalog import load_model
from kvplan.errors import (
    KvplanError,
    ModelNotFoundError,
    SpecError,
    UnitError,
    UnknownEngineError,
)
from kvplan.files import TEXT_LIMIT_BYTES, read_text
from kvplan.spec import MAX_TOKENS, ModelSpec
from kvplan.units import GiB, MiB, abbreviate

if TYPE_CHECKING:
    from kvplan.engines.vllm import VllmConfig, VllmResult
    from kvplan.hardware import GPU

#: Largest parallel size, block size, sequence or step count taken from a log.
_MAX_COUNT = 2**24
_MAX_PARALLEL = 4096
#: GiB figures are printed with two decimals; more digits than this are not a figure.
_DECIMAL = re.compile(r"[0-9]{1,12}(?:\.[0-9]{1,12})?")


def read_log(path: str) -> str:
    """The text of the log file ``path`` (``-``: standard input): at most its first
    ``TEXT_LIMIT_BYTES`` bytes, invalid UTF-8 replaced. Raises SpecError naming the file when
    it is not a regular file, cannot be read, or is binary; UnitError when ``path`` is not a
    str."""
    if not isinstance(path, str):
        raise UnitError(f"path: expected a log file's path or '-', got {type(path).__name__}")
    if path == "-":
        return sys.stdin.read(TEXT_LIMIT_BYTES)
    return read_text(path, truncate=True, errors="replace")


def _count(text: str | None, name: str, path: str, default: int, maximum: int = _MAX_COUNT) -> int:
    """A positive integer setting read from the log (``default`` when absent)."""
    if text is None:
        return default
    digits = text.replace(",", "").lstrip("0") or "0"
    if not digits.isdigit() or len(digits) > 15 or not 1 <= int(digits) <= maximum:
        raise SpecError(
            path, [f"{name} {abbreviate(text)} in the log: expected an integer 1 to {maximum:,}"]
        )
    return int(digits)


def _gib_figure(text: str | None, name: str, path: str) -> float | None:
    """A figure printed in GiB (``71.27``), or None when absent."""
    if text is None:
        return None
    if not _DECIMAL.fullmatch(text):
        raise SpecError(path, [f"{name} {abbreviate(text)} in the log: not a figure in GiB"])
    return float(text)


#: What reconcile says of one row.
Status = Literal["reproduced", "differs", "not read", "estimate"]

#: The printed figures each engine's rules check, named as the engine prints them.
_FIGURES = {
    "vllm": "'GPU KV cache size', 'Maximum concurrency' or 'num_gpu_blocks is'",
    "sglang": "'KV Cache is allocated. #tokens: ...'",
    "llama.cpp": "'size = ... MiB' or 'KV self size = ... MiB'",
    "ik_llama.cpp": "'KV self size = ... MiB'",
}


@dataclass(frozen=True, slots=True)
class Difference:
    """How far a printed figure is from kvplan's nearest value: ``amount`` = printed - kvplan
    in ``unit`` (tokens, blocks, x, MiB, GB, cells...), ``percent`` of kvplan's value (None when
    that is 0). 480,000 printed against 476,016: +3,984 tokens, +0.84%."""

    amount: Fraction
    unit: str
    percent: Fraction | None

    def describe(self) -> str:
        """``+3,984 tokens (+0.84%)``; decimals (x, MiB, GB) with two digits: ``+0.67x``."""
        if self.amount.denominator == 1 and self.unit not in ("x", "MiB", "GB", "GiB"):
            shown = f"{int(self.amount):+,} {self.unit}"
        else:
            shown = f"{float(self.amount):+.2f}{'' if self.unit == 'x' else ' '}{self.unit}"
        return shown + ("" if self.percent is None else f" ({float(self.percent):+.2f}%)")


def _difference(printed: Fraction, mine: Fraction, unit: str) -> Difference:
    amount = printed - mine
    return Difference(amount, unit, 100 * amount / mine if mine else None)


@dataclass(frozen=True, slots=True)
class Row:
    """One compared figure. ``reproduced``: True or False for a rule, None for a modelled
    estimate or a figure not read; ``not_read``: why a printed figure was not checked ("" for
    every other row); ``difference``: by how much a rule's figure differs (None otherwise)."""

    component: str
    printed: str
    kvplan: str
    residual: str
    reproduced: bool | None
    not_read: str = ""
    difference: Difference | None = None

    @property
    def status(self) -> Status:
        """``reproduced``, ``differs``, ``not read`` or ``estimate``."""
        if self.reproduced is not None:
            return "reproduced" if self.reproduced else "differs"
        return "not read" if self.not_read else "estimate"


def _rule(
    component: str, printed: str, mine: str, ok: bool, difference: Difference | None = None
) -> Row:
    """A checked figure: ``exact``, or what differs and by how much."""
    if ok:
        return Row(component, printed, mine, "exact", True)
    return Row(
        component,
        printed,
        mine,
        difference.describe() if difference else "differs",
        False,
        difference=difference,
    )


def _unread(component: str, printed: str, reason: str) -> Row:
    """A printed figure kvplan recognises but could not check, and why."""
    return Row(component, printed, "-", reason, None, not_read=reason)


@dataclass(frozen=True, slots=True)
class Reconciliation:
    engine: str
    engine_version: str
    model: str
    settings: dict[str, Any] = field(default_factory=dict)
    rows: tuple[Row, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def num_checked(self) -> int:
        """Printed figures a rule checked (reproduced or differs)."""
        return sum(1 for row in self.rows if row.reproduced is not None)

    @property
    def num_differ(self) -> int:
        """Printed figures a rule checked that differ from kvplan's."""
        return sum(1 for row in self.rows if row.reproduced is False)

    @property
    def num_not_read(self) -> int:
        """Printed figures kvplan recognised but could not check."""
        return sum(1 for row in self.rows if row.status == "not read")

    @property
    def reproduced(self) -> bool:
        """At least one printed figure checked, and every one reproduced (estimates carry no
        verdict; a figure not read is not a check)."""
        return self.num_checked > 0 and all(row.reproduced is not False for row in self.rows)

    @property
    def status(self) -> Literal["reproduced", "differs", "checked nothing"]:
        """The one answer: every checked figure reproduced, one differs, or nothing checked."""
        if self.num_checked == 0:
            return "checked nothing"
        return "reproduced" if self.reproduced else "differs"

    @property
    def checked_nothing(self) -> str:
        """Why no figure was checked ("" when one was): the figures not read and their
        reasons, else the figures kvplan looks for in this engine's logs."""
        if self.num_checked:
            return ""
        unread = [row for row in self.rows if row.status == "not read"]
        if unread:
            why: dict[str, list[str]] = {}
            for row in unread:
                why.setdefault(row.not_read, []).append(row.component)
            reasons = "; ".join(f"{', '.join(names)}: {reason}" for reason, names in why.items())
            return (
                f"{len(unread)} printed figure{'s' if len(unread) > 1 else ''} not read ({reasons})"
            )
        looked_for = _FIGURES.get(self.engine, "none")
        return f"the log prints none of the figures kvplan recomputes ({looked_for})"


def detect_engine(text: str) -> str:
    """``vllm``, ``sglang``, ``llama.cpp`` or ``ik_llama.cpp``, from the lines the log holds."""
    if (
        "LLM engine" in text
        or "num_gpu_blocks" in text
        or "vLLM API server version" in text
        or re.search(r"\b(GPU|CPU|XPU) KV cache size: [\d,]+ tokens", text)
    ):
        return "vllm"
    if "KV Cache is allocated" in text:
        return "sglang"
    if "llama_kv_cache_init" in text or "c^KV" in text or "llama_new_context_with_model" in text:
        return "ik_llama.cpp"
    if "llama_kv_cache" in text or "llama_context:" in text:
        return "llama.cpp"
    raise KvplanError(
        "cannot tell which engine wrote this log: expected vLLM's 'GPU KV cache size', SGLang's"
        " 'KV Cache is allocated' or llama.cpp's 'llama_kv_cache' lines"
    )


def reconcile(
    text: str,
    *,
    model: ModelSpec | str | None = None,
    gpu: GPU | str | None = None,
    path: str = "<log>",
) -> Reconciliation:
    """Recompute the figures of the start-up log ``text`` (see the module docstring).

    ``model`` and ``gpu`` (a spec or name, a GPU or name) replace what the log names; ``path``
    names the log in errors. Raises SpecError for a log whose figures cannot be read or that
    names no model, KvplanError for a log of no known engine, UnitError for an argument of the
    wrong type."""
    if not isinstance(text, str):
        raise UnitError(f"text: expected the log's text as a str, got {type(text).__name__}")
    if not isinstance(path, str):
        raise UnitError(f"path: expected a str naming the log, got {type(path).__name__}")
    engine = detect_engine(text)
    match engine:
        case "vllm":
            return _vllm(text, model, gpu, path)
        case "sglang":
            return _sglang(text, model, path)
        case _:
            return _llamacpp(text, engine, model, path)


def _find(pattern: str, text: str) -> str | None:
    m = re.search(pattern, text)
    return m.group(1) if m else None


def _model(
    found: str | None, given: ModelSpec | str | None, path: str, text: str = ""
) -> ModelSpec:
    """The model: ``given``, else the name the log prints (read by ``kvplan.names``), else
    the catalog model whose shapes the log prints (``kvplan.log_models``)."""
    from kvplan.log_models import identify_model

    if given is not None:
        return as_spec(given)
    if found is None:
        return identify_model(text, path)
    error: ModelNotFoundError | None = None
    try:
        return load_model(found)
    except ModelNotFoundError as e:
        error = e
    except OSError:  # a name too long to probe as a path: no catalog name either
        pass
    if text:
        try:
            return identify_model(text, path)
        except SpecError:
            pass
    close = f"; did you mean {', '.join(error.suggestions)}?" if error and error.suggestions else ""
    raise SpecError(
        path,
        [
            f"model {abbreviate(found)} in the log is not in the catalog{close} (pass --model:"
            " a catalog name, an HF id or a spec file)"
        ],
    )


def _gib(value: int) -> str:
    return f"{value / GiB:.2f} GiB"


def _estimate_row(component: str, printed_gib: float | None, modelled: int) -> Row:
    if printed_gib is None:
        return Row(component, "-", _gib(modelled), "-", None)
    residual = modelled / GiB - printed_gib
    share = f" ({100 * residual / printed_gib:+.1f}%)" if printed_gib else ""
    return Row(
        component, f"{printed_gib:.2f} GiB", _gib(modelled), f"{residual:+.2f} GiB{share}", None
    )


def _vllm(
    text: str, given_model: ModelSpec | str | None, given_gpu: GPU | str | None, path: str
) -> Reconciliation:
    from kvplan.engines import vllm

    version = (
        _find(r"LLM engine \(v([\d.]+)", text)
        or _find(r"vLLM API server version v?([\d.]+)", text)
        or vllm.DEFAULT_VERSION
    ).strip(".")
    try:
        choice = vllm.resolve_version(version)
    except UnknownEngineError:
        choice = vllm.resolve_version(None)
    spec = _model(
        _find(r"model='([^']+)'", text) or _find(r"'model': '([^']+)'", text), given_model, path
    )
    settings = _vllm_settings(text, spec, path)
    device = _vllm_device(text, given_gpu, path, settings["kv_cache_memory_bytes"])
    flags = _vllm_flags(text, choice.line)
    cfg = vllm.config(
        settings["max_model_len"],
        gpu_memory_utilization=settings["gpu_memory_utilization"],
        tensor_parallel_size=settings["tensor_parallel_size"],
        pipeline_parallel_size=settings["pipeline_parallel_size"],
        dtype=settings["dtype"] if settings["dtype"] != spec.torch_dtype else None,
        kv_cache_dtype=settings["kv_cache_dtype"],
        quantization=settings["quantization"],
        max_num_batched_tokens=settings["max_num_batched_tokens"],
        max_num_seqs=settings["max_num_seqs"],
        block_size=settings["block_size"],
        version=choice.line,
        kv_cache_memory_bytes=settings["kv_cache_memory_bytes"],
        **flags,
    )
    settings.update(flags)
    notes: list[str] = [choice.note] if choice.note else []
    available_text = _find(r"Available KV cache memory: ([\d.]+) GiB", text)
    available = _gib_figure(available_text, "available KV cache memory", path)
    rows: list[Row] = []
    result = None if device is None else vllm.profile(spec, device, cfg)
    if result is not None:
        rows.extend(_vllm_memory_rows(text, result, path))
        rows.append(_estimate_row("available KV cache memory", available, result.available_bytes))
    else:
        notes.append(
            "the log prints no GPU memory (vLLM's DEBUG line 'Free memory on device'): the"
            " figures are checked from the printed pool; pass --gpu NAME for the end-to-end"
            " estimate"
        )
    pool = _vllm_rules(text, spec, cfg, available_text, path, rows, notes)
    if result is not None:
        rows.append(_vllm_end_to_end(result.num_gpu_blocks, pool))
    return Reconciliation("vllm", version, spec.name, settings, tuple(rows), tuple(notes))


def _vllm_end_to_end(modelled: int, pool: tuple[int, int] | None) -> Row:
    """kvplan's blocks from the GPU's memory next to the blocks the log prints or pins
    (a range when the printed two decimals of GiB allow several), with no verdict."""
    if pool is None:
        return Row("num_gpu_blocks (end to end)", "-", f"{modelled:,}", "-", None)
    low, high = pool
    shown = f"{low:,}" if low == high else f"{low:,}..{high:,}"
    nearest = min(max(modelled, low), high)
    share = f"{100 * (modelled / nearest - 1):+.2f}%" if nearest else "-"
    return Row("num_gpu_blocks (end to end)", shown, f"{modelled:,}", share, None)


def _vllm_device(
    text: str, given_gpu: GPU | str | None, path: str, kv_cache_memory_bytes: int | None = None
) -> GPU | None:
    """The GPU named by ``--gpu``, else the catalog GPU whose memory the log prints (to the
    printed two decimals of GiB), else a custom device of that memory; a log whose KV cache
    memory was given in bytes (``kv_cache_memory_bytes``, the CPU build) needs none. None
    when the log prints no GPU memory (an INFO-level log): no end-to-end estimate then."""
    from kvplan.hardware import custom_gpu, list_gpus

    total_text = _find(r"Free memory on device \([\d.]+/([\d.]+) GiB\)", text)
    total = _gib_figure(total_text, "total GPU memory", path)
    if given_gpu is not None:
        return as_gpu(given_gpu)
    if total is not None:
        same = [g for g in list_gpus() if f"{g.memory_bytes / GiB:.2f}" == total_text]
        return same[0] if same else custom_gpu(int(total * GiB))
    if kv_cache_memory_bytes is not None:
        return custom_gpu(kv_cache_memory_bytes)
    return None


def _vllm_settings(text: str, spec: ModelSpec, path: str) -> dict[str, Any]:
    """The vLLM settings the log prints, each checked, with vLLM's defaults where absent."""
    utilization = (
        _find(r"Desired GPU memory utilization is \(([\d.]+),", text)
        or _find(r"'gpu_memory_utilization': ([\d.]+)", text)
        or "0.9"
    )
    dtype = _find(r"dtype=torch\.(\w+)", text)
    kv = _find(r"kv_cache_dtype=(\w+)", text)
    quant = _find(r"quantization=(\w+)", text)
    length = _count(
        _find(r"max_seq_len=(\d+)", text)
        or _find(r"'max_model_len': (\d+)", text)
        or _find(r"Maximum concurrency for ([\d,]+) tokens per request", text),
        "max_model_len",
        path,
        spec.max_position_embeddings or 0,
        MAX_TOKENS,
    )

    kv_bytes = _find(r"'kv_cache_memory_bytes': (\d+)", text)

    def parallel(name: str) -> int:
        return _count(_find(name + r"=(\d+)", text), name, path, 1, _MAX_PARALLEL)

    def count(name: str, default: int) -> int:
        return _count(_find(f"'{name}': " + r"(\d+)", text), name, path, default)

    return {
        "max_model_len": length,
        "gpu_memory_utilization": utilization,
        "tensor_parallel_size": parallel("tensor_parallel_size"),
        "pipeline_parallel_size": parallel("pipeline_parallel_size"),
        "dtype": None if dtype in (None, "auto") else dtype,
        "kv_cache_dtype": None if kv in (None, "auto") else kv,
        "quantization": None if quant in (None, "None") else quant,
        "max_num_batched_tokens": count("max_num_batched_tokens", 8192),
        "max_num_seqs": count("max_num_seqs", 1024),
        "block_size": count("block_size", 16),
        "kv_cache_memory_bytes": (
            _count(kv_bytes, "kv_cache_memory_bytes", path, 0, 2**50) if kv_bytes else None
        ),
    }


def _vllm_flags(text: str, line: str) -> dict[str, Any]:
    """vLLM's cache flags as the log prints them (from 0.32: prefix caching in the engine
    config line; async scheduling among the non-default arguments, else off on the CPU
    build); absent ones keep the line's defaults."""
    if line not in ("0.27", "0.28", "0.29", "0.32"):
        return {}
    flags: dict[str, Any] = {}
    prefix = _find(r"enable_prefix_caching=(True|False)", text) or _find(
        r"'enable_prefix_caching': (True|False)", text
    )
    if prefix is not None:
        flags["enable_prefix_caching"] = prefix == "True"
    scheduling = _find(r"'async_scheduling': (True|False)", text)
    if scheduling is not None:
        flags["async_scheduling"] = scheduling == "True"
    elif "device_config=cpu" in text or re.search(r"\bCPU KV cache size", text):
        flags["async_scheduling"] = False  # vllm/platforms/cpu.py turns it off
    eager = _find(r"enforce_eager=(True|False)", text)
    if eager is not None:
        flags["enforce_eager"] = eager == "True"  # no CUDA graphs, none of their memory
    override = _find(r"num_gpu_blocks_override=(\d+)", text)
    if override is not None:
        flags["num_gpu_blocks_override"] = int(override)
    return flags


def _vllm_memory_rows(text: str, result: VllmResult, path: str) -> list[Row]:
    """The memory vLLM says it measured (weights, activation, non-torch, CUDA graphs) next to
    kvplan's estimates for the sampling stage, the only one without pipeline parallelism."""
    first = result.stages[-1].overhead
    usage = re.search(
        r"Actual usage is ([\d.]+) GiB for weight, ([\d.]+) GiB for peak activation,"
        r" ([\d.]+) GiB for non-torch memory, and ([\d.]+) GiB for CUDAGraph",
        text,
    )
    printed = (
        [_gib_figure(x, "memory usage", path) for x in usage.groups()] if usage else [None] * 4
    )
    return [
        _estimate_row("weights", printed[0], first.weights_bytes),
        _estimate_row("peak activation", printed[1], first.activation_bytes),
        _estimate_row("non-torch memory", printed[2], first.non_torch_bytes),
        _estimate_row("CUDA graphs (subtracted from v0.21.0)", printed[3], first.cuda_graph_bytes),
    ]


#: Where the printed tokens and concurrency can come from, when the log pins no block count.
_NO_POOL = (
    "the log prints no pool to derive it from ('Available KV cache memory',"
    " kv_cache_memory_bytes or num_gpu_blocks)"
)
_PIPELINE_POOL = (
    "with pipeline parallelism one worker prints its memory while the minimum over stages"
    " sets the blocks, and the log prints no num_gpu_blocks (a DEBUG line)"
)


def _vllm_rules(
    text: str,
    spec: ModelSpec,
    cfg: VllmConfig,
    available_text: str | None,
    path: str,
    rows: list[Row],
    notes: list[str],
) -> tuple[int, int] | None:
    """Check vLLM's printed block count, token capacity and concurrency against the pool the
    log prints; adds their rows and returns the block counts the log pins (one, or the range the
    printed two decimals of GiB allow), None when it pins none.

    The pool is, in this order: the printed ``num_gpu_blocks`` (a DEBUG line), the blocks of
    ``kv_cache_memory_bytes``, or the blocks ``Available KV cache memory: A GiB`` allows: vLLM
    prints ``A = bytes / 2^30`` to two decimals, so the bytes lie in ``[(A - 0.005) GiB,
    (A + 0.005) GiB]`` and the blocks in ``low..high`` (``bytes // page // layers per group``).
    Llama 3.1 8B, 58.11 GiB, 65,536 B pages, 32 layers: 58.105 x 512 = 29,749.76 and 58.115 x
    512 = 29,754.88, so 29,749..29,754 blocks; at 512 blocks a request that prints 475,984 to
    476,064 tokens (blocks x 8,192 // 512) and 58.10x or 58.11x."""
    from kvplan.engines import vllm

    printed_blocks_text = _find(r"num_gpu_blocks is: (\d+)", text)
    printed = (
        _count(printed_blocks_text, "num_gpu_blocks", path, 0, 2**40)
        if printed_blocks_text
        else None
    )
    pool: tuple[int, int] | None = None
    reason = _NO_POOL
    if cfg.kv_cache_memory_bytes is not None:
        given = vllm.from_available(spec, cfg.kv_cache_memory_bytes, cfg).num_gpu_blocks
        pool = (given, given)  # the pool was given to the byte: no rounding to undo
        if printed is not None:
            ok = printed == given
            rows.append(
                _rule(
                    "num_gpu_blocks (from kv_cache_memory_bytes)",
                    f"{printed:,}",
                    f"{given:,}",
                    ok,
                    _difference(Fraction(printed), Fraction(given), "blocks"),
                )
            )
    elif available_text is not None:
        gib = Fraction(available_text)
        low_bytes = max(0, int((gib - Fraction(1, 200)) * GiB))
        low = vllm.from_available(spec, low_bytes, cfg).num_gpu_blocks
        high = vllm.from_available(spec, int((gib + Fraction(1, 200)) * GiB), cfg).num_gpu_blocks
        if cfg.pipeline_parallel_size == 1:
            pool = (low, high)
        else:
            reason = _PIPELINE_POOL
        if printed is not None:
            ok = low <= printed <= high
            if not ok and cfg.pipeline_parallel_size > 1:
                notes.append(
                    "with pipeline parallelism one worker prints its memory while the"
                    " minimum over stages sets the blocks"
                )
            nearest = min(max(printed, low), high)
            off = None if ok else _difference(Fraction(printed), Fraction(nearest), "blocks")
            rows.append(
                Row(
                    "num_gpu_blocks (from the printed memory)",
                    f"{printed:,}",
                    f"{low:,}..{high:,}",
                    "in range" if off is None else f"outside: {off.describe()}",
                    ok,
                    difference=off,
                )
            )
    elif printed is not None:
        rows.append(
            _unread(
                "num_gpu_blocks (from the printed memory)",
                f"{printed:,}",
                "the log prints no 'Available KV cache memory' or kv_cache_memory_bytes",
            )
        )
    if printed is not None:
        pool = (printed, printed)  # tokens and concurrency follow from the blocks alone
    layout = vllm.from_available(spec, 0, cfg)  # pages, groups and blocks a request need
    figures, pool = _vllm_figures(text, layout, pool, reason, path)
    rows.extend(figures)
    return pool


def _vllm_printed(layout: VllmResult, num_blocks: int) -> tuple[int, Fraction]:
    """What vLLM prints for a pool of ``num_blocks``: the token capacity and the concurrency
    rounded to its two printed decimals (the rules of ``kvplan.engines.vllm._result``)."""
    from kvplan.engines.vllm_versions import TOKENS_FROM_CONCURRENCY

    cfg = layout.config
    if cfg.version == "0.8":
        tokens = num_blocks * layout.block_size
        concurrency = Fraction(tokens, cfg.max_model_len)
    else:
        concurrency = Fraction(num_blocks, layout.blocks_per_request)
        if cfg.version in TOKENS_FROM_CONCURRENCY:  # int(concurrency x max_model_len)
            tokens = num_blocks * cfg.max_model_len // layout.blocks_per_request
        else:
            tokens = num_blocks // layout.num_groups * layout.block_size
    return tokens, Fraction(f"{float(concurrency):.2f}")


def _match(
    pool: tuple[int, int], value: Callable[[int], Fraction], printed: Fraction
) -> tuple[tuple[int, int] | None, Fraction]:
    """The block counts of ``pool`` whose figure ``value`` (non-decreasing in the blocks) is
    ``printed`` (None when none is), and the figure nearest to ``printed``."""
    blocks = range(pool[0], pool[1] + 1)
    first = bisect_left(blocks, printed, key=value)
    last = bisect_right(blocks, printed, key=value)
    if first < last:
        return (blocks[first], blocks[last - 1]), printed
    near = [value(blocks[i]) for i in (first - 1, first) if 0 <= i < len(blocks)]
    return None, min(near, key=lambda v: abs(v - printed))


def _vllm_figures(
    text: str,
    layout: VllmResult,
    pool: tuple[int, int] | None,
    reason: str,
    path: str,
) -> tuple[list[Row], tuple[int, int] | None]:
    """The printed token capacity and concurrency against those of the pool's block counts:
    reproduced when some block count of the pool prints both (the tokens narrow the counts the
    concurrency is checked on), else by how much they differ from the nearest; not read, with
    ``reason``, when the log pins no pool. A further engine's differing figures are not read.
    Returns the rows and the block counts that print what the log printed (else the pool)."""
    sizes = list(dict.fromkeys(re.findall(r"KV cache size: ([\d,]+) tokens", text)))
    concurrencies = list(
        dict.fromkeys(
            re.findall(r"Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)x", text)
        )
    )
    rows: list[Row] = []
    if sizes:
        tokens = Fraction(_count(sizes[0], "GPU KV cache size", path, 0, 2**50))
        if pool is None:
            rows.append(_unread("GPU KV cache size (tokens)", sizes[0], reason))
        else:
            matched, mine = _match(pool, lambda b: Fraction(_vllm_printed(layout, b)[0]), tokens)
            shown = (
                f"{int(mine):,}"
                if matched
                else _span(pool, lambda b: f"{_vllm_printed(layout, b)[0]:,}")
            )
            rows.append(
                _rule(
                    "GPU KV cache size (tokens)",
                    sizes[0],
                    shown,
                    matched is not None,
                    _difference(tokens, mine, "tokens"),
                )
            )
            pool = matched or pool
    if concurrencies:
        if not _DECIMAL.fullmatch(concurrencies[0]):
            raise SpecError(
                path,
                [f"maximum concurrency {abbreviate(concurrencies[0])} in the log: not a figure"],
            )
        concurrency = Fraction(concurrencies[0])
        if pool is None:
            rows.append(_unread("maximum concurrency", f"{concurrencies[0]}x", reason))
        else:
            matched, mine = _match(pool, lambda b: _vllm_printed(layout, b)[1], concurrency)
            shown = (
                f"{float(mine):.2f}x"
                if matched
                else _span(pool, lambda b: f"{float(_vllm_printed(layout, b)[1]):.2f}x")
            )
            rows.append(
                _rule(
                    "maximum concurrency",
                    f"{concurrencies[0]}x",
                    shown,
                    matched is not None,
                    _difference(concurrency, mine, "x"),
                )
            )
            pool = matched or pool
    further = "a further engine's figure (data parallel or a restart): kvplan checks the first"
    rows.extend(_unread("GPU KV cache size (tokens)", s, further) for s in sizes[1:])
    rows.extend(_unread("maximum concurrency", f"{c}x", further) for c in concurrencies[1:])
    return rows, pool


def _span(pool: tuple[int, int], shown: Callable[[int], str]) -> str:
    """A figure over the pool's block counts: ``476,016``, or ``475,984..476,064``."""
    low, high = shown(pool[0]), shown(pool[1])
    return low if low == high else f"{low}..{high}"


_SGLANG_POOL = re.compile(
    r"#tokens: (\d+), (?:K size: ([\d.]+) GB, V size: ([\d.]+) GB|KV size: ([\d.]+) GB)"
)


def _sglang(text: str, given_model: ModelSpec | str | None, path: str) -> Reconciliation:
    from kvplan.engines import sglang

    found = _find(r"--model(?:-path)?[ =](\S+)", text)
    if found is not None and found.startswith(("/", ".", "~")):
        found = found.rstrip("/").rsplit("/", 1)[-1]  # a local folder: its name
    spec = _model(found, given_model, path)
    tp = _count(_find(r"--tp(?:-size)?[ =](\d+)", text), "--tp", path, 1, _MAX_PARALLEL)
    page = _count(_find(r"--page-size[ =](\d+)", text), "--page-size", path, 1)
    kv_dtype = _find(r"--kv-cache-dtype[ =](\S+)", text)
    rows: list[Row] = []
    first_tokens: int | None = None
    for line in dict.fromkeys(re.findall(r"KV Cache is allocated\.?.*", text)):
        m = _SGLANG_POOL.search(line)
        if m is None:
            rows.append(
                _unread(
                    "KV Cache is allocated",
                    abbreviate(line.split("allocated", 1)[-1].strip(". ")),
                    "kvplan reads '#tokens: N, K size: X GB, V size: Y GB' or"
                    " '#tokens: N, KV size: X GB'",
                )
            )
            continue
        tokens = _count(m.group(1), "#tokens", path, 0, MAX_TOKENS)
        first_tokens = tokens if first_tokens is None else first_tokens
        k_bytes, v_bytes = sglang.pool_bytes(
            spec, tokens, tp=tp, kv_cache_dtype=kv_dtype, page_size=page
        )
        mla = m.group(4) is not None
        mine = sglang.format_log_line(
            tokens, k_bytes + v_bytes if mla else k_bytes, None if mla else v_bytes
        ).split("allocated. ", 1)[-1]
        printed = m.group(0)
        rows.append(
            _rule(
                "KV Cache is allocated",
                printed,
                mine,
                printed == mine,
                _line_difference(printed, mine),
            )
        )
    rows.extend(
        _unread(
            "Mamba Cache is allocated",
            abbreviate(line.split("allocated", 1)[-1].strip(". ")),
            "kvplan's SGLang profile does not size the Mamba state pool",
        )
        for line in dict.fromkeys(re.findall(r"Mamba Cache is allocated\.?.*", text))
    )
    settings = {"tp": tp, "page_size": page, "kv_cache_dtype": kv_dtype, "tokens": first_tokens}
    return Reconciliation("sglang", sglang.SGLANG_VERSION, spec.name, settings, tuple(rows))


#: A figure inside a printed line and the word after it: ``2048.00 MiB``, ``16384 cells``;
#: digits inside a name (``f16``, ``q8_0``) are no figure.
_LINE_FIGURE = re.compile(r"(?<![\w.])([0-9]{1,15}(?:\.[0-9]{1,12})?)(?![\w.])\s*([A-Za-z]*)")


def _line_difference(printed: str, mine: str) -> Difference | None:
    """The first figure where a printed line and kvplan's differ: ``size = 2049.00 MiB`` against
    ``size = 2048.00 MiB`` is +1.00 MiB (+0.05%); None when the lines hold the same figures
    (they differ in words or spacing) or not the same number of them."""
    theirs, ours = _LINE_FIGURE.findall(printed), _LINE_FIGURE.findall(mine)
    if len(theirs) != len(ours):
        return None
    for (value, unit), (my_value, _) in zip(theirs, ours, strict=True):
        if Fraction(value) != Fraction(my_value):
            return _difference(Fraction(value), Fraction(my_value), unit or "")
    return None


def _llamacpp(
    text: str, fork: str, given_model: ModelSpec | str | None, path: str
) -> Reconciliation:
    from kvplan.engines import llamacpp

    name = _find(r"general\.name\s+=\s+(.+)", text)
    hub = _find(r"-hf (\S+)", text)
    if name is None and hub is not None:  # llama.cpp -hf org/name-GGUF
        name = hub.rsplit("/", 1)[-1].removesuffix("-GGUF").removesuffix("-gguf")
    spec = _model(None if name is None else name.strip(), given_model, path, text)
    settings = _llamacpp_settings(text, path)
    result = llamacpp.kv_cache(
        spec,
        n_ctx=settings["n_ctx"],
        n_seq_max=settings["n_seq_max"],
        n_ubatch=settings["n_ubatch"],
        cache_type_k=settings["type_k"],
        cache_type_v=settings["type_v"],
        flash_attn=settings["flash_attn"],
        kv_unified=settings["kv_unified"],
        build=settings["build"],
        fork=fork,
    )
    rows = _llamacpp_line_rows(text, result.log_lines)
    total_mib = result.kv_cache_bytes / MiB
    rows.append(
        Row("KV cache bytes", "-", f"{result.kv_cache_bytes:,} B ({total_mib:.2f} MiB)", "-", None)
    )
    return Reconciliation(
        fork, str(settings["build"] or "unknown"), spec.name, settings, tuple(rows)
    )


def _llamacpp_settings(text: str, path: str) -> dict[str, Any]:
    """The llama.cpp settings the log prints (build, context, sequences, ubatch, flash
    attention, unified cache, cache types), each checked, with its defaults where absent."""
    build = _find(r"build: (\d+)", text) or _build_from_format(text)
    n_ctx_text = _find(r"n_ctx\s+= (\d+)", text) or _find(r"--ctx-size (\d+)", text)
    if n_ctx_text is None:
        raise SpecError(path, ["no n_ctx in the log"])
    n_ctx = _count(n_ctx_text, "n_ctx", path, 0, MAX_TOKENS)
    fa = _find(r"flash_attn\s+= (\w+)", text)
    types = re.search(r"K \((\w+)\)[^V]*V \((\w+)\)", text) or re.search(
        r"type_k = '(\w+)', type_v = '(\w+)'", text
    )
    c_kv = _find(r"c\^KV \((\w+)\)", text)
    return {
        "build": _count(build, "build", path, 0, 10**9) if build else None,
        "n_ctx": n_ctx,
        "n_seq_max": _count(_find(r"n_seq_max\s+= (\d+)", text), "n_seq_max", path, 1),
        "n_ubatch": _count(_find(r"n_ubatch\s+= (\d+)", text), "n_ubatch", path, 512),
        "flash_attn": fa not in ("0", "false", "disabled"),
        "kv_unified": _find(r"kv_unified\s+= (\w+)", text) == "true",
        "type_k": types.group(1) if types else (c_kv or "f16"),
        "type_v": types.group(2) if types else (c_kv or "f16"),
    }


#: A printed llama.cpp line kvplan recomputes: the cache size lines (``size = ... MiB (...
#: cells ...)``, ``KV self size = ...``) and the cells of each ``creating ... KV cache`` line.
_LLAMACPP_SIZE = re.compile(r"\bsize\s+=|KV self size")  # not kv_size = (a setting)


def _llamacpp_key(line: str) -> tuple[str, str]:
    """What pairs a printed line with kvplan's: the function that prints it and the words
    before its first ``=`` (``('llama_kv_cache', 'size')``, ``('llama_kv_cache_iswa',
    'creating SWA KV cache, size')``)."""
    tag, _, body = line.strip().partition(": ")
    return tag.strip(), " ".join(body.split("=", 1)[0].split())


def _llamacpp_line_rows(text: str, log_lines: tuple[str, ...]) -> list[Row]:
    """Each size line the log prints next to the line kvplan prints in its place (the n-th line
    of the same function and words): reproduced, or differs by its first differing figure; a
    printed line kvplan has none for, and each device's KV buffer line, is not read. When the
    log prints some size line, one of kvplan's it lacks differs."""
    printed_lines = [
        line.strip()
        for line in text.splitlines()
        if _LLAMACPP_SIZE.search(line) and ": " in line and "buffer" not in line
    ]
    mine: dict[tuple[str, str], list[str]] = {}
    for line in log_lines:
        if _LLAMACPP_SIZE.search(line):
            mine.setdefault(_llamacpp_key(line), []).append(line.split(": ", 1)[-1].strip())
    rows = []
    for line in printed_lines:
        body = line.split(": ", 1)[-1].strip()
        mine_of_kind = mine.get(_llamacpp_key(line), [])
        if not mine_of_kind:
            rows.append(
                _unread(
                    "KV cache line",
                    body,
                    f"kvplan prints no '{_llamacpp_key(line)[0]}: {_llamacpp_key(line)[1]} ='"
                    " line for this model, build and settings",
                )
            )
            continue
        ours = mine_of_kind.pop(0)
        ok = body == ours
        rows.append(_rule("KV cache line", body, ours, ok, _line_difference(body, ours)))
    if printed_lines:  # a log cut before its cache lines prints none: nothing to miss
        rows.extend(
            Row("KV cache line", "-", ours, "the log prints no such line", False)
            for left in mine.values()
            for ours in left
        )
    rows.extend(
        _unread(
            "KV buffer",
            line.split(": ", 1)[-1].strip(),
            "one device's buffer (split by the layers it holds, padded by the backend):"
            " kvplan checks the size line",
        )
        for line in text.splitlines()
        if re.search(r"KV buffer size\s*=", line)
    )
    return rows


def _build_from_format(text: str) -> str | None:
    """A llama.cpp build its log format pins, for logs that lack the ``build:`` line: the
    total moved from ``llama_context: KV self size`` (to b5261) to ``llama_kv_cache_unified:
    KV self size`` (b5262-b5440), then to ``size = ... (cells, layers, seqs)`` (b5441 on)."""
    if "llama_kv_cache_unified: KV self size" in text:
        return "5400"
    if "llama_context: KV self size" in text:
        return "5000"
    return None
