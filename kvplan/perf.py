"""What the cache costs in speed: roofline bounds on decode and prefill, per GPU rank.

Decode is a memory-bandwidth problem until the batch is large: every step reads the weights
once (shared by the batch) and every sequence's whole retained cache (sliding layers at most
their window, MLA its latent, recurrent layers their state), and writes the new token's K and
V. A step can go no faster than ``bytes / HBM bandwidth`` nor than ``FLOPs / peak FLOP/s``;
whichever is larger binds. Prefill is compute-bound: ``2 x active parameters x tokens`` plus the
causal attention, capped by windows and chunks.

Worked example (Llama 3.1 8B, bf16, H100 SXM at 3.35 TB/s, one sequence, short context): a step
reads 13,959,176,192 B of layer weights + 1,050,673,152 B of output head (the input embedding
is a gather of one row) = 15,009,849,344 B -> at least 4.48 ms, at most 223.2 tokens/s. Counting
the whole embedding table as read, as rough estimates do, gives 209.

Bounds are exact rationals (``Fraction`` seconds); the efficiencies turn them into estimates:
decode kernels typically reach 70-85 % of HBM bandwidth and prefill GEMMs 50-70 % of dense
peak, hence the defaults 0.80 and 0.60, shown apart from the pure bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from kvplan.errors import UnitError
from kvplan.estimator import cache_dtypes
from kvplan.hardware import GPU
from kvplan.layers import (
    ChunkedLocalAttention,
    FullAttention,
    LayerCache,
    MLALatent,
    RecurrentState,
    SlidingWindowAttention,
    tokens_retained,
)
from kvplan.spec import ModelSpec
from kvplan.units import DType, cdiv
from kvplan.weights import model_weights

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
class Perf:
    """Decode and prefill bounds of one deployment (per rank; tensor parallel ranks in step)."""

    model: str
    gpu: GPU
    tensor_parallel_size: int
    kv_dtype: str
    decode: DecodeStep
    prefill: Prefill
    curve: tuple[DecodeStep, ...]
    max_concurrency: int | None

    @property
    def compute_bound_from(self) -> int | None:
        """The smallest batch of the curve whose estimate is compute-bound (None: never)."""
        return next((s.batch_size for s in self.curve if s.estimated_bound == "compute"), None)


@dataclass(frozen=True, slots=True)
class _Model:
    """What the bounds need from a spec, sized once."""

    layers: tuple[tuple[LayerCache, int], ...]  # rank-local layers and their counts
    k_dtype: DType
    v_dtype: DType
    layers_bytes: int  # all layer weights, whole model
    head_bytes: int  # the output head (the embedding when tied)
    row_bytes: int  # one embedding row
    num_parameters: int
    num_active_parameters: int
    num_heads: int  # query heads
    tp: int
    mla_dims: tuple[int, int]  # prefill QK and V dims per head for MLA (decompressed)


def _model(
    spec: ModelSpec,
    tp: int,
    kv_cache_dtype: str | None,
    weights_dtype: str | None,
    quantization: str | None,
) -> _Model:
    if tp < 1:
        raise UnitError(f"tensor_parallel_size must be at least 1, got {tp}")
    k, v = cache_dtypes(spec, kv_cache_dtype, None, None)
    weights = model_weights(spec, weights_dtype, quantization)
    counts: dict[LayerCache, int] = {}
    for layer, n in spec.layer_groups:
        shard = layer.shard(tp)
        counts[shard] = counts.get(shard, 0) + n
    hidden = spec.hidden_size or 0
    nope, rope = spec.qk_nope_head_dim or 0, spec.qk_rope_head_dim or 0
    return _Model(
        layers=tuple(counts.items()),
        k_dtype=k,
        v_dtype=v,
        layers_bytes=weights.layers_bytes,
        head_bytes=weights.lm_head_bytes or weights.embedding_bytes,
        row_bytes=cdiv(weights.embedding_bytes, spec.vocab_size or 1) if hidden else 0,
        num_parameters=spec.num_parameters or 1,
        num_active_parameters=spec.num_active_parameters or spec.num_parameters or 1,
        num_heads=spec.num_attention_heads,
        tp=tp,
        mla_dims=(nope + rope, spec.v_head_dim or nope),
    )


def _weight_read_bytes(m: _Model, batch_size: int) -> int:
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
    m: _Model, gpu: GPU, batch_size: int, context_tokens: int, bw: Fraction, ce: Fraction
) -> DecodeStep:
    heads = max(1, m.num_heads // m.tp)
    kv_read = kv_write = attention = state_flops = 0
    for layer, n in m.layers:
        kept = tokens_retained(layer, context_tokens)
        token_bytes = layer.k_token_bytes(m.k_dtype) + layer.v_token_bytes(m.v_dtype)
        kv_read += n * (token_bytes * kept + layer.state_bytes)
        kv_write += n * (token_bytes + layer.state_bytes)
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
        compute_seconds=Fraction(flops, gpu.bf16_flops),
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


def prefill_bound(m: _Model, gpu: GPU, prompt_tokens: int, ce: Fraction) -> Prefill:
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
        compute_seconds=Fraction(linear + attention, gpu.bf16_flops),
        memory_seconds=Fraction(weights, gpu.bandwidth_bytes_per_s),
        compute_efficiency=ce,
    )


def _ladder(top: int) -> list[int]:
    """1, 2, 4, ... up to ``top``, with ``top`` itself last."""
    steps, b = [], 1
    while b < top:
        steps.append(b)
        b *= 2
    steps.append(top)
    return steps


def perf(
    spec: ModelSpec,
    gpu: GPU,
    *,
    context_tokens: int,
    concurrency: int = 1,
    prompt_tokens: int | None = None,
    tensor_parallel_size: int = 1,
    kv_cache_dtype: str | None = None,
    dtype: str | None = None,
    quantization: str | None = None,
    bandwidth_efficiency: Fraction | float = DEFAULT_BANDWIDTH_EFFICIENCY,
    compute_efficiency: Fraction | float = DEFAULT_COMPUTE_EFFICIENCY,
    max_concurrency: int | None = None,
    curve: Sequence[int] | None = None,
) -> Perf:
    """Decode bounds at ``concurrency`` sequences of ``context_tokens``, the prefill bound of a
    ``prompt_tokens`` prompt (default: the context), and the decode curve over ``curve`` batch
    sizes (default 1, 2, 4, ... up to ``max_concurrency`` or ``concurrency``)."""
    bw, ce = Fraction(bandwidth_efficiency), Fraction(compute_efficiency)
    for name, value in (("bandwidth_efficiency", bw), ("compute_efficiency", ce)):
        if not 0 < value <= 1:
            raise UnitError(f"{name} must be in (0, 1], got {float(value)}")
    if concurrency < 1:
        raise UnitError(f"concurrency must be at least 1, got {concurrency}")
    m = _model(spec, tensor_parallel_size, kv_cache_dtype, dtype, quantization)
    top = max(concurrency, max_concurrency or 1)
    sizes = list(curve) if curve is not None else _ladder(top)
    return Perf(
        model=spec.name,
        gpu=gpu,
        tensor_parallel_size=tensor_parallel_size,
        kv_dtype=m.k_dtype.name if m.k_dtype == m.v_dtype else f"{m.k_dtype.name}/{m.v_dtype.name}",
        decode=decode_step(m, gpu, concurrency, context_tokens, bw, ce),
        prefill=prefill_bound(m, gpu, prompt_tokens or context_tokens, ce),
        curve=tuple(decode_step(m, gpu, b, context_tokens, bw, ce) for b in sizes),
        max_concurrency=max_concurrency,
    )


@dataclass(frozen=True, slots=True)
class Alternative:
    """The deployment at its planner maximum concurrency, with one setting changed."""

    label: str
    context_tokens: int
    kv_cache_dtype: str | None
    max_concurrency: int
    step: DecodeStep | None  # decode at max_concurrency; None when nothing fits


ENGINES = ("ideal", "vllm")


def fit_concurrency(
    spec: ModelSpec,
    gpu: GPU,
    context_tokens: int,
    tensor_parallel_size: int = 1,
    kv_cache_dtype: str | None = None,
    engine: str = "ideal",
) -> int:
    """Sequences of ``context_tokens`` that fit at once (0 when none): kvplan's ideal planner,
    or vLLM's own figure (its block pool over blocks per request, rounded down)."""
    if engine == "vllm":
        from kvplan.engines import vllm

        cfg = vllm.VllmConfig(
            max_model_len=context_tokens,
            kv_cache_dtype=kv_cache_dtype,
            tensor_parallel_size=tensor_parallel_size,
        )
        return int(vllm.profile(spec, gpu, cfg).max_concurrency)
    if engine != "ideal":
        raise UnitError(f"--engine: {engine!r} is not modelled for speed; allowed: ideal, vllm")
    from kvplan.planner import plan

    found = plan(
        spec,
        gpu,
        tensor_parallel_size=tensor_parallel_size,
        max_model_len=context_tokens,
        kv_cache_dtype=kv_cache_dtype,
    ).max_concurrency
    return found or 0


def alternatives(
    spec: ModelSpec,
    gpu: GPU,
    *,
    context_tokens: int,
    tensor_parallel_size: int = 1,
    kv_cache_dtype: str | None = None,
    bandwidth_efficiency: Fraction | float = DEFAULT_BANDWIDTH_EFFICIENCY,
    compute_efficiency: Fraction | float = DEFAULT_COMPUTE_EFFICIENCY,
    engine: str = "ideal",
) -> list[Alternative]:
    """As configured, with an fp8 KV cache, and at half the context: how many sequences fit
    (the planner's answer) and the decode throughput there."""
    bw, ce = Fraction(bandwidth_efficiency), Fraction(compute_efficiency)
    cases = [("as given", context_tokens, kv_cache_dtype)]
    if (kv_cache_dtype or "").lower() not in ("fp8", "fp8_e4m3", "fp8_e5m2"):
        cases.append(("fp8 KV cache", context_tokens, "fp8"))
    if context_tokens >= 2:
        cases.append(("half the context", context_tokens // 2, kv_cache_dtype))
    out = []
    for label, tokens, kv in cases:
        fit = fit_concurrency(spec, gpu, tokens, tensor_parallel_size, kv, engine)
        step = None
        if fit:
            m = _model(spec, tensor_parallel_size, kv, None, None)
            step = decode_step(m, gpu, fit, tokens, bw, ce)
        out.append(Alternative(label, tokens, kv, fit, step))
    return out


def memory_curve(
    spec: ModelSpec, contexts: Sequence[int], kv_cache_dtype: str | None = None
) -> list[int]:
    """The KV cache of one sequence at each context length, in bytes."""
    from kvplan.estimator import estimate

    return [estimate(spec, c, kv_dtype=kv_cache_dtype).kv_cache_bytes for c in contexts]
