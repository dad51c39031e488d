"""llama.cpp and ik_llama.cpp: how many KV cells they allocate and what they print about it.

llama.cpp allocates its whole KV cache at start-up: one K and one V tensor per cached layer,
each ``cells x row_bytes`` (per stream). Everything here is exact integer arithmetic on
build numbers (``build: 5781 (ba3ef86c5)``, the count of commits on master), with the rule
changes found by reading the source at the commits that changed them:

==========  ================================================================================
build       change (pull request; source file)
==========  ================================================================================
b2871       cells padded to 32 without flash attention, 256 with it (#7257; llama-context.cpp)
b4881       ``KV self size`` printed by ``llama_context`` (#12181; llama-context.cpp)
b5137       MLA: K = 576 latent values, V = 512 (#12801; llama-model.cpp, llama-kv-cache.cpp)
b5262       ``KV self size`` printed by ``llama_kv_cache_unified`` (#12799; llama-kv-cache.cpp)
b5429       sliding-window layers get their own small cache (#13194; llama-kv-cache-iswa.cpp)
b5441       ``size = X MiB (cells, layers, seqs)`` line (#13660; llama-kv-cache.cpp)
b5913       per-sequence streams unless ``kv_unified`` (#14363; llama-model.cpp)
b6072       ``1/1 seqs`` instead of ``1/ 1 seqs`` in that line (#15040)
b6233       the "unified" prefix dropped: ``llama_kv_cache:`` (#15467)
b6868       no padding at all (#16812; llama-model.cpp)
b6925       ``n_ctx_seq = n_ctx / n_seq_max`` (floor) moved to llama-context.cpp (#16736)
b6975       cells padded to 256 always, SWA cells too (#17046; llama-context.cpp, -iswa.cpp)
b7832       MLA keeps no V cache ("V-less", #19067; llama-kv-cache.cpp)
b8633-8643  SWA cache forced to f16 (#21277), reverted at b8644 (#21332)
==========  ================================================================================

Builds before b4881 are not modelled; ``build=None``: the newest rules (master, August 2026).

ik_llama.cpp (versions are its own commit counts, ``version: 3732 (9e567e38)``) keeps the
pre-2025 mainline rules in ``src/llama.cpp`` (``llama_kv_cache_init``): cells padded to 256
with flash attention and 32 without, one buffer for all sequences, sliding layers cached for
the full context (the compacted ``--swa-compress`` cache is opt-in and not modelled), and for
MLA one ``c^KV`` latent of ``kv_lora_rank + rope`` (576) values per token per layer; without
flash attention the default ``-mla 3`` stores that latent in the V type and no transposed
``kv^T``. Read at ik_llama.cpp 4840 (August 2026) and checked against version 3732.

Row bytes follow ``ggml/src/ggml-common.h``: per 32 values f32 128 B, f16/bf16 64, q8_0 34,
q4_0 18, q4_1 20, q5_0 22, q5_1 24, iq4_nl 18. Recurrent (Mamba, gated delta net) layers keep
an f32 conv state ``r`` and SSM state ``s`` per sequence, one cell each
(``src/llama-memory-recurrent.cpp``), whatever the context.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from kvplan.arguments import as_flag, as_int, as_str, as_tokens
from kvplan.catalog.lookup import as_spec
from kvplan.engines.base import EngineResult, refuse_unread_kinds
from kvplan.errors import UnitError, UnknownEngineError
from kvplan.model.layers import (
    ChunkedLocalAttention,
    FullAttention,
    MLALatent,
    RecurrentState,
    SlidingWindowAttention,
)
from kvplan.model.spec import ModelSpec
from kvplan.units import DType, MiB, resolve_dtype

__all__ = [
    "FORKS",
    "OLDEST_BUILD",
    "cells_per_stream",
    "format_mib",
    "ggml_row_bytes",
    "kv_cache",
    "mib_printed",
    "mla_row_values",
    "n_ctx_padding",
    "swa_cells",
]

FORKS = ("llama.cpp", "ik_llama.cpp")

#: Oldest mainline build modelled (the llama_context refactor, #12181).
OLDEST_BUILD = 4881

# Mainline rule changes (see the module docstring).
_BUILD_MLA = 5137
_BUILD_LOG_UNIFIED = 5262
_BUILD_SWA = 5429
_BUILD_LOG_CELLS = 5441
_BUILD_STREAMS = 5913
_BUILD_LOG_STREAMS_UNALIGNED = 6072
_BUILD_LOG_NO_UNIFIED = 6233
_BUILD_NO_PAD = 6868
_BUILD_CTX_SEQ_FLOOR = 6925
_BUILD_PAD_256 = 6975
_BUILD_V_LESS_MLA = 7832
_BUILD_SWA_F16 = 8633
_BUILD_SWA_F16_REVERTED = 8644

#: ggml cache types: name -> kvplan dtype (block sizes from ggml/src/ggml-common.h).
GGML_TYPES: dict[str, str] = {
    "f32": "float32",
    "f16": "float16",
    "bf16": "bfloat16",
    "q8_0": "q8_0",
    "q4_0": "q4_0",
    "q4_1": "q4_1",
    "q5_0": "q5_0",
    "q5_1": "q5_1",
    "iq4_nl": "iq4_nl",
}
GGML_NAMES = {dtype: name for name, dtype in GGML_TYPES.items()}
_F32 = resolve_dtype("float32")


def _pad(n: int, multiple: int) -> int:
    """``GGML_PAD``: ``n`` rounded up to a multiple: ``_pad(16768, 256) == 16896``."""
    return -(-n // multiple) * multiple


def _ggml_type(name: str) -> tuple[str, DType]:
    """The ggml name (``q8_0``) and kvplan dtype of a ``-ctk``/``-ctv`` value."""
    try:
        canonical = GGML_NAMES.get(resolve_dtype(name).name)
    except UnitError:
        canonical = None
    if canonical is None:
        raise UnitError(f"unknown llama.cpp cache type {name!r}; allowed: {', '.join(GGML_TYPES)}")
    return canonical, resolve_dtype(GGML_TYPES[canonical])


def ggml_row_bytes(cache_type: str, num_values: int) -> int:
    """Bytes of one cell's row of ``num_values`` values in a ggml type (``ggml_row_size``).

    Whole blocks of 32 for the quantized types: 1,024 values in q8_0 = 32 x 34 = 1,088 B;
    in q4_0 = 32 x 18 = 576 B; in f16 = 2,048 B. Holds for every build (ggml-common.h).
    """
    return _ggml_type(cache_type)[1].row_bytes(num_values)


def n_ctx_padding(*, build: int | None, flash_attn: bool, fork: str = "llama.cpp") -> int:
    """The multiple ``n_ctx`` (cells) is padded to.

    Mainline b2871-b6867: 256 with flash attention, 32 without
    (``llama_kv_cache_unified::get_padding``; src/llama-kv-cache.cpp); b6868-b6974: 1 (no
    padding, #16812); from b6975: 256 always (src/llama-context.cpp). ik_llama.cpp, every
    version: 256 with flash attention, 32 without (src/llama-context.h).
    """
    if fork == "ik_llama.cpp" or (build is not None and build < _BUILD_NO_PAD):
        return 256 if flash_attn else 32
    if build is not None and build < _BUILD_PAD_256:
        return 1
    return 256


def cells_per_stream(
    n_ctx: int,
    *,
    n_seq_max: int = 1,
    kv_unified: bool = False,
    flash_attn: bool = True,
    build: int | None = None,
    fork: str = "llama.cpp",
) -> tuple[int, int]:
    """``(cells, streams)``: the cells of one stream of the main cache, and the streams.

    Before b5913 (and in ik_llama.cpp) one buffer serves all sequences:
    ``(PAD(n_ctx, pad), 1)``. From b5913 (#14363, src/llama-model.cpp) a non-unified cache has
    one stream per sequence: b5913-b6924 ``PAD(ceil(n_ctx / n_seq_max), pad)`` cells each;
    from b6925 (src/llama-context.cpp) ``n_ctx`` is padded first and each stream gets
    ``PAD(n_ctx / n_seq_max, pad)`` (floor division). Example, b6975+, n_ctx 8192, 3 seqs:
    PAD(8192 // 3 = 2730, 256) = 2816 cells x 3 streams = 8448 cells, more than asked.
    """
    pad = n_ctx_padding(build=build, flash_attn=flash_attn, fork=fork)
    streams_exist = fork == "llama.cpp" and (build is None or build >= _BUILD_STREAMS)
    if not streams_exist or kv_unified or n_seq_max == 1:
        return _pad(n_ctx, pad), 1
    if build is not None and build < _BUILD_CTX_SEQ_FLOOR:
        return _pad(-(-n_ctx // n_seq_max), pad), n_seq_max
    return _pad(_pad(n_ctx, pad) // n_seq_max, pad), n_seq_max


def swa_cells(
    base_cells: int,
    *,
    n_swa: int,
    n_seq_max: int = 1,
    n_ubatch: int = 512,
    kv_unified: bool = False,
    swa_full: bool = False,
    flash_attn: bool = True,
    build: int | None = None,
) -> int:
    """Cells per stream of the sliding-window cache (mainline from b5429, -iswa.cpp).

    ``--swa-full``: ``base_cells``. Otherwise the window for every sequence sharing the
    stream (all of them when unified; one per stream from b5913; all before) plus one
    micro-batch: b5429-b6974 ``min(base_cells, PAD(n_swa x seqs + n_ubatch, pad))``; from
    b6975 ``PAD(min(base_cells, n_swa x seqs + n_ubatch), 256)``. gpt-oss, window 128,
    n_ubatch 512: PAD(128 + 512, 256) = 768 cells.
    """
    if swa_full:
        return base_cells
    per_stream_seqs = (
        n_seq_max if kv_unified or (build is not None and build < _BUILD_STREAMS) else 1
    )
    wanted = n_swa * per_stream_seqs + n_ubatch
    if build is not None and build < _BUILD_PAD_256:
        pad = n_ctx_padding(build=build, flash_attn=flash_attn)
        return min(base_cells, _pad(wanted, pad))
    return _pad(min(base_cells, wanted), 256)


def mla_row_values(
    layer: MLALatent, spec: ModelSpec, *, build: int | None, fork: str
) -> tuple[int, int]:
    """``(K values, V values)`` per cell per MLA layer.

    Mainline before b5137: the decompressed heads, K = heads x (nope + rope), V = heads x
    v_head_dim (DeepSeek V3: 128 x 192 = 24,576 and 128 x 128 = 16,384); b5137-b7831: K =
    kv_lora_rank + rope = 576, V = kv_lora_rank = 512 (#12801); from b7832: K = 576, no V
    (#19067). ik_llama.cpp: one 576-value latent ``c^KV``, no V (src/llama.cpp).
    """
    latent = layer.kv_lora_rank + layer.qk_rope_head_dim
    if fork == "ik_llama.cpp" or build is None or build >= _BUILD_V_LESS_MLA:
        return latent, 0
    if build >= _BUILD_MLA:
        return latent, layer.kv_lora_rank
    if spec.qk_nope_head_dim is None or spec.v_head_dim is None:
        raise UnitError(
            f"{spec.name}: builds before b{_BUILD_MLA} cache per-head K and V of MLA layers;"
            " the spec needs qk_nope_head_dim and v_head_dim"
        )
    heads = spec.num_attention_heads
    return heads * (spec.qk_nope_head_dim + layer.qk_rope_head_dim), heads * spec.v_head_dim


@dataclass(frozen=True, slots=True)
class _Part:
    """One llama.cpp memory module: cells per stream, streams, layers and exact bytes."""

    prefix: str  # engine_log key prefix: "" (main cache), "swa_" or "recurrent_"
    cells: int
    streams: int
    num_layers: int
    num_seqs: int
    k_bytes: int
    v_bytes: int
    type_k: str
    type_v: str


@dataclass(frozen=True, slots=True)
class _Settings:
    """The settings of one llama.cpp run, checked; the cache types as ggml names and dtypes."""

    n_seq_max: int
    n_ubatch: int
    swa_full: bool
    flash_attn: bool
    kv_unified: bool
    build: int | None
    fork: str
    name_k: str
    name_v: str
    dtype_k: DType
    dtype_v: DType

    @property
    def ik(self) -> bool:
        return self.fork == "ik_llama.cpp"


@dataclass(slots=True)
class _Rows:
    """Bytes of one cell of each memory module, summed over its layers."""

    main_k_row: int = 0  # bytes of one cell over all main-cache layers
    main_v_row: int = 0
    num_main: int = 0
    swa_rows: list[tuple[int, int]] = field(default_factory=list)  # (K, V) values per layer
    n_swa: int = 0
    num_recurrent: int = 0
    r_row: int = 0
    s_row: int = 0
    has_mla: bool = False


def kv_cache(
    spec: ModelSpec | str,
    *,
    n_ctx: int | str,
    n_seq_max: int = 1,
    n_ubatch: int = 512,
    cache_type_k: str = "f16",
    cache_type_v: str = "f16",
    swa_full: bool = False,
    flash_attn: bool = True,
    kv_unified: bool = False,
    build: int | None = None,
    fork: str = "llama.cpp",
) -> EngineResult:
    """The KV cache llama.cpp (or ik_llama.cpp) allocates for ``spec``, in bytes and cells.

    ``kv_cache_bytes``: all parts (main, sliding-window, recurrent state), all devices.
    ``num_blocks`` / ``kv_cache_tokens``: cells of the main cache over all its streams
    (block_size 1). ``engine_log``: the printed figures per part (``cells`` per stream, as
    printed; the SWA part prefixed ``swa_``, the recurrent state ``recurrent_``, whose
    ``k``/``v`` are llama.cpp's R and S) with the exact ``k_bytes``/``v_bytes``;
    ``log_lines``: the size lines as that build prints them. Raises UnknownEngineError for an
    unknown fork or a build older than ``OLDEST_BUILD``, UnitError for a count below 1 or an
    unknown cache type.
    """
    model = as_spec(spec)
    cells, settings = _checked_settings(
        n_ctx,
        n_seq_max=n_seq_max,
        n_ubatch=n_ubatch,
        cache_types=(cache_type_k, cache_type_v),
        switches=(swa_full, flash_attn, kv_unified),
        build=build,
        fork=fork,
    )
    base_cells, streams = cells_per_stream(
        cells,
        n_seq_max=settings.n_seq_max,
        kv_unified=settings.kv_unified,
        flash_attn=settings.flash_attn,
        build=build,
        fork=fork,
    )
    rows = _layer_rows(model, settings)
    parts = [
        part
        for part in (
            _main_part(rows, settings, base_cells, streams),
            _swa_part(rows, settings, base_cells, streams),
            _recurrent_part(rows, settings, model.num_hidden_layers),
        )
        if part is not None
    ]
    main_cells = parts[0].cells * parts[0].streams if parts else 0
    ik = settings.ik
    version = "newest" if build is None else f"version {build}" if ik else f"b{build}"
    return EngineResult(
        engine=fork,
        engine_version=version,
        kv_cache_bytes=sum(part.k_bytes + part.v_bytes for part in parts),
        num_blocks=main_cells,
        block_size=1,
        kv_cache_tokens=main_cells,
        engine_log=_engine_log(parts, settings, streams),
        log_lines=_log_lines(
            parts, build=build, ik=ik, mla=rows.has_mla, flash_attn=settings.flash_attn
        ),
    )


def _checked_settings(
    n_ctx: object,
    *,
    n_seq_max: object,
    n_ubatch: object,
    cache_types: tuple[str, str],
    switches: tuple[object, object, object],
    build: int | None,
    fork: str,
) -> tuple[int, _Settings]:
    """``n_ctx`` and the other settings of :func:`kv_cache`, checked in the order it states."""
    if as_str(fork, "fork", "a fork's name such as 'llama.cpp'") not in FORKS:
        raise UnknownEngineError(f"unknown llama.cpp fork {fork!r}; known: {', '.join(FORKS)}")
    if build is not None:
        as_int(build, "build")
    if fork == "llama.cpp" and build is not None and build < OLDEST_BUILD:
        raise UnknownEngineError(
            f"llama.cpp b{build} is older than the oldest modelled build b{OLDEST_BUILD}"
        )
    cells = as_tokens(n_ctx, "n_ctx", minimum=1)
    seqs = as_int(n_seq_max, "n_seq_max", minimum=1)
    ubatch = as_int(n_ubatch, "n_ubatch", minimum=1)
    name_k, dtype_k = _ggml_type(as_str(cache_types[0], "cache_type_k", _CACHE_TYPE))
    name_v, dtype_v = _ggml_type(as_str(cache_types[1], "cache_type_v", _CACHE_TYPE))
    swa_full, flash_attn, kv_unified = (
        as_flag(value, name)
        for value, name in zip(switches, ("swa_full", "flash_attn", "kv_unified"), strict=True)
    )
    flags = (swa_full, flash_attn, kv_unified)
    return cells, _Settings(seqs, ubatch, *flags, build, fork, name_k, name_v, dtype_k, dtype_v)


_CACHE_TYPE = "a ggml cache type such as 'f16' or 'q8_0'"


def _layer_rows(spec: ModelSpec, s: _Settings) -> _Rows:
    """Sort the layers into llama.cpp's memory modules and sum each one's row bytes."""
    refuse_unread_kinds(spec.layers, "llama.cpp profile")
    split_swa = not s.ik and (s.build is None or s.build >= _BUILD_SWA)
    rows = _Rows()
    for layer in spec.layers:
        match layer:
            case SlidingWindowAttention(window=window) if split_swa:
                rows.n_swa = max(rows.n_swa, window)
                rows.swa_rows.append(_kv_values(layer))
            case ChunkedLocalAttention(chunk=chunk) if split_swa:
                # Llama 4: llama.cpp runs chunked attention as SWA with n_swa = chunk.
                rows.n_swa = max(rows.n_swa, chunk)
                rows.swa_rows.append(_kv_values(layer))
            case FullAttention():
                rows.num_main += 1
                k_values, v_values = _kv_values(layer)
                rows.main_k_row += s.dtype_k.row_bytes(k_values)
                rows.main_v_row += s.dtype_v.row_bytes(v_values)
            case MLALatent():
                rows.has_mla = True
                rows.num_main += 1
                k_values, v_values = mla_row_values(layer, spec, build=s.build, fork=s.fork)
                # ik_llama.cpp -mla 3 without flash attention keeps c^KV in the V type.
                k_dtype = s.dtype_v if s.ik and not s.flash_attn else s.dtype_k
                rows.main_k_row += k_dtype.row_bytes(k_values)
                rows.main_v_row += s.dtype_v.row_bytes(v_values)
            case RecurrentState():
                rows.num_recurrent += 1
                rows.r_row += _F32.row_bytes(layer.conv_values)
                rows.s_row += _F32.row_bytes(layer.ssm_values)
            case _:
                pass  # NoCache: nothing kept
    return rows


def _main_part(rows: _Rows, s: _Settings, base_cells: int, streams: int) -> _Part | None:
    """The main cache: full attention and MLA layers, ``base_cells`` cells per stream."""
    if not rows.num_main:
        return None
    num_cells = base_cells * streams
    return _Part(
        "",
        base_cells,
        streams,
        rows.num_main,
        s.n_seq_max,
        num_cells * rows.main_k_row,
        num_cells * rows.main_v_row,
        s.name_k,
        s.name_v,
    )


def _swa_part(rows: _Rows, s: _Settings, base_cells: int, streams: int) -> _Part | None:
    """The sliding-window cache (mainline from b5429): the window plus a micro-batch."""
    if not rows.swa_rows:
        return None
    # f16 whatever -ctk/-ctv only in b8633-b8643 (#21277, reverted by #21332).
    forced_f16 = s.build is not None and _BUILD_SWA_F16 <= s.build < _BUILD_SWA_F16_REVERTED
    swa_k, swa_v = ("f16", "f16") if forced_f16 else (s.name_k, s.name_v)
    cells = swa_cells(
        base_cells,
        n_swa=rows.n_swa,
        n_seq_max=s.n_seq_max,
        n_ubatch=s.n_ubatch,
        kv_unified=s.kv_unified,
        swa_full=s.swa_full,
        flash_attn=s.flash_attn,
        build=s.build,
    )
    k_row = sum(ggml_row_bytes(swa_k, k) for k, _ in rows.swa_rows)
    v_row = sum(ggml_row_bytes(swa_v, v) for _, v in rows.swa_rows)
    return _Part(
        "swa_",
        cells,
        streams,
        len(rows.swa_rows),
        s.n_seq_max,
        cells * streams * k_row,
        cells * streams * v_row,
        swa_k,
        swa_v,
    )


def _recurrent_part(rows: _Rows, s: _Settings, num_layers: int) -> _Part | None:
    """llama_memory_recurrent: max(1, n_seq_max) cells, one per sequence; it prints
    hparams.n_layer (all layers) even when only some are recurrent."""
    if not rows.num_recurrent:
        return None
    mem_size = max(1, s.n_seq_max)
    return _Part(
        "recurrent_",
        mem_size,
        1,
        num_layers,
        s.n_seq_max,
        mem_size * rows.r_row,
        mem_size * rows.s_row,
        "f32",
        "f32",
    )


def _engine_log(parts: list[_Part], s: _Settings, streams: int) -> dict[str, int | float | str]:
    """The settings, then each part's printed figures under its prefix."""
    engine_log: dict[str, int | float | str] = {
        "fork": s.fork,
        "build": "newest" if s.build is None else s.build,
        "n_seq_max": s.n_seq_max,
        "streams": streams,
        "type_k": s.name_k,
        "type_v": s.name_v,
    }
    for part in parts:
        p = part.prefix
        engine_log[f"{p}cells"] = part.cells
        engine_log[f"{p}layers"] = part.num_layers
        engine_log[f"{p}seqs"] = part.num_seqs
        engine_log[f"{p}k_bytes"] = part.k_bytes
        engine_log[f"{p}v_bytes"] = part.v_bytes
        engine_log[f"{p}k_mib"] = round(mib_printed(part.k_bytes), 2)
        engine_log[f"{p}v_mib"] = round(mib_printed(part.v_bytes), 2)
        engine_log[f"{p}size_mib"] = round(mib_printed(part.k_bytes + part.v_bytes), 2)
    return engine_log


def _kv_values(layer: FullAttention) -> tuple[int, int]:
    """``(n_embd_k_gqa, n_embd_v_gqa)``: K and V values per cell of an attention layer."""
    return layer.num_kv_heads * layer.head_dim, layer.num_kv_heads * layer.v_head_dim


def mib_printed(num_bytes: int) -> float:
    """``(float) bytes / (1024.0f * 1024.0f)`` as llama.cpp computes it: in float32.

    The float32 rounding shows above 16 MiB of odd bytes; printed with 2 decimals it
    rarely changes a digit, but this is the value ``%7.2f`` formats.
    """
    as_f32: float = struct.unpack("f", struct.pack("f", float(num_bytes)))[0]
    return as_f32 / MiB


def format_mib(num_bytes: int) -> str:
    """``%7.2f`` of :func:`mib_printed`: ``format_mib(2**30) == "1024.00"``."""
    return f"{mib_printed(num_bytes):7.2f}"


def _log_lines(
    parts: list[_Part], *, build: int | None, ik: bool, mla: bool, flash_attn: bool
) -> tuple[str, ...]:
    """The size line(s) of each part in the format of that build (module docstring)."""
    if ik:
        return _ik_lines(parts, mla=mla, flash_attn=flash_attn)
    unified = build is not None and build < _BUILD_LOG_NO_UNIFIED
    prefix = "llama_kv_cache_unified" if unified else "llama_kv_cache"
    iswa = any(part.prefix == "swa_" for part in parts)
    lines: list[str] = []
    for part in parts:
        k_mib, v_mib = format_mib(part.k_bytes), format_mib(part.v_bytes)
        size_mib = format_mib(part.k_bytes + part.v_bytes)
        if part.prefix == "recurrent_":
            lines.append(
                f"llama_memory_recurrent: size = {size_mib} MiB ({part.cells:6d} cells,"
                f" {part.num_layers:3d} layers, {part.num_seqs:2d} seqs),"
                f" R ({part.type_k}): {k_mib} MiB, S ({part.type_v}): {v_mib} MiB"
            )
            continue
        if iswa:
            kind = "    SWA" if part.prefix == "swa_" else "non-SWA"
            lines.append(f"{prefix}_iswa: creating {kind} KV cache, size = {part.cells} cells")
        tail = f"K ({part.type_k}): {k_mib} MiB, V ({part.type_v}): {v_mib} MiB"
        if build is not None and build < _BUILD_LOG_CELLS:
            who = "llama_context" if build < _BUILD_LOG_UNIFIED else prefix
            lines.append(f"{who}: KV self size  = {size_mib} MiB, {tail}")
            continue
        if build is not None and build < _BUILD_STREAMS:
            seqs = f"{part.num_seqs:2d}"
        elif build is not None and build < _BUILD_LOG_STREAMS_UNALIGNED:
            seqs = f"{part.num_seqs:2d}/{part.streams:2d}"
        else:
            seqs = f"{part.num_seqs:2d}/{part.streams}"
        lines.append(
            f"{prefix}: size = {size_mib} MiB ({part.cells:6d} cells,"
            f" {part.num_layers:3d} layers, {seqs} seqs), {tail}"
        )
    return tuple(lines)


def _ik_lines(parts: list[_Part], *, mla: bool, flash_attn: bool) -> tuple[str, ...]:
    """ik_llama.cpp prints one ``KV self size`` line for its single cache (src/llama.cpp)."""
    lines: list[str] = []
    for part in parts:
        if part.prefix == "recurrent_":
            continue  # ik_llama.cpp's recurrent-state line is not modelled
        size_mib = format_mib(part.k_bytes + part.v_bytes)
        k_mib, v_mib = format_mib(part.k_bytes), format_mib(part.v_bytes)
        head = f"llama_new_context_with_model: KV self size  = {size_mib} MiB"
        if mla and flash_attn:
            lines.append(f"{head}, c^KV ({part.type_k}): {k_mib} MiB, kv^T: not used")
        elif mla:
            lines.append(
                f"{head}, c^KV ({part.type_k}): {k_mib} MiB, kv^T ({part.type_v}): {v_mib} MiB"
            )
        else:
            lines.append(f"{head}, K ({part.type_k}): {k_mib} MiB, V ({part.type_v}): {v_mib} MiB")
    return tuple(lines)
