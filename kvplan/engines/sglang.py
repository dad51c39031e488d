"""SGLang: how its model runner sizes the token-to-KV pool, and what it prints about it.

Versions: the pool rules (cell size, ``rest`` memory, page rounding, padded slot) hold for
SGLang v0.4.x through v0.5.x (2025); the DeepSeek V3.2 (NSA) indexer term in the cell size
arrived with PR #11309 (Oct 2025); the automatic ``mem_fraction_static`` is the reserve
heuristic of ``_handle_gpu_memory_settings`` in ``server_args.py`` (late 2025; releases of
mid-2025 and earlier used a different, TP-size-based default, not modelled here).

Sources (sgl-project/sglang):

- ``python/sglang/srt/model_executor/model_runner.py`` and its kv-cache mixin
  (``model_runner_kv_cache_mixin.py``): ``get_cell_size_per_token``, ``profile_max_num_token``,
  ``init_memory``, ``calculate_mla_kv_cache_dim``;
- ``python/sglang/srt/server_args.py``: ``_handle_gpu_memory_settings``;
- ``python/sglang/srt/mem_cache/memory_pool.py``: ``MHATokenToKVPool``, ``MLATokenToKVPool``,
  ``NSATokenToKVPool`` (buffer shapes and the ``KV Cache is allocated`` log line).

The rules, in the order SGLang applies them:

1. ``cell_size`` (bytes per token per rank) = ``kv_heads_per_rank x (head_dim + v_head_dim)
   x layers x dtype bytes``; MLA ``(kv_lora_rank + qk_rope_head_dim) x layers x dtype bytes``;
   DeepSeek V3.2 adds its fp8 indexer key, ``index_head_dim + index_head_dim / 128 x 4`` bytes
   per layer.
2. ``rest = post_load_free - pre_load_free x (1 - mem_fraction_static)``, in GiB as floats;
   ``max_total_num_tokens = int(rest x 2^30) // cell_size``, capped by ``--max-total-tokens``,
   rounded down to the page size, the minimum over pipeline ranks.
3. The pool then allocates ``max_total_num_tokens + page_size`` rows per layer (slot 0 is a
   padded dummy), and the log prints those bytes divided by 1024^3 as "GB".

kvplan keeps bytes as exact integers: ``int(rest_GiB x 2^30)`` is ``floor(rest_bytes)``, and
``mem_fraction_static`` is read as the decimal it is written as (0.93 = 93/100), so the float
arithmetic of the engine is reproduced to the byte, bar float rounding at exact boundaries.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from fractions import Fraction

from kvplan.catalog.lookup import as_spec
from kvplan.engines.base import EngineResult, refuse_unread_kinds
from kvplan.engines.sglang_memory import (  # re-exported: callers read it from here
    mem_fraction_static_auto as mem_fraction_static_auto,
)
from kvplan.engines.sglang_settings import (
    Extras,
    attention_tp_size,
    check_sizes,
    extras,
    pool_fraction,
)
from kvplan.errors import UnitError
from kvplan.hardware.gpus import GPU
from kvplan.hardware.lookup import as_gpu
from kvplan.model.dtypes import cache_dtypes
from kvplan.model.layers import FullAttention, LayerCache, MLALatent, SlidingWindowAttention
from kvplan.model.spec import ModelSpec
from kvplan.model.stages import Stage, walk_stages
from kvplan.model.weights import model_weights, pipeline_partition
from kvplan.units import DType, GiB

#: The SGLang versions these rules were read for: the 0.4.x-0.5.x releases of 2025; the NSA
#: (DeepSeek V3.2) indexer term from PR #11309 (Oct 2025).
SGLANG_VERSION = "0.5"

#: NSA (DeepSeek V3.2) stores its indexer key and the MLA latent in fp8 blocks of 128 values,
#: each block with one fp32 (4 B) scale (``NSATokenToKVPool.quant_block_size``).
NSA_QUANT_BLOCK = 128
_FP32_SCALE_BYTES = 4
#: NSA keeps the RoPE part of the latent in bf16 even when the cache is fp8.
_NSA_ROPE_BYTES = 2


def _kv_dtype(spec: ModelSpec, kv_cache_dtype: str | None) -> DType:
    """The cache dtype: ``auto``/None is the model dtype; SGLang stores whole elements only."""
    if any(layer.kind == "attention_mamba" for layer in spec.layers):
        raise UnitError("SGLang profile: layers with attention and Mamba2 state are not modelled")
    refuse_unread_kinds(spec.layers, "SGLang profile")
    dtype = cache_dtypes(spec, "sglang", kv_cache_dtype=kv_cache_dtype).k
    name = dtype.name
    if dtype.block_values != 1:
        raise UnitError(
            f"kv_cache_dtype {name!r}: the SGLang profile models whole-element dtypes only"
            " (auto, bfloat16, float16, float32, fp8_e4m3, fp8_e5m2)"
        )
    return dtype


def _cell_size_of(
    layers: Sequence[LayerCache], tp: int, dtype: DType, index_head_dim: int | None
) -> int:
    """Bytes per token per rank for ``layers``, as ``get_cell_size_per_token`` counts them."""
    cell = 0
    for layer in layers:
        match layer:
            case MLALatent():
                # The latent is shared by all heads, so TP does not split it.
                cell += (layer.kv_lora_rank + layer.qk_rope_head_dim) * dtype.block_bytes
                if index := index_head_dim or layer.index_head_dim:  # given, or the spec's
                    cell += _index_key_bytes(index)
            case FullAttention():
                # Sliding and chunked layers too: the profile step sums every attention layer.
                shard = layer.shard(tp)
                cell += shard.k_token_bytes(dtype) + shard.v_token_bytes(dtype)
            case _:
                pass  # recurrent state and cache-less layers take no per-token bytes
    return cell


def _index_key_bytes(index_head_dim: int) -> int:
    """One token's NSA indexer key: fp8 values plus one fp32 scale per 128 (128 -> 132 B)."""
    return index_head_dim + index_head_dim // NSA_QUANT_BLOCK * _FP32_SCALE_BYTES


def cell_size_bytes(
    spec: ModelSpec,
    *,
    tp: int = 1,
    kv_cache_dtype: str | None = None,
    index_head_dim: int | None = None,
) -> int:
    """Bytes one token takes on one rank in SGLang's profile: the ``cell_size``.

    ``tp`` is the *attention* TP size (``tp / dp`` with ``--enable-dp-attention``). KV heads
    split across ranks, at least one per rank: Qwen3-235B-A22B at TP 4 in bf16 keeps
    1 head x (128 + 128) x 94 layers x 2 B = 48,128 B. MLA keeps one latent, unsplit:
    DeepSeek V3 in bf16, (512 + 64) x 61 x 2 B = 70,272 B. ``index_head_dim`` (DeepSeek V3.2)
    adds the indexer key, 128 + 4 B a layer: V3.2 in fp8, (576 + 132) x 61 = 43,188 B.

    SGLang counts the latent at the cache dtype's width even where the NSA pool stores fp8
    scales and a bf16 RoPE part (656 B, not 576 B, a layer), so the pool it then allocates
    is larger than this estimate (see ``pool_token_bytes``).
    """
    if tp < 1:
        raise UnitError(f"tp {tp} must be >= 1")
    dtype = _kv_dtype(spec, kv_cache_dtype)
    return _cell_size_of(spec.layers, tp, dtype, index_head_dim)


def _mla_pool_dim_bytes(layer: MLALatent, dtype: DType, index_head_dim: int | None) -> int:
    """Bytes of one MLA pool row: ``calculate_mla_kv_cache_dim`` with the store width.

    NSA in fp8 (non-trtllm backends) packs 512 fp8 values, 4 fp32 scales and the 64 RoPE
    values in bf16: 512 + 16 + 128 = 656 B. Otherwise ``(rank + rope) x dtype bytes``.
    """
    if index_head_dim and dtype.name.startswith("fp8"):
        return (
            layer.kv_lora_rank
            + layer.kv_lora_rank // NSA_QUANT_BLOCK * _FP32_SCALE_BYTES
            + layer.qk_rope_head_dim * _NSA_ROPE_BYTES
        )
    return (layer.kv_lora_rank + layer.qk_rope_head_dim) * dtype.block_bytes


def pool_token_bytes(
    spec: ModelSpec,
    *,
    tp: int = 1,
    kv_cache_dtype: str | None = None,
    index_head_dim: int | None = None,
) -> tuple[int, int]:
    """Bytes the pool allocates per token row on one rank: ``(k, v)``; MLA puts all in ``k``.

    Equal to ``cell_size_bytes`` except for DeepSeek V3.2 in fp8, whose rows are 656 B, not
    576 B, a layer. The NSA indexer buffer is paged and not included (see ``kv_cache``).
    """
    dtype = _kv_dtype(spec, kv_cache_dtype)
    k_bytes = v_bytes = 0
    for layer in spec.layers:
        match layer:
            case MLALatent():
                k_bytes += _mla_pool_dim_bytes(layer, dtype, index_head_dim or layer.index_head_dim)
            case FullAttention():
                shard = layer.shard(tp)
                k_bytes += shard.k_token_bytes(dtype)
                v_bytes += shard.v_token_bytes(dtype)
            case _:
                pass
    return k_bytes, v_bytes


def max_total_tokens(
    spec: ModelSpec,
    *,
    rest_bytes: int,
    tp: int = 1,
    kv_cache_dtype: str | None = None,
    page_size: int = 1,
    max_total_tokens_cap: int | None = None,
    index_head_dim: int | None = None,
) -> int:
    """``max_total_num_tokens``: the token slots of the pool from ``rest_bytes`` left for KV.

    SGLang computes ``int(rest_GiB x 2^30) // cell_size``, that is
    ``rest_bytes // cell_size``; then ``min`` with ``--max-total-tokens``; then rounds down
    to a multiple of ``page_size``. Example: 1000 x 131,072 + 5 B with 131,072 B a token is
    1000 tokens, 960 with pages of 64. No memory left gives 0 (SGLang then refuses to start).
    """
    if page_size < 1:
        raise UnitError(f"page_size {page_size} must be >= 1")
    cell = cell_size_bytes(
        spec, tp=tp, kv_cache_dtype=kv_cache_dtype, index_head_dim=index_head_dim
    )
    return _tokens(rest_bytes, cell, page_size, max_total_tokens_cap)


def _tokens(rest_bytes: int, cell: int, page_size: int, cap: int | None) -> int:
    if cell <= 0:
        raise UnitError("this model keeps no per-token KV cache; SGLang has no pool to size")
    tokens = max(0, rest_bytes) // cell
    if cap is not None:
        tokens = min(tokens, cap)
    return tokens // page_size * page_size


def _fraction(value: float) -> Fraction:
    """A fraction as the decimal it was written as: 0.93 -> 93/100, not the nearest double."""
    return Fraction(repr(value)) if isinstance(value, float) else Fraction(value)


def rest_bytes(
    *, pre_load_free_bytes: int, post_load_free_bytes: int, mem_fraction_static: float
) -> int:
    """Bytes left for the KV pool: ``post_load_free - pre_load_free x (1 - fraction)``, floored.

    80 GiB free before load, 60 GiB after, fraction 0.9: 60 - 8 = 52 GiB.
    """
    rest = post_load_free_bytes - pre_load_free_bytes * (1 - _fraction(mem_fraction_static))
    return math.floor(rest)


def format_log_line(
    max_total_num_tokens: int, k_size_bytes: int, v_size_bytes: int | None = None
) -> str:
    """The line SGLang prints once the pool is allocated; "GB" is GiB (bytes / 1024^3).

    With ``v_size_bytes`` None, the MLA form with one ``KV size``.
    """
    if v_size_bytes is None:
        return (
            f"KV Cache is allocated. #tokens: {max_total_num_tokens},"
            f" KV size: {k_size_bytes / GiB:.2f} GB"
        )
    return (
        f"KV Cache is allocated. #tokens: {max_total_num_tokens},"
        f" K size: {k_size_bytes / GiB:.2f} GB, V size: {v_size_bytes / GiB:.2f} GB"
    )


def pool_bytes(
    spec: ModelSpec,
    max_total_num_tokens: int,
    *,
    tp: int = 1,
    kv_cache_dtype: str | None = None,
    page_size: int = 1,
    index_head_dim: int | None = None,
    layers: Sequence[LayerCache] | None = None,
) -> tuple[int, int]:
    """Bytes the pool allocates on one rank, as its log counts them: ``(k, v)``; MLA all in k.

    Every layer holds ``max_total_num_tokens + page_size`` rows (the padded slot 0 rounded
    to a page): Qwen3-235B-A22B at TP 4, 367,404 tokens: 367,405 x 94 x 128 x 2 B K =
    8,841,233,920 B (8.23 GiB). NSA adds, per layer, an indexer buffer of
    ``(tokens + page_size + 1) // page_size`` pages of ``page_size x 132`` B, counted in the
    printed KV size.
    """
    dtype = _kv_dtype(spec, kv_cache_dtype)
    rows = max_total_num_tokens + page_size
    k_bytes = v_bytes = 0
    for layer in spec.layers if layers is None else layers:
        match layer:
            case MLALatent():
                index = index_head_dim or layer.index_head_dim
                k_bytes += rows * _mla_pool_dim_bytes(layer, dtype, index)
                if index:
                    pages = (max_total_num_tokens + page_size + 1) // page_size
                    k_bytes += pages * page_size * _index_key_bytes(index)
            case FullAttention():
                shard = layer.shard(tp)
                k_bytes += rows * shard.k_token_bytes(dtype)
                v_bytes += rows * shard.v_token_bytes(dtype)
            case _:
                pass
    return k_bytes, v_bytes


def swa_pool_tokens(
    max_total_num_tokens: int,
    *,
    num_layers: int,
    full_layers: int,
    swa_layers: int,
    swa_full_tokens_ratio: float = 0.8,
    page_size: int = 1,
) -> tuple[int, int]:
    """SGLang's split of a hybrid-SWA model's pool: ``(full_layer_tokens, swa_layer_tokens)``.

    The profile counted every layer as full; the same memory is shared so that
    ``swa x swa_layers + full x full_layers = tokens x num_layers`` with
    ``swa = full x swa_full_tokens_ratio`` (``--swa-full-tokens-ratio``, default 0.8), both
    rounded down to the page (model_runner.py, ``set_num_token_hybrid``; SGLang computes it in
    floats, and so does this). Gemma 3 27B (52 sliding, 10 full), 100,000 tokens:
    full = int(6,200,000 / 51.6) = 120,155, swa = int(120,155 x 0.8) = 96,124.
    """
    total = max_total_num_tokens * num_layers
    denominator = swa_full_tokens_ratio * swa_layers + full_layers
    full = int(total / denominator)
    swa = int(full * swa_full_tokens_ratio)
    return full // page_size * page_size, swa // page_size * page_size


def kv_cache(
    spec: ModelSpec | str,
    gpu: GPU | str,
    *,
    tp: int = 1,
    pp: int = 1,
    dp: int = 1,
    enable_dp_attention: bool = False,
    mem_fraction_static: float | None = None,
    kv_cache_dtype: str | None = None,
    page_size: int = 1,
    max_total_tokens: int | None = None,
    weights_bytes: int | None = None,
    used_before_load_bytes: int = 0,
    index_head_dim: int | None = None,
    chunked_prefill_size: int | None = None,
    cuda_graph_max_bs: int | None = None,
    swa_full_tokens_ratio: float = 0.8,
    version: str | None = None,
    speculative_algorithm: str | None = None,
    speculative_num_steps: int | None = None,
    speculative_eagle_topk: int | None = None,
    speculative_num_draft_tokens: int | None = None,
    speculative_draft_model: ModelSpec | None = None,
    enable_lora: bool = False,
    max_loras_per_batch: int = 8,
    max_lora_rank: int | None = None,
    lora_target_modules: Sequence[str] | None = None,
) -> EngineResult:
    """The KV pool SGLang allocates on one GPU of ``gpu``, with its log line.

    Free memory is modelled, not measured: before load, ``gpu.memory_bytes`` less
    ``used_before_load_bytes`` (CUDA context, NCCL buffers; 0 unless given, so
    ``rest = fraction x (total - used) - weights``); after load, that less the weights on the
    rank (``weights_bytes``, or the spec's weights split evenly across TP, by layers across
    PP with the embeddings on the first stage and the head on the last). Activations, CUDA
    graphs and the request-to-token table come later and do not move the pool.

    With PP, each stage sizes its own pool and all take the smallest token count.
    ``mem_fraction_static`` None takes ``mem_fraction_static_auto``. A hybrid-SWA model's pool
    is split between full and sliding layers (``swa_pool_tokens``); then ``kv_cache_tokens``
    is the full layers' tokens and the log carries both counts. ``version`` (an SGLang
    release) picks the automatic fraction's line; ``speculative_*`` add the draft's pool
    (sglang_spec, in ``kv_cache_bytes``); LoRA slots (sglang_lora) lower post-load free memory.
    Not modelled: Mamba state pools, fp4 caches. Wrong types raise ArgumentTypeError.
    """
    spec, gpu = as_spec(spec), as_gpu(gpu)
    check_sizes(
        max_total_tokens=max_total_tokens,
        weights_bytes=weights_bytes,
        used_before_load_bytes=used_before_load_bytes,
        index_head_dim=index_head_dim,
        chunked_prefill_size=chunked_prefill_size,
        cuda_graph_max_bs=cuda_graph_max_bs,
        swa_full_tokens_ratio=swa_full_tokens_ratio,
        enable_dp_attention=enable_dp_attention,
    )
    attention_tp = attention_tp_size(spec, tp, pp, dp, page_size, enable_dp_attention)
    extra = extras(
        spec,
        tp,
        version=version,
        speculative_algorithm=speculative_algorithm,
        speculative_num_steps=speculative_num_steps,
        speculative_eagle_topk=speculative_eagle_topk,
        speculative_num_draft_tokens=speculative_num_draft_tokens,
        speculative_draft_model=speculative_draft_model,
        enable_lora=enable_lora,
        max_loras_per_batch=max_loras_per_batch,
        max_lora_rank=max_lora_rank,
        lora_target_modules=lora_target_modules,
    )
    fraction = pool_fraction(
        spec,
        gpu,
        mem_fraction_static,
        tp=tp,
        pp=pp,
        dp=dp,
        enable_dp_attention=enable_dp_attention,
        chunked_prefill_size=chunked_prefill_size,
        cuda_graph_max_bs=cuda_graph_max_bs,
        extra=extra,
    )
    stages, rests, tokens = _stage_pools(
        spec,
        (tp, pp, attention_tp),
        (gpu.memory_bytes - used_before_load_bytes, extra.lora_bytes, weights_bytes, fraction),
        (_kv_dtype(spec, kv_cache_dtype), index_head_dim, page_size, max_total_tokens),
    )
    log: dict[str, int | float | str] = {
        "max_total_num_tokens": tokens,
        "mem_fraction_static": fraction,
        "rest_bytes": rests[0],
    }
    _note(log, extra)
    if tokens == 0:
        return _no_pool(log, fraction, page_size)
    pool = _Pool(spec, stages[0].layers, attention_tp, kv_cache_dtype, page_size, index_head_dim)
    if _is_hybrid_swa(spec):
        return _with_draft(_swa_result(pool, tokens, log, swa_full_tokens_ratio), pool, extra)
    return _with_draft(_pool_result(pool, tokens, log), pool, extra)


def _stage_pools(
    spec: ModelSpec,
    parallel: tuple[int, int, int],
    memory: tuple[int, int, int | None, float],
    cells: tuple[DType, int | None, int, int | None],
) -> tuple[tuple[Stage, ...], list[int], int]:
    """Each PP stage's ``rest`` and the tokens all take; ``parallel``: tp, pp, attention TP;
    ``memory``: free before load, LoRA slots, weights given, fraction; ``cells``: see kv_cache."""
    (tp, pp, attention_tp), (free, lora, given, fraction) = parallel, memory
    weights = model_weights(spec) if given is None else None
    stages = walk_stages(spec, pipeline_partition(len(spec.layers), pp), weights, tp)
    used = [stage.weights_bytes if given is None else given for stage in stages]
    rests = [
        rest_bytes(
            pre_load_free_bytes=free,
            post_load_free_bytes=free - lora - u,
            mem_fraction_static=fraction,
        )
        for u in used
    ]
    dtype, index_head_dim, page_size, max_total = cells
    sizes = [_cell_size_of(stage.layers, attention_tp, dtype, index_head_dim) for stage in stages]
    tokens = min(_tokens(r, c, page_size, max_total) for r, c in zip(rests, sizes, strict=True))
    return stages, rests, tokens


@dataclass(frozen=True, slots=True)
class _Pool:
    """What sizes the reported pool: the first stage's layers on one attention rank."""

    spec: ModelSpec
    layers: tuple[LayerCache, ...]
    tp: int
    kv_cache_dtype: str | None
    page_size: int
    index_head_dim: int | None

    def bytes(self, tokens: int) -> tuple[int, int]:
        """``pool_bytes`` of ``tokens`` rows in every layer of the stage."""
        return self._pool_bytes(tokens, self.layers, self.index_head_dim)

    def swa_bytes(self, tokens: int, sliding: bool) -> tuple[int, int]:
        """``pool_bytes`` of ``tokens`` rows in the stage's sliding (or its other) layers: one
        part of a hybrid-SWA pool."""
        layers = [x for x in self.layers if isinstance(x, SlidingWindowAttention) == sliding]
        return self._pool_bytes(tokens, layers, None)

    def _pool_bytes(
        self, tokens: int, layers: Sequence[LayerCache], index_head_dim: int | None
    ) -> tuple[int, int]:
        return pool_bytes(
            self.spec,
            tokens,
            tp=self.tp,
            kv_cache_dtype=self.kv_cache_dtype,
            page_size=self.page_size,
            index_head_dim=index_head_dim,
            layers=layers,
        )


def _note(log: dict[str, int | float | str], extra: Extras) -> None:
    log["version_line"] = extra.version.line
    if extra.version.note:
        log["version_note"] = extra.version.note
    if extra.lora_bytes:
        log["lora_bytes"] = extra.lora_bytes


def _with_draft(result: EngineResult, pool: _Pool, extra: Extras) -> EngineResult:
    """``result`` with the draft worker's pool: the target's token count, the draft's layers."""
    draft, tokens = extra.speculative, result.kv_cache_tokens or 0
    if draft is None or not draft.draft_layers or not tokens:
        return result
    sized = _Pool(draft.draft or pool.spec, draft.draft_layers, pool.tp, pool.kv_cache_dtype,
                  pool.page_size, None)  # fmt: skip
    k_bytes, v_bytes = sized.bytes(tokens)
    mla = any(isinstance(layer, MLALatent) for layer in draft.draft_layers)
    log = {**result.engine_log, "draft_k_size_bytes": k_bytes, "draft_v_size_bytes": v_bytes}
    line = format_log_line(tokens, k_bytes, None if mla else v_bytes)
    return replace(
        result,
        kv_cache_bytes=result.kv_cache_bytes + k_bytes + v_bytes,
        engine_log=log,
        log_lines=(*result.log_lines, line),
    )


def _no_pool(log: dict[str, int | float | str], fraction: float, page_size: int) -> EngineResult:
    """No memory left for a pool: SGLang stops here and allocates nothing."""
    return EngineResult(
        engine="sglang",
        engine_version=SGLANG_VERSION,
        kv_cache_bytes=0,
        num_blocks=0,
        block_size=page_size,
        kv_cache_tokens=0,
        engine_log=log,
        log_lines=(
            "Not enough memory. Please try to increase --mem-fraction-static."
            f" Current value: self.server_args.mem_fraction_static={fraction}",
        ),
    )


def _is_hybrid_swa(spec: ModelSpec) -> bool:
    """Both sliding-window and full attention layers: SGLang splits the pool between them."""
    swa = any(isinstance(layer, SlidingWindowAttention) for layer in spec.layers)
    full = any(
        isinstance(layer, FullAttention) and not isinstance(layer, SlidingWindowAttention)
        for layer in spec.layers
    )
    return swa and full


def _swa_result(
    pool: _Pool, tokens: int, log: dict[str, int | float | str], swa_full_tokens_ratio: float
) -> EngineResult:
    """A hybrid-SWA pool: the full layers' tokens and the sliding layers' tokens apart."""
    layers = pool.spec.layers
    full_tokens, swa_tokens = swa_pool_tokens(
        tokens,
        num_layers=len(layers),
        full_layers=sum(
            1
            for layer in layers
            if isinstance(layer, FullAttention) and not isinstance(layer, SlidingWindowAttention)
        ),
        swa_layers=sum(1 for layer in layers if isinstance(layer, SlidingWindowAttention)),
        swa_full_tokens_ratio=swa_full_tokens_ratio,
        page_size=pool.page_size,
    )
    full_k, full_v = pool.swa_bytes(full_tokens, sliding=False)
    swa_k, swa_v = pool.swa_bytes(swa_tokens, sliding=True)
    log.update(
        {
            "max_total_num_tokens": full_tokens,
            "full_layer_tokens": full_tokens,
            "swa_layer_tokens": swa_tokens,
            "k_size_bytes": full_k + swa_k,
            "v_size_bytes": full_v + swa_v,
        }
    )
    return EngineResult(
        engine="sglang",
        engine_version=SGLANG_VERSION,
        kv_cache_bytes=full_k + full_v + swa_k + swa_v,
        num_blocks=full_tokens // pool.page_size,
        block_size=pool.page_size,
        kv_cache_tokens=full_tokens,
        engine_log=log,
        log_lines=(
            "Use sliding window memory pool. full_layer_tokens="
            f"{full_tokens}, swa_layer_tokens={swa_tokens}",
        ),
    )


def _pool_result(pool: _Pool, tokens: int, log: dict[str, int | float | str]) -> EngineResult:
    """One pool of ``tokens`` rows per layer, with the line SGLang prints: K and V sizes, or
    one KV size for MLA."""
    k_bytes, v_bytes = pool.bytes(tokens)
    if any(isinstance(layer, MLALatent) for layer in pool.spec.layers):
        log["kv_size_gb"] = float(f"{k_bytes / GiB:.2f}")
        log["kv_size_bytes"] = k_bytes
        line = format_log_line(tokens, k_bytes)
    else:
        log["k_size_gb"] = float(f"{k_bytes / GiB:.2f}")
        log["v_size_gb"] = float(f"{v_bytes / GiB:.2f}")
        log["k_size_bytes"] = k_bytes
        log["v_size_bytes"] = v_bytes
        line = format_log_line(tokens, k_bytes, v_bytes)
    return EngineResult(
        engine="sglang",
        engine_version=SGLANG_VERSION,
        kv_cache_bytes=k_bytes + v_bytes,
        num_blocks=tokens // pool.page_size,
        block_size=pool.page_size,
        kv_cache_tokens=tokens,
        engine_log=log,
        log_lines=(line,),
    )
