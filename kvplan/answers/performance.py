"""What the cache costs in speed: roofline bounds on decode and prefill, per GPU rank.

The bounds are ``kvplan.speed.roofline``'s; this module answers the questions asked of them: the
bounds of one deployment (``perf``), how many sequences fit (``fit_concurrency``), the same
deployment with one setting changed (``alternatives``), and models side by side (``compare``).

Worked example (Llama 3.1 8B, bf16, H100 SXM at 3.35 TB/s, one sequence, short context): a step
reads 13,959,176,192 B of layer weights + 1,050,673,152 B of output head (the input embedding
is a gather of one row) = 15,009,849,344 B -> at least 4.48 ms, at most 223.2 tokens/s. Counting
the whole embedding table as read, as rough estimates do, gives 209.

Bounds are exact; estimates take them at achieved fractions of bandwidth and peak
(``kvplan.speed.roofline``: 0.80 and 0.60 by default).

The cache and the weights are sized in the dtype the engine serves the model in
(:func:`kvplan.model.dtypes.cache_dtypes`): Gemma 2 9B, a float32 checkpoint, is served and cached
in
bfloat16. What the bounds leave out is listed by :func:`not_modelled` and printed with them.

Public functions take a ``ModelSpec`` or a model name (``load_model``), a ``GPU`` or a GPU name
(``find_gpu``), token counts as integers or strings as the command line reads them (``"32K"``),
and raise ``ArgumentTypeError`` (a TypeError) for a bool, a float or anything else that is
not a whole count, ``UnitError`` for a value out of range.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

from kvplan.arguments import as_int, as_optional_str, as_str, as_tokens, as_values, wrong_type
from kvplan.errors import ArgumentTypeError, UnitError
from kvplan.hardware.gpus import GPU
from kvplan.hardware.lookup import as_gpu
from kvplan.model.dtypes import cache_dtypes
from kvplan.model.spec import ModelSpec
from kvplan.speed.roofline import (
    DEFAULT_BANDWIDTH_EFFICIENCY,
    DEFAULT_COMPUTE_EFFICIENCY,
    DecodeStep,
    Perf,
    Prefill,
    RankModel,
    ReplicaStep,
    decode_step,
    matmul_peak,
    prefill_bound,
    rank_model,
)
from kvplan.units import abbreviate

if TYPE_CHECKING:
    from kvplan.hardware.systems import System

__all__ = [
    "DEFAULT_BANDWIDTH_EFFICIENCY",
    "DEFAULT_COMPUTE_EFFICIENCY",
    "ENGINES",
    "Alternative",
    "Comparison",
    "DecodeStep",
    "Perf",
    "Prefill",
    "ReplicaStep",
    "alternatives",
    "compare",
    "decode_step",
    "efficiency",
    "fit_concurrency",
    "memory_curve",
    "not_modelled",
    "perf",
    "prefill_bound",
]


# -- arguments --------------------------------------------------------------------------------


def _spec(spec: object, name: str = "spec") -> ModelSpec:
    """A spec as given, or the one a name or path loads (``kvplan.catalog.lookup.as_spec``)."""
    from kvplan.catalog.lookup import as_spec

    return as_spec(spec, name)


def _gpu(gpu: object, rates: bool = True) -> GPU:
    """A GPU as given, or the catalog GPU of that name; speed bounds (``rates``) need its HBM
    bandwidth and peak, which a device described by its memory alone lacks."""
    gpu = as_gpu(gpu)
    if rates and (gpu.bandwidth_bytes_per_s <= 0 or gpu.bf16_flops <= 0):
        raise UnitError(
            f"GPU {gpu.name!r} has no HBM bandwidth or bf16 peak: speed bounds need a catalog GPU"
        )
    return gpu


def _count(name: str, value: object, minimum: int) -> int:
    """An integer of at least ``minimum``; a bool or a float is refused, not rounded."""
    return as_int(value, name, minimum=minimum)


def _tokens(name: str, value: object, minimum: int = 1) -> int:
    """A token count: an integer, or a string as ``--context`` reads it (``"32K"`` = 32,768)."""
    return as_tokens(value, name, minimum=minimum)


def _optional_str(name: str, value: object) -> str | None:
    return as_optional_str(value, name, "a name such as 'fp8', or None")


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
        raise ArgumentTypeError(f"{name} must be a number in (0, 1], not {abbreviate(value)}")
    elif isinstance(value, float) and not math.isfinite(value):
        raise UnitError(f"{name} must be in (0, 1], got {value}")
    else:
        parsed = Fraction(value)
    if not 0 < parsed <= 1:
        shown = value if isinstance(value, str) else abbreviate(value)
        raise UnitError(f"{name} must be in (0, 1], got {shown}")
    return parsed


def _engine(engine: object) -> str:
    as_str(engine, "engine", "an engine's name: ideal or vllm")
    if engine not in ENGINES:
        raise UnitError(f"--engine: {engine!r} is not modelled for speed; allowed: ideal, vllm")
    return str(engine)


# -- bounds -----------------------------------------------------------------------------------

ENGINES = ("ideal", "vllm")


def not_modelled(
    spec: ModelSpec | str, tensor_parallel_size: int = 1, precision: str = "bf16"
) -> tuple[str, ...]:
    """What the per-rank bounds leave out for this deployment, one phrase each; the
    deployment's own omissions (tensor-parallel traffic, MoE routing) first. ``precision``:
    the tensor-core peak the FLOPs run at (``kvplan.speed.roofline.matmul_peak``)."""
    spec = _spec(spec)
    tp = _count("tensor_parallel_size", tensor_parallel_size, 1)
    found = []
    if tp > 1:
        found.append(
            f"tensor-parallel communication: the all-reduces of each layer across {tp} ranks"
            " (ranks are taken to split bytes and FLOPs evenly and to run in step; the"
            " replica line adds them from the system's links)"
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
        f"dequantization and mixed-precision kernels (FLOPs run at the dense {precision} peak"
        " the weights allow)",
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
    pipeline_parallel_size: int = 1,
    expert_parallel_size: int = 1,
    system: System | str | None = None,
) -> Perf:
    """Decode bounds at ``concurrency`` sequences of ``context_tokens``, the prefill bound of a
    ``prompt_tokens`` prompt (default: the context), and the decode curve over ``curve`` batch
    sizes (default 1, 2, 4, ... up to ``max_concurrency`` or ``concurrency``).

    ``engine`` (``ideal`` or ``vllm``) decides the dtype the model and its cache are served in
    (``kvplan.model.dtypes.cache_dtypes``); ``dtype`` is its ``--dtype``. Raises ``UnitError`` for
    an
    argument that cannot be used, ``SpecError`` for a spec without ``num_parameters``.

    ``replica`` is the decode round of ``concurrency`` requests on ``tensor_parallel_size x
    pipeline_parallel_size`` GPUs (with ``expert_parallel_size`` > 1: ``concurrency`` on each
    data-parallel rank, its experts split over that many GPUs), the communication per step
    added over ``system``'s links (a name, a ``System``, or by default the first catalog
    system of the GPU).
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
        curve = as_values(curve, "curve", "a sequence of batch sizes")
        sizes = [_count(f"curve[{i}]", b, 1) for i, b in enumerate(curve)]
    else:
        sizes = _ladder(max(concurrency, fit or 1))
    pp = _count("pipeline_parallel_size", pipeline_parallel_size, 1)
    ep = _count("expert_parallel_size", expert_parallel_size, 1)
    m = rank_model(spec, tp, kv_cache_dtype, dtype, quantization, engine)
    if ep > 1:
        m = _expert_parallel(spec, m, tp, pp, ep, quantization)
    linked = _system(system, gpu, max(tp, ep) * pp)
    decode = decode_step(m, gpu, concurrency, tokens, bw, ce)
    precision, peak = matmul_peak(gpu, m.weights_format)
    return Perf(
        model=spec.name,
        gpu=gpu,
        tensor_parallel_size=tp,
        kv_dtype=m.dtypes.kv_dtype,
        decode=decode,
        prefill=prefill_bound(m, gpu, prompt, ce),
        curve=tuple(decode_step(m, gpu, b, tokens, bw, ce) for b in sizes),
        max_concurrency=fit,
        model_dtype=m.dtypes.model.name,
        kv_dtype_reason=m.dtypes.reason,
        engine=engine,
        not_modelled=not_modelled(spec, tp, precision),
        pipeline_parallel_size=pp,
        expert_parallel_size=ep,
        system=None if linked is None else linked.name,
        matmul_precision=precision,
        matmul_peak_flops=peak,
        replica=_replica(spec, decode, linked, tp, pp, ep),
        leaves_out=_leaves_out(linked, max(tp, ep) * pp),
        weights_format=m.weights_format,
        who_fits=_who_fits(engine),
    )


def _who_fits(engine: str) -> str:
    """Whose answer the maximum concurrency is, in words."""
    return "vLLM's block pool" if engine == "vllm" else "kvplan's planner"


def _system(given: System | str | None, gpu: GPU, num_gpus: int) -> System | None:
    """The system whose links carry the communication: as given, or for more than one GPU
    the first catalog system of ``gpu`` (None: communication not estimated)."""
    from kvplan.hardware.systems import as_system, system_for_gpu

    if given is not None:
        return as_system(given)
    return system_for_gpu(gpu) if num_gpus > 1 else None


def _expert_parallel(
    spec: ModelSpec, m: RankModel, tp: int, pp: int, ep: int, quantization: str | None
) -> RankModel:
    """One data-parallel rank holding the weights whole but 1/ep of the routed experts, as
    the planner sizes it (``kvplan.planner.pool.routed_expert_bytes``)."""
    from kvplan.model.weights import model_weights
    from kvplan.planner.pool import routed_expert_bytes
    from kvplan.planner.throughput import expert_parallel_rank

    if tp > 1 or pp > 1:
        raise UnitError(
            "expert_parallel_size is modelled with data-parallel attention: tensor and"
            " pipeline parallel size 1"
        )
    weights = model_weights(spec, m.dtypes.model.name, quantization)
    experts = routed_expert_bytes(spec, weights)
    if not experts:
        raise UnitError(f"expert_parallel_size {ep}: {spec.name} has no routed experts to split")
    return expert_parallel_rank(m, weights.total_bytes - experts + -(-experts // ep))


def _replica(
    spec: ModelSpec, step: DecodeStep, system: System | None, tp: int, pp: int, ep: int
) -> ReplicaStep:
    from kvplan.planner.throughput import communication, round_seconds

    c = communication(spec, system, step.batch_size, tp, pp, ep)
    return ReplicaStep(
        batch_size=step.batch_size,
        gpus_per_batch=1 if ep > 1 else tp * pp,
        compute_bound_seconds=round_seconds(step, pp, estimated=False),
        compute_estimate_seconds=round_seconds(step, pp, estimated=True),
        communication=c,
    )


def _leaves_out(system: System | None, num_gpus: int) -> str:
    """One line: what the bound with communication still leaves out."""
    from kvplan.planner.throughput import COMMUNICATION_NOT_MODELLED

    if system is None and num_gpus > 1:
        return "no system known for this GPU: communication not estimated; " + (
            COMMUNICATION_NOT_MODELLED
        )
    return COMMUNICATION_NOT_MODELLED


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
    """Sequences of ``context_tokens`` that fit at once (0 when none): the answer ``kvplan
    plan`` gives (``kvplan.answers.plans.answer``), kvplan's planner's or vLLM's."""
    spec, gpu = _spec(spec), _gpu(gpu, rates=False)
    tokens = _tokens("context_tokens", context_tokens)
    tp = _count("tensor_parallel_size", tensor_parallel_size, 1)
    kv_cache_dtype = _optional_str("kv_cache_dtype", kv_cache_dtype)
    from kvplan.answers.plans import answer
    from kvplan.answers.question import Question

    asked = Question(
        engine=_engine(engine),
        max_model_len=tokens,
        tensor_parallel_size=tp,
        kv_cache_dtype=kv_cache_dtype,
    )
    return answer(spec, gpu, asked).verdict.max_concurrency


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
        m = rank_model(spec, tp, kv, None, None, engine)
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
    ``engine`` serves (``kvplan.model.dtypes.cache_dtypes``)."""
    from kvplan.model.estimator import estimate

    spec = _spec(spec)
    contexts = as_values(contexts, "contexts", "a sequence of token counts")
    tokens = [_tokens(f"contexts[{i}]", c, 0) for i, c in enumerate(contexts)]
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
    # KV/token: what one more token of one sequence adds to the cache at the context
    # (``Estimate.bytes_per_token``: sliding layers past their window add nothing)
    bytes_per_token: int
    kv_cache_bytes: int  # one sequence at the context
    max_concurrency: int | None
    decode_tokens_per_second: Fraction | None  # one sequence, estimate
    note: str
    # the same step plus the TP communication over the system's links (None: not estimated)
    decode_tokens_per_second_with_communication: Fraction | None = None
    system: str | None = None  # the catalog system whose links carry it
    # why there is no decode speed: no GPU, no weights, or not one sequence fits
    no_speed_reason: str | None = None
    weights_format: str | None = None  # as ``kvplan plan`` names them; None: not sized


def compare(
    models: Sequence[ModelSpec | str],
    context_tokens: int | str,
    gpu: GPU | str | None = None,
    *,
    tensor_parallel_size: int = 1,
    kv_cache_dtype: str | None = None,
    engine: str = "ideal",
    system: System | str | None = None,
) -> list[Comparison]:
    """Each model's KV bytes per token and per sequence at ``context_tokens``, in the cache
    dtype ``engine`` serves it in; with a ``gpu`` also the sequences that fit and one
    sequence's decode speed, and that speed with the step's all-reduce over ``system``'s links
    added (``kvplan.planner.throughput.communication``; by default, with more than one GPU,
    the GPU's first catalog system; None where no system is known). A model of which not one
    sequence fits has no speed (None, and ``no_speed_reason`` says why)."""
    from kvplan.model.estimator import estimate

    if isinstance(models, str) or not isinstance(models, Sequence):
        raise wrong_type("models", "a sequence of specs or names", models)
    tokens = _tokens("context_tokens", context_tokens)
    device = None if gpu is None else _gpu(gpu)
    tp = _count("tensor_parallel_size", tensor_parallel_size, 1)
    engine = _engine(engine)
    kv_cache_dtype = _optional_str("kv_cache_dtype", kv_cache_dtype)
    linked = None if device is None else _system(system, device, tp)
    rows = []
    for i, given in enumerate(models):
        spec = _spec(given, f"models[{i}]")
        dtypes = cache_dtypes(spec, engine, kv_cache_dtype=kv_cache_dtype)
        at_context = estimate(spec, tokens, k_dtype=dtypes.k.name, v_dtype=dtypes.v.name)
        fit = speed = linked_speed = weights_format = None
        notes = []
        no_speed = "no GPU given" if device is None else None
        trained = spec.max_position_embeddings
        if trained is not None and tokens > trained:
            notes.append(f"beyond its {trained:,}-token maximum")
        if device is not None and spec.num_parameters is not None:
            fit = fit_concurrency(spec, device, tokens, tp, kv_cache_dtype, engine)
            m = rank_model(spec, tp, kv_cache_dtype, None, None, engine)
            weights_format = m.weights_format
            if fit:
                bw, ce = DEFAULT_BANDWIDTH_EFFICIENCY, DEFAULT_COMPUTE_EFFICIENCY
                step = decode_step(m, device, 1, tokens, bw, ce)
                speed = step.tokens_per_second(estimated=True)
                linked_speed = _with_communication(spec, step, linked, tp)
            else:
                no_speed = f"0 sequences of {tokens:,} tokens fit ({_who_fits(engine)})"
        elif device is not None:
            no_speed = "no num_parameters: weights unknown"
            notes.append(no_speed)
        rows.append(
            Comparison(
                model=spec.name,
                kv_dtype=dtypes.kv_dtype,
                kv_dtype_reason=dtypes.reason,
                model_dtype=dtypes.model.name,
                bytes_per_token=at_context.bytes_per_token,
                kv_cache_bytes=at_context.kv_cache_bytes,
                max_concurrency=fit,
                decode_tokens_per_second=speed,
                note="; ".join(notes),
                decode_tokens_per_second_with_communication=linked_speed,
                system=None if linked is None else linked.name,
                no_speed_reason=no_speed,
                weights_format=weights_format,
            )
        )
    return rows


def _with_communication(
    spec: ModelSpec, step: DecodeStep, system: System | None, tp: int
) -> Fraction | None:
    """One sequence's decode speed with the step's TP all-reduce added (estimate); None for
    more than one GPU and no system to carry it."""
    if system is None and tp > 1:
        return None
    from kvplan.planner.throughput import communication

    extra = communication(spec, system, step.batch_size, tp, 1, 1).seconds
    seconds = step.estimate_seconds + extra
    return Fraction(step.batch_size) / seconds if seconds else None
