"""Roofline bounds on one GPU rank: what a decode step and a prefill move and compute.

Decode is a memory-bandwidth problem until the batch is large: every step reads the weights
once (shared by the batch) and every sequence's whole retained cache (sliding layers at most
their window, MLA its latent, recurrent layers their state), and writes the new token's K and
V. A step can go no faster than ``bytes / HBM bandwidth`` nor than ``FLOPs / peak FLOP/s``;
whichever is larger binds. Prefill is compute-bound: ``2 x active parameters x tokens`` plus the
causal attention, capped by windows and chunks.

Bounds are exact rationals (``Fraction`` seconds); the efficiencies turn them into estimates:
decode kernels typically reach 70-85 % of HBM bandwidth and prefill GEMMs 50-70 % of dense
peak, hence the defaults 0.80 and 0.60, shown apart from the pure bound.
``kvplan.answers.performance`` reads the arguments and asks these functions.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from kvplan.hardware.gpus import GPU
from kvplan.model.dtypes import CacheDTypes, cache_dtypes
from kvplan.model.layers import (
    ChunkedLocalAttention,
    FullAttention,
    LayerCache,
    MLALatent,
    RecurrentState,
    SlidingWindowAttention,
    pool_parts,
    pooled_bytes,
    tokens_retained,
)
from kvplan.model.spec import ModelSpec
from kvplan.model.weights import model_weights
from kvplan.units import DType, cdiv

DEFAULT_BANDWIDTH_EFFICIENCY = Fraction(4, 5)
DEFAULT_COMPUTE_EFFICIENCY = Fraction(3, 5)


@dataclass(frozen=True, slots=True)
class DecodeStep:
    """One decode step of ``batch_size`` sequences at ``context_tokens`` each, on one rank."""

    batch_size: int
    context_tokens: int
    weight_read_bytes: int
    kv_read_bytes: int
    kv_write_bytes: int
    flops: int
    memory_seconds: Fraction  # pure bound: bytes / bandwidth
    compute_seconds: Fraction  # pure bound: FLOPs / peak
    bandwidth_efficiency: Fraction
    compute_efficiency: Fraction

    @property
    def bytes_moved(self) -> int:
        return self.weight_read_bytes + self.kv_read_bytes + self.kv_write_bytes

    @property
    def bound(self) -> str:
        """``memory`` or ``compute``: which pure bound binds."""
        return "compute" if self.compute_seconds > self.memory_seconds else "memory"

    @property
    def bound_seconds(self) -> Fraction:
        """The step can take no less than this."""
        return max(self.memory_seconds, self.compute_seconds)

    @property
    def estimate_seconds(self) -> Fraction:
        """The bound at the achieved fractions of bandwidth and peak."""
        return max(self._memory_estimate, self._compute_estimate)

    @property
    def estimated_bound(self) -> str:
        """``memory`` or ``compute``: which binds at the achieved fractions."""
        return "compute" if self._compute_estimate > self._memory_estimate else "memory"

    @property
    def _memory_estimate(self) -> Fraction:
        return self.memory_seconds / self.bandwidth_efficiency

    @property
    def _compute_estimate(self) -> Fraction:
        return self.compute_seconds / self.compute_efficiency

    def tokens_per_second(self, estimated: bool = False) -> Fraction:
        """Output tokens a second over the batch (the bound, or the estimate)."""
        return self.batch_size / (self.estimate_seconds if estimated else self.bound_seconds)


@dataclass(frozen=True, slots=True)
class Prefill:
    """Prefill of one prompt of ``prompt_tokens`` on one rank: the time-to-first-token bound."""

    prompt_tokens: int
    linear_flops: int
    attention_flops: int
    weight_read_bytes: int
    compute_seconds: Fraction
    memory_seconds: Fraction
    compute_efficiency: Fraction

    @property
    def flops(self) -> int:
        return self.linear_flops + self.attention_flops

    @property
    def bound_seconds(self) -> Fraction:
        return max(self.compute_seconds, self.memory_seconds)

    @property
    def estimate_seconds(self) -> Fraction:
        return max(self.compute_seconds / self.compute_efficiency, self.memory_seconds)


@dataclass(frozen=True, slots=True)
class Communication:
    """What tensor, pipeline and expert parallelism add to one decode step, in seconds."""

    tensor_parallel_seconds: Fraction = Fraction(0)
    pipeline_seconds: Fraction = Fraction(0)
    expert_parallel_seconds: Fraction = Fraction(0)

    @property
    def seconds(self) -> Fraction:
        return self.tensor_parallel_seconds + self.pipeline_seconds + self.expert_parallel_seconds


@dataclass(frozen=True, slots=True)
class ReplicaStep:
    """One decode round of a replica (``tp x pp`` GPUs, or one data-parallel rank with expert
    parallelism), every request one token: the rank's roofline round plus the communication
    per step (``kvplan.planner.throughput.communication``), added, never overlapped."""

    batch_size: int  # requests of one round
    gpus_per_batch: int  # GPUs the round's requests occupy: tp x pp, or 1 with DP attention
    compute_bound_seconds: Fraction  # pure roofline of the round (pipeline-aware)
    compute_estimate_seconds: Fraction  # at the achieved fractions
    communication: Communication

    @property
    def communication_seconds(self) -> Fraction:
        return self.communication.seconds

    @property
    def bound_seconds(self) -> Fraction:
        return self.compute_bound_seconds + self.communication_seconds

    @property
    def estimate_seconds(self) -> Fraction:
        return self.compute_estimate_seconds + self.communication_seconds

    def tokens_per_second_per_gpu(self, estimated: bool = False) -> Fraction:
        """Output tokens a second per GPU: the bound, or the estimate."""
        seconds = self.estimate_seconds if estimated else self.bound_seconds
        return Fraction(self.batch_size, self.gpus_per_batch) / seconds


@dataclass(frozen=True, slots=True)
class Perf:
    """Decode and prefill bounds of one deployment (per rank; tensor parallel ranks in step)."""

    model: str
    gpu: GPU
    tensor_parallel_size: int
    kv_dtype: str  # the cache dtype, ``k/v`` when K and V differ
    decode: DecodeStep
    prefill: Prefill
    curve: tuple[DecodeStep, ...]
    max_concurrency: int | None
    model_dtype: str = ""  # the dtype the model runs in: weights and activations
    kv_dtype_reason: str = ""  # why the cache has that dtype, in words
    engine: str = "ideal"
    not_modelled: tuple[str, ...] = ()  # what the bounds leave out, one phrase each
    pipeline_parallel_size: int = 1
    expert_parallel_size: int = 1
    system: str | None = None  # the system whose interconnect carries the communication
    matmul_precision: str = "bf16"  # the tensor-core peak the FLOPs run at
    matmul_peak_flops: int = 0
    replica: ReplicaStep | None = None  # the decode round with communication, per replica
    leaves_out: str = ""  # one line: what the bound with communication still leaves out
    # the weights as ``kvplan.model.weights.model_weights`` describes them, as ``kvplan plan`` names
    # them: ``awq for 31,206,298,624 parameters, bfloat16 for the rest``
    weights_format: str = ""
    who_fits: str = "kvplan's planner"  # whose answer ``max_concurrency`` is

    @property
    def compute_bound_from(self) -> int | None:
        """The smallest batch of the curve whose estimate is compute-bound (None: never)."""
        return next(
            (
                s.batch_size
                for s in self.curve
                if s.estimated_bound == "compute" and self.fits(s.batch_size)
            ),
            None,
        )

    def fits(self, batch_size: int) -> bool:
        """Whether ``batch_size`` sequences of the context fit at once (unknown: True)."""
        return self.max_concurrency is None or batch_size <= self.max_concurrency

    def no_speed_reason(self, batch_size: int) -> str | None:
        """Why a decode step of ``batch_size`` sequences has no speed: they do not fit, so the
        step never runs (None where they fit or the fit is unknown). Llama 3.1 70B on one
        H100 at 8,192 tokens: ``1 x 8,192 tokens do not fit: at most 0 sequences do
        (kvplan's planner)``."""
        if self.fits(batch_size):
            return None
        context = self.decode.context_tokens
        return (
            f"{batch_size:,} x {context:,} tokens do not fit: at most"
            f" {self.max_concurrency or 0:,} sequences do ({self.who_fits})"
        )


@dataclass(frozen=True, slots=True)
class RankModel:
    """What the bounds need from a spec, sized once."""

    layers: tuple[tuple[LayerCache, int], ...]  # rank-local layers and their counts
    dtypes: CacheDTypes
    layers_bytes: int  # all layer weights, whole model
    head_bytes: int  # the output head (the embedding when tied)
    row_bytes: int  # one embedding row
    num_parameters: int
    num_active_parameters: int
    num_heads: int  # query heads
    tp: int
    mla_dims: tuple[int, int]  # prefill QK and V dims per head for MLA (decompressed)
    weights_format: str = ""  # the weights as ``kvplan.model.weights`` describes them

    @property
    def k_dtype(self) -> DType:
        return self.dtypes.k

    @property
    def v_dtype(self) -> DType:
        return self.dtypes.v


def rank_model(
    spec: ModelSpec,
    tp: int,
    kv_cache_dtype: str | None,
    dtype: str | None,
    quantization: str | None,
    engine: str = "ideal",
) -> RankModel:
    """What the bounds need from ``spec`` on one of ``tp`` ranks, in the dtypes ``engine``
    serves it in."""
    dtypes = cache_dtypes(spec, engine, kv_cache_dtype=kv_cache_dtype, dtype=dtype)
    # the weights in the dtype the engine runs the model in: a float32 checkpoint served in
    # bfloat16 reads 2 B a parameter, not 4
    weights = model_weights(spec, dtypes.model.name, quantization)
    counts: dict[LayerCache, int] = {}
    for layer, n in spec.layer_groups:
        shard = layer.shard(tp)
        counts[shard] = counts.get(shard, 0) + n
    hidden = spec.hidden_size or 0
    nope, rope = spec.qk_nope_head_dim or 0, spec.qk_rope_head_dim or 0
    return RankModel(
        layers=tuple(counts.items()),
        dtypes=dtypes,
        layers_bytes=weights.layers_bytes,
        head_bytes=weights.lm_head_bytes or weights.embedding_bytes,
        row_bytes=cdiv(weights.embedding_bytes, spec.vocab_size or 1) if hidden else 0,
        num_parameters=spec.num_parameters or 1,
        num_active_parameters=spec.num_active_parameters or spec.num_parameters or 1,
        num_heads=spec.num_attention_heads,
        tp=tp,
        mla_dims=(nope + rope, spec.v_head_dim or nope),
        weights_format=weights.description,
    )


def matmul_peak(gpu: GPU, weights_format: str) -> tuple[str, int]:
    """The tensor-core peak the step's FLOPs run at, and its precision: fp8 weights at the
    GPU's fp8 peak; fp4 weights (mxfp4, nvfp4) at its fp4 peak, else its fp8 peak; anything
    else at the dense bf16 peak. The fastest the format allows, so a bound stays a bound
    (mxfp4 on Hopper runs with bf16 activations in practice, slower)."""
    fmt = weights_format.lower()
    if fmt.startswith(("mxfp4", "nvfp4")) and gpu.fp4_flops:
        return "fp4", gpu.fp4_flops
    if fmt.startswith(("mxfp4", "nvfp4", "fp8")) and gpu.fp8_flops:
        return "fp8", gpu.fp8_flops
    return "bf16", gpu.bf16_flops


def _weight_read_bytes(m: RankModel, batch_size: int) -> int:
    """Weights one decode step reads on one rank. Dense: every layer weight once. MoE: each
    sequence reads its active experts, so the batch reads up to ``batch x active`` of the
    layer weights, capped at all of them (an estimate: routing overlap makes it less)."""
    layers = m.layers_bytes
    if m.num_active_parameters < m.num_parameters:
        layers = min(layers, layers * m.num_active_parameters * batch_size // m.num_parameters)
    return cdiv(layers + m.head_bytes, m.tp) + batch_size * m.row_bytes


def _attention_dims(layer: LayerCache) -> int:
    """Multiply-add dims per query head and attended token: QK^T plus AV."""
    match layer:
        case MLALatent():
            # absorbed decode: scores against the latent and rope part, values from the latent
            return 2 * layer.kv_lora_rank + layer.qk_rope_head_dim
        case FullAttention():
            return layer.head_dim + layer.v_head_dim
        case _:
            return 0


def decode_step(
    m: RankModel, gpu: GPU, batch_size: int, context_tokens: int, bw: Fraction, ce: Fraction
) -> DecodeStep:
    heads = max(1, m.num_heads // m.tp)
    kv_read = kv_write = attention = state_flops = 0
    for layer, n in m.layers:
        kept = tokens_retained(layer, context_tokens)
        token_bytes = layer.k_token_bytes(m.k_dtype) + layer.v_token_bytes(m.v_dtype)
        pooled = pooled_bytes(layer, kept)  # GLM-5.3's indexer keys, one per pool
        kv_read += n * (token_bytes * kept + pooled + layer.state_bytes)
        pool_bytes, tokens_per_pool = pool_parts(layer)  # one pool written per tokens_per_pool
        kv_write += n * (token_bytes + cdiv(pool_bytes, tokens_per_pool) + layer.state_bytes)
        attention += n * 2 * heads * _attention_dims(layer) * kept
        if isinstance(layer, RecurrentState):
            state_flops += n * 4 * layer.ssm_values  # decay, update, read out
    linear = cdiv(2 * m.num_active_parameters, m.tp)
    flops = batch_size * (linear + attention + state_flops)
    weight_read = _weight_read_bytes(m, batch_size)
    moved = weight_read + batch_size * (kv_read + kv_write)
    return DecodeStep(
        batch_size=batch_size,
        context_tokens=context_tokens,
        weight_read_bytes=weight_read,
        kv_read_bytes=batch_size * kv_read,
        kv_write_bytes=batch_size * kv_write,
        flops=flops,
        memory_seconds=Fraction(moved, gpu.bandwidth_bytes_per_s),
        compute_seconds=Fraction(flops, matmul_peak(gpu, m.weights_format)[1]),
        bandwidth_efficiency=bw,
        compute_efficiency=ce,
    )


def _causal_pairs(layer: LayerCache, prompt_tokens: int) -> int:
    """Query-key pairs of a causal prefill: token i attends to min(i, window) tokens."""
    p = prompt_tokens
    match layer:
        case SlidingWindowAttention(window=w) if p > w:
            return w * (w + 1) // 2 + (p - w) * w
        case ChunkedLocalAttention(chunk=c):
            q, r = divmod(p, c)
            return q * c * (c + 1) // 2 + r * (r + 1) // 2
        case MLALatent() | FullAttention():
            return p * (p + 1) // 2
        case _:
            return 0


def prefill_bound(m: RankModel, gpu: GPU, prompt_tokens: int, ce: Fraction) -> Prefill:
    heads = max(1, m.num_heads // m.tp)
    attention = 0
    for layer, n in m.layers:
        match layer:
            case MLALatent():
                dims = sum(m.mla_dims) or _attention_dims(layer)  # prefill decompresses
            case _:
                dims = _attention_dims(layer)
        attention += n * 2 * heads * dims * _causal_pairs(layer, prompt_tokens)
    linear = cdiv(2 * m.num_active_parameters * prompt_tokens, m.tp)
    weights = cdiv(m.layers_bytes + m.head_bytes, m.tp)
    return Prefill(
        prompt_tokens=prompt_tokens,
        linear_flops=linear,
        attention_flops=attention,
        weight_read_bytes=weights,
        compute_seconds=Fraction(linear + attention, matmul_peak(gpu, m.weights_format)[1]),
        memory_seconds=Fraction(weights, gpu.bandwidth_bytes_per_s),
        compute_efficiency=ce,
    )
