"""The KV pool of each pipeline stage, and what requests take from it, in exact integers.

Per GPU: ``floor(total x utilization) - weights - overhead = KV pool`` (or ``kv_cache_memory``
given directly). The pool is paged: each KV layer stores ``block_size`` tokens per page, and a
request holds whole pages, as many as its layer kinds need (a sliding layer at most its window
plus one, a recurrent layer a fixed state). A shared prefix is stored once per GPU, in the
layers that keep every token.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from kvplan.model.dtypes import CacheDTypes
from kvplan.model.layers import LayerCache, pool_parts, tokens_retained
from kvplan.model.spec import ModelSpec
from kvplan.model.stages import Stage, walk_stages
from kvplan.model.weights import (
    Weights,
    model_weights,
    pipeline_partition,
    stage_weight_bytes,
    weights_for_pool,
)
from kvplan.planner.deployment import Deployment, Overhead, usable_bytes
from kvplan.units import DType, cdiv


@dataclass(frozen=True, slots=True)
class Group:
    """Identical layers of one stage, sharded for one rank, with their costs in the cache dtype."""

    layer: LayerCache
    num_layers: int
    page_bytes: int  # one page of block_size tokens in one layer
    token_bytes: int  # one token in one layer (K + V)
    state_bytes: int
    shares_prefix: bool
    pool_bytes: int = 0  # a second growing part: one entry per tokens_per_pool tokens
    tokens_per_pool: int = 1


@dataclass(frozen=True, slots=True)
class StagePlan:
    """One pipeline stage, seen from one of its GPUs."""

    index: int
    first_layer: int
    last_layer: int
    weights_bytes: int
    overhead_bytes: int
    kv_cache_memory_bytes: int
    block_bytes: int
    num_blocks: int
    kv_cache_tokens: int
    request_bytes: int | None
    shared_bytes: int
    max_concurrency: int | None
    groups: tuple[Group, ...] = field(repr=False)

    def private_bytes(self, context_tokens: int, shared_blocks: int, block_size: int) -> int:
        """Bytes one request of ``context_tokens`` holds beyond the shared prefix."""
        return private_bytes(self.groups, context_tokens, shared_blocks, block_size)

    def ideal_bytes(self, context_tokens: int, shared_tokens: int = 0) -> int:
        """The same request without paging: exactly the tokens each layer keeps, less the
        ``shared_tokens`` of a prefix stored once (in the layers that share it)."""
        total = 0
        for g in self.groups:
            kept = tokens_retained(g.layer, context_tokens)
            if g.shares_prefix:
                kept -= min(kept, shared_tokens)
            pooled = g.pool_bytes * (kept // g.tokens_per_pool)
            total += (g.token_bytes * kept + pooled + g.state_bytes) * g.num_layers
        return total


def private_bytes(
    groups: Sequence[Group], context_tokens: int, shared_blocks: int, block_size: int
) -> int:
    """Bytes of whole pages (and states) one request of ``context_tokens`` holds in ``groups``,
    beyond the ``shared_blocks`` of a prefix stored once."""
    total = 0
    for g in groups:
        blocks = g.layer.max_blocks(context_tokens, block_size)
        if g.shares_prefix:
            blocks -= min(blocks, shared_blocks)
        total += (blocks * g.page_bytes + g.state_bytes) * g.num_layers
    return total


def stored_prefix_bytes(groups: Sequence[Group], shared_blocks: int) -> int:
    """The prefix's pages, stored once per GPU for all requests (full and MLA layers)."""
    return sum(g.page_bytes * g.num_layers * shared_blocks for g in groups if g.shares_prefix)


def shared_blocks(prefix_tokens: int, tokens: int, block_size: int) -> int:
    """Whole blocks of the shared prefix a request of ``tokens`` reuses. The block holding a
    request's last token is always its own (engines recompute the last prompt token), so a
    prefix never covers a whole request."""
    return max(0, min(prefix_tokens, tokens - 1)) // block_size


def shared_bytes(stage: StagePlan, num_shared_blocks: int) -> int:
    """The shared prefix's bytes on ``stage``: ``num_shared_blocks`` pages, stored once."""
    return stored_prefix_bytes(stage.groups, num_shared_blocks)


def concurrency(
    stage: StagePlan, tokens: int, num_shared_blocks: int, block_size: int
) -> int | None:
    """How many requests of ``tokens`` fit in the stage's pool beside the shared prefix.

    None when the stage keeps nothing per request (its layers cache nothing): it sets no limit.
    """
    private = stage.private_bytes(tokens, num_shared_blocks, block_size)
    room = stage.kv_cache_memory_bytes - shared_bytes(stage, num_shared_blocks)
    if private == 0:
        return None
    return room // private if room >= 0 else 0


def fits(stages: Sequence[StagePlan], tokens: int, n: int, shared: int, block_size: int) -> bool:
    """Whether ``n`` requests of ``tokens`` (reusing ``shared`` prefix blocks) fit on every
    stage."""
    return all(
        n * s.private_bytes(tokens, shared, block_size) + shared_bytes(s, shared)
        <= s.kv_cache_memory_bytes
        for s in stages
    )


def longest(stages: Sequence[StagePlan], n: int, shared: int, block_size: int, cap: int) -> int:
    """The largest context in [0, cap] that ``n`` requests can each hold (-1: not even 0)."""
    if not fits(stages, 0, n, 0, block_size):
        return -1
    lo, hi = 0, cap
    while lo < hi:  # invariant: lo fits
        mid = (lo + hi + 1) // 2
        if fits(stages, mid, n, shared_blocks(shared, mid, block_size), block_size):
            lo = mid
        else:
            hi = mid - 1
    return lo


_GROUPS: dict[
    tuple[tuple[tuple[LayerCache, int], ...], int, DType, DType, int], tuple[Group, ...]
] = {}


def _groups(
    layer_groups: tuple[tuple[LayerCache, int], ...], tp: int, k: DType, v: DType, block_size: int
) -> tuple[Group, ...]:
    """A stage's layer groups sharded over ``tp`` ranks and sized in the cache dtypes,
    memoised: sweeps plan the same layers thousands of times."""
    key = (layer_groups, tp, k, v, block_size)
    groups = _GROUPS.get(key)
    if groups is None:
        groups = _GROUPS[key] = tuple(
            _group(layer.shard(tp), n, k, v, block_size) for layer, n in layer_groups
        )
    return groups


def _group(layer: LayerCache, n: int, k: DType, v: DType, block_size: int) -> Group:
    token_bytes = layer.k_token_bytes(k) + layer.v_token_bytes(v)
    pool_bytes, tokens_per_pool = pool_parts(layer)
    # a page of block_size tokens also holds that many tokens' pools (GLM-5.3's indexer
    # shares the latent's block table: 64 tokens, 4 keys of 132 B)
    return Group(
        layer=layer,
        num_layers=n,
        page_bytes=token_bytes * block_size + pool_bytes * (block_size // tokens_per_pool),
        token_bytes=token_bytes,
        state_bytes=layer.state_bytes,
        shares_prefix=layer.max_tokens is None,
        pool_bytes=pool_bytes,
        tokens_per_pool=tokens_per_pool,
    )


def stage_plans(
    d: Deployment,
    chosen: CacheDTypes,
    max_model_len: int | None = None,
    num_shared_blocks: int = 0,
) -> tuple[tuple[StagePlan, ...], Weights, Overhead]:
    """Memory and pages of every stage (one GPU each) of deployment ``d`` with its cache
    dtypes ``chosen`` (``d.cache_dtypes()``); with ``max_model_len``, also what one request
    of that length holds and how many fit."""
    spec = d.spec
    pool_given = d.kv_cache_memory_bytes is not None
    weights = weights_for_pool(spec, chosen.model.name, d.quantization, pool_given=pool_given)
    overhead = d.overhead()
    usable = usable_bytes(d.gpu.memory_bytes, d.gpu_memory_utilization)
    counts = pipeline_partition(spec.num_hidden_layers, d.pipeline_parallel_size)
    stages = walk_stages(spec, counts, weights, d.tensor_parallel_size)
    if d.expert_parallel_size > 1:
        stages = tuple(
            replace(s, weights_bytes=expert_parallel_weight_bytes(d, weights, s)) for s in stages
        )
    plans = tuple(
        _stage_plan(
            d, stage, chosen.k, chosen.v, usable, overhead, max_model_len, num_shared_blocks
        )
        for stage in stages
    )
    return plans, weights, overhead


def routed_expert_bytes(spec: ModelSpec, weights: Weights) -> int:
    """The layer weight bytes of the routed experts, which expert parallelism splits across
    its ranks.

    With ``num_expert_parameters``: exactly those parameters' bytes in the format the experts
    are stored in: ``weights`` less the same weights without the experts, so a quantized
    checkpoint's experts are sized in its format (gpt-oss: MXFP4, 17 B per 32; DeepSeek V3:
    fp8 blocks of 128 x 128 with an fp32 scale), as is a ``--quantization``. From a file's
    stored bytes (GGUF), whose formats per tensor are not kept, pro rata of the layers'
    parameters. DeepSeek V3: 58 MoE layers x 256 experts x 3 x 7,168 x 2,048 =
    653,908,770,816 parameters, x 16,388 / 16,384 B = 654,068,416,512 B.

    Without it, an estimate: the parameters no token uses (``num_parameters -
    num_active_parameters``) pro rata of the layers' bytes. The experts a token does use stay
    with the weights every rank keeps (DeepSeek V3: 634B of its ~654B expert parameters are
    split), which errs toward more memory per rank, unless the experts are stored narrower
    than the rest of the layers (Kimi K2.5: int4 experts, bf16 attention), whose mean width
    overstates them."""
    total, experts = spec.num_parameters, spec.num_expert_parameters
    layer_params = _layer_parameters(spec)
    if total is None or layer_params <= 0 or weights.layers_bytes == 0:
        return 0
    if experts is None:
        active = spec.num_active_parameters
        if active is None or active >= total:
            return 0
        return weights.layers_bytes * min(total - active, layer_params) // layer_params
    experts = min(experts, layer_params)
    formatted = weights.quantization is not None or weights.model_dtype != spec.torch_dtype
    if spec.stored_weight_bytes is not None and not formatted:
        return weights.layers_bytes * experts // layer_params
    whole = spec.model_copy(update={"stored_weight_bytes": None})
    # the rest of the checkpoint: the experts leave the quantized parameters first (an absent
    # count means all of them are quantized, and stays so); none left: no quantized format
    rest_update: dict[str, object] = {"num_parameters": total - experts}
    quantized = spec.num_quantized_parameters
    if quantized is not None:
        left = quantized - min(experts, quantized)
        rest_update["num_quantized_parameters"] = left or None
        if not left:
            rest_update["weight_dtype"] = None
    rest = whole.model_copy(update=rest_update)
    with_experts = model_weights(whole, weights.model_dtype, weights.quantization)
    without = model_weights(rest, weights.model_dtype, weights.quantization)
    return min(with_experts.layers_bytes - without.layers_bytes, weights.layers_bytes)


def _layer_parameters(spec: ModelSpec) -> int:
    """The decoder layers' parameters: the total less the embeddings and an untied head."""
    embed = (spec.vocab_size or 0) * (spec.hidden_size or 0)
    return (spec.num_parameters or 0) - embed * (1 if spec.tie_word_embeddings else 2)


def expert_parallel_weight_bytes(d: Deployment, weights: Weights, s: Stage) -> int:
    """One rank's weights of stage ``s`` with expert parallelism: the stage's share of the
    routed experts over ``expert_parallel_size`` ranks, everything else over the tensor
    parallel ranks (1 with data-parallel attention)."""
    experts = routed_expert_bytes(d.spec, weights)
    num_layers, stage_layers = d.spec.num_hidden_layers, s.num_layers
    rest = replace(weights, layers_bytes=weights.layers_bytes - experts)
    dense = stage_weight_bytes(
        rest, num_layers, stage_layers, s.is_first, s.is_last, d.tensor_parallel_size
    )
    return dense + cdiv(experts * stage_layers // num_layers, d.expert_parallel_size)


def _stage_plan(
    d: Deployment,
    stage: Stage,
    k_dtype: DType,
    v_dtype: DType,
    usable: int,
    overhead: Overhead,
    max_model_len: int | None,
    num_shared_blocks: int,
) -> StagePlan:
    """One stage's pool, pages and (with ``max_model_len``) requests that fit."""
    bs = d.block_size
    groups = _groups(stage.layer_groups, d.tensor_parallel_size, k_dtype, v_dtype, bs)
    if d.kv_cache_memory_bytes is not None:
        pool = d.kv_cache_memory_bytes
    else:
        pool = max(0, usable - stage.weights_bytes - overhead.total_bytes)
    block_bytes = sum(g.page_bytes * g.num_layers for g in groups)
    num_blocks = pool // block_bytes if block_bytes else 0
    request = stored = fit = None
    if max_model_len is not None:
        request = private_bytes(groups, max_model_len, num_shared_blocks, bs)
        stored = stored_prefix_bytes(groups, num_shared_blocks)
        if request:
            fit = (pool - stored) // request if pool >= stored else 0
    return StagePlan(
        index=stage.index,
        first_layer=stage.first_layer,
        last_layer=stage.last_layer,
        weights_bytes=stage.weights_bytes,
        overhead_bytes=overhead.total_bytes,
        kv_cache_memory_bytes=pool,
        block_bytes=block_bytes,
        num_blocks=num_blocks,
        kv_cache_tokens=num_blocks * bs,
        request_bytes=request,
        shared_bytes=stored or 0,
        max_concurrency=fit,
        groups=groups,
    )
