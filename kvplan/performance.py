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

The cache and the weights are sized in the dtype the engine serves the model in
(:func:`kvplan.dtypes.cache_dtypes`): Gemma 2 9B, a float32 checkpoint, is served and cached in
bfloat16. What the bounds leave out is listed by :func:`not_modelled` and printed with them.

Public functions take a ``ModelSpec`` or a model name (``load_model``), a ``GPU`` or a GPU name
(``find_gpu``), token counts as integers or strings as the command line reads them (``"32K"``),
and raise ``UnitError`` for a bool, a float or anything else that is not a whole count.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from kvplan.dtypes import CacheDTypes, cache_dtypes
from kvplan.errors import UnitError
from kvplan.hardware import GPU, find_gpu
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
from kvplan.units import DType, cdiv, parse_tokens
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
    kv_dtype: str  # the cache dtype, ``k/v`` when K and V differ
    decode: DecodeStep
    prefill: Prefill
    curve: tuple[DecodeStep, ...]
    max_concurrency: int | None
    model_dtype: str = ""  # the dtype the model runs in: weights and activations
    kv_dtype_reason: str = ""  # why the cache has that dtype, in words
    engine: str = "ideal"
    not_modelled: tuple[str, ...] = ()  # what the bounds leave out, one phrase each

    @property
    def compute_bound_from(self) -> int | None:
        """The smallest batch of the curve whose estimate is compute-bound (None: never)."""
        return next((s.batch_size for s in self.curve if s.estimated_bound == "compute"), None)


@dataclass(frozen=True, slots=True)
class _Model:
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

    @property
    def k_dtype(self) -> DType:
        return self.dtypes.k

    @property
    def v_dtype(self) -> DType:
        return self.dtypes.v


def _model(
    spec: ModelSpec,
    tp: int,
    kv_cache_dtype: str | None,
    dtype: str | None,
    quantization: str | None,
    engine: str = "ideal",
) -> _Model:
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
    return _Model(
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


# -- arguments --------------------------------------------------------------------------------


def _spec(spec: ModelSpec | str | Path) -> ModelSpec:
    """A spec as given, or the one a name or path loads (``kvplan.catalog.load_model``)."""
    if isinstance(spec, ModelSpec):
        return spec
    if isinstance(spec, str | Path):
        from kvplan.catalog import load_model

        return load_model(spec)
    raise UnitError(f"a model is a ModelSpec or a model name such as 'qwen3-8b', not {spec!r}")


def _gpu(gpu: GPU | str, rates: bool = True) -> GPU:
    """A GPU as given, or the catalog GPU of that name; speed bounds (``rates``) need its HBM
    bandwidth and peak, which a device described by its memory alone lacks."""
    if isinstance(gpu, str):
        gpu = find_gpu(gpu)
    elif not isinstance(gpu, GPU):
        raise UnitError(f"a GPU is a GPU or a catalog name such as 'h100', not {gpu!r}")
    if rates and (gpu.bandwidth_bytes_per_s <= 0 or gpu.bf16_flops <= 0):
        raise UnitError(
            f"GPU {gpu.name!r} has no HBM bandwidth or bf16 peak: speed bounds need a catalog GPU"
        )
    return gpu


def _count(name: str, value: object, minimum: int) -> int:
    """An integer of at least ``minimum``; a bool or a float is refused, not rounded."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise UnitError(f"{name} must be an integer, not {value!r}")
    if value < minimum:
        raise UnitError(f"{name} must be at least {minimum}, got {value}")
    return int(value)


def _tokens(name: str, value: object, minimum: int = 1) -> int:
    """A token count: an integer, or a string as ``--context`` reads it (``"32K"`` = 32,768)."""
    if isinstance(value, str):
        try:
            value = parse_tokens(value)
        except UnitError as e:
            raise UnitError(f"{name}: {e}") from None
    return _count(name, value, minimum)


def _optional_str(name: str, value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise UnitError(f"{name} must be a name such as 'fp8', not {value!r}")


def efficiency(name: str, value: Fraction | float | str) -> Fraction:
    """An achieved fraction in (0, 1]: ``0.8``, ``Fraction(4, 5)``, ``"0.8"`` or ``"80%"``."""
    if isinstance(value, str):
        text = value.strip()
        try:
            parsed = Fraction(text.removesuffix("%")) / (100 if text.endswith("%") else 1)
        except (ValueError, ZeroDivisionError):
            raise UnitError(
                f"{name} {value!r} is not a fraction (0.8) or a percentage (80%)"
            ) from None
    elif isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise UnitError(f"{name} must be a number in (0, 1], not {value!r}")
    elif isinstance(value, float) and not math.isfinite(value):
        raise UnitError(f"{name} must be in (0, 1], got {value}")
    else:
        parsed = Fraction(value)
    if not 0 < parsed <= 1:
        shown = value if isinstance(value, str) else float(parsed)
        raise UnitError(f"{name} must be in (0, 1], got {shown}")
    return parsed


def _engine(engine: object) -> str:
    if engine not in ENGINES:
        raise UnitError(f"--engine: {engine!r} is not modelled for speed; allowed: ideal, vllm")
    return str(engine)


# -- bounds -----------------------------------------------------------------------------------

ENGINES = ("ideal", "vllm")


def not_modelled(spec: ModelSpec | str, tensor_parallel_size: int = 1) -> tuple[str, ...]:
    """What the bounds leave out for this deployment, one phrase each; the deployment's own
    omissions (tensor-parallel traffic, MoE routing) first."""
    spec = _spec(spec)
    tp = _count("tensor_parallel_size", tensor_parallel_size, 1)
    found = []
    if tp > 1:
        found.append(
            f"tensor-parallel communication: the all-reduces of each layer across {tp} ranks"
            " (ranks are taken to split bytes and FLOPs evenly and to run in step)"
        )
    total = spec.num_parameters or 0
    if (spec.num_active_parameters or total) < total:
        found.append(
            "MoE routing: expert load imbalance and experts shared within a batch (each"
            " sequence is taken to read its own active experts, up to all of them);"
            " expert-parallel all-to-all"
        )
    found += [
        "pipeline parallelism and its bubbles (one stage holds every layer)",
        "speculative decoding (one token per sequence a step)",
        "prefill and decode sharing a step (continuous batching, chunked prefill)",
        "activation traffic, norms, softmax and sampling; kernel launches and scheduler time",
        "faster low-precision tensor cores and dequantization (FLOPs run at the dense bf16 peak)",
    ]
    return tuple(found)


def _ladder(top: int) -> list[int]:
    """1, 2, 4, ... up to ``top``, with ``top`` itself last."""
    steps, b = [], 1
    while b < top:
        steps.append(b)
        b *= 2
    steps.append(top)
    return steps


def perf(
    spec: ModelSpec | str,
    gpu: GPU | str,
    *,
    context_tokens: int | str,
    concurrency: int = 1,
    prompt_tokens: int | str | None = None,
    tensor_parallel_size: int = 1,
    kv_cache_dtype: str | None = None,
    dtype: str | None = None,
    quantization: str | None = None,
    bandwidth_efficiency: Fraction | float | str = DEFAULT_BANDWIDTH_EFFICIENCY,
    compute_efficiency: Fraction | float | str = DEFAULT_COMPUTE_EFFICIENCY,
    max_concurrency: int | None = None,
    curve: Sequence[int] | None = None,
    engine: str = "ideal",
) -> Perf:
    """Decode bounds at ``concurrency`` sequences of ``context_tokens``, the prefill bound of a
    ``prompt_tokens`` prompt (default: the context), and the decode curve over ``curve`` batch
    sizes (default 1, 2, 4, ... up to ``max_concurrency`` or ``concurrency``).

    ``engine`` (``ideal`` or ``vllm``) decides the dtype the model and its cache are served in
    (``kvplan.dtypes.cache_dtypes``); ``dtype`` is its ``--dtype``. Raises ``UnitError`` for an
    argument that cannot be used, ``SpecError`` for a spec without ``num_parameters``.
    """
    spec, gpu = _spec(spec), _gpu(gpu)
    tokens = _tokens("context_tokens", context_tokens)
    concurrency = _count("concurrency", concurrency, 1)
    prompt = tokens if prompt_tokens is None else _tokens("prompt_tokens", prompt_tokens)
    tp = _count("tensor_parallel_size", tensor_parallel_size, 1)
    fit = None if max_concurrency is None else _count("max_concurrency", max_concurrency, 0)
    bw = efficiency("bandwidth_efficiency", bandwidth_efficiency)
    ce = efficiency("compute_efficiency", compute_efficiency)
    quantization = _optional_str("quantization", quantization)
    engine = _engine(engine)
    if curve is not None:
        if isinstance(curve, str) or not isinstance(curve, Sequence):
            raise UnitError(f"curve must be a sequence of batch sizes, not {curve!r}")
        sizes = [_count("curve batch size", b, 1) for b in curve]
    else:
        sizes = _ladder(max(concurrency, fit or 1))
    m = _model(spec, tp, kv_cache_dtype, dtype, quantization, engine)
    return Perf(
        model=spec.name,
        gpu=gpu,
        tensor_parallel_size=tp,
        kv_dtype=m.dtypes.kv_dtype,
        decode=decode_step(m, gpu, concurrency, tokens, bw, ce),
        prefill=prefill_bound(m, gpu, prompt, ce),
        curve=tuple(decode_step(m, gpu, b, tokens, bw, ce) for b in sizes),
        max_concurrency=fit,
        model_dtype=m.dtypes.model.name,
        kv_dtype_reason=m.dtypes.reason,
        engine=engine,
        not_modelled=not_modelled(spec, tp),
    )


@dataclass(frozen=True, slots=True)
class Alternative:
    """The deployment at its planner maximum concurrency, with one setting changed."""

    label: str
    context_tokens: int
    kv_cache_dtype: str | None  # as asked: None for the model's own
    max_concurrency: int
    step: DecodeStep | None  # decode at max_concurrency; None when nothing fits
    kv_dtype: str = ""  # the cache dtype that gives: ``bfloat16``, ``fp8_e4m3``
    kv_dtype_reason: str = ""


def fit_concurrency(
    spec: ModelSpec | str,
    gpu: GPU | str,
    context_tokens: int | str,
    tensor_parallel_size: int = 1,
    kv_cache_dtype: str | None = None,
    engine: str = "ideal",
) -> int:
    """Sequences of ``context_tokens`` that fit at once (0 when none): kvplan's ideal planner,
    or vLLM's own figure (its block pool over blocks per request, rounded down)."""
    spec, gpu = _spec(spec), _gpu(gpu, rates=False)
    tokens = _tokens("context_tokens", context_tokens)
    tp = _count("tensor_parallel_size", tensor_parallel_size, 1)
    kv_cache_dtype = _optional_str("kv_cache_dtype", kv_cache_dtype)
    if _engine(engine) == "vllm":
        from kvplan.engines import vllm

        cfg = vllm.VllmConfig(
            max_model_len=tokens,
            kv_cache_dtype=kv_cache_dtype,
            tensor_parallel_size=tp,
        )
        return int(vllm.profile(spec, gpu, cfg).max_concurrency)
    from kvplan.planner import plan

    found = plan(
        spec,
        gpu,
        tensor_parallel_size=tp,
        max_model_len=tokens,
        kv_cache_dtype=kv_cache_dtype,
    ).max_concurrency
    return found or 0


def alternatives(
    spec: ModelSpec | str,
    gpu: GPU | str,
    *,
    context_tokens: int | str,
    tensor_parallel_size: int = 1,
    kv_cache_dtype: str | None = None,
    bandwidth_efficiency: Fraction | float | str = DEFAULT_BANDWIDTH_EFFICIENCY,
    compute_efficiency: Fraction | float | str = DEFAULT_COMPUTE_EFFICIENCY,
    engine: str = "ideal",
) -> list[Alternative]:
    """As configured, with an fp8 KV cache, and at half the context: how many sequences fit
    (the planner's answer, or vLLM's with ``engine="vllm"``) and the decode throughput there.
    The fp8 case is left out when the cache is fp8 already."""
    spec, gpu = _spec(spec), _gpu(gpu)
    tokens = _tokens("context_tokens", context_tokens)
    tp = _count("tensor_parallel_size", tensor_parallel_size, 1)
    bw = efficiency("bandwidth_efficiency", bandwidth_efficiency)
    ce = efficiency("compute_efficiency", compute_efficiency)
    engine = _engine(engine)
    kv_cache_dtype = _optional_str("kv_cache_dtype", kv_cache_dtype)
    given = cache_dtypes(spec, engine, kv_cache_dtype=kv_cache_dtype)
    cases = [("as given", tokens, kv_cache_dtype)]
    if not (given.k.name.startswith("fp8") and given.v.name.startswith("fp8")):
        cases.append(("fp8 KV cache", tokens, "fp8"))
    if tokens >= 2:
        cases.append(("half the context", tokens // 2, kv_cache_dtype))
    out = []
    for label, length, kv in cases:
        m = _model(spec, tp, kv, None, None, engine)
        fit = fit_concurrency(spec, gpu, length, tp, kv, engine)
        step = decode_step(m, gpu, fit, length, bw, ce) if fit else None
        out.append(Alternative(label, length, kv, fit, step, m.dtypes.kv_dtype, m.dtypes.reason))
    return out


def memory_curve(
    spec: ModelSpec | str,
    contexts: Sequence[int | str],
    kv_cache_dtype: str | None = None,
    *,
    engine: str = "ideal",
) -> list[int]:
    """The KV cache of one sequence at each context length, in bytes, in the cache dtype
    ``engine`` serves (``kvplan.dtypes.cache_dtypes``)."""
    from kvplan.estimator import estimate

    spec = _spec(spec)
    if isinstance(contexts, str) or not isinstance(contexts, Sequence):
        raise UnitError(f"contexts must be a sequence of token counts, not {contexts!r}")
    tokens = [_tokens("context_tokens", c, 0) for c in contexts]
    dtypes = cache_dtypes(spec, _engine(engine), kv_cache_dtype=kv_cache_dtype)
    k, v = dtypes.k.name, dtypes.v.name
    return [estimate(spec, t, k_dtype=k, v_dtype=v).kv_cache_bytes for t in tokens]


# -- models side by side ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Comparison:
    """One model of ``compare``: its cache at the context and, on a GPU, what fits and how
    fast one sequence decodes (estimate). ``None`` where there is no GPU or no weights."""

    model: str
    kv_dtype: str
    kv_dtype_reason: str
    model_dtype: str
    bytes_per_token: int  # one more token of one sequence, at a short context
    kv_cache_bytes: int  # one sequence at the context
    max_concurrency: int | None
    decode_tokens_per_second: Fraction | None  # one sequence, estimate
    note: str


def compare(
    models: Sequence[ModelSpec | str],
    context_tokens: int | str,
    gpu: GPU | str | None = None,
    *,
    tensor_parallel_size: int = 1,
    kv_cache_dtype: str | None = None,
    engine: str = "ideal",
) -> list[Comparison]:
    """Each model's KV bytes per token and at ``context_tokens``, in the cache dtype ``engine``
    serves it in; with a ``gpu`` also the sequences that fit and one sequence's decode speed."""
    from kvplan.estimator import estimate

    if isinstance(models, str) or not isinstance(models, Sequence):
        raise UnitError(f"models must be a sequence of specs or names, not {models!r}")
    tokens = _tokens("context_tokens", context_tokens)
    device = None if gpu is None else _gpu(gpu)
    tp = _count("tensor_parallel_size", tensor_parallel_size, 1)
    engine = _engine(engine)
    kv_cache_dtype = _optional_str("kv_cache_dtype", kv_cache_dtype)
    rows = []
    for given in models:
        spec = _spec(given)
        dtypes = cache_dtypes(spec, engine, kv_cache_dtype=kv_cache_dtype)
        k, v = dtypes.k.name, dtypes.v.name
        fit = speed = None
        notes = []
        trained = spec.max_position_embeddings
        if trained is not None and tokens > trained:
            notes.append(f"beyond its {trained:,}-token maximum")
        if device is not None and spec.num_parameters is not None:
            fit = fit_concurrency(spec, device, tokens, tp, kv_cache_dtype, engine)
            m = _model(spec, tp, kv_cache_dtype, None, None, engine)
            bw, ce = DEFAULT_BANDWIDTH_EFFICIENCY, DEFAULT_COMPUTE_EFFICIENCY
            speed = decode_step(m, device, 1, tokens, bw, ce).tokens_per_second(estimated=True)
        elif device is not None:
            notes.append("no num_parameters: weights unknown")
        rows.append(
            Comparison(
                model=spec.name,
                kv_dtype=dtypes.kv_dtype,
                kv_dtype_reason=dtypes.reason,
                model_dtype=dtypes.model.name,
                bytes_per_token=estimate(spec, 0, k_dtype=k, v_dtype=v).bytes_per_token,
                kv_cache_bytes=estimate(spec, tokens, k_dtype=k, v_dtype=v).kv_cache_bytes,
                max_concurrency=fit,
                decode_tokens_per_second=speed,
                note="; ".join(notes),
            )
        )
    return rows
