"""Whether a plan meets the question's targets, and if not, one message saying what to change."""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from kvplan.planner.deployment import Deployment, usable_bytes
from kvplan.planner.pool import StagePlan, longest
from kvplan.units import format_bytes, format_tokens


def advice(d: Deployment, *changes: str) -> str:
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


def requests(n: int) -> str:
    """``1 request``, ``2 requests``, ``1,024 requests``."""
    return f"{n:,} request{'' if n == 1 else 's'}"


def verdict(
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
    refusal = _over_memory(d, stages)
    if refusal:
        return False, refusal
    if max_model_len is not None and max_concurrency is not None:
        wanted = concurrency or 1
        if max_concurrency < wanted:
            return False, _too_few(
                d, stages, max_model_len, concurrency, max_concurrency, shared_prefix, cap
            )
        fit = "fits" if max_concurrency == 1 else "fit"
        concurrent = "concurrent request" if max_concurrency == 1 else "concurrent requests"
        return True, (
            f"{max_concurrency:,} {concurrent} of {format_tokens(max_model_len)} tokens {fit}"
        )
    if max_context is not None:
        return _context_verdict(d, concurrency or 1, max_context, cap)
    return True, ""


def _over_memory(d: Deployment, stages: Sequence[StagePlan]) -> str:
    """Why the deployment cannot hold any KV cache at all ('' when it can): a given KV cache
    memory beyond the GPU, or weights and overhead beyond the usable memory."""
    tight = min(stages, key=lambda s: s.kv_cache_memory_bytes)
    heaviest = max(
        stages, key=lambda s: s.weights_bytes + s.overhead_bytes + s.kv_cache_memory_bytes
    )
    used = heaviest.weights_bytes + heaviest.overhead_bytes + heaviest.kv_cache_memory_bytes
    if d.kv_cache_memory_bytes is not None and used > d.gpu.memory_bytes:
        return (
            f"weights ({format_bytes(heaviest.weights_bytes)}), overhead"
            f" ({format_bytes(heaviest.overhead_bytes)}) and the given KV cache memory"
            f" ({format_bytes(heaviest.kv_cache_memory_bytes)}) need {format_bytes(used)} per GPU,"
            f" more than its {format_bytes(d.gpu.memory_bytes)}: lower --kv-cache-memory or add"
            " GPUs (-tp/-pp)"
        )
    if tight.kv_cache_memory_bytes == 0 and d.kv_cache_memory_bytes is None:
        need = tight.weights_bytes + tight.overhead_bytes
        usable = usable_bytes(d.gpu.memory_bytes, d.gpu_memory_utilization)
        levers = ["add GPUs (-tp/-pp)"]
        if d.quantization is None and d.spec.weight_dtype is None:
            levers.append("quantize the weights (--quantization)")
        if d.gpu_memory_utilization < Fraction(95, 100):
            levers.append("raise --gpu-memory-utilization")
        levers.append("use a larger GPU")
        return (
            f"weights ({format_bytes(tight.weights_bytes)}) and overhead"
            f" ({format_bytes(tight.overhead_bytes)}) need {format_bytes(need)} per GPU, more"
            f" than the {format_bytes(usable)} usable at utilization"
            f" {float(d.gpu_memory_utilization):g}: " + ", ".join(levers[:-1]) + f" or {levers[-1]}"
        )
    return ""


def _too_few(
    d: Deployment,
    stages: Sequence[StagePlan],
    max_model_len: int,
    concurrency: int | None,
    max_concurrency: int,
    shared_prefix: int,
    cap: int,
) -> str:
    """Fewer requests of ``max_model_len`` fit than asked: what they need, what fits, and
    how long the asked number could each be."""
    wanted = concurrency or 1
    tight = min(stages, key=lambda s: s.kv_cache_memory_bytes)
    reach_tokens = longest(stages, wanted, shared_prefix, d.block_size, cap)
    need = wanted * (max(s.request_bytes or 0 for s in stages)) + max(
        s.shared_bytes for s in stages
    )
    if max_concurrency == 0:
        at_length = "not one request fits at that length"
    else:
        at_length = f"at most {requests(max_concurrency)} fit at that length"
    if reach_tokens >= 1:
        reach = f", and {wanted:,} fit{'s' if wanted == 1 else ''} up to" + (
            f" {format_tokens(reach_tokens)} tokens each"
        )
    else:
        reach = f"; {wanted:,} do not fit even at 1 token each"
    levers = ["lower --max-model-len"]
    if concurrency is not None and concurrency > 1:
        levers.append("--concurrency")
    return (
        f"{requests(wanted)} of {format_tokens(max_model_len)}"
        f" tokens need {format_bytes(need)} of KV cache per GPU, more than the"
        f" {format_bytes(tight.kv_cache_memory_bytes)} available; {at_length}{reach}: "
        + advice(d, " or ".join(levers))
    )


def _context_verdict(d: Deployment, wanted: int, max_context: int, cap: int) -> tuple[bool, str]:
    """The answer to ``concurrency`` alone: how long ``wanted`` requests can each be."""
    if max_context < 1:
        return False, (
            f"{requests(wanted)} do{'es' if wanted == 1 else ''} not fit even with 1 token"
            " each: " + advice(d, "lower --concurrency" if wanted > 1 else "")
        )
    capped = " (the model's maximum)" if max_context == cap else ""
    concurrent = "concurrent request" if wanted == 1 else "concurrent requests"
    return True, (
        f"{wanted:,} {concurrent} can each reach {format_tokens(max_context)} tokens{capped}"
    )
