"""Capacity planning: what fits on a deployment, solved in exact integers.

Per GPU: ``floor(total x utilization) - weights - overhead = KV pool`` (or ``kv_cache_memory``
given directly). The pool is paged: each KV layer stores ``block_size`` tokens per page, and a
request holds whole pages, as many as its layer kinds need (a sliding layer at most its window
plus one, a recurrent layer a fixed state). Tensor parallelism shards weights and KV heads;
pipeline parallelism splits layers into stages, and the tightest stage sets the answer.

Every answer is checked by construction: a reported maximum fits and one more does not.

Worked example (Llama 3.1 8B, bf16, one H100 SXM at utilization 0.9, 2 GiB overhead):
usable = floor(85,029,027,840 x 0.9) = 76,526,125,056 B; weights 16,060,522,496 B; pool =
76,526,125,056 - 16,060,522,496 - 2,147,483,648 = 58,318,118,912 B. A block is 16 tokens x
131,072 B = 2,097,152 B, so 27,808 blocks = 444,928 tokens: 54 requests of 8,192 tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction

from kvplan import dtypes
from kvplan.arguments import (
    as_bytes,
    as_fraction,
    as_gpu,
    as_int,
    as_parallel,
    as_spec,
    as_tensor_parallel_size,
    as_tokens,
    tensor_parallel_valid,
)
from kvplan.errors import UnitError
from kvplan.hardware import GPU
from kvplan.layers import LayerCache, tokens_retained
from kvplan.spec import ModelSpec
from kvplan.units import DType, MiB, format_bytes, format_tokens
from kvplan.weights import Weights, model_weights, pipeline_partition, stage_weight_bytes

DEFAULT_UTILIZATION = Fraction(9, 10)
DEFAULT_BLOCK_SIZE = 16
DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192
DEFAULT_MAX_NUM_SEQS = 1024
# The largest tensor-parallel size tried when searching for the smallest deployment: one node.
MAX_SEARCH_TP = 8
MAX_SEARCH_PP = 16


@dataclass(frozen=True, slots=True)
class Overhead:
    """Memory a serving engine needs besides weights and KV cache, per GPU.

    The estimate (``source="estimate"``), read off vLLM v0.19 profiles on H100:

    - activation peak of a profiling run of ``max_num_batched_tokens`` (T, default 8,192)
      tokens and ``max_num_seqs`` (S, 1,024) sampled sequences:
      ``T x (4 x hidden + 2 x intermediate / tp) x 2 B + S x vocab x 8 B`` (hidden states,
      the MLP's gate and up projections, fp32 logits and their sampling copy). Llama 3.1 8B:
      0.69 GiB + 0.98 GiB = 1.67 GiB (vLLM measures 1.89 GiB).
    - non-torch memory (CUDA context, cuBLAS workspaces): 256 MiB, plus 1,792 MiB of NCCL and
      all-reduce buffers when tensor-parallel (vLLM: 0.25 GiB at TP 1, 2.07 GiB at TP 2).
    - CUDA graphs: 0 here, since vLLM up to v0.19 captures them after sizing the KV cache, out
      of the ``1 - utilization`` headroom.

    Engine profiles replace this with each engine's own rules; ``overhead=`` replaces it whole.
    """

    activation_bytes: int
    non_torch_bytes: int
    cuda_graph_bytes: int
    source: str

    @property
    def total_bytes(self) -> int:
        return self.activation_bytes + self.non_torch_bytes + self.cuda_graph_bytes


def estimate_overhead(
    spec: ModelSpec,
    tensor_parallel_size: int = 1,
    max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS,
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS,
) -> Overhead:
    """The documented overhead estimate (see ``Overhead``) for one GPU."""
    hidden = spec.hidden_size or 4096
    intermediate = spec.intermediate_size or 4 * hidden
    hidden_bytes = max_num_batched_tokens * (4 * hidden + 2 * intermediate // tensor_parallel_size)
    logits_bytes = max_num_seqs * (spec.vocab_size or 32000) * 8
    non_torch = 256 * MiB + (1792 * MiB if tensor_parallel_size > 1 else 0)
    return Overhead(hidden_bytes * 2 + logits_bytes, non_torch, 0, "estimate")


def given_overhead(overhead_bytes: int) -> Overhead:
    """An overhead the user measured (``--overhead 3GiB``), in place of the estimate."""
    return Overhead(overhead_bytes, 0, 0, "given")


@dataclass(frozen=True, slots=True)
class _Group:
    layer: LayerCache
    num_layers: int
    page_bytes: int  # one page of block_size tokens in one layer
    token_bytes: int  # one token in one layer (K + V)
    state_bytes: int
    shares_prefix: bool


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
    groups: tuple[_Group, ...] = field(repr=False)

    def private_bytes(self, context_tokens: int, shared_blocks: int, block_size: int) -> int:
        """Bytes one request of ``context_tokens`` holds beyond the shared prefix."""
        return _private_bytes(self.groups, context_tokens, shared_blocks, block_size)

    def ideal_bytes(self, context_tokens: int, shared_tokens: int = 0) -> int:
        """The same request without paging: exactly the tokens each layer keeps, less the
        ``shared_tokens`` of a prefix stored once (in the layers that share it)."""
        total = 0
        for g in self.groups:
            kept = tokens_retained(g.layer, context_tokens)
            if g.shares_prefix:
                kept -= min(kept, shared_tokens)
            total += (g.token_bytes * kept + g.state_bytes) * g.num_layers
        return total


def _private_bytes(
    groups: Sequence[_Group], context_tokens: int, shared_blocks: int, block_size: int
) -> int:
    total = 0
    for g in groups:
        blocks = g.layer.max_blocks(context_tokens, block_size)
        if g.shares_prefix:
            blocks -= min(blocks, shared_blocks)
        total += (blocks * g.page_bytes + g.state_bytes) * g.num_layers
    return total


def _stored_prefix_bytes(groups: Sequence[_Group], shared_blocks: int) -> int:
    """The prefix's pages, stored once per GPU for all requests (full and MLA layers)."""
    return sum(g.page_bytes * g.num_layers * shared_blocks for g in groups if g.shares_prefix)


_SHARDS: dict[tuple[LayerCache, int], LayerCache] = {}


def _shard(layer: LayerCache, tensor_parallel_size: int) -> LayerCache:
    """``layer.shard(tp)``, memoised: sweeps plan the same layers thousands of times."""
    key = (layer, tensor_parallel_size)
    shard = _SHARDS.get(key)
    if shard is None:
        shard = _SHARDS[key] = layer.shard(tensor_parallel_size)
    return shard


@dataclass(frozen=True, slots=True)
class LengthMix:
    """Concurrency for a real mix of request lengths (prompt + output tokens each)."""

    num_requests: int
    mean_tokens: int
    p50_tokens: int
    p99_tokens: int
    max_tokens: int
    expected_concurrency: int
    worst_case_concurrency: int
    paged_bytes: int
    ideal_bytes: int

    @property
    def paged_waste_bytes(self) -> int:
        return self.paged_bytes - self.ideal_bytes


@dataclass(frozen=True, slots=True)
class Plan:
    """The answer for one deployment: per-GPU memory, the pool, and what it holds.

    Per-GPU figures are those of the tightest pipeline stage; ``stages`` holds them all.
    ``max_concurrency`` is at ``max_model_len`` (every request reaching it);
    ``max_context_tokens`` is the longest context ``concurrency`` requests can each reach.
    """

    model: str
    gpu: GPU
    tensor_parallel_size: int
    pipeline_parallel_size: int
    replicas: int
    max_model_len: int | None
    concurrency: int | None
    gpu_memory_utilization: Fraction
    k_dtype: DType
    v_dtype: DType
    block_size: int
    shared_prefix_tokens: int
    overhead: Overhead
    weights_model_dtype: str
    weights_format: str
    quantization: str | None
    stages: tuple[StagePlan, ...]
    max_concurrency: int | None
    max_context_tokens: int | None
    fits: bool
    message: str
    request_bytes: int | None
    ideal_request_bytes: int | None
    length_mix: LengthMix | None = None
    searched: bool = False
    dtype_reason: str = ""
    kv_cache_memory_given: bool = False

    @property
    def num_gpus(self) -> int:
        return self.tensor_parallel_size * self.pipeline_parallel_size * self.replicas

    @property
    def tightest(self) -> StagePlan:
        """The stage that sets the answers: least concurrency, then fewest blocks."""
        return min(
            self.stages,
            key=lambda s: (
                s.max_concurrency if s.max_concurrency is not None else 1 << 62,
                s.num_blocks,
            ),
        )

    @property
    def total_memory_bytes(self) -> int:
        return self.gpu.memory_bytes

    @property
    def usable_memory_bytes(self) -> int:
        return _usable(self.gpu.memory_bytes, self.gpu_memory_utilization)

    @property
    def weights_bytes(self) -> int:
        return self.tightest.weights_bytes

    @property
    def overhead_bytes(self) -> int:
        return self.tightest.overhead_bytes

    @property
    def kv_cache_memory_bytes(self) -> int:
        return self.tightest.kv_cache_memory_bytes

    @property
    def unallocated_memory_bytes(self) -> int:
        """The GPU's memory less weights, overhead and pool on the tightest stage: the headroom
        above utilization included (the JSON ``free_memory_bytes`` of schema 1)."""
        t = self.tightest
        return self.gpu.memory_bytes - t.weights_bytes - t.overhead_bytes - t.kv_cache_memory_bytes

    @property
    def headroom_bytes(self) -> int:
        """What ``gpu_memory_utilization`` holds back from the engine: total - usable. The
        engine never allocates it (CUDA graphs, fragmentation and other processes use it)."""
        return self.gpu.memory_bytes - self.usable_memory_bytes

    @property
    def free_memory_bytes(self) -> int:
        """Memory a deployment could still use for more work, per GPU (the tightest stage):
        the usable memory (``total x utilization``, or the whole GPU when the KV cache memory is
        given) less weights, overhead and the KV cache the question's requests hold.

        The requests held: ``concurrency`` requests (or, when only ``max_model_len`` is asked,
        the ``max_concurrency`` that fit) of ``max_model_len`` tokens, or ``concurrency``
        requests at ``max_context_tokens``; with neither, the whole pool counts as used. The
        headroom above utilization (``headroom_bytes``) is never free: the engine does not
        allocate it. Negative when the given KV cache memory oversubscribes the GPU.
        """
        return min(self.stage_free_bytes(s) for s in self.stages)

    def stage_free_bytes(self, s: StagePlan) -> int:
        """``free_memory_bytes`` of one stage."""
        budget = self.gpu.memory_bytes if self.kv_cache_memory_given else self.usable_memory_bytes
        return budget - s.weights_bytes - s.overhead_bytes - self._held_kv_bytes(s)

    def _held_kv_bytes(self, s: StagePlan) -> int:
        """KV bytes the question's requests hold on stage ``s`` (the pool if none is asked)."""
        tokens = self.max_model_len
        n = self.concurrency if self.concurrency is not None else self.max_concurrency
        if tokens is None and self.concurrency is not None:
            tokens = self.max_context_tokens
        if tokens is None or n is None or self.length_mix is not None or not self.fits:
            return s.kv_cache_memory_bytes
        n = -(-n // self.replicas)  # requests on one replica
        if self.max_concurrency is not None:
            n = min(n, self.max_concurrency)
        shared = _shared_blocks(self.shared_prefix_tokens, tokens, self.block_size)
        held = n * s.private_bytes(tokens, shared, self.block_size)
        return min(s.kv_cache_memory_bytes, held + _shared_bytes(s, shared))

    def pool_note(self) -> str:
        """Why a request can outgrow the pool's token count, for models whose sliding,
        chunked or recurrent layers keep less than every token: the pool's tokens count every
        layer, a request's bounded layers hold only their window. Empty for other models.

        gpt-oss-120b on one H100 at 131,072 tokens: the pool holds 123,104 tokens of every
        layer, yet one request fits, since its 18 sliding layers keep 144 tokens each (window
        128 in 16-token blocks, +1 block) and only the 18 full layers keep all 131,072.
        """
        if self.max_model_len is None or self.request_bytes is None:
            return ""
        tokens = self.max_model_len
        t = self.tightest
        bounded = [
            g
            for g in t.groups
            if g.layer.max_tokens is not None or (g.state_bytes and not g.page_bytes)
        ]
        if not bounded or not t.block_bytes:
            return ""
        parts = []
        for g in bounded:
            if g.page_bytes:
                kept = g.layer.max_blocks(tokens, self.block_size) * self.block_size
                parts.append(
                    f"{g.num_layers} {g.layer.kind} layers keep at most {format_tokens(kept)}"
                    " tokens"
                )
            else:
                parts.append(f"{g.num_layers} {g.layer.kind} layers keep a fixed state")
        equivalent = self.request_bytes * self.block_size // t.block_bytes
        return (
            f"the pool's {format_tokens(self.kv_cache_tokens)} tokens count every layer; a request"
            f" of {format_tokens(tokens)} tokens takes the room of {format_tokens(equivalent)}"
            f" of them, since its {'; '.join(parts)}"
        )

    @property
    def num_blocks(self) -> int:
        return min(s.num_blocks for s in self.stages)

    @property
    def kv_cache_tokens(self) -> int:
        return self.num_blocks * self.block_size

    @property
    def kv_dtype(self) -> str:
        if self.k_dtype == self.v_dtype:
            return self.k_dtype.name
        return f"{self.k_dtype.name}/{self.v_dtype.name}"

    @property
    def paged_waste_bytes(self) -> int | None:
        if self.request_bytes is None or self.ideal_request_bytes is None:
            return None
        return self.request_bytes - self.ideal_request_bytes


def _usable(total_bytes: int, utilization: Fraction) -> int:
    return total_bytes * utilization.numerator // utilization.denominator


def parse_utilization(value: float | str | Fraction) -> Fraction:
    """``0.9`` -> 9/10 exactly (via its decimal text, never binary float error), in (0, 1]."""
    return as_fraction(value, "gpu_memory_utilization")


@dataclass(frozen=True, slots=True)
class Deployment:
    """Everything but the question: the model, where it runs and how it is configured."""

    spec: ModelSpec
    gpu: GPU
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    gpu_memory_utilization: Fraction = DEFAULT_UTILIZATION
    kv_cache_dtype: str | None = None
    dtype: str | None = None
    quantization: str | None = None
    overhead_bytes: int | None = None
    kv_cache_memory_bytes: int | None = None
    block_size: int = DEFAULT_BLOCK_SIZE
    max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS

    def overhead(self) -> Overhead:
        """The given overhead, or the documented estimate for this deployment."""
        if self.overhead_bytes is not None:
            return given_overhead(self.overhead_bytes)
        return estimate_overhead(self.spec, self.tensor_parallel_size, self.max_num_batched_tokens)

    @property
    def served_dtype(self) -> str:
        """The dtype the model runs in (``kvplan.dtypes``: a float32 checkpoint is served in
        bfloat16, as the engines' ``--dtype auto`` does)."""
        return dtypes.served_dtype(self.spec, dtype=self.dtype)[0].name

    def cache_dtypes(self) -> dtypes.CacheDTypes:
        """The run and cache dtypes of this deployment, with the reason."""
        return dtypes.cache_dtypes(self.spec, kv_cache_dtype=self.kv_cache_dtype, dtype=self.dtype)


def plan(
    spec: ModelSpec | str,
    gpu: GPU | str,
    *,
    tensor_parallel_size: int | None = None,
    pipeline_parallel_size: int | None = None,
    max_model_len: int | str | None = None,
    concurrency: int | None = None,
    gpu_memory_utilization: float | str | Fraction = DEFAULT_UTILIZATION,
    kv_cache_dtype: str | None = None,
    dtype: str | None = None,
    quantization: str | None = None,
    overhead_bytes: int | str | None = None,
    kv_cache_memory_bytes: int | str | None = None,
    block_size: int = DEFAULT_BLOCK_SIZE,
    shared_prefix_tokens: int | str = 0,
    lengths: Sequence[int] | None = None,
    mean_length: int | str | None = None,
    p99_length: int | str | None = None,
    max_num_batched_tokens: int | str = DEFAULT_MAX_NUM_BATCHED_TOKENS,
) -> Plan:
    """Plan ``spec`` on ``gpu``.

    - ``max_model_len`` alone: the pool, and how many requests of that length fit at once.
    - ``concurrency`` alone: the longest context that many requests can each reach.
    - both, with neither parallel size given: the smallest deployment (tensor parallel within
      the model's head divisibility, then pipeline stages, then replicas) that holds them.
    - ``lengths``: concurrency for that mix of request lengths (prompt + output each), or
      ``mean_length`` (expected concurrency) and ``p99_length`` (worst case) in its place.
    - nothing asked: ``max_model_len`` is the model's ``max_position_embeddings``.

    ``spec`` and ``gpu`` may be names; token counts take ``32K``-style strings and sizes
    ``80GiB``-style strings, as the command line does. A float32 checkpoint is served in
    bfloat16 unless ``dtype`` says otherwise, as vLLM's and SGLang's ``--dtype auto`` do; the
    cache dtype follows the served dtype (``kvplan.dtypes``). Raises UnitError (or
    ModelNotFoundError / UnknownGPUError for names) for a bad argument.
    """
    spec = as_spec(spec)
    gpu = as_gpu(gpu)
    if tensor_parallel_size is not None:
        tensor_parallel_size = as_tensor_parallel_size(spec, tensor_parallel_size)
    if pipeline_parallel_size is not None:
        pipeline_parallel_size = as_parallel(pipeline_parallel_size, "pipeline_parallel_size")
        if pipeline_parallel_size > spec.num_hidden_layers:
            raise UnitError(
                f"pipeline_parallel_size {pipeline_parallel_size}: more stages than the"
                f" {spec.num_hidden_layers} layers of {spec.name}"
            )
    if max_model_len is not None:
        max_model_len = as_tokens(max_model_len, "max_model_len", minimum=1)
    if concurrency is not None:
        concurrency = as_int(concurrency, "concurrency", minimum=1)
    block_size = as_int(block_size, "block_size", minimum=1, maximum=1 << 20)
    shared_prefix_tokens = as_tokens(shared_prefix_tokens, "shared_prefix_tokens")
    if overhead_bytes is not None:
        overhead_bytes = as_bytes(overhead_bytes, "overhead_bytes")
    if kv_cache_memory_bytes is not None:
        kv_cache_memory_bytes = as_bytes(kv_cache_memory_bytes, "kv_cache_memory_bytes")
    if mean_length is not None:
        mean_length = as_tokens(mean_length, "mean_length", minimum=1)
    if p99_length is not None:
        p99_length = as_tokens(p99_length, "p99_length", minimum=1)
    max_num_batched_tokens = as_tokens(
        max_num_batched_tokens, "max_num_batched_tokens", minimum=1
    )
    utilization = parse_utilization(gpu_memory_utilization)
    mix = _mix_lengths(lengths, mean_length, p99_length)
    if max_model_len is None and concurrency is None and mix is None:
        max_model_len = spec.max_position_embeddings
    deployment = Deployment(
        spec,
        gpu,
        tensor_parallel_size or 1,
        pipeline_parallel_size or 1,
        utilization,
        kv_cache_dtype,
        dtype,
        quantization,
        overhead_bytes,
        kv_cache_memory_bytes,
        block_size,
        max_num_batched_tokens,
    )
    search = (
        max_model_len is not None
        and concurrency is not None
        and tensor_parallel_size is None
        and pipeline_parallel_size is None
    )
    if search:
        assert max_model_len is not None
        assert concurrency is not None
        found = _smallest_deployment(deployment, max_model_len, concurrency, shared_prefix_tokens)
        if mix is None or not found.fits:
            return found
        return replace(
            found, length_mix=_length_mix(found.stages, mix, shared_prefix_tokens, block_size)
        )
    return _solve(deployment, max_model_len, concurrency, shared_prefix_tokens, mix)


def _mix_lengths(
    lengths: Sequence[int] | None, mean: int | None, p99: int | None
) -> tuple[list[int], bool] | None:
    """The request lengths to plan for, and whether they are a summary (mean, p99) rather
    than a sample."""
    if lengths is not None:
        if isinstance(lengths, (str, bytes)) or not isinstance(lengths, Sequence):
            raise UnitError("lengths: expected a sequence of integer token counts")
        if not lengths:
            raise UnitError("lengths: the mix is empty; give at least one request length")
        return sorted(as_tokens(t, f"lengths[{i}]") for i, t in enumerate(lengths)), False
    if mean is None and p99 is None:
        return None
    summary = [t for t in (mean, p99) if t is not None]
    if any(t < 1 for t in summary):
        raise UnitError("mean and p99 lengths must be at least 1 token")
    return summary, True


def _stages(
    d: Deployment, max_model_len: int | None = None, shared_blocks: int = 0
) -> tuple[tuple[StagePlan, ...], Weights, Overhead]:
    """Memory and pages of every stage (one GPU each) of deployment ``d``; with
    ``max_model_len``, also what one request of that length holds and how many fit."""
    spec, tp = d.spec, d.tensor_parallel_size
    chosen = d.cache_dtypes()
    k_dtype, v_dtype = chosen.k, chosen.v
    weights = model_weights(spec, d.served_dtype, d.quantization)
    overhead = d.overhead()
    usable = _usable(d.gpu.memory_bytes, d.gpu_memory_utilization)
    parts = pipeline_partition(spec.num_hidden_layers, d.pipeline_parallel_size)
    stages = []
    first = 0
    for index, num_layers in enumerate(parts):
        last = first + num_layers - 1
        if len(parts) == 1:
            layer_groups = spec.layer_groups
        else:
            counts: dict[LayerCache, int] = {}
            for layer in spec.layers[first : last + 1]:
                counts[layer] = counts.get(layer, 0) + 1
            layer_groups = tuple(counts.items())
        groups = tuple(
            _group(_shard(layer, tp), n, k_dtype, v_dtype, d.block_size)
            for layer, n in layer_groups
        )
        weights_bytes = stage_weight_bytes(
            weights, spec.num_hidden_layers, num_layers, index == 0, index == len(parts) - 1, tp
        )
        if d.kv_cache_memory_bytes is not None:
            pool = d.kv_cache_memory_bytes
        else:
            pool = max(0, usable - weights_bytes - overhead.total_bytes)
        block_bytes = sum(g.page_bytes * g.num_layers for g in groups)
        num_blocks = pool // block_bytes if block_bytes else 0
        request = stored = concurrency = None
        if max_model_len is not None:
            request = _private_bytes(groups, max_model_len, shared_blocks, d.block_size)
            stored = _stored_prefix_bytes(groups, shared_blocks)
            if request:
                concurrency = (pool - stored) // request if pool >= stored else 0
        stages.append(
            StagePlan(
                index=index,
                first_layer=first,
                last_layer=last,
                weights_bytes=weights_bytes,
                overhead_bytes=overhead.total_bytes,
                kv_cache_memory_bytes=pool,
                block_bytes=block_bytes,
                num_blocks=num_blocks,
                kv_cache_tokens=num_blocks * d.block_size,
                request_bytes=request,
                shared_bytes=stored or 0,
                max_concurrency=concurrency,
                groups=groups,
            )
        )
        first = last + 1
    return tuple(stages), weights, overhead


def _group(layer: LayerCache, n: int, k: DType, v: DType, block_size: int) -> _Group:
    token_bytes = layer.k_token_bytes(k) + layer.v_token_bytes(v)
    return _Group(
        layer=layer,
        num_layers=n,
        page_bytes=token_bytes * block_size,
        token_bytes=token_bytes,
        state_bytes=layer.state_bytes,
        shares_prefix=layer.max_tokens is None,
    )


def _shared_blocks(prefix_tokens: int, tokens: int, block_size: int) -> int:
    """Whole blocks of the shared prefix a request of ``tokens`` reuses. The block holding a
    request's last token is always its own (engines recompute the last prompt token), so a
    prefix never covers a whole request."""
    return max(0, min(prefix_tokens, tokens - 1)) // block_size


def _shared_bytes(stage: StagePlan, shared_blocks: int) -> int:
    return _stored_prefix_bytes(stage.groups, shared_blocks)


def _concurrency(stage: StagePlan, tokens: int, shared_blocks: int, block_size: int) -> int | None:
    """How many requests of ``tokens`` fit in the stage's pool beside the shared prefix.

    None when the stage keeps nothing per request (its layers cache nothing): it sets no limit.
    """
    private = stage.private_bytes(tokens, shared_blocks, block_size)
    room = stage.kv_cache_memory_bytes - _shared_bytes(stage, shared_blocks)
    if private == 0:
        return None
    return room // private if room >= 0 else 0


def _fits(stages: Sequence[StagePlan], tokens: int, n: int, shared: int, block_size: int) -> bool:
    return all(
        n * s.private_bytes(tokens, shared, block_size) + _shared_bytes(s, shared)
        <= s.kv_cache_memory_bytes
        for s in stages
    )


def _longest(stages: Sequence[StagePlan], n: int, shared: int, block_size: int, cap: int) -> int:
    """The largest context in [0, cap] that ``n`` requests can each hold (-1: not even 0)."""
    if not _fits(stages, 0, n, 0, block_size):
        return -1
    lo, hi = 0, cap
    while lo < hi:  # invariant: lo fits
        mid = (lo + hi + 1) // 2
        if _fits(stages, mid, n, _shared_blocks(shared, mid, block_size), block_size):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _solve(
    d: Deployment,
    max_model_len: int | None,
    concurrency: int | None,
    shared_prefix: int,
    mix_lengths: tuple[list[int], bool] | None,
) -> Plan:
    spec, bs = d.spec, d.block_size
    cap = max_model_len or spec.max_position_embeddings or 1 << 24
    if shared_prefix > cap:
        raise UnitError(f"shared prefix {shared_prefix:,} exceeds the context {cap:,}")
    shared_blocks = _shared_blocks(shared_prefix, max_model_len or cap, bs)
    stages, weights, overhead = _stages(d, max_model_len, shared_blocks)
    chosen = d.cache_dtypes()
    max_concurrency = request_bytes = ideal = max_context = None
    if max_model_len is not None:
        limiting = [s for s in stages if s.max_concurrency is not None]
        if not limiting:
            raise UnitError(f"{spec.name} keeps no per-request cache: concurrency is unbounded")
        tight = min(limiting, key=lambda s: s.max_concurrency or 0)
        max_concurrency = tight.max_concurrency
        request_bytes = tight.request_bytes
        ideal = tight.ideal_bytes(max_model_len, shared_blocks * bs)
    target = concurrency if concurrency is not None else 1
    if concurrency is not None or (max_model_len is None and mix_lengths is None):
        max_context = _longest(stages, target, shared_prefix, bs, cap)
    mix = _length_mix(stages, mix_lengths, shared_prefix, bs) if mix_lengths else None
    fits, message = _verdict(
        d, stages, max_model_len, concurrency, max_concurrency, max_context, shared_prefix, cap
    )
    return Plan(
        model=spec.name,
        gpu=d.gpu,
        tensor_parallel_size=d.tensor_parallel_size,
        pipeline_parallel_size=d.pipeline_parallel_size,
        replicas=1,
        max_model_len=max_model_len,
        concurrency=concurrency,
        gpu_memory_utilization=d.gpu_memory_utilization,
        k_dtype=chosen.k,
        v_dtype=chosen.v,
        block_size=bs,
        shared_prefix_tokens=shared_prefix,
        overhead=overhead,
        weights_model_dtype=weights.model_dtype,
        weights_format=weights.description,
        quantization=d.quantization,
        stages=stages,
        max_concurrency=max_concurrency,
        max_context_tokens=None if max_context is None else max(max_context, 0),
        fits=fits,
        message=message,
        request_bytes=request_bytes,
        ideal_request_bytes=ideal,
        length_mix=mix,
        dtype_reason=chosen.reason,
        kv_cache_memory_given=d.kv_cache_memory_bytes is not None,
    )


def _length_mix(
    stages: Sequence[StagePlan],
    mix_lengths: tuple[list[int], bool],
    shared_prefix: int,
    bs: int,
) -> LengthMix:
    """Concurrency for a mix: a sample of lengths, or a (mean[, p99]) summary of one.

    A sample: expected concurrency = pool x n / (the sample's paged bytes), i.e. the pool over
    the mean request. A summary: the pool over a request of the mean length; the worst case is
    every request at the p99 length (or at the sample's longest).
    """
    ordered, summary = mix_lengths
    best: LengthMix | None = None
    for s in stages:
        sample = ordered[:1] if summary else ordered
        paged = sum(s.private_bytes(t, _shared_blocks(shared_prefix, t, bs), bs) for t in sample)
        ideal = sum(s.ideal_bytes(t, _shared_blocks(shared_prefix, t, bs) * bs) for t in sample)
        longest = ordered[-1]
        stored = _shared_bytes(s, _shared_blocks(shared_prefix, longest, bs))
        room = max(0, s.kv_cache_memory_bytes - stored)
        expected = room * len(sample) // paged if paged else 0
        worst = _concurrency(s, longest, _shared_blocks(shared_prefix, longest, bs), bs)
        n = len(ordered)
        mix = LengthMix(
            num_requests=0 if summary else n,
            mean_tokens=ordered[0] if summary else sum(ordered) // n,
            p50_tokens=ordered[0] if summary else ordered[(n - 1) // 2],
            p99_tokens=longest if summary else ordered[min(n - 1, -(-99 * n // 100) - 1)],
            max_tokens=longest,
            expected_concurrency=expected,
            worst_case_concurrency=worst if worst is not None else expected,
            paged_bytes=paged,
            ideal_bytes=ideal,
        )
        if best is None or mix.expected_concurrency < best.expected_concurrency:
            best = mix
    assert best is not None
    return best


def _advice(d: Deployment, *changes: str) -> str:
    """The settings worth changing, leaving out what is already set: ``changes`` are the
    question's own levers (lower --max-model-len ...), then memory levers the deployment has
    not used yet."""
    levers = [c for c in changes if c]
    if d.kv_cache_memory_bytes is not None:
        levers.append("raise --kv-cache-memory")
    elif d.gpu_memory_utilization < Fraction(95, 100):
        levers.append("raise --gpu-memory-utilization")
    chosen = d.cache_dtypes()
    if any(t.block_bytes > t.block_values for t in (chosen.k, chosen.v)):  # over 8 bits
        levers.append("use --kv-cache-dtype fp8")
    if d.quantization is None and d.spec.weight_dtype is None:
        levers.append("quantize the weights (--quantization)")
    levers.append("add GPUs (-tp/-pp)")
    if len(levers) == 1:
        return levers[0]
    return ", ".join(levers[:-1]) + f" or {levers[-1]}"


def _requests(n: int) -> str:
    return f"{n:,} request{'' if n == 1 else 's'}"


def _verdict(
    d: Deployment,
    stages: Sequence[StagePlan],
    max_model_len: int | None,
    concurrency: int | None,
    max_concurrency: int | None,
    max_context: int | None,
    shared_prefix: int,
    cap: int,
) -> tuple[bool, str]:
    """Whether the question's targets are met, and if not, one message saying what to change."""
    tight = min(stages, key=lambda s: s.kv_cache_memory_bytes)
    heaviest = max(
        stages, key=lambda s: s.weights_bytes + s.overhead_bytes + s.kv_cache_memory_bytes
    )
    used = heaviest.weights_bytes + heaviest.overhead_bytes + heaviest.kv_cache_memory_bytes
    if d.kv_cache_memory_bytes is not None and used > d.gpu.memory_bytes:
        return False, (
            f"weights ({format_bytes(heaviest.weights_bytes)}), overhead"
            f" ({format_bytes(heaviest.overhead_bytes)}) and the given KV cache memory"
            f" ({format_bytes(heaviest.kv_cache_memory_bytes)}) need {format_bytes(used)} per GPU,"
            f" more than its {format_bytes(d.gpu.memory_bytes)}: lower --kv-cache-memory or add"
            " GPUs (-tp/-pp)"
        )
    if tight.kv_cache_memory_bytes == 0 and d.kv_cache_memory_bytes is None:
        need = tight.weights_bytes + tight.overhead_bytes
        usable = _usable(d.gpu.memory_bytes, d.gpu_memory_utilization)
        levers = ["add GPUs (-tp/-pp)"]
        if d.quantization is None and d.spec.weight_dtype is None:
            levers.append("quantize the weights (--quantization)")
        if d.gpu_memory_utilization < Fraction(95, 100):
            levers.append("raise --gpu-memory-utilization")
        levers.append("use a larger GPU")
        return False, (
            f"weights ({format_bytes(tight.weights_bytes)}) and overhead"
            f" ({format_bytes(tight.overhead_bytes)}) need {format_bytes(need)} per GPU, more"
            f" than the {format_bytes(usable)} usable at utilization"
            f" {float(d.gpu_memory_utilization):g}: "
            + ", ".join(levers[:-1])
            + f" or {levers[-1]}"
        )
    if max_model_len is not None and max_concurrency is not None:
        wanted = concurrency or 1
        if max_concurrency < wanted:
            longest = _longest(stages, wanted, shared_prefix, d.block_size, cap)
            need = wanted * (max(s.request_bytes or 0 for s in stages)) + max(
                s.shared_bytes for s in stages
            )
            if max_concurrency == 0:
                at_length = "not one request fits at that length"
            else:
                at_length = f"at most {_requests(max_concurrency)} fit at that length"
            if longest >= 1:
                reach = f", and {wanted:,} fit{'s' if wanted == 1 else ''} up to" + (
                    f" {format_tokens(longest)} tokens each"
                )
            else:
                reach = f"; {wanted:,} do not fit even at 1 token each"
            levers = ["lower --max-model-len"]
            if concurrency is not None and concurrency > 1:
                levers.append("--concurrency")
            return False, (
                f"{_requests(wanted)} of {format_tokens(max_model_len)}"
                f" tokens need {format_bytes(need)} of KV cache per GPU, more than the"
                f" {format_bytes(tight.kv_cache_memory_bytes)} available; {at_length}{reach}: "
                + _advice(d, " or ".join(levers))
            )
        fit = "fits" if max_concurrency == 1 else "fit"
        concurrent = "concurrent request" if max_concurrency == 1 else "concurrent requests"
        return True, (
            f"{max_concurrency:,} {concurrent} of {format_tokens(max_model_len)} tokens {fit}"
        )
    if max_context is not None:
        wanted = concurrency or 1
        if max_context < 1:
            return False, (
                f"{_requests(wanted)} do{'es' if wanted == 1 else ''} not fit even with 1 token"
                " each: " + _advice(d, "lower --concurrency" if wanted > 1 else "")
            )
        capped = " (the model's maximum)" if max_context == cap else ""
        concurrent = "concurrent request" if wanted == 1 else "concurrent requests"
        return True, (
            f"{wanted:,} {concurrent} can each reach {format_tokens(max_context)} tokens{capped}"
        )
    return True, ""


def valid_tensor_parallel_sizes(spec: ModelSpec, limit: int = MAX_SEARCH_TP) -> list[int]:
    """TP sizes up to ``limit`` the engines accept (``tensor_parallel_valid``): powers of
    two for the search's default limit, every divisor when asked for more."""
    if limit <= MAX_SEARCH_TP:
        candidates = [1 << i for i in range(limit.bit_length()) if 1 << i <= limit]
    else:
        candidates = list(range(1, limit + 1))
    return [tp for tp in candidates if tensor_parallel_valid(spec, tp)]


def _smallest_deployment(d: Deployment, length: int, n: int, shared_prefix: int) -> Plan:
    """The fewest GPUs (TP x PP x replicas) holding ``n`` requests of ``length`` tokens."""

    best: tuple[tuple[int, int, int], Plan] | None = None
    for tp in valid_tensor_parallel_sizes(d.spec):
        for pp in range(1, min(MAX_SEARCH_PP, d.spec.num_hidden_layers) + 1):
            if best is not None and tp * pp > best[0][0]:
                break  # one replica alone already uses more GPUs than the best found
            candidate = _solve(
                replace(d, tensor_parallel_size=tp, pipeline_parallel_size=pp),
                length,
                None,
                shared_prefix,
                None,
            )
            per_replica = candidate.max_concurrency or 0
            if per_replica < 1:
                continue
            replicas = -(-n // per_replica)
            key = (tp * pp * replicas, tp * pp, pp)
            if best is None or key < best[0]:
                best = (key, replace(candidate, replicas=replicas))
    if best is None:
        largest = _solve(
            replace(
                d,
                tensor_parallel_size=max(valid_tensor_parallel_sizes(d.spec)),
                pipeline_parallel_size=min(MAX_SEARCH_PP, d.spec.num_hidden_layers),
            ),
            length,
            n,
            shared_prefix,
            None,
        )
        return replace(
            largest,
            searched=True,
            fits=False,
            concurrency=n,
            message=(
                f"no deployment of up to {MAX_SEARCH_TP} x {MAX_SEARCH_PP} {d.gpu.name} GPUs holds"
                f" one request of {format_tokens(length)} tokens: lower --max-model-len, quantize"
                " (--quantization, --kv-cache-dtype fp8) or use a larger GPU"
            ),
        )
    plan_ = best[1]
    total = (plan_.max_concurrency or 0) * plan_.replicas
    return replace(
        plan_,
        concurrency=n,
        searched=True,
        fits=True,
        message=(
            f"{plan_.num_gpus} x {d.gpu.name}: {plan_.replicas} replica"
            f"{'s' if plan_.replicas > 1 else ''} of TP {plan_.tensor_parallel_size} x PP"
            f" {plan_.pipeline_parallel_size}, holding {total} requests of"
            f" {format_tokens(length)} tokens (>= {n})"
        ),
    )
