"""TensorRT-LLM, PyTorch backend: how its KV cache manager sizes the paged pool.

Rules read for TensorRT-LLM 1.0 to 1.2 (tensorrt_llm/_torch/pyexecutor/_util.py
``KvCacheCreator``, tensorrt_llm/_torch/pyexecutor/resource_manager.py ``KVCacheManager``,
cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp for the log line,
docs/source/reference/memory.md):

- After a dry run with a temporary cache, ``_cal_max_memory``:
  ``available = int((total - peak + temporary_kv) x free_gpu_memory_fraction)``, with ``peak``
  the torch peak plus non-torch memory of the dry run and ``temporary_kv`` the dry run's own
  cache (allocated, so inside the peak, and added back). A fraction of what is *free*, not of
  the total as in vLLM. Default fraction 0.9.
- Estimated bytes per token (``get_cache_size_per_token``): ``kv_factor x layers x
  (head_dim x kv_heads // tp) x dtype bytes``, ``kv_factor`` 2 (K, V); MLA:
  ``1 x layers x (kv_lora_rank + qk_rope_head_dim) x dtype bytes``, not split by TP. The
  dtype counts 1 B for fp8 and 2 B otherwise (a float32 cache too); ``layers`` are the
  attention layers of this pipeline rank.
- Caps: ``max_tokens`` gives ``min(available, max_tokens x bytes per token)``;
  ``max_gpu_total_bytes`` a byte cap; then ``max_tokens = available // bytes per token``.
- Blocks: ``blocks_in_primary_pool = max_tokens // tokens_per_block`` (32 by default), the
  minimum over ranks. The pool holds, per token, ``kv_factor x sum over local layers of
  ceil(kv_heads / tp) x head_dim`` values of the cache dtype.
- Windows: ``max_attention_window`` (one value, or a pattern repeated over the layers) is
  clamped to ``max_seq_len`` and then to the pool: ``blocks x tokens_per_block`` (beam 1).
  Several different windows (VSWA) make the C++ manager split the pool by window; that split
  is not modelled here.
- Printed: ``Number of tokens per block: 32.`` and ``[MemUsageChange] Allocated X GiB for max
  tokens in paged KV cache (N).`` with ``N = blocks x tokens_per_block`` and X the pool bytes
  / 2^30 to two decimals.

Worked example (Llama 3.1 8B, bf16, 80 GiB total, peak 20 GiB, 1 GiB temporary cache):
``int(61 GiB x 0.9)`` = 58,948,426,137 B; 2 x 32 x 1,024 x 2 B = 131,072 B a token, so
449,740 tokens, 14,054 blocks of 32 = 449,728 tokens = 54.90 GiB.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

from kvplan.arguments import (
    as_fraction,
    as_int,
    as_optional_str,
    as_parallel,
    as_sequence,
    check_ints,
)
from kvplan.catalog.lookup import as_spec
from kvplan.engines.base import EngineResult, UnknownEngineError
from kvplan.errors import UnitError
from kvplan.hardware.gpus import GPU
from kvplan.hardware.lookup import as_gpu
from kvplan.model.dtypes import cache_dtypes
from kvplan.model.layers import FullAttention, LayerCache, MLALatent, NoCache, RecurrentState
from kvplan.model.spec import ModelSpec
from kvplan.model.stages import as_tensor_parallel_size, walk_stages
from kvplan.model.weights import model_weights
from kvplan.units import DType, GiB

__all__ = [
    "DEFAULT_VERSION",
    "VERSIONS",
    "estimated_bytes_per_token",
    "kv_cache",
    "pool_bytes_per_token",
    "pp_layer_counts",
]

VERSIONS = ("1.0", "1.1", "1.2")
DEFAULT_VERSION = "1.2"


def _cache_dtype(spec: ModelSpec, kv_cache_dtype: str | None) -> DType:
    return cache_dtypes(spec, "trtllm", kv_cache_dtype=kv_cache_dtype).k


def _attention_layers(layers: Sequence[LayerCache]) -> list[LayerCache]:
    cached: list[LayerCache] = []
    for layer in layers:
        match layer:
            case MLALatent() if layer.index_head_dim:
                raise UnitError(
                    "TensorRT-LLM profile: the DeepSeek-V3.2 indexer cache is not modelled"
                )
            case MLALatent() | FullAttention():
                cached.append(layer)
            case NoCache():
                pass
            case RecurrentState():
                raise UnitError(
                    "TensorRT-LLM profile: hybrid recurrent models (MambaHybridCacheManager)"
                    " are not modelled"
                )
            case _:
                raise UnitError(f"TensorRT-LLM profile: {layer.kind} layers are not modelled")
    return cached


def pp_layer_counts(num_layers: int, pp: int) -> tuple[int, ...]:
    """Layers per pipeline rank as ``Mapping.pp_layers`` splits them: equal shares, the
    remainder one each to the first ranks. 61 layers on 4 ranks: (16, 15, 15, 15)."""
    if pp < 1 or pp > num_layers:
        raise UnitError(f"pp {pp} must be between 1 and the {num_layers} layers")
    share, rest = divmod(num_layers, pp)
    return tuple(share + (1 if i < rest else 0) for i in range(pp))


def estimated_bytes_per_token(layers: Sequence[LayerCache], *, tp: int, dtype: DType) -> int:
    """``get_cache_size_per_token`` for the given (one rank's) layers.

    Llama 3.1 8B: 2 x 32 x (128 x 8 // 1) x 2 B = 131,072; at TP 16: 128 x 8 // 16 = 64 values
    a layer, half a head (the estimate does not round heads up).
    """
    attention = _attention_layers(layers)
    num_layers = max(len(attention), 1)
    width = 1 if dtype.name.startswith("fp8") or dtype.name == "int8" else 2
    first = attention[0] if attention else None
    match first:
        case MLALatent():
            return num_layers * (first.kv_lora_rank + first.qk_rope_head_dim) * width
        case FullAttention():
            values = first.head_dim * first.num_kv_heads // tp
            return 2 * num_layers * values * width
    raise UnitError("this model keeps no attention KV cache; TensorRT-LLM has no pool to size")


def pool_bytes_per_token(layers: Sequence[LayerCache], *, tp: int, dtype: DType) -> int:
    """Bytes the allocated pool holds per token on one rank (``get_cache_bytes_per_token``):
    ``kv_factor x sum(ceil(kv_heads / tp)) x head_dim`` values in the cache dtype."""
    values = 0
    for layer in _attention_layers(layers):
        match layer:
            case MLALatent():
                values += layer.kv_lora_rank + layer.qk_rope_head_dim
            case FullAttention():
                values += 2 * math.ceil(layer.num_kv_heads / tp) * layer.head_dim
    return dtype.row_bytes(values)


def kv_cache(
    spec: ModelSpec | str,
    gpu: GPU | str,
    *,
    tp: int = 1,
    pp: int = 1,
    free_gpu_memory_fraction: float | Fraction | str = 0.9,
    max_tokens: int | None = None,
    tokens_per_block: int = 32,
    kv_cache_dtype: str | None = None,
    peak_bytes: int | None = None,
    weights_bytes: int | None = None,
    max_attention_window: Sequence[int] | None = None,
    version: str | None = None,
    temporary_kv_bytes: int = 0,
    max_gpu_total_bytes: int | None = None,
    max_seq_len: int | None = None,
) -> EngineResult:
    """The paged KV pool TensorRT-LLM's PyTorch backend allocates on one GPU.

    ``peak_bytes``: the dry run's peak (torch peak + non-torch memory), which includes the
    ``temporary_kv_bytes`` of its own cache; when not given it is modelled as the rank's
    weights (``weights_bytes``, or the spec's split over TP and PP) plus that temporary
    cache, so activations and CUDA graphs count as nothing. ``max_seq_len`` (default the
    spec's ``max_position_embeddings``) clamps the attention window. With PP, every rank
    sizes from its own layers and all take the smallest token count; the first rank is
    reported.
    """
    spec, gpu = as_spec(spec), as_gpu(gpu)
    version = _check(spec, version, tp, pp, tokens_per_block)
    fraction = as_fraction(free_gpu_memory_fraction, "free_gpu_memory_fraction")
    if fraction == 1:
        raise UnitError(f"free_gpu_memory_fraction {free_gpu_memory_fraction} must be in (0, 1)")
    check_ints(
        optional=True,
        peak_bytes=peak_bytes,
        weights_bytes=weights_bytes,
        max_gpu_total_bytes=max_gpu_total_bytes,
    )
    as_int(temporary_kv_bytes, "temporary_kv_bytes")
    check_ints(minimum=1, optional=True, max_tokens=max_tokens, max_seq_len=max_seq_len)
    dtype = _cache_dtype(spec, kv_cache_dtype)
    windows = _windows(max_attention_window)
    if len(set(windows)) > 1:
        raise UnitError(
            "TensorRT-LLM profile: several attention windows (VSWA) split the pool by window"
            " in the C++ manager; not modelled"
        )
    # Every rank sizes from its own layers (split by TensorRT-LLM's rule, not vLLM's); all
    # take the smallest token count, and the first rank is reported.
    counts = pp_layer_counts(len(spec.layers), pp)
    weights = model_weights(spec) if weights_bytes is None and peak_bytes is None else None
    stages = walk_stages(spec, counts, weights, tp)
    available = []
    for stage in stages:
        if peak_bytes is not None:
            peak = peak_bytes
        else:
            rank_weights = stage.weights_bytes if weights_bytes is None else weights_bytes
            peak = rank_weights + temporary_kv_bytes
        per_token = estimated_bytes_per_token(stage.layers, tp=tp, dtype=dtype)
        free = (gpu.memory_bytes - peak + temporary_kv_bytes) * fraction
        rank_available = max(0, math.floor(free))
        if max_tokens is not None:
            rank_available = min(rank_available, max_tokens * per_token)
        if max_gpu_total_bytes is not None and max_gpu_total_bytes > 0:
            rank_available = min(rank_available, max_gpu_total_bytes)
        available.append((rank_available, rank_available // per_token))
    tokens = min(rank_tokens for _, rank_tokens in available)
    num_blocks = tokens // tokens_per_block
    pool_tokens = num_blocks * tokens_per_block
    seq_len = max_seq_len or spec.max_position_embeddings or pool_tokens
    window = min(windows[0], seq_len) if windows else seq_len
    return _result(
        version,
        stages[0].layers,
        tp=tp,
        dtype=dtype,
        available_bytes=available[0][0],
        tokens=tokens,
        tokens_per_block=tokens_per_block,
        window=min(window, pool_tokens),
    )


def _result(
    version: str,
    layers: Sequence[LayerCache],
    *,
    tp: int,
    dtype: DType,
    available_bytes: int,
    tokens: int,
    tokens_per_block: int,
    window: int,
) -> EngineResult:
    """The pool of the reported rank (holding ``layers``) at the ranks' smallest ``tokens``,
    with the lines TensorRT-LLM prints."""
    num_blocks = tokens // tokens_per_block
    pool_tokens = num_blocks * tokens_per_block
    pool_bytes = pool_tokens * pool_bytes_per_token(layers, tp=tp, dtype=dtype)
    return EngineResult(
        engine="trtllm",
        engine_version=version,
        kv_cache_bytes=pool_bytes,
        num_blocks=num_blocks,
        block_size=tokens_per_block,
        kv_cache_tokens=pool_tokens,
        engine_log={
            "available_kv_mem_bytes": available_bytes,
            "kv_size_per_token": estimated_bytes_per_token(layers, tp=tp, dtype=dtype),
            "max_tokens": tokens,
            "blocks_in_primary_pool": num_blocks,
            "tokens_per_block": tokens_per_block,
            "max_tokens_in_paged_kv_cache": pool_tokens,
            "allocated_gib": float(f"{pool_bytes / GiB:.2f}"),
            "max_attention_window": window,
        },
        log_lines=(
            f"Number of tokens per block: {tokens_per_block}.",
            f"[MemUsageChange] Allocated {pool_bytes / GiB:.2f} GiB for max tokens in paged"
            f" KV cache ({pool_tokens}).",
        ),
    )


def _check(spec: ModelSpec, version: str | None, tp: int, pp: int, tokens_per_block: int) -> str:
    """The version asked (default: the latest modelled), the sizes checked."""
    version = as_optional_str(version, "version") or DEFAULT_VERSION
    if version not in VERSIONS:
        raise UnknownEngineError(
            f"TensorRT-LLM {version} is not modelled; modelled: {', '.join(VERSIONS)}"
        )
    check_ints(minimum=1, tp=tp, pp=pp, tokens_per_block=tokens_per_block)
    as_parallel(pp, "pp")
    as_tensor_parallel_size(spec, tp)
    return version


def _windows(max_attention_window: object) -> tuple[int, ...]:
    """``--max-attention-window``: a list of window sizes in tokens, or None."""
    if max_attention_window is None:
        return ()
    windows = as_sequence(max_attention_window, "max_attention_window", "a list of token counts")
    return tuple(as_int(w, "max_attention_window", minimum=1) for w in windows)
