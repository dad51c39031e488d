"""Startup cost of the CLI against the floor its dependencies set.

Prints the median wall time of ``kvplan calc llama-3.1-8b --context 32k --format json`` over
the median time of ``python -c "import typer, rich.console, pydantic, yaml"``, as a ratio.
The target is at most 1.5. Run: ``python bench/startup.py [--runs 21]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

# An installed package has its bytecode compiled (pip does it); let the warm-up run write it
# here too, or every timed run would recompile kvplan's sources and the ratio would measure that.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def median_seconds(cmd: list[str], runs: int) -> float:
    subprocess.run(cmd, check=True, capture_output=True, env=ENV)  # warm caches, write .pyc
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, env=ENV)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()
    kvplan = shutil.which("kvplan", path=os.path.dirname(sys.executable)) or shutil.which("kvplan")
    calc = [kvplan] if kvplan else [sys.executable, "-m", "kvplan"]
    calc += ["calc", "llama-3.1-8b", "--context", "32k", "--format", "json"]
    floor = [sys.executable, "-c", "import typer, rich.console, pydantic, yaml"]
    # Interleave-free but same conditions: floor, calc, floor again; keep the lower floor.
    t_floor = median_seconds(floor, args.runs)
    t_calc = median_seconds(calc, args.runs)
    t_floor = min(t_floor, median_seconds(floor, args.runs))
    print(f"dependency floor : {t_floor * 1000:7.1f} ms  (median of {args.runs})")
    print(f"kvplan calc      : {t_calc * 1000:7.1f} ms  (median of {args.runs})")
    print(f"ratio            : {t_calc / t_floor:7.2f}  (target <= 1.5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
