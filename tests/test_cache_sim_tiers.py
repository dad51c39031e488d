"""Lower tiers under vLLM's prefix cache (kvplan.cache_sim.prefix): loads, writes and evictions
derived by hand, and the per-trace-block replay equal to a plain block-by-block one."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest
from replay_reference import simulate_prefix_cache as reference

from kvplan.cache_sim.prefix import LowerTier, simulate_prefix_cache
from kvplan.cache_sim.trace import TraceRequest, read_mooncake
from kvplan.errors import UnitError

SAMPLE = Path(__file__).parent / "data" / "traces" / "mooncake_conversation_400.jsonl"


def _fixed(ms: int):  # type: ignore[no-untyped-def]
    return lambda request, computed: ms


def test_a_prefix_evicted_from_the_gpu_comes_back_from_host_memory() -> None:
    """A pool of 2 blocks of 256 tokens over a host tier of 4 blocks, 10 ms a block to load.
    R1 (512 tokens, block 1) computes (1,0) (1,1) and writes both to the host. R2 (block 2)
    takes the pool's 2 blocks, evicting R1's, and writes 2 more: the host is full (4). R3 is
    R1 again: nothing on the GPU; the host has block 1 whole but the one-token rule leaves
    (512 - 1) // 256 = 1 block to reuse: 256 tokens loaded (10 ms), 256 computed; R3 evicts
    R2's 2 blocks from the GPU and touches block 1 on the host, so the host's order is 2, 1.
    R4 (block 4) writes 2 blocks: the host evicts block 2, its least recently touched. R5
    (block 2 again) finds it nowhere."""
    requests = [
        TraceRequest(0, 512, 0, (1,)),
        TraceRequest(200, 512, 0, (2,)),
        TraceRequest(400, 512, 0, (1,)),
        TraceRequest(1000, 512, 0, (4,)),
        TraceRequest(2000, 512, 0, (2,)),
    ]
    seen: list[int] = []

    def service(request: TraceRequest, computed: int) -> int:
        seen.append(computed)
        return 100

    host = LowerTier("host", 4, Fraction(1, 100))
    result = simulate_prefix_cache(
        requests, num_blocks=2, block_tokens=256, service_ms=service, tiers=[host]
    )
    (tier,) = result.tiers
    assert seen == [512, 512, 256, 512, 512]
    assert (result.hit_tokens, tier.hit_tokens, tier.loaded_blocks) == (0, 256, 1)
    assert (tier.stored_blocks, tier.evicted_blocks) == (2 + 2 + 0 + 2 + 2, 2 + 2)
    assert (result.evicted_blocks, result.load_ms) == (2 + 2 + 2 + 2, 10)
    assert result.computed_tokens == 5 * 512 - 256


def test_a_hit_runs_on_from_the_gpu_through_each_tier() -> None:
    """Pool 4 blocks of 256; host 2 blocks (1 ms a block), disk 8 (10 ms). R1 (1,024 tokens,
    blocks 1 2) writes block 2 then block 1 to both (touched last first): the host keeps block
    1 (2 blocks), the disk all 4. R2 (blocks 5 6) evicts R1's 4 blocks from the GPU; the host
    then holds block 5 alone, the disk 8 blocks. R3 (blocks 1 2 again) may reuse 1,023 // 256
    = 3 blocks: none on the GPU, none on the host, 3 on the disk (1,0) (1,1) (2,0): 768 tokens,
    30 ms. Host writes 4 + 4 + 4, evicts 2 + 4 + 4; disk writes 4 + 4 + 0, evicts none."""
    requests = [
        TraceRequest(0, 1024, 0, (1, 2)),
        TraceRequest(200, 1024, 0, (5, 6)),
        TraceRequest(400, 1024, 0, (1, 2)),
    ]
    tiers = [LowerTier("host", 2, Fraction(1, 1000)), LowerTier("disk", 8, Fraction(1, 100))]
    result = simulate_prefix_cache(
        requests, num_blocks=4, block_tokens=256, service_ms=_fixed(100), tiers=tiers
    )
    host, disk = result.tiers
    assert (result.hit_tokens, host.hit_tokens, disk.hit_tokens) == (0, 0, 768)
    assert (host.stored_blocks, host.evicted_blocks) == (12, 10)
    assert (disk.stored_blocks, disk.evicted_blocks, disk.loaded_blocks) == (8, 0, 3)
    assert result.load_ms == 30
    assert result.reused_tokens == 768


@pytest.mark.parametrize(
    ("num_blocks", "block_tokens"),
    [(2_000, 16), (5_000, 16), (20_000, 16), (100, 512), (300, 512), (20_000, 256)],
)
def test_the_replay_equals_a_plain_block_by_block_one(num_blocks: int, block_tokens: int) -> None:
    """The sample trace on pools small enough to refuse, wait and evict: the same totals and
    the same names evicted in the same order as tests/replay_reference.py."""

    def service(request: TraceRequest, computed: int) -> int:
        return computed // 100 + 10 * request.output_tokens

    runs = [
        f(
            read_mooncake(SAMPLE),
            num_blocks=num_blocks,
            block_tokens=block_tokens,
            service_ms=service,
            keep_evictions=True,
        )
        for f in (simulate_prefix_cache, reference)
    ]
    fast, plain = runs
    assert fast.evictions == plain.evictions
    assert fast.evicted_blocks > 0 or num_blocks == 20_000
    for name in ("num_requests", "num_refused", "hit_tokens", "peak_running", "wait_ms"):
        assert getattr(fast, name) == getattr(plain, name), name


def test_an_empty_tier_changes_nothing_and_a_huge_one_holds_every_prefix() -> None:
    """With a host tier of 0 blocks the replay is the GPU's alone; with one that holds the
    whole trace, GPU and host together reuse what an unbounded GPU pool would."""

    def service(request: TraceRequest, computed: int) -> int:
        return computed // 100 + 10 * request.output_tokens

    def run(num_blocks: int, tiers: list[LowerTier]) -> tuple[int, int]:
        r = simulate_prefix_cache(
            read_mooncake(SAMPLE), num_blocks=num_blocks, service_ms=service, tiers=tiers
        )
        return r.hit_tokens, r.reused_tokens

    alone = run(20_000, [])
    assert run(20_000, [LowerTier("host", 0)]) == alone
    unbounded = run(10**9 // 16, [])
    assert run(20_000, [LowerTier("host", 10**9 // 16)])[1] == unbounded[1]


def test_a_tier_of_another_kind_is_refused() -> None:
    with pytest.raises(UnitError, match="tiers: expected LowerTier"):
        simulate_prefix_cache([], num_blocks=10, service_ms=_fixed(1), tiers=[4])  # type: ignore[list-item]
    with pytest.raises(UnitError, match="seconds_per_block"):
        LowerTier("host", 4, Fraction(-1))
