"""``--gpu local``: the GPUs of this machine, as nvidia-smi or rocm-smi print them.

The parsers are pure functions of the tool's text, so tests feed them recorded outputs; only
``run_tool`` starts a process. Memory is planned as the serving runtime will see it: nvidia-smi's
``memory.total`` includes what the driver keeps for itself (an H100 80GB HBM3 prints 81,559 MiB,
CUDA reports 81,090 MiB to torch and vLLM), so where the printed name matches a catalog GPU and
the printed total exceeds the catalog's runtime figure by no more than such a reserve, the
catalog's figure is used; a smaller total (a smaller variant) is used as printed.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cache

from kvplan.errors import LocalGPUError
from kvplan.hardware.gpus import (
    GPU,
    UnknownGPUError,
    catalog_gpu,
    custom_gpu,
)

MiB = 2**20

NVIDIA_SMI = (
    "nvidia-smi",
    "--query-gpu=index,name,memory.total,memory.used,mig.mode.current",
    "--format=csv,noheader,nounits",
)
ROCM_SMI = ("rocm-smi", "--showproductname", "--showmeminfo", "vram", "--json")

#: nvidia-smi answers in well under a second on a healthy node; a hung driver must not hang
#: kvplan.
TIMEOUT_S = 10.0
#: What nvidia-smi or rocm-smi may print: a line a GPU, a few KiB for a node of 16
OUTPUT_LIMIT_BYTES = 1024 * 1024

#: The most a driver keeps out of the runtime's total: H100 469 MiB, A100 80GB 870 MiB, B300
#: 925 MiB (nvidia-smi total minus torch total_memory). A printed total further above the
#: catalog's figure is a larger board than the entry the name matched, so it is used as printed.
DRIVER_RESERVE_BYTES = 2048 * MiB

#: Memory already in use above this is worth saying: a display or a driver context holds a few
#: hundred MiB; more means another process holds memory an engine will not get.
BUSY_BYTES = 1024 * MiB


@dataclass(frozen=True, slots=True)
class LocalGPU:
    """One device as its tool printed it; memory in bytes (nvidia-smi's MiB x 2**20)."""

    index: int
    name: str
    memory_total_bytes: int
    memory_used_bytes: int = 0
    mig_enabled: bool = False


@dataclass(frozen=True, slots=True)
class LocalGPUs:
    """What ``--gpu local`` found: ``gpu`` is the device to plan for (the smallest, if mixed)
    and ``summary`` says in one line what was found and what is planned."""

    tool: str
    devices: tuple[LocalGPU, ...]
    gpu: GPU
    summary: str

    @property
    def num_gpus(self) -> int:
        return len(self.devices)


# --- parsing the tools' text -------------------------------------------------------------------


def parse_nvidia_smi(text: str) -> tuple[LocalGPU, ...]:
    """The devices of ``nvidia-smi --query-gpu=index,name,memory.total,memory.used
    [,mig.mode.current] --format=csv,noheader,nounits``. Raises LocalGPUError for a line it
    cannot read or for no device at all."""
    devices = []
    for line in filter(None, (raw.strip() for raw in text.splitlines())):
        fields = [f.strip() for f in line.split(",")]
        if len(fields) not in (4, 5) or not _digits(fields[0]) or not _digits(fields[2]):
            raise LocalGPUError(
                f"nvidia-smi printed {line[:80]!r}, not 'index, name, memory.total [MiB],"
                " memory.used [MiB], mig.mode.current'"
            )
        used = fields[3]
        devices.append(
            LocalGPU(
                index=int(fields[0]),
                name=_name(fields[1]),
                memory_total_bytes=int(fields[2]) * MiB,
                memory_used_bytes=int(used) * MiB if _digits(used) else 0,
                mig_enabled=len(fields) == 5 and fields[4].lower() == "enabled",
            )
        )
    if not devices:
        raise LocalGPUError("nvidia-smi listed no GPU")
    return tuple(devices)


def parse_rocm_smi(text: str) -> tuple[LocalGPU, ...]:
    """The devices of ``rocm-smi --showproductname --showmeminfo vram --json`` (cards
    ``card0``, ``card1``...; memory in bytes as printed). Raises LocalGPUError for text that
    is not that JSON or lists no card."""
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        first = text.strip().splitlines()[0][:80] if text.strip() else ""
        raise LocalGPUError(f"rocm-smi printed {first!r}, not JSON") from None
    cards = doc.items() if isinstance(doc, dict) else ()
    devices = []
    for key, card in cards:
        if not key.startswith("card") or not isinstance(card, dict):
            continue  # "system" holds the driver version
        name = card.get("Card Series", card.get("Card series"))
        total = str(card.get("VRAM Total Memory (B)", ""))
        used = str(card.get("VRAM Total Used Memory (B)", "0"))
        if not _digits(key[4:]) or not isinstance(name, str) or not _digits(total):
            raise LocalGPUError(
                f"rocm-smi's {key} has no 'Card Series' and 'VRAM Total Memory (B)'"
            )
        devices.append(
            LocalGPU(int(key[4:]), _name(name), int(total), int(used) if _digits(used) else 0)
        )
    if not devices:
        raise LocalGPUError("rocm-smi listed no GPU")
    return tuple(sorted(devices, key=lambda d: d.index))


def _digits(text: str) -> bool:
    """A count as the tools print one: ASCII digits only (``isdigit`` alone takes ``²``),
    at most 20 of them."""
    return text.isascii() and text.isdigit() and len(text) <= 20


def _name(text: str) -> str:
    """A device name as printed, made safe to show: printable characters, at most 96."""
    return "".join(c for c in text if c.isprintable())[:96] or "unnamed device"


# --- running the tool --------------------------------------------------------------------------


def run_tool(argv: Sequence[str], timeout_s: float = TIMEOUT_S) -> str | None:
    """The stdout of ``argv``, decoded leniently, or None when its program is not on PATH.
    Raises LocalGPUError when it fails, times out, prints more than ``OUTPUT_LIMIT_BYTES`` or
    exits non-zero (its first line of output in the message)."""
    from kvplan.programs import run_bounded

    program = shutil.which(argv[0])
    if program is None:
        return None
    try:
        done = run_bounded(
            [program, *argv[1:]], timeout_s=timeout_s, limit_bytes=OUTPUT_LIMIT_BYTES
        )
    except OSError as e:
        raise LocalGPUError(f"{argv[0]} could not run: {e.strerror or e}") from None
    if done.timed_out:
        raise LocalGPUError(f"{argv[0]} did not answer within {timeout_s:g} s")
    if done.too_large:
        raise LocalGPUError(f"{argv[0]} printed more than {OUTPUT_LIMIT_BYTES // 1024} KiB")
    if done.returncode != 0:
        raise LocalGPUError(f"{argv[0]} failed (exit {done.returncode}): {done.first_line()}")
    return done.stdout.decode("utf-8", errors="replace")


def read_devices() -> tuple[str, tuple[LocalGPU, ...]]:
    """The tool that answered and the devices it listed: nvidia-smi, else rocm-smi."""
    text = run_tool(NVIDIA_SMI)
    if text is not None:
        return "nvidia-smi", parse_nvidia_smi(text)
    text = run_tool(ROCM_SMI)
    if text is not None:
        return "rocm-smi", parse_rocm_smi(text)
    raise LocalGPUError(
        "--gpu local: neither nvidia-smi nor rocm-smi is on PATH; name the GPU (`kvplan gpus`)"
        " or give --gpu-memory"
    )


def local_gpus() -> LocalGPUs:
    """What ``--gpu local`` plans for on this machine. Runs the tool once per process and
    PATH (the option's note and the lookup both ask)."""
    return _local_gpus(os.environ.get("PATH", ""))


def _local_gpus(path: str) -> LocalGPUs:
    found = _read_once(path)
    if isinstance(found, LocalGPUError):
        raise found  # the same failure again, without running a hung tool twice
    return found


@cache
def _read_once(path: str) -> LocalGPUs | LocalGPUError:
    try:
        tool, devices = read_devices()
        return describe(tool, devices)
    except LocalGPUError as e:
        return e


# --- from devices to the GPU to plan for -------------------------------------------------------


def describe(tool: str, devices: Sequence[LocalGPU]) -> LocalGPUs:
    """The GPU to plan for and the one-line summary, for ``devices`` as ``tool`` listed them.

    Mixed devices: the one with the least memory, said so. MIG: refused, since a MIG
    instance's memory is not in the listing. Raises LocalGPUError."""
    if not devices:
        raise LocalGPUError(f"{tool} listed no GPU")
    mig = [d for d in devices if d.mig_enabled]
    if mig:
        raise LocalGPUError(
            f"GPU {mig[0].index} ({mig[0].name}) has MIG enabled; {tool} does not list a MIG"
            " instance's memory: give --gpu-memory with the instance's size"
        )
    smallest = min(devices, key=lambda d: d.memory_total_bytes)
    gpu, planned = _plan_gpu(tool, smallest)
    groups: dict[tuple[str, int], int] = {}
    for d in devices:
        groups[(d.name, d.memory_total_bytes)] = groups.get((d.name, d.memory_total_bytes), 0) + 1
    if len(groups) == 1:
        found = f"local: {len(devices)} x {smallest.name}, {_mib(smallest.memory_total_bytes)} each"
    else:
        found = "local: " + " + ".join(
            f"{n} x {name} ({_mib(total)})" for (name, total), n in groups.items()
        )
        found += f"; mixed, planning for the smallest, {smallest.name}"
    busy = max(d.memory_used_bytes for d in devices)
    if busy > BUSY_BYTES:
        found += f"; up to {_mib(busy)} already in use"
    return LocalGPUs(tool, tuple(devices), gpu, found + planned)


def _plan_gpu(tool: str, device: LocalGPU) -> tuple[GPU, str]:
    """The GPU to plan for ``device`` and what to add to the summary about its memory."""
    seen = f"{tool}: {device.name}, {device.memory_total_bytes:,} B"
    try:
        entry = catalog_gpu(device.name)
    except UnknownGPUError:
        gpu = custom_gpu(device.memory_total_bytes)
        shown = f"{device.name} (local, not in the catalog)"
        note = "; not in the catalog: memory only, as printed (it includes the driver's reserve)"
        return replace(gpu, name="local", display_name=shown, source=seen), note
    reported = device.memory_total_bytes
    reserve = reported - entry.memory_bytes
    memory = entry.memory_bytes if 0 <= reserve <= DRIVER_RESERVE_BYTES else reported
    note = f"; planned as {entry.name}"
    if memory != reported:
        note += f" with the {_mib(memory)} the runtime reports"
    gpu = replace(
        entry,
        display_name=f"{device.name} (local)",
        memory_bytes=memory,
        aliases=(),
        driver_names=(),
        source=f"{seen}; {entry.source}",
    )
    return gpu, note


def _mib(n_bytes: int) -> str:
    """``81,559 MiB`` when ``n_bytes`` is whole MiB, else the bytes."""
    return f"{n_bytes // MiB:,} MiB" if n_bytes % MiB == 0 else f"{n_bytes:,} B"
