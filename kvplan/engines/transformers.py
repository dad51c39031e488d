"""Hugging Face transformers: the bytes a ``DynamicCache`` or ``StaticCache`` holds.

Rules read for transformers v4.56 to v5.x (src/transformers/cache_utils.py: DynamicLayer,
DynamicSlidingWindowLayer, StaticLayer, StaticSlidingWindowLayer, LinearAttentionLayer;
src/transformers/models/deepseek_v3/modeling_deepseek_v3.py), for a cache built from the
model's config (as ``generate`` builds it):

- Every cached tensor has shape ``[batch, kv_heads, tokens, head_dim]`` in the cache dtype
  (the model dtype unless given), one K and one V tensor per attention layer.
- DynamicCache: a full-attention layer (``DynamicLayer``) concatenates every token. A sliding
  or chunked layer (``DynamicSlidingWindowLayer``, built with ``sliding_window`` or
  ``attention_chunk_size``) keeps ``states[:, :, -window + 1:]`` after *every* update, prefill
  and decode alike: ``min(tokens, window - 1)`` tokens (window 1 slices ``[0:]``: all).
- StaticCache: ``StaticLayer`` pre-allocates ``max_cache_len`` tokens; ``StaticSlidingWindowLayer``
  ``min(window, max_cache_len)``, the full window. From v5 the V tensor takes V's own head
  dim; up to v4.57 it took K's, so a static cache of an MLA model is refused there.
- MLA (DeepSeek V2/V3, Kimi K2): up to v5.0 transformers caches the decompressed per-head K,
  ``num_attention_heads x (qk_nope_head_dim + qk_rope_head_dim)``, and V,
  ``num_attention_heads x v_head_dim``, not the latent (the flash-attention zero-padding of V
  happens after the cache update and is not stored). By 5.24 it caches the latent: K holds
  ``kv_lora_rank`` values and V the ``qk_rope_head_dim`` RoPE part, one head (measured by the
  torch probe; the release that changed it is not pinned).
- Recurrent layers (``LinearAttentionLayer``): a conv state of ``conv_kernel`` columns in the
  model dtype and a recurrent state in the dtype the kernel returns: float32 for the gated
  delta net (its torch and fla paths compute the state in float32); kvplan takes the spec's
  ``state_dtype`` (float32 unless stated) for Mamba too. Neither grows with the context.

Worked example (Llama 3.1 8B, bf16, DynamicCache, 1,000 tokens, batch 2): 32 layers x 2
tensors of 2 x 8 x 1,000 x 128 values x 2 B = 32 x 2 x 4,096,000 B = 262,144,000 B.
gpt-oss-20b at 1,000 tokens: its 12 sliding layers keep 127 tokens, the 12 full layers 1,000.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from kvplan.arguments import as_int, as_optional_str, as_str, as_tokens
from kvplan.catalog.lookup import as_spec
from kvplan.engines.base import EngineResult
from kvplan.errors import UnitError, UnknownEngineError
from kvplan.model.dtypes import served_dtype
from kvplan.model.layers import (
    AttentionAndState,
    ChunkedLocalAttention,
    FullAttention,
    LayerCache,
    MLALatent,
    NoCache,
    RecurrentState,
    SlidingWindowAttention,
)
from kvplan.model.spec import ModelSpec
from kvplan.units import DType, resolve_dtype

__all__ = ["DEFAULT_VERSION", "VERSIONS", "kv_cache", "sliding_tokens_kept"]

#: transformers versions modelled: the layered cache classes arrived in 4.56; v5 gives the
#: static V tensor its own head dim; by 5.24 DeepSeek V2/V3 cache the MLA latent (the torch
#: probe measured it with transformers 5.24.0: K ``[batch, 1, tokens, kv_lora_rank]`` and V
#: ``[batch, 1, tokens, qk_rope_head_dim]``), no longer the decompressed per-head K and V.
VERSIONS = ("4.56", "4.57", "5", "5.24")
DEFAULT_VERSION = "5.24"

CacheKind = Literal["dynamic", "static"]


@dataclass(frozen=True, slots=True)
class _LayerBytes:
    kind: str
    k_bytes: int
    v_bytes: int
    state_bytes: int
    tensors: int


def sliding_tokens_kept(context_tokens: int, window: int) -> int:
    """Tokens a ``DynamicSlidingWindowLayer`` of ``window`` holds after ``context_tokens``.

    It keeps ``[-window + 1:]`` of the concatenated states: window 128 at 1,000 tokens
    keeps 127; at 100 tokens all 100. A window of 1 slices ``[0:]`` and keeps everything.
    """
    if window <= 1:
        return context_tokens
    return min(context_tokens, window - 1)


def _tensor_bytes(batch: int, heads: int, tokens: int, dims: int, dtype: DType) -> int:
    """One ``[batch, heads, tokens, dims]`` tensor in ``dtype``."""
    return batch * heads * tokens * dtype.row_bytes(dims)


def _cache_dtype(spec: ModelSpec, dtype: str | None, version: str) -> tuple[DType, str]:
    """The dtype the model runs and caches in, and why (``kvplan.model.dtypes``: 4.x loads in
    float32 unless told, v5 in the checkpoint's dtype)."""
    if dtype in (None, "auto"):
        return served_dtype(spec, "transformers", engine_version=version)
    found = resolve_dtype(str(dtype))
    if found.block_values != 1:
        raise UnitError(f"transformers caches plain torch tensors; {found.name} is a block format")
    return found, "as given"


def _layer_bytes(
    layer: LayerCache,
    spec: ModelSpec,
    *,
    tokens: int,
    batch: int,
    cache: CacheKind,
    max_cache_len: int,
    dtype: DType,
    model_dtype: DType,
    version: str,
) -> _LayerBytes:
    match layer:
        case MLALatent() if version == "5.24":
            kept = tokens if cache == "dynamic" else max_cache_len
            # DeepSeek-V3.2's indexer key is cached beside the latent in the cache dtype
            # (measured by the probe; vLLM stores it in fp8 with scales instead)
            index = _tensor_bytes(batch, 1, kept, layer.index_head_dim, dtype)
            return _LayerBytes(
                "mla_latent",
                _tensor_bytes(batch, 1, kept, layer.kv_lora_rank, dtype) + index,
                _tensor_bytes(batch, 1, kept, layer.qk_rope_head_dim, dtype),
                0,
                2 + (1 if layer.index_head_dim else 0),
            )
        case MLALatent():
            if cache == "static" and version != "5":
                raise UnitError(
                    f"transformers {version}: a StaticCache gives V the K head dim, so an MLA"
                    " model's V does not fit it; modelled from v5"
                )
            if spec.qk_nope_head_dim is None or spec.v_head_dim is None:
                raise UnitError(
                    f"{spec.name}: qk_nope_head_dim and v_head_dim are needed for the"
                    " decompressed K and V transformers caches"
                )
            heads = spec.num_attention_heads
            kept = tokens if cache == "dynamic" else max_cache_len
            k_dims = spec.qk_nope_head_dim + layer.qk_rope_head_dim
            return _LayerBytes(
                "mla_decompressed",
                _tensor_bytes(batch, heads, kept, k_dims, dtype),
                _tensor_bytes(batch, heads, kept, spec.v_head_dim, dtype),
                0,
                2,
            )
        case SlidingWindowAttention() | ChunkedLocalAttention():
            window = layer.window if isinstance(layer, SlidingWindowAttention) else layer.chunk
            if cache == "dynamic":
                kept = sliding_tokens_kept(tokens, window)
            else:
                kept = min(window, max_cache_len)
            return _attention(layer, layer.kind, kept, batch, dtype)
        case FullAttention():
            kept = tokens if cache == "dynamic" else max_cache_len
            return _attention(layer, layer.kind, kept, batch, dtype)
        case RecurrentState():
            state = _state_bytes(layer, spec, batch, model_dtype, version)
            return _LayerBytes("recurrent_state", 0, 0, state, 0)
        case AttentionAndState():
            kept = tokens if cache == "dynamic" else max_cache_len
            attention = _attention(layer.attention, layer.attention.kind, kept, batch, dtype)
            state = _state_bytes(layer.state, spec, batch, model_dtype, version)
            return replace(attention, state_bytes=state)
        case NoCache():
            return _LayerBytes("no_cache", 0, 0, 0, 0)
    raise UnitError(f"transformers profile: {layer.kind} layers are not modelled")


#: model types whose linear attention is MiniMax's lightning: its state in the model dtype
_LIGHTNING = ("minimax", "minimax_text_01")


def _state_bytes(
    layer: RecurrentState, spec: ModelSpec, batch: int, model_dtype: DType, version: str
) -> int:
    """A recurrent layer's state as transformers holds it. The whole kernel width of conv
    history in the model dtype (vLLM and llama.cpp keep kernel - 1 columns): Jamba, d_inner
    8192 and kernel 4 -> 8192 x 4 values; LFM2's short convolution keeps conv_L_cache columns;
    a kernel of 1 (MiniMax lightning) keeps none. The SSM state: float32 for the gated delta
    net in every version and for Mamba from 5.24 (whatever the model dtype: measured by the
    probe), MiniMax lightning's in the model dtype, else the spec's ``state_dtype``."""
    kernels = {"mamba": spec.mamba_d_conv, "short_conv": spec.conv_L_cache}
    kernel = kernels.get(layer.kind, spec.linear_conv_kernel_dim) or 2
    conv_values = 0 if kernel <= 1 else layer.conv_values // (kernel - 1) * kernel
    if spec.model_type in _LIGHTNING:
        ssm_dtype = model_dtype
    elif layer.kind == "linear_attention" or (layer.kind == "mamba" and version == "5.24"):
        ssm_dtype = resolve_dtype("float32")
    else:
        ssm_dtype = layer.state_dtype
    return batch * (model_dtype.row_bytes(conv_values) + ssm_dtype.row_bytes(layer.ssm_values))


def _attention(layer: FullAttention, kind: str, kept: int, batch: int, dtype: DType) -> _LayerBytes:
    heads = layer.num_kv_heads
    return _LayerBytes(
        kind,
        _tensor_bytes(batch, heads, kept, layer.head_dim, dtype),
        _tensor_bytes(batch, heads, kept, layer.v_head_dim, dtype),
        0,
        2,
    )


def kv_cache(
    spec: ModelSpec | str,
    *,
    context_tokens: int | str,
    batch_size: int = 1,
    cache: CacheKind = "dynamic",
    max_cache_len: int | str | None = None,
    dtype: str | None = None,
    version: str | None = None,
) -> EngineResult:
    """Bytes the transformers cache holds for ``batch_size`` sequences of ``context_tokens``.

    ``cache="static"`` pre-allocates ``max_cache_len`` tokens (default ``context_tokens``),
    whatever has been written. ``dtype`` is the cache (and activation) dtype: the model's
    unless given. ``engine_log`` carries the bytes per layer kind (``full_attention_bytes``,
    ``sliding_attention_bytes``, ``mla_decompressed_bytes``, ``recurrent_state_bytes``...),
    the K and V totals and ``tensors``, the count of K and V tensors. Raises
    UnknownEngineError for a version not in ``VERSIONS``, UnitError for a bad count, cache
    kind or dtype.
    """
    model = as_spec(spec)
    version = as_optional_str(version, "version") or DEFAULT_VERSION
    if version not in VERSIONS:
        raise UnknownEngineError(
            f"transformers {version} is not modelled; modelled: {', '.join(VERSIONS)}"
        )
    tokens = as_tokens(context_tokens, "context_tokens")
    batch = as_int(batch_size, "batch_size", minimum=1)
    if as_str(cache, "cache", "a cache kind: dynamic or static") not in ("dynamic", "static"):
        raise UnitError(f"cache {cache!r}: choose dynamic or static")
    cache_len = tokens if max_cache_len is None else as_tokens(max_cache_len, "max_cache_len")
    if cache == "static" and cache_len < tokens:
        raise UnitError(f"max_cache_len {cache_len} is shorter than the {tokens} tokens to cache")
    cache_dtype, why = _cache_dtype(model, as_optional_str(dtype, "dtype"), version)
    # transformers caches what the model computes: the run dtype is the cache dtype.
    parts = [
        _layer_bytes(
            layer,
            model,
            tokens=tokens,
            batch=batch,
            cache=cache,
            max_cache_len=cache_len,
            dtype=cache_dtype,
            model_dtype=cache_dtype,
            version=version,
        )
        for layer in model.layers
    ]
    log = _engine_log(parts)
    log.update({"cache": cache, "dtype": cache_dtype.name, "dtype_reason": why})
    k_total, v_total, state_total = (int(log[f"{k}_bytes"]) for k in ("k", "v", "state"))
    total = k_total + v_total + state_total
    label = "DynamicCache" if cache == "dynamic" else f"StaticCache(max_cache_len={cache_len})"
    return EngineResult(
        engine="transformers",
        engine_version=version,
        kv_cache_bytes=total,
        kv_cache_tokens=tokens if cache == "dynamic" else cache_len,
        engine_log=log,
        log_lines=(
            f"{label}: {log['tensors']} K/V tensors, {total:,} B"
            f" (K {k_total:,} B, V {v_total:,} B, state {state_total:,} B)",
        ),
    )


def _engine_log(parts: list[_LayerBytes]) -> dict[str, int | float | str]:
    """Bytes per cache kind (no-cache layers left out): K and V under the layer's kind, any
    recurrent state under ``recurrent_state`` (a Falcon-H1 layer holds both); then the K, V
    and state totals and the count of K and V tensors."""
    by_kind: dict[str, int] = {}
    for part in parts:
        by_kind[part.kind] = by_kind.get(part.kind, 0) + part.k_bytes + part.v_bytes
        if part.state_bytes:
            by_kind["recurrent_state"] = by_kind.get("recurrent_state", 0) + part.state_bytes
    log: dict[str, int | float | str] = {
        f"{kind}_bytes": num_bytes for kind, num_bytes in by_kind.items() if kind != "no_cache"
    }
    log["k_bytes"] = sum(part.k_bytes for part in parts)
    log["v_bytes"] = sum(part.v_bytes for part in parts)
    log["state_bytes"] = sum(part.state_bytes for part in parts)
    log["tensors"] = sum(part.tensors for part in parts)
    return log
