"""Reconcile an engine's start-up log with kvplan: recover the settings, recompute, compare.

``reconcile(text)`` detects the engine (vLLM, SGLang, llama.cpp/ik_llama.cpp), reads the model,
the settings and the figures the engine printed, recomputes them with the engine profile, and
returns one row per component. A row is either a *rule* (reproduced or not: blocks from the
printed memory, tokens and concurrency from the blocks, cells, MiB) or a *modelled estimate*
(weights, activation, non-torch memory, the pool), shown with its residual.

A log is read with ``read_log``: a regular file (or standard input), its first 64 MiB (the
start-up lines come first), invalid UTF-8 replaced. Every number taken from it is checked
(digits, range) before use, so an edited or corrupted log is a SpecError naming the setting.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

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


@dataclass(frozen=True, slots=True)
class Row:
    """One compared figure. ``reproduced`` is None for a modelled estimate (no verdict)."""

    component: str
    printed: str
    kvplan: str
    residual: str
    reproduced: bool | None


@dataclass(frozen=True, slots=True)
class Reconciliation:
    engine: str
    engine_version: str
    model: str
    settings: dict[str, Any] = field(default_factory=dict)
    rows: tuple[Row, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def reproduced(self) -> bool:
        """Every rule row reproduced (estimates carry no verdict)."""
        return all(row.reproduced is not False for row in self.rows)


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
    result = vllm.profile(spec, device, cfg)
    rows = _vllm_memory_rows(text, result, path)
    available = _gib_figure(
        _find(r"Available KV cache memory: ([\d.]+) GiB", text), "available KV cache memory", path
    )
    rows.append(_estimate_row("available KV cache memory", available, result.available_bytes))
    notes: list[str] = [choice.note] if choice.note else []
    blocks_text = _find(r"num_gpu_blocks is: (\d+)", text)
    blocks = _count(blocks_text, "num_gpu_blocks", path, 0, 2**40) if blocks_text else None
    if cfg.kv_cache_memory_bytes is not None and blocks is None:
        blocks = result.num_gpu_blocks  # the pool was given to the byte: no rounding to undo
    elif available is not None:
        blocks = _vllm_blocks_rule(text, spec, cfg, available, blocks, rows, notes)
    if blocks is not None:
        rows.extend(_vllm_figures_from_blocks(text, result, blocks, path))
    rows.append(
        Row(
            "num_gpu_blocks (end to end)",
            f"{blocks:,}" if blocks else "-",
            f"{result.num_gpu_blocks:,}",
            f"{100 * (result.num_gpu_blocks / blocks - 1):+.2f}%" if blocks else "-",
            None,
        )
    )
    return Reconciliation("vllm", version, spec.name, settings, tuple(rows), tuple(notes))


def _vllm_device(
    text: str, given_gpu: GPU | str | None, path: str, kv_cache_memory_bytes: int | None = None
) -> GPU:
    """The GPU named by ``--gpu``, else the catalog GPU whose memory the log prints (to the
    printed two decimals of GiB), else a custom device of that memory; a log whose KV cache
    memory was given in bytes (``kv_cache_memory_bytes``, the CPU build) needs none."""
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
    raise SpecError(path, ["the log prints no GPU memory; pass --gpu NAME"])


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
        _find(r"max_seq_len=(\d+)", text) or _find(r"'max_model_len': (\d+)", text),
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
        _estimate_row(
            "CUDA graphs (subtracted from v0.21.0)", printed[3], first.cuda_graph_bytes
        ),
    ]


def _vllm_blocks_rule(
    text: str,
    spec: ModelSpec,
    cfg: VllmConfig,
    available: float,
    blocks: int | None,
    rows: list[Row],
    notes: list[str],
) -> int | None:
    """Check the printed block count against the blocks the printed memory (two decimals of
    GiB: +-0.005) allows; adds the row (and a note for pipeline parallelism) and returns the
    block count, taken from that range when the log prints tokens but no block count and the
    range holds one value."""
    from kvplan.engines import vllm

    tokens_text = _find(r"KV cache size: ([\d,]+) tokens", text)
    low_bytes = max(0, int((available - 0.005) * GiB))
    low = vllm.from_available(spec, low_bytes, cfg).num_gpu_blocks
    high = vllm.from_available(spec, int((available + 0.005) * GiB), cfg).num_gpu_blocks
    if blocks is None and tokens_text is not None and low == high:
        blocks = low
    if blocks is not None:
        ok = low <= blocks <= high
        if not ok and cfg.pipeline_parallel_size > 1:
            notes.append(
                "with pipeline parallelism one worker prints its memory while the"
                " minimum over stages sets the blocks"
            )
        rows.append(
            Row(
                "num_gpu_blocks (from the printed memory)",
                f"{blocks:,}",
                f"{low:,}..{high:,}",
                "in range" if ok else "outside",
                ok,
            )
        )
    return blocks


def _vllm_figures_from_blocks(text: str, result: VllmResult, blocks: int, path: str) -> list[Row]:
    """The printed token capacity and concurrency, which follow from the block count alone."""
    from kvplan.engines.vllm_versions import TOKENS_FROM_CONCURRENCY

    tokens_text = _find(r"KV cache size: ([\d,]+) tokens", text)
    conc_text = _find(r"Maximum concurrency for [\d,]+ tokens per request: ([\d.]+)x", text)
    rows = []
    if result.config.version in TOKENS_FROM_CONCURRENCY:  # int(concurrency x max_model_len)
        tokens = blocks * result.config.max_model_len // result.blocks_per_request
    else:
        tokens = blocks // result.num_groups * result.block_size
    if tokens_text is not None:
        ok = tokens == _count(tokens_text, "GPU KV cache size", path, 0, 2**50)
        rows.append(Row("GPU KV cache size (tokens)", tokens_text, f"{tokens:,}", _verdict(ok), ok))
    if conc_text is not None:
        mine = f"{float(Fraction(blocks, result.blocks_per_request)):.2f}"
        ok = mine == conc_text
        rows.append(Row("maximum concurrency", f"{conc_text}x", f"{mine}x", _verdict(ok), ok))
    return rows


def _verdict(ok: bool) -> str:
    return "exact" if ok else "differs"


def _sglang(text: str, given_model: ModelSpec | str | None, path: str) -> Reconciliation:
    from kvplan.engines import sglang

    m = re.search(
        r"#tokens: (\d+), (?:K size: ([\d.]+) GB, V size: ([\d.]+) GB|KV size: ([\d.]+) GB)", text
    )
    if m is None:
        raise SpecError(path, ["no 'KV Cache is allocated. #tokens: ...' line"])
    found = _find(r"--model(?:-path)?[ =](\S+)", text)
    if found is not None and found.startswith(("/", ".", "~")):
        found = found.rstrip("/").rsplit("/", 1)[-1]  # a local folder: its name
    spec = _model(found, given_model, path)
    tp = _count(_find(r"--tp(?:-size)?[ =](\d+)", text), "--tp", path, 1, _MAX_PARALLEL)
    page = _count(_find(r"--page-size[ =](\d+)", text), "--page-size", path, 1)
    kv_dtype = _find(r"--kv-cache-dtype[ =](\S+)", text)
    tokens = _count(m.group(1), "#tokens", path, 0, MAX_TOKENS)
    k_bytes, v_bytes = sglang.pool_bytes(
        spec, tokens, tp=tp, kv_cache_dtype=kv_dtype, page_size=page
    )
    mla = m.group(4) is not None
    line = sglang.format_log_line(
        tokens, k_bytes + v_bytes if mla else k_bytes, None if mla else v_bytes
    )
    printed = m.group(0)
    ok = printed in line
    rows = (
        Row(
            "KV Cache is allocated",
            printed,
            line.split("allocated. ", 1)[-1],
            "exact" if ok else "differs",
            ok,
        ),
    )
    settings = {"tp": tp, "page_size": page, "kv_cache_dtype": kv_dtype, "tokens": tokens}
    return Reconciliation("sglang", sglang.SGLANG_VERSION, spec.name, settings, rows)


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


def _llamacpp_line_rows(text: str, log_lines: tuple[str, ...]) -> list[Row]:
    """Each size line kvplan would print, next to the printed line that starts the same."""
    printed_lines = [
        line.split(": ", 1)[-1].strip()
        for line in text.splitlines()
        if re.search(r"(size\s+=|KV self size)", line) and "buffer" not in line
    ]
    rows = []
    for mine in log_lines:
        body = mine.split(": ", 1)[-1].strip()
        if "size" not in body or "creating" in body:
            continue
        ok = body in printed_lines
        rows.append(
            Row(
                "KV cache line",
                next((p for p in printed_lines if p[:12] == body[:12]), "-"),
                body,
                _verdict(ok),
                ok,
            )
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
