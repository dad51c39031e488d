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
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from kvplan.arguments import as_str
from kvplan.errors import (
    KvplanError,
    SpecError,
)
from kvplan.model.limits import MAX_TOKENS
from kvplan.model.spec import ModelSpec
from kvplan.units import MiB, abbreviate

if TYPE_CHECKING:
    from kvplan.hardware.gpus import GPU

#: Largest parallel size, block size, sequence or step count taken from a log.
from kvplan.logs.rows import (
    _MAX_PARALLEL,
    Difference,
    Reconciliation,
    Row,
    _count,
    _difference,
    _find,
    _model,
    _rule,
    _unread,
    read_log,
)
from kvplan.logs.vllm import _vllm

__all__ = ["Difference", "Reconciliation", "Row", "detect_engine", "read_log", "reconcile"]


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
    names no model, KvplanError for a log of no known engine, ArgumentTypeError (a TypeError)
    for an argument of the wrong type."""
    as_str(text, "text", "the log's text as a str")
    as_str(path, "path", "a str naming the log")
    engine = detect_engine(text)
    match engine:
        case "vllm":
            return _vllm(text, model, gpu, path)
        case "sglang":
            return _sglang(text, model, path)
        case _:
            return _llamacpp(text, engine, model, path)


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
