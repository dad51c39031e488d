"""What one layer keeps per sequence: one small frozen class per cache kind.

Every class answers the same questions with plain integers, for ONE sequence:

- ``max_tokens``: the most token positions the layer ever keeps (None: all of them);
- ``k_token_bytes(dtype)`` / ``v_token_bytes(dtype)``: what one kept position costs;
- ``state_bytes``: a fixed per-sequence state that does not grow with the context.

Worked example (Llama 3.1 8B, one full-attention layer, bf16, 8 KV heads of 128 dims):
one token costs 8 x 128 x 2 B for K and as much for V = 4096 B; 32 such layers give the
familiar 131,072 B (128 KiB) per token.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar, Literal, NamedTuple, Protocol, get_args

from kvplan.arguments import as_instance, as_int, as_str, check_ints
from kvplan.model.limits import MAX_DIM, MAX_TOKENS
from kvplan.units import DType, cdiv, format_count

#: The layer kinds a spec's ``layer_types`` may name.
LayerKind = Literal[
    "full_attention",
    "sliding_attention",
    "chunked_attention",
    "linear_attention",
    "mamba",
    "short_conv",
    "attention_mamba",
    "compressed_attention",
    "sparse_attention",
    "indexed_attention",
    "no_cache",
]
LAYER_KINDS: tuple[str, ...] = get_args(LayerKind)


class LayerCache(Protocol):
    """The questions every cache kind answers (see the module docstring)."""

    @property
    def kind(self) -> str:
        """The layer kind as shown (``sliding_attention``, ``mla_latent``, ``mamba``...)."""
        ...

    @property
    def max_tokens(self) -> int | None:
        """The most positions kept per sequence: None for all, a window, or 0."""
        ...

    @property
    def state_bytes(self) -> int:
        """Fixed bytes per sequence, whatever the context (recurrent state)."""
        ...

    def k_token_bytes(self, dtype: DType) -> int: ...

    def v_token_bytes(self, dtype: DType) -> int: ...

    def shard(self, tensor_parallel_size: int) -> LayerCache:
        """What one of ``tensor_parallel_size`` ranks keeps of this layer."""
        ...

    def max_blocks(self, context_tokens: int, block_size: int) -> int:
        """Pages of ``block_size`` tokens one sequence of ``context_tokens`` holds, worst case."""
        ...

    def describe(self) -> str: ...

    def formula(self, context_tokens: int, k_dtype: DType, v_dtype: DType) -> str: ...


def tokens_retained(layer: LayerCache, context_tokens: int) -> int:
    """Positions ``layer`` keeps for one sequence of ``context_tokens`` tokens: for a
    compressed layer, its entries (one per ``tokens_per_entry`` tokens, whole groups only)."""
    limit = layer.max_tokens
    kept = context_tokens if limit is None else min(context_tokens, limit)
    return kept // tokens_per_entry(layer)


def tokens_per_entry(layer: LayerCache) -> int:
    """Tokens one kept position stands for: 1, or a compressed layer's ratio (DeepSeek V4's
    ``CompressedLatent``, whose K bytes are per entry)."""
    ratio: int = getattr(layer, "tokens_per_entry", 1)
    return ratio


def pool_parts(layer: LayerCache) -> tuple[int, int]:
    """A layer's second growing part: ``(pool_bytes, tokens_per_pool)``, one entry of
    ``pool_bytes`` per whole ``tokens_per_pool`` tokens kept, beside its per-token K and V
    (GLM-5.3's indexer keeps 132 B per 16 tokens beside a latent a token); (0, 1): none."""
    pool: tuple[int, int] = getattr(layer, "pool_parts", (0, 1))
    return pool


def pooled_bytes(layer: LayerCache, kept_tokens: int) -> int:
    """Bytes of the second growing part for ``kept_tokens`` tokens: whole pools only."""
    pool_bytes, tokens_per_pool = pool_parts(layer)
    return pool_bytes * (kept_tokens // tokens_per_pool)


class LayerTerm(NamedTuple):
    """A group of identical layers with its per-layer costs for given K and V dtypes;
    ``pool_bytes`` per ``tokens_per_pool`` kept tokens is a second growing part."""

    layer: LayerCache
    num_layers: int
    k_token_bytes: int
    v_token_bytes: int
    state_bytes: int
    max_tokens: int | None
    tokens_per_entry: int = 1
    pool_bytes: int = 0
    tokens_per_pool: int = 1


def layer_term(layer: LayerCache, num_layers: int, k_dtype: DType, v_dtype: DType) -> LayerTerm:
    """``num_layers`` layers like ``layer`` with their per-layer costs in these dtypes."""
    k_token, v_token = layer.k_token_bytes(k_dtype), layer.v_token_bytes(v_dtype)
    per_entry, limit = tokens_per_entry(layer), layer.max_tokens
    return LayerTerm(
        layer, num_layers, k_token, v_token, layer.state_bytes, limit, per_entry, *pool_parts(layer)
    )


@dataclass(frozen=True, slots=True)
class FullAttention:
    """Keeps K and V of every token: ``kv_heads x (head_dim + v_head_dim) x bytes x tokens``."""

    num_kv_heads: int
    head_dim: int
    v_head_dim: int
    kind: ClassVar[str] = "full_attention"
    state_bytes: ClassVar[int] = 0

    def __post_init__(self) -> None:
        check_ints(
            maximum=MAX_DIM,
            num_kv_heads=self.num_kv_heads,
            head_dim=self.head_dim,
            v_head_dim=self.v_head_dim,
        )

    @property
    def max_tokens(self) -> int | None:
        return None

    def k_token_bytes(self, dtype: DType) -> int:
        return dtype.row_bytes(self.num_kv_heads * self.head_dim)

    def v_token_bytes(self, dtype: DType) -> int:
        return dtype.row_bytes(self.num_kv_heads * self.v_head_dim)

    def max_blocks(self, context_tokens: int, block_size: int) -> int:
        return cdiv(context_tokens, block_size)

    def shard(self, tensor_parallel_size: int) -> LayerCache:
        # KV heads split across ranks; with fewer heads than ranks each rank keeps a replica
        # of one head (vLLM, SGLang and TensorRT-LLM alike): 8 heads at TP 16 -> 1 per rank.
        return replace(self, num_kv_heads=max(1, self.num_kv_heads // tensor_parallel_size))

    def describe(self) -> str:
        dims = (
            f"head_dim {self.head_dim}"
            if self.head_dim == self.v_head_dim
            else f"K head_dim {self.head_dim}, V head_dim {self.v_head_dim}"
        )
        return f"{self.num_kv_heads} KV heads, {dims}"

    def formula(self, context_tokens: int, k_dtype: DType, v_dtype: DType) -> str:
        kept = tokens_retained(self, context_tokens)
        k_row = _row(self.num_kv_heads, self.head_dim, k_dtype)
        if self.head_dim == self.v_head_dim and k_dtype == v_dtype:
            return f"2 (K,V) x {k_row} x {format_count(kept, 'token')}"
        v_row = _row(self.num_kv_heads, self.v_head_dim, v_dtype)
        return f"({k_row} + {v_row}) x {format_count(kept, 'token')}"


@dataclass(frozen=True, slots=True)
class SlidingWindowAttention(FullAttention):
    """Keeps the last ``window`` tokens: memory is flat once the context passes the window."""

    window: int = 0
    kind: ClassVar[str] = "sliding_attention"

    def __post_init__(self) -> None:
        FullAttention.__post_init__(self)
        as_int(self.window, "window", maximum=MAX_TOKENS)

    @property
    def max_tokens(self) -> int | None:
        return self.window

    def max_blocks(self, context_tokens: int, block_size: int) -> int:
        # The window (the current token and window - 1 before it) need not start on a block
        # boundary, so it can touch one block more than it fills: window 1024 in blocks of
        # 16 needs up to cdiv(1023, 16) + 1 = 65 blocks, not 64.
        window_blocks = cdiv(self.window - 1, block_size) + 1
        return min(cdiv(context_tokens, block_size), window_blocks)

    def describe(self) -> str:
        return f"{FullAttention.describe(self)}, window {self.window:,}"


@dataclass(frozen=True, slots=True)
class ChunkedLocalAttention(FullAttention):
    """Attends within fixed chunks (Llama 4): at most ``chunk`` tokens are ever needed."""

    chunk: int = 0
    kind: ClassVar[str] = "chunked_attention"

    def __post_init__(self) -> None:
        FullAttention.__post_init__(self)
        as_int(self.chunk, "chunk", maximum=MAX_TOKENS)

    @property
    def max_tokens(self) -> int | None:
        return self.chunk

    def max_blocks(self, context_tokens: int, block_size: int) -> int:
        # Chunks start at multiples of the chunk size; one that is not a multiple of the block
        # size straddles one extra block.
        chunk_blocks = cdiv(self.chunk, block_size) + (1 if self.chunk % block_size else 0)
        return min(cdiv(context_tokens, block_size), chunk_blocks)

    def describe(self) -> str:
        return f"{FullAttention.describe(self)}, chunk {self.chunk:,}"


@dataclass(frozen=True, slots=True)
class MLALatent:
    """Multi-head latent attention (DeepSeek V2/V3, Kimi K2).

    One compressed latent of ``kv_lora_rank + qk_rope_head_dim`` values per token, shared by
    all heads and serving as both K and V: no factor 2, no multiplication by heads.
    DeepSeek V3: (512 + 64) x 2 B = 1,152 B per token per layer, against 128 heads x
    (192 + 128) x 2 B = 81,920 B for the decompressed K and V.
    """

    kv_lora_rank: int
    qk_rope_head_dim: int
    index_head_dim: int = 0
    kind: ClassVar[str] = "mla_latent"
    state_bytes: ClassVar[int] = 0

    def __post_init__(self) -> None:
        check_ints(
            maximum=MAX_DIM,
            kv_lora_rank=self.kv_lora_rank,
            qk_rope_head_dim=self.qk_rope_head_dim,
            index_head_dim=self.index_head_dim,
        )

    @property
    def max_tokens(self) -> int | None:
        return None

    @property
    def index_token_bytes(self) -> int:
        """DeepSeek-V3.2's sparse-attention indexer keeps one key of ``index_head_dim`` values
        a token beside the latent, in fp8 with one fp32 scale per 128 values whatever the
        cache dtype (vLLM's ``DeepseekV32IndexerCache``): 128 + 128 // 128 x 4 = 132 B."""
        return self.index_head_dim + self.index_head_dim // 128 * 4

    def k_token_bytes(self, dtype: DType) -> int:
        # the indexer's key counts with the latent: both are one vector a token, no V
        return dtype.row_bytes(self.kv_lora_rank + self.qk_rope_head_dim) + self.index_token_bytes

    def v_token_bytes(self, dtype: DType) -> int:
        return 0

    def max_blocks(self, context_tokens: int, block_size: int) -> int:
        return cdiv(context_tokens, block_size)

    def shard(self, tensor_parallel_size: int) -> LayerCache:
        return self  # the latent is shared by all heads, so every rank keeps all of it

    def describe(self) -> str:
        indexer = f", indexer key {self.index_head_dim}" if self.index_head_dim else ""
        return f"MLA latent {self.kv_lora_rank} + rope {self.qk_rope_head_dim}{indexer}"

    def formula(self, context_tokens: int, k_dtype: DType, v_dtype: DType) -> str:
        values = self.kv_lora_rank + self.qk_rope_head_dim
        tokens = format_count(context_tokens, "token")
        if k_dtype.block_values == 1:
            latent = f"({self.kv_lora_rank} latent + {self.qk_rope_head_dim} rope) dims"
            latent = f"{latent} x {_per_value(k_dtype)}"
        else:
            latent = f"{values} values in {k_dtype.name} = {k_dtype.row_bytes(values):,} B"
        if not self.index_head_dim:
            return f"{latent} x {tokens}" if k_dtype.block_values == 1 else f"({latent}) x {tokens}"
        indexer = f"indexer {self.index_head_dim} fp8 + scales = {self.index_token_bytes} B"
        return f"({latent} + {indexer}) x {tokens}"


@dataclass(frozen=True, slots=True)
class RecurrentState:
    """A fixed state per sequence (Mamba, gated delta net, LFM2's short convolution),
    independent of the context. A short convolution keeps only its conv tail (no SSM state):
    LFM2 1.2B, ``conv_L_cache`` 3 over 2,048 channels: 2,048 x 2 = 4,096 values a layer.

    ``conv_values`` and ``ssm_values`` are the element counts of the convolution state and of
    the recurrent (SSM) state; both are stored in ``state_dtype``, not in the KV cache dtype,
    unless ``conv_dtype`` names the convolution tail's own (Kimi delta attention keeps its
    tail in the model dtype and its state in float32: vLLM's ``kda_state_dtype``).
    ``replicated_values`` are a second conv tail, in the conv dtype, that every tensor-parallel
    rank keeps whole (Qwen4Exp's PLE short conv beside a gated delta net).
    """

    kind: str
    conv_values: int
    ssm_values: int
    state_dtype: DType
    conv_dtype: DType | None = None
    replicated_values: int = 0

    def __post_init__(self) -> None:
        as_str(self.kind, "kind", "the state's kind, such as 'mamba'")
        check_ints(
            conv_values=self.conv_values,
            ssm_values=self.ssm_values,
            replicated_values=self.replicated_values,
        )
        as_instance(self.state_dtype, DType, "state_dtype", "a DType (resolve_dtype)")
        if self.conv_dtype is not None:
            as_instance(self.conv_dtype, DType, "conv_dtype", "a DType (resolve_dtype)")

    @property
    def max_tokens(self) -> int | None:
        return 0

    @property
    def state_bytes(self) -> int:
        conv_dtype = self.conv_dtype or self.state_dtype
        conv = conv_dtype.row_bytes(self.conv_values) + conv_dtype.row_bytes(self.replicated_values)
        return conv + self.state_dtype.row_bytes(self.ssm_values)

    def k_token_bytes(self, dtype: DType) -> int:
        return 0

    def v_token_bytes(self, dtype: DType) -> int:
        return 0

    def max_blocks(self, context_tokens: int, block_size: int) -> int:
        return 0

    def shard(self, tensor_parallel_size: int) -> LayerCache:
        # The state is split like its heads (channels of the conv state, heads of the SSM);
        # a replicated tail stays whole.
        return replace(
            self,
            conv_values=cdiv(self.conv_values, tensor_parallel_size),
            ssm_values=cdiv(self.ssm_values, tensor_parallel_size),
        )

    def describe(self) -> str:
        tail = f" in {self.conv_dtype.name}" if self.conv_dtype else ""
        side = f" + {self.replicated_values:,} replicated conv" if self.replicated_values else ""
        return (
            f"{self.kind} state: {self.conv_values:,} conv{tail}{side} + {self.ssm_values:,} ssm"
            f" values in {self.state_dtype.name}"
        )

    def formula(self, context_tokens: int, k_dtype: DType, v_dtype: DType) -> str:
        if self.replicated_values:
            conv_dtype = self.conv_dtype or self.state_dtype
            return (
                f"({self.conv_values:,} + {self.replicated_values:,} replicated) conv values x"
                f" {_per_value(conv_dtype)} + {self.ssm_values:,} ssm values x"
                f" {_per_value(self.state_dtype)}, whatever the context"
            )
        if not self.ssm_values:  # a short convolution keeps only its tail
            return (
                f"{self.conv_values:,} conv values x {_per_value(self.state_dtype)},"
                " whatever the context"
            )
        if self.conv_dtype is not None:
            return (
                f"{self.conv_values:,} conv values x {_per_value(self.conv_dtype)} +"
                f" {self.ssm_values:,} ssm values x {_per_value(self.state_dtype)},"
                " whatever the context"
            )
        return (
            f"({self.conv_values:,} conv + {self.ssm_values:,} ssm) values"
            f" x {_per_value(self.state_dtype)}, whatever the context"
        )


@dataclass(frozen=True, slots=True)
class NoCache:
    """A layer that keeps nothing of its own (MLP-only, or KV shared with another layer)."""

    kind: ClassVar[str] = "no_cache"
    state_bytes: ClassVar[int] = 0

    @property
    def max_tokens(self) -> int | None:
        return 0

    def k_token_bytes(self, dtype: DType) -> int:
        return 0

    def v_token_bytes(self, dtype: DType) -> int:
        return 0

    def max_blocks(self, context_tokens: int, block_size: int) -> int:
        return 0

    def shard(self, tensor_parallel_size: int) -> LayerCache:
        return self

    def describe(self) -> str:
        return "keeps no cache"

    def formula(self, context_tokens: int, k_dtype: DType, v_dtype: DType) -> str:
        return "0"


@dataclass(frozen=True, slots=True)
class SharedKV(NoCache):
    """A layer that reads the K and V an earlier layer of its kind wrote (Gemma 3n, Gemma 4:
    the last ``num_kv_shared_layers`` layers): it keeps nothing of its own. Gemma 3n E4B: 35
    layers, 15 shared, so only 20 layers' K and V are cached."""

    kind: ClassVar[str] = "kv_shared"

    def describe(self) -> str:
        return "reuses an earlier layer's K and V"


class _BesideAttention:
    """What a layer keeping a fixed state beside its attention cache answers: the attention's
    tokens, rows and blocks, and the state's bytes (``_side``)."""

    __slots__ = ()
    attention: FullAttention

    @property
    def _side(self) -> RecurrentState:
        raise NotImplementedError

    @property
    def max_tokens(self) -> int | None:
        return self.attention.max_tokens

    @property
    def state_bytes(self) -> int:
        return self._side.state_bytes

    def k_token_bytes(self, dtype: DType) -> int:
        return self.attention.k_token_bytes(dtype)

    def v_token_bytes(self, dtype: DType) -> int:
        return self.attention.v_token_bytes(dtype)

    def max_blocks(self, context_tokens: int, block_size: int) -> int:
        return self.attention.max_blocks(context_tokens, block_size)

    def formula(self, context_tokens: int, k_dtype: DType, v_dtype: DType) -> str:
        attention = self.attention.formula(context_tokens, k_dtype, v_dtype)
        return f"{attention} + {self._side.formula(context_tokens, k_dtype, v_dtype)}"

    def _shards(self, tensor_parallel_size: int) -> tuple[FullAttention, RecurrentState]:
        attention = self.attention.shard(tensor_parallel_size)
        side = self._side.shard(tensor_parallel_size)
        assert isinstance(attention, FullAttention)
        assert isinstance(side, RecurrentState)
        return attention, side


@dataclass(frozen=True, slots=True)
class AttentionAndState(_BesideAttention):
    """One layer that keeps both an attention cache and a recurrent state: Falcon-H1 runs
    Mamba2 beside attention in every layer; Zamba2's hybrid layers apply a shared attention
    block (with a KV cache of its own at each depth) before their Mamba2 mixer. Falcon-H1 0.5B
    (bf16 cache): 2 x 2 heads x 64 x 2 B = 512 B a token, plus the Mamba2 state, per layer."""

    attention: FullAttention
    state: RecurrentState
    kind: ClassVar[str] = "attention_mamba"

    @property
    def _side(self) -> RecurrentState:
        return self.state

    def shard(self, tensor_parallel_size: int) -> LayerCache:
        attention, state = self._shards(tensor_parallel_size)
        return replace(self, attention=attention, state=state)

    def describe(self) -> str:
        return f"{self.attention.describe()}; and {self.state.describe()}"


@dataclass(frozen=True, slots=True)
class AttentionAndConv(_BesideAttention):
    """An attention layer (full or windowed) with a short convolution over its K and V
    streams and over the attention and MLP outputs (Inkling: vLLM 0.32
    models/inkling/nvidia/model.py). Beside the attention cache it keeps the convolution's
    tail: ``kernel - 1`` positions of ``2 x kv_heads x head_dim + 2 x hidden_size`` channels
    in the model dtype. Inkling-Small's full layer (8 KV heads of 128, hidden 4,096, kernel 4):
    3 x (2,048 + 8,192) = 30,720 values, 61,440 B in bf16, whatever the context."""

    attention: FullAttention
    conv: RecurrentState
    kernel: int
    kind: ClassVar[str] = "attention_conv"

    @property
    def _side(self) -> RecurrentState:
        return self.conv

    def shard(self, tensor_parallel_size: int) -> LayerCache:
        # K/V heads and the hidden chunks of the two output streams both split by rank
        attention, conv = self._shards(tensor_parallel_size)
        return replace(self, attention=attention, conv=conv)

    def describe(self) -> str:
        return f"{self.attention.describe()}; and a {self.conv.describe()}"


def with_attention_conv(
    layer: LayerCache, kernel: int | None, hidden_size: int | None, dtype: DType
) -> LayerCache:
    """``layer`` with Inkling's short-convolution tail beside it when ``kernel`` is given and
    the layer is attention (``attention_conv_kernel``); otherwise ``layer`` itself."""
    if kernel is None or not isinstance(layer, FullAttention):
        return layer
    if hidden_size is None:
        raise ValueError("hidden_size: required with attention_conv_kernel")
    channels = 2 * layer.num_kv_heads * layer.head_dim + 2 * hidden_size
    conv = RecurrentState("short_conv", (kernel - 1) * channels, 0, dtype)
    return AttentionAndConv(layer, conv, kernel)


def _row(heads: int, dims: int, dtype: DType) -> str:
    """One token's K (or V) row: plain ``8 heads x 128 dims x 2 B (bfloat16)``, or for block
    formats the whole blocks it takes: ``(8 heads x 128 dims = 1,024 values in q8_0 =
    32 blocks x 34 B)``, since a partial block still costs a whole one."""
    if dtype.block_values == 1:
        return f"{heads} heads x {dims} dims x {_per_value(dtype)}"
    values = heads * dims
    blocks = dtype.row_bytes(values) // dtype.block_bytes
    return (
        f"({heads} heads x {dims} dims = {values:,} values in {dtype.name}"
        f" = {blocks:,} blocks x {dtype.block_bytes} B)"
    )


def _per_value(dtype: DType) -> str:
    if dtype.block_values == 1:
        return f"{dtype.block_bytes} B ({dtype.name})"
    return f"{dtype.block_bytes} B/{dtype.block_values} values ({dtype.name})"
