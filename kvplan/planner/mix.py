"""Concurrency for a mix of request lengths: a sample, or a (mean[, p99]) summary of one."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from kvplan.arguments import as_int, as_tokens, as_values
from kvplan.errors import UnitError
from kvplan.planner.pool import StagePlan, concurrency, shared_blocks, shared_bytes
from kvplan.planner.result import LengthMix

#: A mix as given: one length per request, or {tokens: requests of that length}.
Lengths = Sequence[int] | Mapping[int, int]
#: A mix: (tokens, requests of that length) sorted by tokens, and whether it is a summary
#: (mean[, p99]) rather than a sample.
Mix = tuple[list[tuple[int, int]], bool]


def mix_lengths(lengths: Lengths | None, mean: int | None, p99: int | None) -> Mix | None:
    """The request lengths to plan for, as a histogram, and whether they are a summary (mean,
    p99) rather than a sample. Linear: a sample of 10^7 lengths is counted, not sorted."""
    if isinstance(lengths, Mapping):
        return _histogram(lengths), False
    if lengths is not None:
        lengths = as_values(
            lengths,
            "lengths",
            "a sequence of integer token counts, or a mapping of token count to requests",
        )
        if not lengths:
            raise UnitError("lengths: the mix is empty; give at least one request length")
        if set(map(type, lengths)) != {int}:  # strings such as "32k", or bad values
            lengths = [as_tokens(t, f"lengths[{i}]") for i, t in enumerate(lengths)]
        counts = Counter(lengths)
        for bound in (min(counts), max(counts)):
            try:
                as_tokens(bound, "lengths")
            except UnitError:
                i = lengths.index(bound)
                as_tokens(bound, f"lengths[{i}]")  # the same refusal, naming the request
        return sorted(counts.items()), False
    if mean is None and p99 is None:
        return None
    summary = [t for t in (mean, p99) if t is not None]
    if any(t < 1 for t in summary):
        raise UnitError("mean and p99 lengths must be at least 1 token")
    return [(t, 1) for t in summary], True


def _histogram(counts: Mapping[Any, Any]) -> list[tuple[int, int]]:
    """A histogram given as {tokens: requests}, checked: both whole numbers, requests >= 1."""
    if not counts:
        raise UnitError("lengths: the mix is empty; give at least one request length")
    histogram = []
    for tokens, requests in counts.items():
        t = as_tokens(tokens, "lengths: a token count")
        n = as_int(requests, f"lengths[{t}]: its number of requests", minimum=1)
        histogram.append((t, n))
    return sorted(histogram)


def _percentile(histogram: list[tuple[int, int]], rank: int) -> int:
    """The length at 0-based ``rank`` of the sorted sample."""
    seen = 0
    for tokens, count in histogram:
        seen += count
        if rank < seen:
            return tokens
    return histogram[-1][0]


def length_mix(
    stages: Sequence[StagePlan],
    lengths: Mix,
    shared_prefix: int,
    bs: int,
) -> LengthMix:
    """Concurrency for a mix: a sample of lengths, or a (mean[, p99]) summary of one.

    A sample: expected concurrency = pool x n / (the sample's paged bytes), i.e. the pool over
    the mean request. A summary: the pool over a request of the mean length; the worst case is
    every request at the p99 length (or at the sample's longest).
    """
    histogram, summary = lengths
    sample = histogram[:1] if summary else histogram
    n = sum(count for _, count in sample)
    longest = histogram[-1][0]
    p99_rank = min(n - 1, -(-99 * n // 100) - 1)
    best: LengthMix | None = None
    for s in stages:
        paged = sum(
            count * s.private_bytes(t, shared_blocks(shared_prefix, t, bs), bs)
            for t, count in sample
        )
        ideal = sum(
            count * s.ideal_bytes(t, shared_blocks(shared_prefix, t, bs) * bs)
            for t, count in sample
        )
        stored = shared_bytes(s, shared_blocks(shared_prefix, longest, bs))
        room = max(0, s.kv_cache_memory_bytes - stored)
        expected = room * n // paged if paged else 0
        worst = concurrency(s, longest, shared_blocks(shared_prefix, longest, bs), bs)
        first = histogram[0][0]
        mix = LengthMix(
            num_requests=0 if summary else n,
            mean_tokens=first if summary else sum(t * c for t, c in sample) // n,
            p50_tokens=first if summary else _percentile(sample, (n - 1) // 2),
            p99_tokens=longest if summary else _percentile(sample, p99_rank),
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
