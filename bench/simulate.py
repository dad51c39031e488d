"""Trace replay speed: requests and blocks a second through vLLM's prefix cache
(kvplan.cache_sim.prefix), on the bundled sample or a trace given.

Run: ``python bench/simulate.py [TRACE.jsonl]``. It reports the direct count's speed and the
replay's at 16- and 512-token blocks on pools of 20,000 and 640,000 blocks.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from kvplan.cache_sim.prefix import simulate_prefix_cache
from kvplan.cache_sim.trace import prefix_reuse, read_mooncake

SAMPLE = (
    Path(__file__).parent.parent / "tests" / "data" / "traces" / "mooncake_conversation_400.jsonl"
)


def main() -> int:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else SAMPLE
    start = time.perf_counter()
    direct = prefix_reuse(read_mooncake(path), 16)
    seconds = time.perf_counter() - start
    print(f"{path.name}: {direct.num_requests:,} requests, {direct.input_tokens:,} input tokens")
    print(f"direct count (16-token blocks): {direct.num_requests / seconds:,.0f} requests/s")
    for blocks, tokens in ((20_000, 16), (640_000, 16), (20_000, 512)):
        start = time.perf_counter()
        result = simulate_prefix_cache(
            read_mooncake(path),
            num_blocks=blocks,
            block_tokens=tokens,
            service_ms=lambda r, computed: computed // 100 + 10 * r.output_tokens,
        )
        seconds = time.perf_counter() - start
        print(
            f"replay, {blocks:,} blocks of {tokens}: {result.num_requests / seconds:,.0f}"
            f" requests/s, {direct.input_tokens // tokens / seconds:,.0f} blocks/s,"
            f" hit ratio {result.hit_ratio:.4f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
