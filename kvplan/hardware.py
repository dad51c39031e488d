"""Accelerators: memory as the runtime reports it, bandwidth and peak FLOP/s, and lookup.

``memory_bytes`` is the *total* the serving runtime sees (``torch.cuda.mem_get_info()[1]``,
``total_memory``), not the marketing figure: an "80 GB" H100 reports 79.19 GiB. Engines size
their budgets from that number, so kvplan does too.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvplan.errors import KvplanError, closest


@dataclass(frozen=True, slots=True)
class GPU:
    """One accelerator model. Rates are dense (no sparsity), per device."""

    name: str
    display_name: str
    vendor: str
    memory_bytes: int
    bandwidth_bytes_per_s: int
    bf16_flops: int
    fp8_flops: int | None
    source: str
    aliases: tuple[str, ...] = ()
    unified_memory: bool = False


class UnknownGPUError(KvplanError, LookupError):
    """No catalog GPU has that name; ``suggestions`` holds the closest."""

    def __init__(self, query: str, suggestions: list[str]) -> None:
        self.query = query
        self.suggestions = tuple(suggestions)
        hint = f"; did you mean {', '.join(suggestions)}?" if suggestions else ""
        super().__init__(
            f"unknown GPU {query!r}{hint} (`kvplan gpus` lists them; --gpu-memory 24GiB"
            " describes any other device)"
        )


def list_gpus() -> tuple[GPU, ...]:
    """The catalog, in its curated order (NVIDIA data center, workstation, AMD, Apple)."""
    from kvplan.gpu_data import GPUS

    return GPUS


def find_gpu(name: str) -> GPU:
    """A catalog GPU by name or alias, case-insensitive (``h100`` is the H100 SXM 80GB)."""
    key = name.strip().lower()
    known: dict[str, GPU] = {}
    for gpu in list_gpus():
        for label in (gpu.name, *gpu.aliases):
            known[label.lower()] = gpu
    if key in known:
        return known[key]
    close = closest(key, list(known), limit=6, cutoff=0.5)
    raise UnknownGPUError(name, list(dict.fromkeys(known[c].name for c in close))[:3])


def custom_gpu(memory_bytes: int, base: GPU | None = None) -> GPU:
    """A device described by its memory alone, or a catalog GPU with its memory replaced.

    Raises UnitError unless ``memory_bytes`` is an integer of at least 1 byte."""
    from kvplan.arguments import as_int

    as_int(memory_bytes, "gpu memory", minimum=1)
    if base is not None:
        return replace(
            base,
            display_name=f"{base.display_name}, {memory_bytes:,} B given",
            memory_bytes=memory_bytes,
            source="memory given on the command line",
            aliases=(),
        )
    return GPU(
        name="custom",
        display_name=f"a device of {memory_bytes:,} B",
        vendor="unknown",
        memory_bytes=memory_bytes,
        bandwidth_bytes_per_s=0,
        bf16_flops=0,
        fp8_flops=None,
        source="memory given on the command line",
    )
