"""The smallest deployment: fewest GPUs (TP x PP x replicas) that hold the requests asked."""

from __future__ import annotations

from dataclasses import replace

from kvplan.model.spec import ModelSpec
from kvplan.model.stages import tensor_parallel_valid
from kvplan.planner.deployment import Deployment
from kvplan.planner.result import Plan
from kvplan.planner.solve import solve
from kvplan.units import format_tokens

# The largest tensor-parallel size tried when searching for the smallest deployment: one node.
MAX_SEARCH_TP = 8
MAX_SEARCH_PP = 16
#: A cluster search's defaults (plan_cluster, search_cluster): the fewest GPUs, five shown.
DEFAULT_OBJECTIVE = "gpus"
DEFAULT_TOP = 5


def valid_tensor_parallel_sizes(spec: ModelSpec, limit: int = MAX_SEARCH_TP) -> list[int]:
    """TP sizes up to ``limit`` the engines accept (``tensor_parallel_valid``): powers of
    two for the search's default limit, every divisor when asked for more."""
    if limit <= MAX_SEARCH_TP:
        candidates = [1 << i for i in range(limit.bit_length()) if 1 << i <= limit]
    else:
        candidates = list(range(1, limit + 1))
    return [tp for tp in candidates if tensor_parallel_valid(spec, tp)]


def smallest_deployment(d: Deployment, length: int, n: int, shared_prefix: int) -> Plan:
    """The fewest GPUs (TP x PP x replicas) holding ``n`` requests of ``length`` tokens."""
    best: tuple[tuple[int, int, int], Plan] | None = None
    for tp in valid_tensor_parallel_sizes(d.spec):
        for pp in range(1, min(MAX_SEARCH_PP, d.spec.num_hidden_layers) + 1):
            if best is not None and tp * pp > best[0][0]:
                break  # one replica alone already uses more GPUs than the best found
            candidate = solve(
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
        return _nothing_holds(d, length, n, shared_prefix)
    found = best[1]
    total = (found.max_concurrency or 0) * found.replicas
    return replace(
        found,
        concurrency=n,
        searched=True,
        fits=True,
        message=(
            f"{found.num_gpus} x {d.gpu.name}: {found.replicas} replica"
            f"{'s' if found.replicas > 1 else ''} of TP {found.tensor_parallel_size} x PP"
            f" {found.pipeline_parallel_size}, holding {total} requests of"
            f" {format_tokens(length)} tokens (>= {n})"
        ),
    )


def _nothing_holds(d: Deployment, length: int, n: int, shared_prefix: int) -> Plan:
    """The largest deployment searched, refused: not even one request of ``length`` fits."""
    largest = solve(
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
