"""vLLM's cache spec of each layer and its groups: what a page holds, how many a request
needs, and how hybrid models share one pool (vllm/v1/kv_cache_interface.py,
vllm/v1/core/kv_cache_utils.py). ``kvplan.engines.vllm`` budgets and prints on top of this.

A layer that keeps two caches (Falcon-H1's attention beside its Mamba2 mixer, Zamba2's shared
attention block in a hybrid layer) is two cache layers to vLLM, each with its own spec, exactly
as two layers would be; a layer that reads another's K and V (``kv_sharing_target_layer_name``)
has no spec at all.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from kvplan.errors import UnitError
from kvplan.model.dtypes import PER_TOKEN_HEAD as PER_TOKEN_HEAD
from kvplan.model.layers import (
    AttentionAndConv,
    AttentionAndState,
    ChunkedLocalAttention,
    FullAttention,
    LayerCache,
    MLALatent,
    NoCache,
    RecurrentState,
    SlidingWindowAttention,
)
from kvplan.model.sparse import CompressedLatent, SparseAttention
from kvplan.units import DType, cdiv, resolve_dtype

if TYPE_CHECKING:
    from kvplan.engines.vllm_config import VllmConfig


@dataclass(frozen=True, slots=True)
class PageSpec:
    """One layer's cache spec as vLLM sees it: what a page holds and how many a request needs.

    ``token_bytes``: one token of one layer (attention), or the whole state (mamba);
    ``page_bytes``: one page of ``block_size`` tokens, a state page padded to it;
    ``in_flight``: tokens a sliding or chunked layer reserves beyond its window (0:
    ``max_num_batched_tokens``); ``state_blocks``: state pages a request holds (mamba);
    ``per_block``: the all mode, a state page per ``block_size`` tokens of the request;
    ``spec_blocks`` and ``retained``: what speculative decoding adds
    (kvplan.engines.vllm_speculative).
    """

    kind: str  # full | sliding | chunked | mla | mamba
    token_bytes: int
    block_size: int
    window: int = 0
    padded_page_bytes: int = 0
    in_flight: int = 0
    state_blocks: int = 1
    per_block: bool = False
    spec_blocks: int = 0  # mamba: state blocks for the draft tokens (num_speculative_blocks)
    retained: int = 0  # sliding: tokens kept below the window (extra_retained_tokens)

    @property
    def page_bytes(self) -> int:
        if self.kind == "mamba":
            return max(self.token_bytes, self.padded_page_bytes)
        return self.block_size * self.token_bytes

    def blocks_per_request(self, cfg: VllmConfig) -> int:
        bs, length = self.block_size, cfg.max_model_len
        batched = self.in_flight or cfg.batched_tokens
        match self.kind:
            case "sliding":
                # the window need not start on a block boundary: one block more
                return cdiv(min(self.window - 1 + self.retained + batched, length), bs) + 1
            case "chunked":
                return cdiv(min(self.window + batched, length), bs)
            case "mamba" if self.per_block:
                return cdiv(length, bs) + self.spec_blocks
            case "mamba":
                return self.state_blocks + self.spec_blocks  # whatever the request's length
            case _:
                return cdiv(length, bs)


FP8_DS_MLA_TOKEN_BYTES = 656  # 512 fp8 latent values + 4 fp32 scales + 64 bf16 rope values


def page_spec(
    layer: LayerCache,
    tp: int,
    kv_cache_dtype: str,
    block_size: int,
    state_dtype: DType,
    conv_dtype: DType | None = None,
) -> PageSpec | None:
    """vLLM's cache spec of one layer on one rank; None for layers without a KV cache.

    A recurrent layer keeps its SSM state in ``state_dtype`` (``--mamba-ssm-cache-dtype``) and
    its convolution tail in ``conv_dtype`` (``--mamba-cache-dtype``, the model dtype; default:
    ``state_dtype``).

    ``kv_cache_dtype`` is vLLM's flag value: an element type (``bfloat16``, ``fp8``...),
    ``int8_per_token_head``/``fp8_per_token_head`` (1 B a value plus one fp32 scale per token
    per head, for K and for V), or ``fp8_ds_mla`` (656 B per token of an MLA layer).
    """
    match layer:
        case MLALatent() if layer.index_head_dim:
            # vLLM pages the indexer's 132 B keys as a layer of their own, beside a latent page
            # of another size, and unifies the two page sizes: not modelled here.
            raise UnitError(
                "vLLM profile: the DeepSeek-V3.2 sparse-attention indexer cache is not modelled"
                " (kvplan estimate gives its exact bytes)"
            )
        case CompressedLatent() | SparseAttention():
            # vLLM gives such a layer several specs of unequal pages (a sliding latent window
            # of 64-token blocks, compressed entries, fp32 compressor rings of 4 or 8 slots,
            # a bf16 indexer key) and unifies their page sizes: not modelled here.
            raise UnitError(
                f"vLLM profile: {layer.kind} layers (DeepSeek V4, MiniMax M3) are not modelled"
                " (kvplan calc gives their exact bytes)"
            )
        case MLALatent():
            if kv_cache_dtype == "fp8_ds_mla":
                return PageSpec("mla", FP8_DS_MLA_TOKEN_BYTES, block_size)
            dtype = resolve_dtype(PER_TOKEN_HEAD.get(kv_cache_dtype, kv_cache_dtype))
            return PageSpec(
                "mla", dtype.row_bytes(layer.kv_lora_rank + layer.qk_rope_head_dim), block_size
            )
        case SlidingWindowAttention() | ChunkedLocalAttention() | FullAttention():
            heads = max(1, layer.num_kv_heads // tp)
            if kv_cache_dtype == "fp8_ds_mla":
                raise UnitError("--kv-cache-dtype fp8_ds_mla applies to MLA models only")
            # K and V rows: AttentionSpec pages head_size + head_size_v values a head (V heads
            # narrower than K for openPangu's sink attention, MiMo-V2's 192 / 128)
            if kv_cache_dtype in PER_TOKEN_HEAD:
                # 1 B a value + an fp32 scale a head, for K and for V
                token = heads * (layer.head_dim + layer.v_head_dim) + 2 * heads * 4
            else:
                dtype = resolve_dtype(kv_cache_dtype)
                token = dtype.row_bytes(heads * layer.head_dim)
                token += dtype.row_bytes(heads * layer.v_head_dim)
            if isinstance(layer, SlidingWindowAttention):
                return PageSpec("sliding", token, block_size, layer.window)
            if isinstance(layer, ChunkedLocalAttention):
                return PageSpec("chunked", token, block_size, layer.chunk)
            return PageSpec("full", token, block_size)
        case RecurrentState() if layer.replicated_values:
            # vLLM pages Qwen4Exp's PLE tail as a Mamba layer of its own (its own group)
            raise UnitError(
                "vLLM profile: Qwen4Exp's PLE conv state (a cache layer of its own) is not"
                " modelled (kvplan calc gives its exact bytes)"
            )
        case RecurrentState():
            shard = layer.shard(tp)
            assert isinstance(shard, RecurrentState)
            conv = (conv_dtype or state_dtype).row_bytes(shard.conv_values)
            state = conv + state_dtype.row_bytes(shard.ssm_values)
            return PageSpec("mamba", state, block_size)
        case NoCache():
            return None
    raise UnitError(f"vLLM profile: {layer.kind} layers are not modelled")


def page_specs(
    layer: LayerCache,
    tp: int,
    kv_cache_dtype: str,
    block_size: int,
    state_dtype: DType,
    conv_dtype: DType | None = None,
) -> tuple[PageSpec | None, ...]:
    """The cache specs vLLM gives one decoder layer: one (None: no cache), or two for a layer
    that keeps attention and a recurrent state (attention first, as vLLM names them)."""
    if isinstance(layer, AttentionAndConv):
        attention = page_spec(layer.attention, tp, kv_cache_dtype, block_size, state_dtype)
        return attention, conv_page_spec(layer, tp, conv_dtype or state_dtype)
    parts = (layer.attention, layer.state) if isinstance(layer, AttentionAndState) else (layer,)
    return tuple(
        page_spec(part, tp, kv_cache_dtype, block_size, state_dtype, conv_dtype) for part in parts
    )


def conv_page_spec(layer: AttentionAndConv, tp: int, dtype: DType) -> PageSpec:
    """Inkling's conv tail as vLLM pages it (models/inkling/nvidia/sconv_swa_attn.py): a
    ``SlidingWindowSpec`` of ``kernel``-token blocks and a window of ``kernel``, the four
    streams of each KV head packed into one head of ``2 x head_dim + 2 x hidden / kv_heads``
    values padded to a power of two, in the model dtype. Inkling-Small: 8 heads of
    2 x 128 + 2 x 512 = 1,280 -> 2,048 values, 4 x 8 x 2,048 x 2 B = 131,072 B a page."""
    heads = layer.attention.num_kv_heads
    packed = layer.conv.conv_values // (layer.kernel - 1) // heads
    head = 1 << (packed - 1).bit_length()
    token = dtype.row_bytes(max(1, heads // tp) * head)
    return PageSpec("sliding", token, layer.kernel, layer.kernel)


def part_owners(layers: Sequence[LayerCache]) -> list[int]:
    """The decoder layer of each cache spec ``page_specs`` gives, in order."""
    return [
        i
        for i, layer in enumerate(layers)
        for _ in range(2 if isinstance(layer, (AttentionAndState, AttentionAndConv)) else 1)
    ]


def align_to_state_pages(specs: list[PageSpec | None], chunk: int = 0) -> list[PageSpec | None]:
    """Hybrids with recurrent state: vLLM raises the attention block size until one attention
    page holds at least one state page, then pads the state page to the attention page, so
    every page in the shared pool has one size. Qwen3-Next (bf16): an attention token is
    2 x 2 x 256 x 2 = 2,048 B on one rank and a gated-delta-net state 1,097,728 B, so blocks
    grow from 16 to 16 x cdiv(1,097,728, 16 x 2,048) = 544 tokens (page 1,114,112 B).

    ``chunk``: the all mode's Mamba chunk, or from v0.33 the 64-token grid of FlashInfer's
    gated-delta-net prefill checkpoints (0: neither); the block then grows in steps of
    ``lcm(chunk, block_size)`` tokens, from one step up (``kernel_block_alignment_size`` in
    vllm/platforms/interface.py). Qwen3-Next on an H100 under v0.33: 64 x cdiv(1,097,728,
    64 x 2,048) = 576 tokens, not 544."""
    states = [s for s in specs if s is not None and s.kind == "mamba"]
    attention = [s for s in specs if s is not None and s.kind != "mamba"]
    if not states or not attention:
        return specs
    token = max(s.token_bytes for s in attention)
    base = attention[0].block_size
    state_page = max(s.token_bytes for s in states)
    if chunk:
        step = math.lcm(chunk, base)
        block_size = step * cdiv(state_page, step * token)
    elif state_page > base * token:
        block_size = base * cdiv(state_page, base * token)
    else:
        block_size = base
    page = block_size * token
    return [
        None
        if s is None
        else replace(s, padded_page_bytes=page, block_size=block_size)
        if s.kind == "mamba"
        else replace(s, block_size=block_size)
        for s in specs
    ]


def kv_cache_groups(specs: Sequence[PageSpec]) -> tuple[list[tuple[PageSpec, int]], int, int]:
    """vLLM's groups for one model: ``([(spec, layers in group)...], group_size, padding)``.

    Uniform models form one group of every layer. Hybrids cut each type into groups of
    ``group_size`` layers: the smallest type's count, or the largest's when under 1.5x it.
    Gemma 3 12B: 40 sliding + 8 full -> group size 8, six groups, no padding.
    """
    by_type: dict[PageSpec, int] = {}
    for spec in specs:
        by_type[spec] = by_type.get(spec, 0) + 1
    if len(by_type) <= 1:
        return list(by_type.items()), max(by_type.values(), default=0), 0
    pages = {s.page_bytes for s in by_type}
    if len(pages) != 1:
        raise UnitError("vLLM profile: hybrid models with unequal page sizes are not modelled yet")
    smallest, largest = min(by_type.values()), max(by_type.values())
    group_size = largest if largest < smallest * 1.5 else smallest
    groups: list[tuple[PageSpec, int]] = []
    padding = 0
    for spec, count in by_type.items():
        num_groups = cdiv(count, group_size)
        padding += num_groups * group_size - count
        groups.extend((spec, group_size) for _ in range(num_groups))
    return groups, group_size, padding


def unify_page_sizes(specs: list[PageSpec | None]) -> list[PageSpec | None]:
    """vLLM's ``unify_kv_cache_spec_page_size``: a page smaller than the largest that divides
    it takes proportionally more tokens a block (Inkling-Small: full attention's 16-token
    65,536 B page becomes 32 tokens beside the 131,072 B conv page). Pages that do not divide
    the largest (vLLM pads them, or refuses) are left for ``kv_cache_groups`` to refuse."""
    pages = [s.page_bytes for s in specs if s is not None]
    largest = max(pages, default=0)
    return [
        s
        if s is None or s.kind == "mamba" or largest % s.page_bytes
        else replace(s, block_size=s.block_size * (largest // s.page_bytes))
        for s in specs
    ]
