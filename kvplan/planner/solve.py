"""One deployment, one question: the stages' pools, what fits, and the verdict."""

from __future__ import annotations

from kvplan.errors import UnitError
from kvplan.planner.deployment import Deployment
from kvplan.planner.mix import Mix, length_mix
from kvplan.planner.pool import longest, shared_blocks, stage_plans
from kvplan.planner.result import Plan
from kvplan.planner.verdict import verdict


def solve(
    d: Deployment,
    max_model_len: int | None,
    concurrency: int | None,
    shared_prefix: int,
    mix_lengths: Mix | None,
) -> Plan:
    """The plan of deployment ``d``: with ``max_model_len``, how many requests of it fit;
    with ``concurrency`` (or nothing asked), how long that many can each be; with
    ``mix_lengths``, the concurrency of that mix."""
    spec, bs = d.spec, d.block_size
    cap = max_model_len or spec.max_position_embeddings or 1 << 24
    if shared_prefix > cap:
        raise UnitError(f"shared prefix {shared_prefix:,} exceeds the context {cap:,}")
    num_shared_blocks = shared_blocks(shared_prefix, max_model_len or cap, bs)
    chosen = d.cache_dtypes()
    stages, weights, overhead = stage_plans(d, chosen, max_model_len, num_shared_blocks)
    max_concurrency = request_bytes = ideal = max_context = None
    if max_model_len is not None:
        limiting = [s for s in stages if s.max_concurrency is not None]
        if not limiting:
            raise UnitError(f"{spec.name} keeps no per-request cache: concurrency is unbounded")
        tight = min(limiting, key=lambda s: s.max_concurrency or 0)
        max_concurrency = tight.max_concurrency
        request_bytes = tight.request_bytes
        ideal = tight.ideal_bytes(max_model_len, num_shared_blocks * bs)
    target = concurrency if concurrency is not None else 1
    if concurrency is not None or (max_model_len is None and mix_lengths is None):
        max_context = longest(stages, target, shared_prefix, bs, cap)
    mix = length_mix(stages, mix_lengths, shared_prefix, bs) if mix_lengths else None
    fits, message = verdict(
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
        expert_parallel_size=d.expert_parallel_size,
    )
