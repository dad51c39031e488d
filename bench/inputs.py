"""Time and memory of the largest inputs kvplan accepts, each at (or past) its documented limit.

Run: ``python bench/inputs.py``. Targets: a length mix of 5 x 10^6 requests read and planned in a
few seconds; a budget of 4,096 deployments checked in about as long; a GGUF vocabulary of 2^21
strings skipped in under a second; any YAML file at the 2 MiB limit composed in a few seconds.
Each case runs ``kvplan`` as a user does, and prints wall seconds and peak memory (MiB).
"""

from __future__ import annotations

import random
import resource
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _lengths(folder: Path, n: int) -> list[str]:
    path = folder / "mix.csv"
    rng = random.Random(7)
    with path.open("w") as f:
        f.write("prompt_tokens,output_tokens\n")
        f.writelines(f"{rng.randint(1, 8000)},{rng.randint(1, 999)}\n" for _ in range(n))
    return ["plan", "llama-3.1-8b", "--gpu", "H100-80GB", "--lengths", str(path)]


def _budget(folder: Path, n: int) -> list[str]:
    path = folder / "budget.yaml"
    models, gpus = ("llama-3.1-8b", "qwen3-8b", "llama-3.1-70b"), ("h100", "l4", "a100-80gb")
    with path.open("w") as f:
        f.write("deployments:\n")
        for i in range(n):
            f.write(
                f"  - name: d{i}\n    model: {models[i % 3]}\n    gpu: {gpus[i % 3]}\n"
                f"    max_model_len: {4096 << (i % 3)}\n    expect:\n      min_concurrency: 1\n"
            )
    return ["check", str(path)]


def _gguf(folder: Path, n: int) -> list[str]:
    path = folder / "vocab.gguf"
    with path.open("wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, 0, 2))
        for key, kind, value in (
            (b"general.architecture", 8, struct.pack("<Q", 5) + b"llama"),
            (b"tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, n) + b"\0" * (8 * n)),
        ):
            f.write(struct.pack("<Q", len(key)) + key + struct.pack("<I", kind) + value)
    return ["import", str(path), "-o", str(folder / "out.yaml"), "--force"]


def _yaml(folder: Path, n: int) -> list[str]:
    path = folder / "flow.yaml"
    path.write_text("[" + "a," * n + "]")
    return ["calc", str(path), "-c", "4K"]


CASES = {
    "length mix, 5 x 10^6 requests": (_lengths, 5 * 10**6),  # 44 MiB of the 64 MiB a file may hold
    "budget, 4,096 deployments": (_budget, 4096),
    "GGUF vocabulary, 2^21 strings": (_gguf, 2**21),
    "YAML flow list at 2 MiB": (_yaml, 2**20 - 1),
}


def main() -> int:
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        for label, (make, n) in CASES.items():
            args = make(folder, n)
            before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
            start = time.perf_counter()
            run = subprocess.run(
                [sys.executable, "-m", "kvplan", *args], capture_output=True, text=True
            )
            seconds = time.perf_counter() - start
            peak = max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024
            last = (run.stdout.strip().splitlines() or run.stderr.strip().splitlines() or [""])[-1]
            shown = f"exit {run.returncode}  {seconds:6.2f} s  {peak:7.0f} MiB"
            print(f"{label:32s} {shown}  {last[:60]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
