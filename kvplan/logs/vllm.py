"""Reconcile a vLLM start-up log: its settings, its memory lines and the figures its pool
gives (blocks, tokens, concurrency), each checked against kvplan's vLLM profile."""

from __future__ import annotations

import json
import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from kvplan.errors import (
    KvplanError,
    SpecError,
    UnknownEngineError,
)
from kvplan.hardware.lookup import as_gpu
from kvplan.model.limits import MAX_TOKENS
from kvplan.model.spec import ModelSpec
from kvplan.units import GiB, abbreviate

if TYPE_CHECKING:
    from kvplan.engines.vllm import VllmResult
    from kvplan.engines.vllm_config import VllmConfig
    from kvplan.engines.vllm_speculative import Speculative
    from kvplan.hardware.gpus import GPU

#: Largest parallel size, block size, sequence or step count taken from a log.
from kvplan.logs.rows import (
    _DECIMAL,
    _MAX_PARALLEL,
    Reconciliation,
    Row,
    _count,
    _difference,
    _estimate_row,
    _find,
    _gib_figure,
    _model,
    _rule,
    _unread,
)


@dataclass(frozen=True, slots=True)
class VllmStart:
    """What a vLLM start-up log says of its run: the version it prints (or None), the line
    read with, the model, the settings, the GPU (None when the log prints no GPU memory) and
    the config kvplan profiles, with the note on the line when it is not the printed one."""

    printed_version: str | None
    line: str
    note: str
    spec: ModelSpec
    settings: dict[str, Any]
    device: GPU | None
    config: VllmConfig
    speculative_note: str = ""  # a speculative config the log runs that kvplan cannot read


def read_start(
    text: str, given_model: ModelSpec | str | None, given_gpu: GPU | str | None, path: str
) -> VllmStart:
    """The run a vLLM log describes (``VllmStart``); ``given_model`` and ``given_gpu`` replace
    what it names. Raises SpecError naming ``path`` for a figure that cannot be read."""
    from kvplan.engines import vllm

    printed = _find(r"LLM engine \(v([\d.]+)", text) or _find(
        r"vLLM API server version v?([\d.]+)", text
    )
    version = (printed or vllm.DEFAULT_VERSION).strip(".")
    try:
        choice = vllm.resolve_version(version)
    except UnknownEngineError:
        newest = vllm.resolve_version(None)
        why = f"prints version {abbreviate(printed)}, which no modelled line covers"
        choice = replace(newest, note=f"the log {why}: read with vLLM {newest.line}'s rules")
    else:
        if printed is None:  # say so: the rules below are the newest line's
            why = "prints no vLLM version"
            choice = replace(choice, note=f"the log {why}: read with vLLM {choice.line}'s rules")
    spec = _model(
        _find(r"model='([^']+)'", text) or _find(r"'model': '([^']+)'", text), given_model, path
    )
    settings = _vllm_settings(text, spec, path)
    device = _vllm_device(text, given_gpu, path, settings["kv_cache_memory_bytes"])
    flags = _vllm_flags(text, choice.line)
    speculative, speculative_note = _speculative(text, choice.line)
    if speculative is not None:
        flags["speculative"] = speculative
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
    if speculative is not None:
        k = speculative.num_speculative_tokens
        settings["speculative"] = f"{speculative.method}, {k} tokens" if k else speculative.method
    return VllmStart(
        printed, choice.line, choice.note, spec, settings, device, cfg, speculative_note
    )


#: the engine config line's speculative decoding, as vLLM prints it (v0.10 on)
_SPECULATIVE = re.compile(
    r"speculative_config=SpeculativeConfig\(method='([\w-]{1,40})',"
    r" model=(?:'([^']{0,300})'|None), num_spec_tokens=(\d{1,6})\)"
)


def _speculative(text: str, line: str) -> tuple[Speculative | None, str]:
    """The speculative decoding the log's engine config line prints, as ``--speculative-config``
    would give it (the drafter read by name only), and a note when kvplan cannot take it: the
    log's figures are then checked without a drafter, and say so."""
    found = _SPECULATIVE.search(text)
    if found is None:
        return None, ""
    from kvplan.engines.vllm_speculative import (
        DRAFT_MODEL_METHODS,
        SPECULATIVE_LINES,
        parse_speculative_config,
    )

    method, model, tokens = found.groups()
    doc: dict[str, Any] = {"method": method, "num_speculative_tokens": int(tokens)}
    if model is not None and method in DRAFT_MODEL_METHODS:
        doc["model"] = model
    why = ""
    if line not in SPECULATIVE_LINES:
        why = f"vLLM's speculative decoding is modelled from the 0.24 line, not {line}"
    else:
        try:
            return parse_speculative_config(json.dumps(doc), paths=False), ""
        except KvplanError as e:
            why = str(e)
    return None, (
        f"the log runs speculative decoding ({method}, {tokens} tokens), which"
        f" kvplan reads without its drafter: {why}"
    )


def _vllm(
    text: str, given_model: ModelSpec | str | None, given_gpu: GPU | str | None, path: str
) -> Reconciliation:
    from kvplan.engines import vllm

    start = read_start(text, given_model, given_gpu, path)
    spec, settings, device, cfg = start.spec, start.settings, start.device, start.config
    version = (start.printed_version or vllm.DEFAULT_VERSION).strip(".")
    notes = [n for n in (start.note, start.speculative_note) if n]
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
    from kvplan.hardware.gpus import custom_gpu, list_gpus

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

    def optional(name: str) -> int | None:
        found = _find(f"'{name}': " + r"(\d+)", text)
        return None if found is None else _count(found, name, path, 0)

    return {
        "max_model_len": length,
        "gpu_memory_utilization": utilization,
        "tensor_parallel_size": parallel("tensor_parallel_size"),
        "pipeline_parallel_size": parallel("pipeline_parallel_size"),
        "dtype": None if dtype in (None, "auto") else dtype,
        "kv_cache_dtype": None if kv in (None, "auto") else kv,
        "quantization": None if quant in (None, "None") else quant,
        # not printed: None, vLLM's default for the log's GPU (kvplan.engines.vllm_config)
        "max_num_batched_tokens": optional("max_num_batched_tokens"),
        "max_num_seqs": optional("max_num_seqs"),
        "block_size": count("block_size", 16),
        "kv_cache_memory_bytes": (
            _count(kv_bytes, "kv_cache_memory_bytes", path, 0, 2**50) if kv_bytes else None
        ),
    }


def _vllm_flags(text: str, line: str) -> dict[str, Any]:
    """vLLM's cache flags as the log prints them (from 0.32: prefix caching in the engine
    config line; async scheduling among the non-default arguments, else off on the CPU
    build); absent ones keep the line's defaults."""
    if line not in ("0.27", "0.28", "0.29", "0.32", "0.33"):
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
    ssm = _find(r"'mamba_ssm_cache_dtype': '(float32|float16|bfloat16)'", text)
    if "Reset SSM cache type to float32" in text:
        ssm = "float32"  # vllm/platforms/cpu.py on a host with AVX-512 BF16, as it warns
    if ssm is not None:
        flags["mamba_ssm_cache_dtype"] = ssm
    return flags


#: vLLM 0.32's memory line (the v0.31 releases print it too): weights and non-torch memory as
#: one figure, the peak activation with the CUDA-graph estimate
CONSUMED = re.compile(
    r"Actual usage is ([\d.]+) GiB for consumed memory \(weights \+ non-torch\),"
    r" ([\d.]+) GiB for peak activation"
)


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
    newer = CONSUMED.search(text)
    if usage is None and newer is not None:
        # the 0.32 line's DEBUG line: weights with non-torch memory, and the peak activation
        # with the CUDA-graph estimate the budget subtracts (vllm/v1/worker/gpu_worker.py)
        consumed, peak = (_gib_figure(x, "memory usage", path) for x in newer.groups())
        return [
            _estimate_row(
                "weights + non-torch memory",
                consumed,
                first.weights_bytes + first.non_torch_bytes,
            ),
            _estimate_row(
                "peak activation + CUDA-graph estimate",
                peak,
                first.activation_bytes + first.cuda_graph_bytes,
            ),
        ]
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
        pool, reason = _available_pool(spec, cfg, available_text, printed, rows, notes)
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


def _available_pool(
    spec: ModelSpec,
    cfg: VllmConfig,
    available_text: str,
    printed: int | None,
    rows: list[Row],
    notes: list[str],
) -> tuple[tuple[int, int] | None, str]:
    """The blocks ``Available KV cache memory: A GiB`` allows (``_vllm_rules``), and the
    reason when they pin no pool; checks a printed ``num_gpu_blocks`` against them."""
    from kvplan.engines import vllm

    pool: tuple[int, int] | None = None
    reason = _NO_POOL
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
    return pool, reason


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
        row, pool = _check_printed(
            ("GPU KV cache size (tokens)", sizes[0], tokens, "tokens"),
            pool,
            reason,
            lambda b: Fraction(_vllm_printed(layout, b)[0]),
            lambda value: f"{int(value):,}",
        )
        rows.append(row)
    if concurrencies:
        if not _DECIMAL.fullmatch(concurrencies[0]):
            raise SpecError(
                path,
                [f"maximum concurrency {abbreviate(concurrencies[0])} in the log: not a figure"],
            )
        row, pool = _check_printed(
            ("maximum concurrency", f"{concurrencies[0]}x", Fraction(concurrencies[0]), "x"),
            pool,
            reason,
            lambda b: _vllm_printed(layout, b)[1],
            lambda value: f"{float(value):.2f}x",
        )
        rows.append(row)
    further = "a further engine's figure (data parallel or a restart): kvplan checks the first"
    rows.extend(_unread("GPU KV cache size (tokens)", s, further) for s in sizes[1:])
    rows.extend(_unread("maximum concurrency", f"{c}x", further) for c in concurrencies[1:])
    return rows, pool


def _check_printed(
    printed: tuple[str, str, Fraction, str],
    pool: tuple[int, int] | None,
    reason: str,
    figure: Callable[[int], Fraction],
    show: Callable[[Fraction], str],
) -> tuple[Row, tuple[int, int] | None]:
    """One printed figure (component, as printed, its value, unit) checked against what each
    block count of ``pool`` prints (``figure``); not read, with ``reason``, without a pool.
    Returns the row and the block counts that print it (else the pool)."""
    component, as_printed, value, unit = printed
    if pool is None:
        return _unread(component, as_printed, reason), None
    matched, mine = _match(pool, figure, value)
    shown = show(mine) if matched else _span(pool, lambda b: show(figure(b)))
    row = _rule(component, as_printed, shown, matched is not None, _difference(value, mine, unit))
    return row, matched or pool


def _span(pool: tuple[int, int], shown: Callable[[int], str]) -> str:
    """A figure over the pool's block counts: ``476,016``, or ``475,984..476,064``."""
    low, high = shown(pool[0]), shown(pool[1])
    return low if low == high else f"{low}..{high}"
