"""Trace replay speed: requests and blocks a second through vLLM's prefix cache
(kvplan.cache_sim.prefix), on the bundled sample or a trace given.

Run: ``python bench/simulate.py [TRACE.jsonl] [REPEAT]``. REPEAT (default 1) plays the trace
that many times end to end, each copy's block ids shifted past the last's so the copies share
nothing (the conversation trace's 12,031 requests nine times over is 108,279). It reports the
direct count's speed and the replay's at 16- and 512-token blocks on pools of 20,000 and
640,000 blocks, and with a host tier of 200,000 blocks under the 20,000.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from kvplan.cache_sim.prefix import LowerTier, simulate_prefix_cache
from kvplan.cache_sim.trace import TraceRequest, prefix_reuse, read_mooncake

SAMPLE = (
    Path(__file__).parent.parent / "tests" / "data" / "traces" / "mooncake_conversation_400.jsonl"
)


def _tiled(path: Path, repeat: int) -> Iterator[TraceRequest]:
    """The trace ``repeat`` times, each copy after the last, its ids past the last's."""
    ids = span = 0
    for request in read_mooncake(path):
        ids = max(ids, max(request.block_ids) + 1)
        span = max(span, request.timestamp_ms + 1)
    for copy in range(repeat):
        for request in read_mooncake(path):
            yield replace(
                request,
                timestamp_ms=request.timestamp_ms + copy * span,
                block_ids=tuple(b + copy * ids for b in request.block_ids),
            )


def main() -> int:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else SAMPLE
    repeat = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    start = time.perf_counter()
    direct = prefix_reuse(_tiled(path, repeat), 16)
    seconds = time.perf_counter() - start
    print(f"{path.name}: {direct.num_requests:,} requests, {direct.input_tokens:,} input tokens")
    print(f"direct count (16-token blocks): {direct.num_requests / seconds:,.0f} requests/s")
    host = (LowerTier("host", 200_000),)
    for blocks, tokens, tiers in (
        (20_000, 16, ()),
        (640_000, 16, ()),
        (20_000, 512, ()),
        (20_000, 16, host),
    ):
        start = time.perf_counter()
        result = simulate_prefix_cache(
            _tiled(path, repeat),
            num_blocks=blocks,
            block_tokens=tokens,
            service_ms=lambda r, computed: computed // 100 + 10 * r.output_tokens,
            tiers=tiers,
        )
        seconds = time.perf_counter() - start
        label = " over a host tier of 200,000" if tiers else ""
        print(
            f"replay, {blocks:,} blocks of {tokens}{label}: {result.num_requests / seconds:,.0f}"
            f" requests/s, {direct.input_tokens // tokens / seconds:,.0f} blocks/s,"
            f" hit ratio {result.reuse_ratio:.4f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
