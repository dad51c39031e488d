"""Library throughput: estimates per second for a loaded spec, and plans of a sweep.

Run: ``python bench/throughput.py``. Targets: at least 200,000 estimates per second, and a
sweep of 10,000 plans in under a second.
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
    count, seconds = plans_per_second()
    print(f"sweep: {count:,} plans (10 models x 5 GPUs x 4 TP x 50 contexts) in {seconds:.2f} s")
    return 0


def plans_per_second() -> tuple[int, float]:
    """A sweep of models x GPUs x contexts x TP sizes, planned in-process."""
    from kvplan.hardware.lookup import find_gpu
    from kvplan.planner import plan

    models = [
        kvplan.load_model(n)
        for n in (
            "llama-3.1-8b",
            "llama-3.1-70b",
            "qwen3-32b",
            "gemma-3-27b",
            "mixtral-8x7b",
            "deepseek-v2-lite",
            "gpt-oss-120b",
            "jamba-v0.1",
            "mistral-nemo",
            "qwen3-8b",  # phi-4 (10 KV heads) does not shard over TP 4 or 8
        )
    ]
    gpus = [find_gpu(n) for n in ("h100", "h200", "a100-80gb", "l40s", "b200")]
    contexts = [1024 * 2**i for i in range(10)] + [3000 * i for i in range(1, 41)]
    tps = [1, 2, 4, 8]
    start = time.perf_counter()
    count = 0
    for spec in models:
        for gpu in gpus:
            for tp in tps:
                for context in contexts:
                    plan(spec, gpu, tensor_parallel_size=tp, max_model_len=context)
                    count += 1
    return count, time.perf_counter() - start


if __name__ == "__main__":
    sys.exit(main())
