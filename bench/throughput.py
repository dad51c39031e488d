"""Library throughput: estimates per second for a loaded spec, and plans of a sweep.

Run: ``python bench/throughput.py``. The target is at least 200,000 estimates per second.
"""

from __future__ import annotations

import sys
import time

import kvplan


def estimates_per_second(name: str, n: int = 200_000) -> float:
    spec = kvplan.load_model(name)
    contexts = [1024 + 37 * i for i in range(1000)]
    kvplan.estimate(spec, 1)  # resolve the per-dtype terms once
    start = time.perf_counter()
    for i in range(n):
        kvplan.estimate(spec, contexts[i % 1000], batch_size=1 + i % 64)
    return n / (time.perf_counter() - start)


def main() -> int:
    for name in ("llama-3.1-8b", "gemma-3-27b", "jamba-v0.1", "deepseek-v3"):
        best = max(estimates_per_second(name) for _ in range(3))
        print(f"{name:16s} {best:12,.0f} estimates/s (best of 3 x 200,000)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
