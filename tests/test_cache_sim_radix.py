"""SGLang's radix cache replayed on traces (kvplan.cache_sim.radix): whole leaves evicted
least recently accessed first, derived by hand, and the unbounded tree equal to the direct
count."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.cache_sim.prefix import simulate_prefix_cache
from kvplan.cache_sim.radix import simulate_radix_cache
from kvplan.cache_sim.trace import TraceRequest, read_mooncake
from kvplan.errors import UnitError

SAMPLE = Path(__file__).parent / "data" / "traces" / "mooncake_conversation_400.jsonl"


def _fixed(ms: int):  # type: ignore[no-untyped-def]
    return lambda request, computed: ms


def test_a_whole_leaf_goes_where_vllm_evicts_one_block() -> None:
    """4 pages of 256 tokens, each request done 100 ms after admission. R1 (512 tokens, block
    1) caches node (1, places 0-1); R2 (block 2) node (2, 0-1): the pool is full. R3 (100
    tokens, no full page) needs 1 page: SGLang evicts the least recently accessed leaf whole,
    R1's node, both its pages; vLLM evicts only the front of its free queue, (1,1), R1's tail.
    R4 is R1 again: SGLang finds nothing; vLLM finds (1,0), 256 tokens (the one-token rule
    allows (512 - 1) // 256 = 1 page)."""
    requests = [
        TraceRequest(0, 512, 0, (1,)),
        TraceRequest(200, 512, 0, (2,)),
        TraceRequest(400, 100, 0, (3,)),
        TraceRequest(600, 512, 0, (1,)),
    ]
    radix = simulate_radix_cache(
        requests, num_pages=4, page_tokens=256, service_ms=_fixed(100), keep_evictions=True
    )
    assert radix.evictions[:2] == [(1, 1), (1, 0)]
    assert radix.hit_tokens == 0
    vllm = simulate_prefix_cache(
        requests, num_blocks=4, block_tokens=256, service_ms=_fixed(100), keep_evictions=True
    )
    assert vllm.evictions[0] == (1, 1)
    assert vllm.hit_tokens == 256


def test_a_hit_locks_its_nodes_and_waits_for_room() -> None:
    """4 pages of 256. R1 (1,024 tokens, blocks 1 2) caches (1, 0-1) and (2, 0-1), locked
    while it runs: the pool is full. R2 (512 tokens, block 1) arrives at 50: it may reuse
    (512 - 1) // 256 = 1 page, (1,0), splitting block 1's node there, but needs 1 page more
    and nothing is evictable: it waits 50 ms. At 100 R1 is done; R2 locks (1,0) and evicts
    the only leaf, (2, 0-1), whole; its copy of (1,1), already cached, is freed. R3 (block 9)
    fits in the 2 free pages. R4 (blocks 1 2) finds block 1's 2 pages, 512 tokens, and evicts
    R3's node for the 2 it needs, the least recently accessed leaf (block 1's were touched by
    R4's own match). vLLM evicts R1's tail (2,1) alone for R2, but R3 then takes the front of
    its free queue, (2,0) and (1,1) (freed before R2's (1,0)): R4 finds 256 tokens there."""
    requests = [
        TraceRequest(0, 1024, 0, (1, 2)),
        TraceRequest(50, 512, 0, (1,)),
        TraceRequest(250, 512, 0, (9,)),
        TraceRequest(400, 1024, 0, (1, 2)),
    ]
    result = simulate_radix_cache(
        requests, num_pages=4, page_tokens=256, service_ms=_fixed(100), keep_evictions=True
    )
    assert result.evictions == [(2, 1), (2, 0), (9, 1), (9, 0)]
    assert (result.hit_tokens, result.wait_ms, result.peak_running) == (256 + 512, 50, 1)
    vllm = simulate_prefix_cache(
        requests, num_blocks=4, block_tokens=256, service_ms=_fixed(100), keep_evictions=True
    )
    assert vllm.evictions[:3] == [(2, 1), (2, 0), (1, 1)]
    assert (vllm.hit_tokens, vllm.wait_ms) == (256 + 256, 50)


@pytest.mark.parametrize("page_tokens", [1, 16, 512])
def test_an_unbounded_tree_finds_what_the_direct_count_finds(page_tokens: int) -> None:
    from test_cache_sim_prefix import _counted

    def service(request: TraceRequest, computed: int) -> int:
        return computed // 100 + 10 * request.output_tokens

    result = simulate_radix_cache(
        read_mooncake(SAMPLE),
        num_pages=10**9 // page_tokens,
        page_tokens=page_tokens,
        service_ms=service,
    )
    assert result.evicted_blocks == 0
    assert result.hit_tokens == _counted(page_tokens)


def test_a_page_size_that_does_not_divide_the_trace_blocks_is_refused() -> None:
    with pytest.raises(UnitError, match="must divide the trace's 512-token"):
        simulate_radix_cache([], num_pages=10, page_tokens=48, service_ms=_fixed(1))


def test_hicaches_host_tier_gives_back_what_the_tree_evicted() -> None:
    """The host-tier trace of tests/test_cache_sim_tiers.py through SGLang's tree: 2 pages of
    256 over a host tier of 4 pages, 10 ms a page. Every node the tree evicts is a whole
    request's, as vLLM's queue evicts them here, so the figures are vLLM's: R3 (R1 again)
    loads 1 page (256 tokens, 10 ms) from the host, which wrote 8 pages and evicted 4."""
    from fractions import Fraction

    from kvplan.cache_sim.prefix import LowerTier

    requests = [
        TraceRequest(0, 512, 0, (1,)),
        TraceRequest(200, 512, 0, (2,)),
        TraceRequest(400, 512, 0, (1,)),
        TraceRequest(1000, 512, 0, (4,)),
        TraceRequest(2000, 512, 0, (2,)),
    ]
    host = [LowerTier("host", 4, Fraction(1, 100))]
    result = simulate_radix_cache(
        requests, num_pages=2, page_tokens=256, service_ms=_fixed(100), tiers=host
    )
    (tier,) = result.tiers
    assert (result.hit_tokens, tier.hit_tokens, tier.loaded_blocks) == (0, 256, 1)
    assert (tier.stored_blocks, tier.evicted_blocks) == (8, 4)
    assert (result.evicted_blocks, result.load_ms, result.computed_tokens) == (8, 10, 5 * 512 - 256)
