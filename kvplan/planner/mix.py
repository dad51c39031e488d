"""Concurrency for a mix of request lengths: a sample, or a (mean[, p99]) summary of one."""

from __future__ import annotations

from collections.abc import Sequence

from kvplan.arguments import as_tokens
from kvplan.errors import UnitError
from kvplan.planner.pool import StagePlan, concurrency, shared_blocks, shared_bytes
from kvplan.planner.result import LengthMix


def mix_lengths(
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


def length_mix(
    stages: Sequence[StagePlan],
    lengths: tuple[list[int], bool],
    shared_prefix: int,
    bs: int,
) -> LengthMix:
    """Concurrency for a mix: a sample of lengths, or a (mean[, p99]) summary of one.

    A sample: expected concurrency = pool x n / (the sample's paged bytes), i.e. the pool over
    the mean request. A summary: the pool over a request of the mean length; the worst case is
    every request at the p99 length (or at the sample's longest).
    """
    ordered, summary = lengths
    best: LengthMix | None = None
    for s in stages:
        sample = ordered[:1] if summary else ordered
        paged = sum(s.private_bytes(t, shared_blocks(shared_prefix, t, bs), bs) for t in sample)
        ideal = sum(s.ideal_bytes(t, shared_blocks(shared_prefix, t, bs) * bs) for t in sample)
        longest = ordered[-1]
        stored = shared_bytes(s, shared_blocks(shared_prefix, longest, bs))
        room = max(0, s.kv_cache_memory_bytes - stored)
        expected = room * len(sample) // paged if paged else 0
        worst = concurrency(s, longest, shared_blocks(shared_prefix, longest, bs), bs)
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
