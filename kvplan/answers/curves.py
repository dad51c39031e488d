"""Speed and memory questions as ``kvplan perf`` and ``kvplan chart`` ask them, in exact figures.

- ``perf_report``: the decode and prefill bounds at the planner's maximum concurrency, with
  the alternatives that change it (an fp8 cache, half the context).
- ``memory_curves``: the KV cache of one sequence at each power-of-two context up to the
  model's ``max_position_embeddings`` (131,072 without one), and the KV pool the planner
  leaves on the GPUs (tensor-parallel ranks summed), where the spec counts its parameters.
- ``throughput_curves``: decode tokens/s against concurrency, up to the most sequences of
  ``context_tokens`` that fit (none: an empty curve).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvplan.answers.performance import Alternative, Perf
    from kvplan.hardware.gpus import GPU
    from kvplan.model.spec import ModelSpec

_DEFAULT_TOP_TOKENS = 131072  # the x axis of a model without max_position_embeddings


def perf_report(
    spec: ModelSpec,
    gpu: GPU,
    *,
    context_tokens: int,
    concurrency: int = 1,
    prompt_tokens: int | None = None,
    tensor_parallel_size: int = 1,
    kv_cache_dtype: str | None = None,
    bandwidth_efficiency: float = 0.8,
    compute_efficiency: float = 0.6,
    engine: str = "ideal",
    pipeline_parallel_size: int = 1,
    expert_parallel_size: int = 1,
    system: str | None = None,
) -> tuple[Perf, list[Alternative]]:
    """``perf.perf`` with ``max_concurrency`` the planner's answer as configured, and
    ``perf.alternatives`` (the first of which is that answer). The alternatives and the
    maximum concurrency are those of one tensor-parallel group (pipeline stages and expert
    parallelism change the communication and the replica line, not the ceiling shown)."""
    from kvplan.answers.performance import alternatives, perf

    alts = alternatives(
        spec,
        gpu,
        context_tokens=context_tokens,
        tensor_parallel_size=tensor_parallel_size,
        kv_cache_dtype=kv_cache_dtype,
        bandwidth_efficiency=bandwidth_efficiency,
        compute_efficiency=compute_efficiency,
        engine=engine,
    )
    result = perf(
        spec,
        gpu,
        context_tokens=context_tokens,
        concurrency=concurrency,
        prompt_tokens=prompt_tokens,
        tensor_parallel_size=tensor_parallel_size,
        kv_cache_dtype=kv_cache_dtype,
        bandwidth_efficiency=bandwidth_efficiency,
        compute_efficiency=compute_efficiency,
        max_concurrency=alts[0].max_concurrency,  # "as given": the planner's answer
        engine=engine,
        pipeline_parallel_size=pipeline_parallel_size,
        expert_parallel_size=expert_parallel_size,
        system=system,
    )
    return result, alts


@dataclass(frozen=True, slots=True)
class MemoryCurve:
    """One model in one cache dtype: ``kv_cache_bytes[i]`` at ``context_tokens[i]``.
    ``pool_bytes``: the KV pool of the deployment; None without the model's parameter count."""

    model: str
    kv_dtype: str
    dtype_reason: str
    context_tokens: tuple[int, ...]
    kv_cache_bytes: tuple[int, ...]
    pool_bytes: int | None


@dataclass(frozen=True, slots=True)
class ThroughputCurve:
    """One model in one cache dtype: ``tokens_per_second[i]`` (estimate) at ``batch_sizes[i]``
    concurrent sequences, up to ``max_concurrency`` (0: not one sequence fits; no points)."""

    model: str
    kv_dtype: str
    dtype_reason: str
    max_concurrency: int
    batch_sizes: tuple[int, ...] = ()
    tokens_per_second: tuple[Fraction, ...] = ()


def _dtype(spec: ModelSpec, kv_cache_dtype: str | None, engine: str) -> tuple[str, str]:
    from kvplan.model.dtypes import cache_dtypes

    found = cache_dtypes(spec, engine, kv_cache_dtype=kv_cache_dtype)
    return found.kv_dtype, found.reason


def memory_curves(
    specs: Sequence[ModelSpec],
    gpu: GPU,
    kv_cache_dtypes: Sequence[str | None],
    tensor_parallel_size: int = 1,
    engine: str = "ideal",
) -> tuple[MemoryCurve, ...]:
    """One curve per model and cache dtype (None: the model's), models first; each pool is
    ``engine``'s: kvplan's planner, or vLLM's available KV cache memory."""
    from kvplan.answers.performance import memory_curve

    curves = []
    for spec in specs:
        top = spec.max_position_embeddings or _DEFAULT_TOP_TOKENS
        contexts = [2**k for k in range(10, 40) if 2**k <= top] or [top]
        for dtype in kv_cache_dtypes:
            kv_dtype, reason = _dtype(spec, dtype, engine)
            kv_cache_bytes = tuple(memory_curve(spec, contexts, dtype, engine=engine))
            pool = None
            if spec.num_parameters is not None:
                pool = _pool_bytes(spec, gpu, dtype, tensor_parallel_size, engine, contexts[0])
            curves.append(
                MemoryCurve(spec.name, kv_dtype, reason, tuple(contexts), kv_cache_bytes, pool)
            )
    return tuple(curves)


def _pool_bytes(
    spec: ModelSpec,
    gpu: GPU,
    kv_cache_dtype: str | None,
    tensor_parallel_size: int,
    engine: str,
    context_tokens: int,
) -> int:
    """The KV pool of all ``tensor_parallel_size`` GPUs, in bytes, as ``engine`` sizes it
    (the same answer ``fit_concurrency`` divides): vLLM's available KV cache memory of a
    worker, or kvplan's planner's pool of a GPU, times the GPUs."""
    if engine == "vllm":
        from kvplan.engines import vllm

        cfg = vllm.VllmConfig(
            max_model_len=context_tokens,
            kv_cache_dtype=kv_cache_dtype,
            tensor_parallel_size=tensor_parallel_size,
        )
        per_gpu = vllm.profile(spec, gpu, cfg).available_bytes
    else:
        from kvplan.planner import plan

        per_gpu = plan(
            spec,
            gpu,
            tensor_parallel_size=tensor_parallel_size,
            max_model_len=context_tokens,
            kv_cache_dtype=kv_cache_dtype,
        ).kv_cache_memory_bytes
    return per_gpu * tensor_parallel_size


def throughput_curves(
    specs: Sequence[ModelSpec],
    gpu: GPU,
    kv_cache_dtypes: Sequence[str | None],
    context_tokens: int,
    tensor_parallel_size: int = 1,
    engine: str = "ideal",
) -> tuple[ThroughputCurve, ...]:
    """One curve per model and cache dtype (None: the model's), models first."""
    from kvplan.answers.performance import fit_concurrency, perf

    curves = []
    for spec in specs:
        for dtype in kv_cache_dtypes:
            kv_dtype, reason = _dtype(spec, dtype, engine)
            tp = tensor_parallel_size
            fit = fit_concurrency(spec, gpu, context_tokens, tp, dtype, engine)
            if not fit:
                curves.append(ThroughputCurve(spec.name, kv_dtype, reason, 0))
                continue
            result = perf(
                spec,
                gpu,
                context_tokens=context_tokens,
                tensor_parallel_size=tp,
                kv_cache_dtype=dtype,
                max_concurrency=fit,
                engine=engine,
            )
            curves.append(
                ThroughputCurve(
                    spec.name,
                    kv_dtype,
                    reason,
                    fit,
                    tuple(s.batch_size for s in result.curve),
                    tuple(s.tokens_per_second(estimated=True) for s in result.curve),
                )
            )
    return tuple(curves)
