"""vLLM's prefix cache replayed on traces (kvplan.cache_sim.prefix): hits, evictions and waits
derived by hand on small traces, and the unbounded pool equal to the direct count."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.cache_sim.prefix import simulate_prefix_cache
from kvplan.cache_sim.trace import TraceRequest, prefix_reuse, read_mooncake
from kvplan.errors import UnitError

SAMPLE = Path(__file__).parent / "data" / "traces" / "mooncake_conversation_400.jsonl"


def _fixed(ms: int):  # type: ignore[no-untyped-def]
    return lambda request, computed: ms


def test_hits_and_the_one_eviction_by_hand() -> None:
    """A pool of 4 blocks of 256 tokens; each request done 10 ms after admission.
    R1 (1,024 tokens: names (10,0) (10,1) (11,0) (11,1)) computes all 4 in fresh blocks 0-3 and
    frees them last first: the queue is 3 2 1 0. R2 (600 tokens, ids 10 20; 100 out) hits
    (10,0) (10,1) in blocks 0 and 1 (512 tokens) and needs cdiv(700, 256) - 2 = 1 block: the
    front, block 3, evicting (11,1). R3 (R1's 1,024 tokens again) may hit 3 blocks ((1,024 - 1)
    // 256): (10,0) (10,1) (11,0), 768 tokens, and takes block 3, uncached, for (11,1)."""
    requests = [
        TraceRequest(0, 1024, 0, (10, 11)),
        TraceRequest(100, 600, 100, (10, 20)),
        TraceRequest(200, 1024, 0, (10, 11)),
    ]
    result = simulate_prefix_cache(
        requests, num_blocks=4, block_tokens=256, service_ms=_fixed(10), keep_evictions=True
    )
    assert result.evictions == [(11, 1)]
    assert result.hit_tokens == 512 + 768
    assert result.input_tokens == 2648
    assert (result.num_requests, result.peak_running, result.wait_ms) == (3, 1, 0)


def test_a_request_waits_for_blocks_and_evicts_the_tail_first() -> None:
    """Two blocks: R1 (512 tokens, names (1,0) (1,1)) holds both for 100 ms; R2 arrives at 10
    and waits 90 ms; R1's blocks come back last first, so R2 evicts (1,1), then (1,0). R3 needs
    cdiv(1,000 + 100, 256) = 5 blocks, more than the pool: refused."""
    requests = [
        TraceRequest(0, 512, 0, (1,)),
        TraceRequest(10, 512, 0, (2,)),
        TraceRequest(20, 1000, 100, (3, 4)),
    ]
    result = simulate_prefix_cache(
        requests, num_blocks=2, block_tokens=256, service_ms=_fixed(100), keep_evictions=True
    )
    assert result.evictions == [(1, 1), (1, 0)]
    assert result.wait_ms == 90
    assert (result.num_requests, result.num_refused, result.hit_tokens) == (2, 1, 0)


@pytest.mark.parametrize("block_tokens", [16, 512])
def test_an_unbounded_pool_finds_what_the_direct_count_finds(block_tokens: int) -> None:
    """Mooncake's conversation sample: with room for every block nothing is evicted and each
    request hits the run of first blocks an earlier request computed."""
    direct = prefix_reuse(read_mooncake(SAMPLE), block_tokens)
    replayed = simulate_prefix_cache(
        read_mooncake(SAMPLE),
        num_blocks=10**9 // block_tokens,
        block_tokens=block_tokens,
        service_ms=lambda request, computed: computed // 100 + 10 * request.output_tokens,
    )
    assert replayed.evicted_blocks == 0
    assert replayed.hit_tokens == direct.hit_tokens == _counted(block_tokens)


def _counted(block_tokens: int) -> int:
    """The sample's hit tokens counted here: a request hits the run of its first whole blocks
    (at most (input - 1) // block_tokens) whose (trace id, place) an earlier line holds whole."""
    import json

    per = 512 // block_tokens
    rows = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()]
    first: dict[tuple[int, int], int] = {}
    for number, row in enumerate(rows):
        for i in range(row["input_length"] // block_tokens):
            first.setdefault((row["hash_ids"][i // per], i % per), number)
    hits = 0
    for number, row in enumerate(rows):
        for i in range((row["input_length"] - 1) // block_tokens):
            if first.get((row["hash_ids"][i // per], i % per), number) >= number:
                break
            hits += block_tokens
    return hits


def test_a_smaller_pool_evicts_and_finds_less() -> None:
    svc = lambda request, computed: computed // 100 + 10 * request.output_tokens  # noqa: E731
    small = simulate_prefix_cache(read_mooncake(SAMPLE), num_blocks=20_000, service_ms=svc)
    large = simulate_prefix_cache(read_mooncake(SAMPLE), num_blocks=640_000, service_ms=svc)
    assert small.evicted_blocks > large.evicted_blocks
    assert small.hit_tokens < large.hit_tokens


def test_a_block_size_that_does_not_divide_the_trace_blocks_is_refused() -> None:
    with pytest.raises(UnitError, match="must divide the trace's 512-token blocks"):
        simulate_prefix_cache([], num_blocks=10, block_tokens=48, service_ms=_fixed(1))
