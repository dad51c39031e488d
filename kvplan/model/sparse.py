"""Compressed and sparse attention caches: DeepSeek V4's compressed latents, MiniMax M3's
indexer keys, GLM-5.3's pooled indexer keys, Qwen4Exp's compressed QSA keys. Each class
answers the questions of ``kvplan.model.layers.LayerCache``.

DeepSeek V4 (vLLM models/deepseek_v4/attention.py, compressor.py) keeps, in every layer, the
latent of the last ``sliding_window`` tokens, and in a layer of ``compress_ratio`` r > 1 one
compressed latent per r tokens; a ratio-4 layer adds the lightning indexer's key per entry.
vLLM's default layout (``fp8_ds_mla``, what FlashMLA needs, whatever ``--kv-cache-dtype``)
stores a latent of ``head_dim`` 512 as 448 fp8 values, 64 bf16 RoPE values and 8 one-byte
scales: 448 + 128 + 8 = 584 B; the indexer's key is 128 fp8 values + a 4 B scale = 132 B.
The open group of r tokens still being compressed lives in an fp32 ring per layer.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar, Protocol

from kvplan.arguments import check_ints
from kvplan.model.layers import FullAttention, LayerCache, MLALatent
from kvplan.model.limits import MAX_DIM
from kvplan.units import DType, cdiv, format_count, resolve_dtype

#: The compress ratios vLLM 0.32's DeepSeek V4 builds (0 and 1: the window only).
COMPRESS_RATIOS = (0, 1, 4, 128)
#: The layer kinds of this module, as a spec's ``layer_types`` names them.
SPARSE_KINDS = ("compressed_attention", "sparse_attention", "indexed_attention")
_FP32_BYTES = 4


def ds_mla_entry_bytes(head_dim: int, rope_dim: int) -> int:
    """One latent in vLLM's ``fp8_ds_mla`` layout: the non-RoPE values in fp8, the RoPE
    values in bf16, one UE8M0 scale per 64 fp8 values plus one pad byte (584 B for V4)."""
    nope = head_dim - rope_dim
    return nope + 2 * rope_dim + nope // 64 + 1


def fp8_key_bytes(dim: int) -> int:
    """An indexer key in fp8 with one fp32 scale per 128 values: 128 + 4 = 132 B."""
    return dim + dim // 128 * 4


@dataclass(frozen=True, slots=True)
class CompressedLatent:
    """One DeepSeek V4 layer: compressed entries that grow with the context, plus a fixed part.

    ``entry_bytes``: one compressed entry (the latent, and the indexer key on ratio-4 layers),
    kept for every ``compress_ratio`` tokens (0: none); ``window_bytes``: the sliding window's
    latents, counted whole (what a sequence past the window holds); ``ring_bytes``: the
    compressors' fp32 rings of the open group. DeepSeek-V4-Flash, a ratio-4 layer: an entry
    584 + 132 = 716 B per 4 tokens (179 B a token), window 128 x 584 = 74,752 B, rings
    8 x 2 x 2 x 512 x 4 + 8 x 2 x 2 x 128 x 4 = 81,920 B.
    """

    compress_ratio: int
    entry_bytes: int
    window_bytes: int
    ring_bytes: int
    kind: ClassVar[str] = "compressed_attention"

    def __post_init__(self) -> None:
        check_ints(
            compress_ratio=self.compress_ratio,
            entry_bytes=self.entry_bytes,
            window_bytes=self.window_bytes,
            ring_bytes=self.ring_bytes,
        )

    @property
    def tokens_per_entry(self) -> int:
        return max(1, self.compress_ratio)

    @property
    def max_tokens(self) -> int | None:
        return None if self.compress_ratio > 1 else 0

    @property
    def state_bytes(self) -> int:
        return self.window_bytes + self.ring_bytes

    def k_token_bytes(self, dtype: DType) -> int:
        # per kept entry: tokens_retained counts entries, one per compress_ratio tokens
        return self.entry_bytes if self.compress_ratio > 1 else 0

    def v_token_bytes(self, dtype: DType) -> int:
        return 0

    def max_blocks(self, context_tokens: int, block_size: int) -> int:
        if self.compress_ratio <= 1:
            return 0
        return cdiv(context_tokens // self.compress_ratio, block_size)

    def shard(self, tensor_parallel_size: int) -> LayerCache:
        return self  # one latent shared by all heads: vLLM replicates it (max_tp_shards=1)

    def describe(self) -> str:
        fixed = f"window {self.window_bytes:,} B + rings {self.ring_bytes:,} B"
        if self.compress_ratio <= 1:
            return f"sliding latent only: {fixed}"
        return f"{self.entry_bytes} B per {self.compress_ratio} tokens; {fixed}"

    def formula(self, context_tokens: int, k_dtype: DType, v_dtype: DType) -> str:
        fixed = f"{self.state_bytes:,} B (window + rings)"
        if self.compress_ratio <= 1:
            return f"{fixed}, whatever the context"
        entries = f"{context_tokens // self.compress_ratio:,} entries"
        return f"{self.entry_bytes} B x {entries} (1 per {self.compress_ratio} tokens) + {fixed}"


def _sharded(attention: FullAttention, tensor_parallel_size: int) -> FullAttention:
    """``attention``'s heads on one rank (the indexer's one-head caches beside it stay whole)."""
    shard = attention.shard(tensor_parallel_size)
    if not isinstance(shard, FullAttention):
        raise TypeError("FullAttention.shard returned another kind")
    return shard


@dataclass(frozen=True, slots=True)
class SparseAttention:
    """GQA attention plus the sparse indexer's key (MiniMax M3, vLLM minimax_m3 indexer.py):
    one key of ``index_head_dim`` values a token, for the layer (not per head), kept in bf16
    (the model's ``indexer_kv_dtype`` default) on every rank. 128 values: 256 B a token."""

    attention: FullAttention
    index_head_dim: int
    kind: ClassVar[str] = "sparse_attention"
    state_bytes: ClassVar[int] = 0

    def __post_init__(self) -> None:
        check_ints(minimum=1, maximum=MAX_DIM, index_head_dim=self.index_head_dim)

    @property
    def max_tokens(self) -> int | None:
        return None

    @property
    def index_token_bytes(self) -> int:
        return resolve_dtype("bfloat16").row_bytes(self.index_head_dim)

    def k_token_bytes(self, dtype: DType) -> int:
        # the indexer's key counts with K: one more vector a token, no V of its own
        return self.attention.k_token_bytes(dtype) + self.index_token_bytes

    def v_token_bytes(self, dtype: DType) -> int:
        return self.attention.v_token_bytes(dtype)

    def max_blocks(self, context_tokens: int, block_size: int) -> int:
        return cdiv(context_tokens, block_size)

    def shard(self, tensor_parallel_size: int) -> LayerCache:
        return replace(self, attention=_sharded(self.attention, tensor_parallel_size))

    def describe(self) -> str:
        return f"{self.attention.describe()}, indexer key {self.index_head_dim} (bf16)"

    def formula(self, context_tokens: int, k_dtype: DType, v_dtype: DType) -> str:
        attention = self.attention.formula(context_tokens, k_dtype, v_dtype)
        tokens = format_count(context_tokens, "token")
        return f"{attention} + indexer {self.index_token_bytes} B x {tokens}"


@dataclass(frozen=True, slots=True)
class IndexedLatent:
    """GLM-5.3 (vLLM 0.32 models/glm5next/common/attention.py): an MLA latent a token, plus
    the kpool indexer's fp8 key, one per ``index_kpool`` tokens (``Glm5NextIndexerCache``:
    an ``MLAAttentionSpec`` of ``index_head_dim + index_head_dim // 128 x 4`` bytes with
    ``tokens_per_state = index_kpool``), plus a ring for the open pool (``Glm5NextTailCache``,
    a ``CircularBufferSpec``: one block a request of 2 bf16 rows, raw key and gate score, of
    ``index_head_dim`` values for each of ``ring_tokens`` slots). The ring is ``index_kpool``
    slots without speculative decoding (vLLM rounds kpool + draft tokens up to kpool x a power
    of 2). GLM-5.3-Flash: 512 x 2 B = 1,024 B a token, 132 B per 16 tokens, ring
    2 x 16 x 128 x 2 B = 8,192 B. Only whole pools are kept, as vLLM stores one state a pool."""

    latent: MLALatent
    index_head_dim: int
    index_kpool: int
    kind: ClassVar[str] = "indexed_attention"

    def __post_init__(self) -> None:
        check_ints(minimum=1, maximum=MAX_DIM, index_head_dim=self.index_head_dim)
        check_ints(minimum=2, maximum=MAX_DIM, index_kpool=self.index_kpool)

    @property
    def max_tokens(self) -> int | None:
        return None

    @property
    def pool_parts(self) -> tuple[int, int]:
        return fp8_key_bytes(self.index_head_dim), self.index_kpool

    @property
    def state_bytes(self) -> int:
        # ring_tokens = index_kpool (no draft tokens): 2 rows x slots x dims x 2 B (bf16)
        return 2 * self.index_kpool * self.index_head_dim * 2

    def k_token_bytes(self, dtype: DType) -> int:
        return self.latent.k_token_bytes(dtype)

    def v_token_bytes(self, dtype: DType) -> int:
        return 0

    def max_blocks(self, context_tokens: int, block_size: int) -> int:
        return cdiv(context_tokens, block_size)

    def shard(self, tensor_parallel_size: int) -> LayerCache:
        return self  # latent, indexer keys and ring are replicated on every rank

    def describe(self) -> str:
        key = fp8_key_bytes(self.index_head_dim)
        return (
            f"{self.latent.describe()}, indexer key {key} B per {self.index_kpool} tokens,"
            f" ring {self.state_bytes:,} B"
        )

    def formula(self, context_tokens: int, k_dtype: DType, v_dtype: DType) -> str:
        latent = self.latent.formula(context_tokens, k_dtype, v_dtype)
        pools = format_count(context_tokens // self.index_kpool, "pool")
        key = fp8_key_bytes(self.index_head_dim)
        return f"{latent} + indexer {key} B x {pools} + ring {self.state_bytes:,} B"


@dataclass(frozen=True, slots=True)
class IndexedAttention:
    """Qwen4Exp's QSA layer (vLLM 0.32 models/qwen4_exp/nvidia/qsa.py, indexer_qsa.py,
    common/qsa_cache.py): GQA K and V a token (``FullAttentionSpec``), plus the indexer's
    compressed key, one bf16 row of ``index_head_dim`` per ``tokens_per_key`` tokens
    (``QSACompressedKeyCache``, an ``MLAAttentionSpec`` with ``tokens_per_state``), plus a ring
    of ``tokens_per_key`` raw bf16 keys for the open group (``QSAKeyStateCache``, a
    ``CircularBufferSpec``, one block a request); with MRoPE each slot also holds the key's 3
    int64 positions, after the key rounded up to 4 values: 128 + 12 = 140 values. The keys and
    the ring are one head, kept whole on every rank. Qwen3.8-Flash-Next (2 KV heads of 256,
    index dim 128, ratio 4): 2,048 B a token, 256 B per 4 tokens, ring 4 x 140 x 2 = 1,120 B."""

    attention: FullAttention
    index_head_dim: int
    tokens_per_key: int
    ring_bytes: int
    kind: ClassVar[str] = "indexed_attention"

    def __post_init__(self) -> None:
        check_ints(minimum=1, maximum=MAX_DIM, index_head_dim=self.index_head_dim)
        check_ints(minimum=2, maximum=MAX_DIM, tokens_per_key=self.tokens_per_key)
        check_ints(ring_bytes=self.ring_bytes)

    @property
    def max_tokens(self) -> int | None:
        return None

    @property
    def key_bytes(self) -> int:
        return resolve_dtype("bfloat16").row_bytes(self.index_head_dim)

    @property
    def pool_parts(self) -> tuple[int, int]:
        return self.key_bytes, self.tokens_per_key

    @property
    def state_bytes(self) -> int:
        return self.ring_bytes

    def k_token_bytes(self, dtype: DType) -> int:
        return self.attention.k_token_bytes(dtype)

    def v_token_bytes(self, dtype: DType) -> int:
        return self.attention.v_token_bytes(dtype)

    def max_blocks(self, context_tokens: int, block_size: int) -> int:
        return cdiv(context_tokens, block_size)

    def shard(self, tensor_parallel_size: int) -> LayerCache:
        return replace(self, attention=_sharded(self.attention, tensor_parallel_size))

    def describe(self) -> str:
        return (
            f"{self.attention.describe()}, indexer key {self.key_bytes} B per"
            f" {self.tokens_per_key} tokens, ring {self.ring_bytes:,} B"
        )

    def formula(self, context_tokens: int, k_dtype: DType, v_dtype: DType) -> str:
        attention = self.attention.formula(context_tokens, k_dtype, v_dtype)
        keys = format_count(context_tokens // self.tokens_per_key, "key")
        return f"{attention} + indexer {self.key_bytes} B x {keys} + ring {self.ring_bytes:,} B"


def qsa_ring_bytes(index_head_dim: int, tokens_per_key: int, rope_positions: bool) -> int:
    """``QSAKeyStateCache``'s page without draft tokens: ``tokens_per_key`` slots of the raw
    bf16 key, and with MRoPE its 3 int64 positions (4 bf16 values each) after the key rounded
    up to 4 values."""
    width = index_head_dim
    if rope_positions:
        width = cdiv(index_head_dim, 4) * 4 + 3 * 4
    return tokens_per_key * width * 2


def compressed_latent(
    ratio: int, head_dim: int, rope_dim: int, window: int, index_head_dim: int
) -> CompressedLatent:
    """DeepSeek V4's layer of ``ratio`` (vLLM 0.32): the entry, window and ring bytes.

    The compressor of a ratio-4 layer overlaps two groups (coff 2), a ratio-128 one does
    not; its ring holds coff x ratio slots of 2 x coff x head_dim fp32 values (the kv and
    score states, ``CompressorStateCache``). A ratio-4 layer's indexer has its own compressor
    of ``index_head_dim``, and its fp8 key joins every entry."""
    if ratio not in COMPRESS_RATIOS:
        raise ValueError(f"compress_ratios: {ratio} is not one of {COMPRESS_RATIOS}")
    latent = ds_mla_entry_bytes(head_dim, rope_dim)
    window_bytes = window * latent
    if ratio <= 1:
        return CompressedLatent(ratio, 0, window_bytes, 0)
    coff = 2 if ratio == 4 else 1
    ring = coff * ratio * 2 * coff * head_dim * _FP32_BYTES
    entry = latent
    if ratio == 4:
        if not index_head_dim:
            raise ValueError("index_head_dim: required by DeepSeek V4's ratio-4 layers")
        ring += coff * ratio * 2 * coff * index_head_dim * _FP32_BYTES
        entry += fp8_key_bytes(index_head_dim)
    return CompressedLatent(ratio, entry, window_bytes, ring)


class SpecKeys(Protocol):
    """The spec keys these layers read (``kvplan.model.spec.ModelSpec`` has them all)."""

    @property
    def num_hidden_layers(self) -> int: ...
    @property
    def kv_heads(self) -> int: ...
    @property
    def head_dim(self) -> int | None: ...
    @property
    def v_head_dim(self) -> int | None: ...
    @property
    def qk_rope_head_dim(self) -> int | None: ...
    @property
    def index_head_dim(self) -> int | None: ...
    @property
    def sliding_window(self) -> int | None: ...
    @property
    def compress_ratios(self) -> tuple[int, ...] | None: ...
    @property
    def kv_lora_rank(self) -> int | None: ...
    @property
    def index_kpool(self) -> int | None: ...
    @property
    def index_rope_positions(self) -> bool | None: ...


def _indexed_attention(spec: SpecKeys) -> IndexedAttention:
    dim, ratio, head_dim = spec.index_head_dim, spec.index_kpool, spec.head_dim
    if dim is None or ratio is None or head_dim is None:
        raise ValueError(
            "index_head_dim, index_kpool, head_dim: required by indexed_attention layers"
            " (kv_lora_rank too for an MLA latent, GLM-5.3; without it GQA, Qwen4Exp)"
        )
    if ratio < 2:
        raise ValueError(f"index_kpool: {ratio} must be at least 2 (tokens per indexer key)")
    ring = qsa_ring_bytes(dim, ratio, bool(spec.index_rope_positions))
    v_dim = spec.v_head_dim or head_dim
    return IndexedAttention(FullAttention(spec.kv_heads, head_dim, v_dim), dim, ratio, ring)


def _indexed_layer(spec: SpecKeys) -> IndexedLatent | IndexedAttention:
    if spec.kv_lora_rank is None:  # GQA with the QSA indexer (Qwen4Exp), not an MLA latent
        return _indexed_attention(spec)
    # GLM-5.3 applies no rotary (qk_rope_head_dim 0): an absent key caches no rope part
    rank, rope = spec.kv_lora_rank, spec.qk_rope_head_dim or 0
    dim, pool = spec.index_head_dim, spec.index_kpool
    if rank is None or dim is None or pool is None:
        raise ValueError(
            "kv_lora_rank, index_head_dim, index_kpool: required by indexed_attention layers"
        )
    if pool < 2:
        raise ValueError(f"index_kpool: {pool} must be at least 2 (tokens per indexer key)")
    return IndexedLatent(MLALatent(rank, rope), dim, pool)


def sparse_layer(spec: SpecKeys, i: int, kind: str) -> LayerCache:
    """Layer ``i`` of ``spec`` of one of ``SPARSE_KINDS`` (ValueError naming the key)."""
    if kind == "indexed_attention":
        return _indexed_layer(spec)
    if kind == "sparse_attention":
        if spec.index_head_dim is None or spec.head_dim is None:
            raise ValueError("index_head_dim, head_dim: required by sparse_attention layers")
        v_dim = spec.v_head_dim or spec.head_dim
        attention = FullAttention(spec.kv_heads, spec.head_dim, v_dim)
        return SparseAttention(attention, spec.index_head_dim)
    ratios, n = spec.compress_ratios, spec.num_hidden_layers
    if ratios is None or len(ratios) != n:
        given = "absent" if ratios is None else f"{len(ratios)} entries"
        raise ValueError(
            f"compress_ratios: {given}; compressed_attention needs one per layer ({n})"
        )
    head_dim, rope, window = spec.head_dim, spec.qk_rope_head_dim, spec.sliding_window
    if head_dim is None or rope is None or window is None:
        raise ValueError(
            "head_dim, qk_rope_head_dim, sliding_window: required by compressed_attention layers"
        )
    if rope > head_dim:
        raise ValueError(f"qk_rope_head_dim: {rope} is more than head_dim {head_dim}")
    return compressed_latent(ratios[i], head_dim, rope, window, spec.index_head_dim or 0)
