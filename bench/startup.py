"""Startup cost of the CLI against the floor its dependencies set.

For ``kvplan calc``, ``kvplan plan`` and ``kvplan --help``, prints the median wall time over the
median time of the floor, ``python -c "import typer, rich.console, pydantic, yaml"``, as a ratio;
the target is at most 1.3 for each. Run: ``python bench/startup.py [--runs 21] [--check]``;
with ``--check`` the exit status is 1 when a command misses the target.

Runs are interleaved (floor, calc, plan, --help, reference, floor, ...) so that a burst of load on
a shared machine falls on every command alike. The CPU column (user + system time of the child)
moves less than wall time when other processes compete for the cores.

The reference line is not a kvplan command: a one-command typer app that validates one pydantic
model, the least that any CLI built on these libraries pays. ``import pydantic`` in the floor
loads almost nothing (pydantic 2 imports its names on first use), so the floor does not include
the cost of using pydantic; the reference shows how much of a ratio that alone takes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

TARGET = 1.3

# An installed package has its bytecode compiled (pip does it); let the warm-up run write it
# here too, or every timed run would recompile kvplan's sources and the ratio would measure that.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

FLOOR = "import typer, rich.console, pydantic, yaml"

REFERENCE = """\
import json, sys
import typer
from pydantic import BaseModel, Field

class Spec(BaseModel):
    name: str = Field(min_length=1)
    num_hidden_layers: int = Field(gt=0)

app = typer.Typer()

@app.callback()
def main() -> None:
    "Reference."

@app.command()
def calc(model: str, context: str | None = None) -> None:
    spec = Spec.model_validate({"name": model, "num_hidden_layers": 32})
    sys.stdout.write(json.dumps({"model": spec.name}) + "\\n")

app(["calc", "llama"])
"""


def commands() -> dict[str, list[str]]:
    """The floor, each timed command and the reference, by label."""
    kvplan = shutil.which("kvplan", path=os.path.dirname(sys.executable)) or shutil.which("kvplan")
    base = [kvplan] if kvplan else [sys.executable, "-m", "kvplan"]
    return {
        "floor": [sys.executable, "-c", FLOOR],
        "calc": [*base, "calc", "llama-3.1-8b", "--context", "32k", "--format", "json"],
        "plan": [
            *base,
            *("plan", "llama-3.1-8b", "--gpu", "h100", "--max-model-len", "32K"),
            *("--format", "json"),
        ],
        "--help": [*base, "--help"],
        "reference": [sys.executable, "-c", REFERENCE],
    }


def _run(cmd: list[str]) -> tuple[float, float | None]:
    """Wall seconds and CPU seconds (None where the platform cannot tell) of one run."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=ENV)
    cpu: float | None = None
    if hasattr(os, "wait4"):
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        cpu = usage.ru_utime + usage.ru_stime
    else:  # pragma: no cover - Windows
        proc.wait()
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        failed = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
        raise SystemExit(f"{cmd} exited {failed.returncode}: {failed.stderr.strip()}")
    return wall, cpu


def medians(cmds: dict[str, list[str]], runs: int) -> dict[str, tuple[float, float | None]]:
    """Median wall and CPU seconds of each command over ``runs`` interleaved rounds."""
    for cmd in cmds.values():  # warm the file cache and write .pyc
        _run(cmd)
    walls: dict[str, list[float]] = {label: [] for label in cmds}
    cpus: dict[str, list[float]] = {label: [] for label in cmds}
    for _ in range(runs):
        for label, cmd in cmds.items():
            wall, cpu = _run(cmd)
            walls[label].append(wall)
            if cpu is not None:
                cpus[label].append(cpu)
    return {
        label: (
            statistics.median(walls[label]),
            statistics.median(cpus[label]) if cpus[label] else None,
        )
        for label in cmds
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--check", action="store_true", help=f"exit 1 if a ratio is > {TARGET}")
    args = parser.parse_args()
    found = medians(commands(), args.runs)
    floor_wall, floor_cpu = found.pop("floor")
    print(f"median of {args.runs} runs; floor: python -c {FLOOR!r}")
    print(f"{'':18}{'wall':>9} {'ratio':>6}   {'cpu':>9} {'ratio':>6}")
    worst = 0.0
    for label, (wall, cpu) in {"floor": (floor_wall, floor_cpu), **found}.items():
        ratio = wall / floor_wall
        if label in ("calc", "plan", "--help"):
            worst = max(worst, ratio)
        name = label if label in ("floor", "reference") else f"kvplan {label}"
        cpu_cols = (
            f"{cpu * 1000:6.1f} ms {cpu / floor_cpu:6.2f}" if cpu is not None and floor_cpu else ""
        )
        print(f"{name:<18}{wall * 1000:6.1f} ms {ratio:6.2f}   {cpu_cols}")
    verdict = "met" if worst <= TARGET else "missed"
    print(f"target: every kvplan command <= {TARGET} x floor (wall): {verdict}, worst {worst:.2f}")
    return 1 if args.check and worst > TARGET else 0


if __name__ == "__main__":
    sys.exit(main())
