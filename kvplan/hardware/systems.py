"""Systems: GPUs as they are sold and rented, a node at a time, and how they are connected.

A ``System`` says how many GPUs a node holds, how many share one NVLink / NVSwitch / Infinity
Fabric domain (tensor parallelism and expert all-to-all stay inside it), the bandwidth inside
that domain and between nodes, and whether clouds rent it by whole nodes. The figures are data:
``gpu_specs/systems/*.yaml``, each with its public source (docs/hardware.md), read once per
process on the first lookup.

Worked example (HGX H100): 8 GPUs a node, all 8 on NVSwitch at 450 GB/s each way per GPU
(900 GB/s both ways), one 400 Gb/s NIC per GPU between nodes = 50 GB/s.

The links to the tiers below the GPU's memory, for KV cache kept off the GPU: the node's host
memory (``host_memory_bytes``), one GPU's link to it (``host_link_bytes_per_s``: PCIe Gen5 x16
= 64 GB/s each way on HGX H100, NVLink-C2C = 450 GB/s on GB200), the node's local NVMe read
rate (``disk_bytes_per_s``, shared by its GPUs) and, to a remote pool, the network
(``scale_out_bytes_per_s``). 0 means not known (a system built by ``custom_system``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from kvplan.arguments import (
    as_instance,
    as_str,
    check_flags,
    check_ints,
    check_names,
    check_strs,
    wrong_type,
)
from kvplan.errors import KvplanError, SpecError, closest
from kvplan.hardware.gpus import GPU, catalog_gpu, gpu_specs_dir, normalize_gpu_name

_DOCS = "docs/hardware.md"
#: What each key of a system's ``sources`` cites.
SYSTEM_SOURCE_KEYS = ("gpus", "scale_up", "scale_out", "host_memory", "host_link", "disk")
#: The figure each source key of a tier link cites: its source is required when it is given.
_LINK_FIGURES = {
    "host_memory": "host_memory_bytes",
    "host_link": "host_link_bytes_per_s",
    "disk": "disk_bytes_per_s",
}


@dataclass(frozen=True, slots=True)
class System:
    """One node type. Bandwidths are per GPU, one direction, in bytes per second."""

    name: str
    display_name: str
    gpu: GPU
    gpus_per_node: int
    scale_up_gpus: int
    scale_up_bytes_per_s: int
    scale_out_bytes_per_s: int
    rents_by_node: bool
    source: str
    aliases: tuple[str, ...] = ()
    host_memory_bytes: int = 0  # the node's DRAM; 0: not known
    host_link_bytes_per_s: int = 0  # one GPU to host memory, one direction; 0: not known
    disk_bytes_per_s: int = 0  # the node's local NVMe read, all its GPUs together; 0: not known

    def __post_init__(self) -> None:
        check_strs(name=self.name, display_name=self.display_name, source=self.source)
        as_instance(self.gpu, GPU, "gpu", "a GPU")
        check_ints(minimum=1, gpus_per_node=self.gpus_per_node, scale_up_gpus=self.scale_up_gpus)
        check_ints(
            scale_up_bytes_per_s=self.scale_up_bytes_per_s,
            scale_out_bytes_per_s=self.scale_out_bytes_per_s,
            host_memory_bytes=self.host_memory_bytes,
            host_link_bytes_per_s=self.host_link_bytes_per_s,
            disk_bytes_per_s=self.disk_bytes_per_s,
        )
        check_flags(rents_by_node=self.rents_by_node)
        check_names(aliases=self.aliases)

    @property
    def max_tensor_parallel_size(self) -> int:
        """The widest tensor parallelism kept off the network: the scale-up domain, or the
        node for PCIe cards (whose tensor parallelism crosses PCIe inside the node)."""
        return max(self.scale_up_gpus, self.gpus_per_node)

    @property
    def pcie_only(self) -> bool:
        return self.scale_up_gpus == 1


class UnknownSystemError(KvplanError, LookupError):
    """No catalog system has that name; ``suggestions`` holds the closest."""

    def __init__(self, query: str, suggestions: list[str]) -> None:
        self.query = query
        self.suggestions = tuple(suggestions)
        hint = f"; did you mean {', '.join(suggestions)}?" if suggestions else ""
        names = ", ".join(s.name for s in list_systems())
        super().__init__(f"unknown system {query!r}{hint} (known: {names})")


def systems_dir() -> Path:
    """The folder of system files, beside the GPU files."""
    return gpu_specs_dir() / "systems"


def list_systems() -> tuple[System, ...]:
    """Every catalog system, in file order (files by name)."""
    return _catalog()[0]


def find_system(name: str) -> System:
    """A catalog system by name or alias (compared as ``normalize_gpu_name`` keys).
    Raises UnknownSystemError with the nearest names (ArgumentTypeError for a non-str)."""
    key = normalize_gpu_name(as_str(name, "name", "a system's name (a str)"))
    known = _catalog()[1]
    if key in known:
        return known[key]
    close = closest(key, list(known), limit=6, cutoff=0.5)
    raise UnknownSystemError(name, list(dict.fromkeys(known[c].name for c in close))[:3])


def as_system(system: object, name: str = "system") -> System:
    """A System as given, or the catalog system a name resolves to (``find_system``); anything
    else raises ArgumentTypeError (a TypeError) naming the parameter ``name``."""
    if isinstance(system, System):
        return system
    if isinstance(system, str):
        return find_system(system)
    raise wrong_type(name, "a System or a system's name", system)


def system_for_gpu(gpu: GPU) -> System | None:
    """The first catalog system built of ``gpu`` (matched by name), or None."""
    return next((s for s in list_systems() if s.gpu.name == gpu.name), None)


def custom_system(gpu: GPU, gpus_per_node: int, base: System | None = None) -> System:
    """``gpu`` in nodes of ``gpus_per_node``: the scale-up domain and bandwidths of ``base``
    (capped at the node), or for an unknown server, a PCIe-only node with no bandwidths known
    (communication then goes unestimated)."""
    if base is not None:
        return System(
            name=f"{base.name}-{gpus_per_node}",
            display_name=f"{base.display_name}, {gpus_per_node} GPUs a node given",
            gpu=gpu,
            gpus_per_node=gpus_per_node,
            scale_up_gpus=base.scale_up_gpus
            if base.scale_up_gpus > base.gpus_per_node
            else min(base.scale_up_gpus, gpus_per_node),
            scale_up_bytes_per_s=base.scale_up_bytes_per_s,
            scale_out_bytes_per_s=base.scale_out_bytes_per_s,
            rents_by_node=base.rents_by_node,
            source=base.source,
            host_memory_bytes=base.host_memory_bytes,
            host_link_bytes_per_s=base.host_link_bytes_per_s,
            disk_bytes_per_s=base.disk_bytes_per_s,
        )
    return System(
        name=f"{gpu.name}-x{gpus_per_node}",
        display_name=f"{gpus_per_node} x {gpu.display_name} a node",
        gpu=gpu,
        gpus_per_node=gpus_per_node,
        scale_up_gpus=1,
        scale_up_bytes_per_s=0,
        scale_out_bytes_per_s=0,
        rents_by_node=False,
        source="GPUs per node given on the command line",
    )


# --- reading gpu_specs/systems/ ------------------------------------------------------------


@cache
def _catalog() -> tuple[tuple[System, ...], dict[str, System]]:
    systems = load_systems(systems_dir())
    return systems, {normalize_gpu_name(n): s for s in systems for n in (s.name, *s.aliases)}


def load_systems(folder: str | Path) -> tuple[System, ...]:
    """Every system of the ``*.yaml`` files in ``folder``, files by name. Raises SpecError
    naming file, line and field for an invalid entry, an unknown GPU, or a name two systems
    share."""
    from kvplan.files import read_text
    from kvplan.validation import line_of

    systems: list[System] = []
    owner: dict[str, str] = {}
    for path in sorted(Path(folder).glob("*.yaml")):
        for i, system in enumerate(load_system_file(path)):
            for j, label in enumerate((system.name, *system.aliases)):
                key = normalize_gpu_name(label)
                if key in owner:
                    loc: tuple[int | str, ...] = ("systems", i, "name" if j == 0 else "aliases")
                    raise SpecError(
                        str(path),
                        [f"{'.'.join(map(str, loc))}: {label!r} is already a name of {owner[key]}"],
                        [line_of(read_text(path), loc)],
                    )
                owner[key] = system.name
            systems.append(system)
    return tuple(systems)


def load_system_file(path: str | Path) -> tuple[System, ...]:
    """The systems of one file, validated. Raises SpecError naming file, line and field."""
    from kvplan.hardware.gpus import UnknownGPUError
    from kvplan.validation import line_of, read_yaml, validate

    data, text = read_yaml(path)
    model, keys = _file_model()
    checked: Any = validate(model, data, str(path), text, keys, _DOCS)
    systems = []
    for i, e in enumerate(checked.systems):
        try:
            gpu = catalog_gpu(e.gpu)
        except UnknownGPUError as error:
            loc = ("systems", i, "gpu")
            raise SpecError(
                str(path), [f"systems.{i}.gpu: {error}"], [line_of(text, loc)]
            ) from None
        parts = [f"{key}: {citation}" for key, citation in e.sources.items()]
        systems.append(
            System(
                name=e.name,
                display_name=e.display_name,
                gpu=gpu,
                gpus_per_node=e.gpus_per_node,
                scale_up_gpus=e.scale_up_gpus,
                scale_up_bytes_per_s=e.scale_up_bytes_per_s,
                scale_out_bytes_per_s=e.scale_out_bytes_per_s,
                rents_by_node=e.rents_by_node,
                source="; ".join([*parts, *e.notes]),
                aliases=e.aliases,
                host_memory_bytes=e.host_memory_bytes or 0,
                host_link_bytes_per_s=e.host_link_bytes_per_s or 0,
                disk_bytes_per_s=e.disk_bytes_per_s or 0,
            )
        )
    return tuple(systems)


def _check_sources(sources: dict[str, str]) -> dict[str, str]:
    missing = [k for k in SYSTEM_SOURCE_KEYS if k not in sources and k not in _LINK_FIGURES]
    unknown = [k for k in sources if k not in SYSTEM_SOURCE_KEYS]
    if unknown:
        raise ValueError(
            f"{unknown[0]!r} names no figure; keys are {', '.join(SYSTEM_SOURCE_KEYS)}"
        )
    if missing:
        raise ValueError(f"no source for {', '.join(missing)}; every figure needs its source")
    return sources


@cache
def _file_model() -> tuple[Any, frozenset[str]]:
    """The pydantic model of a systems file and its key names, built on first use."""
    from typing import Annotated

    from pydantic import AfterValidator, BaseModel, ConfigDict, StrictBool, model_validator

    from kvplan.hardware.fields import Label as label
    from kvplan.hardware.fields import Positive as positive
    from kvplan.hardware.fields import Text as text
    from kvplan.validation import field_names

    class Entry(BaseModel):
        model_config = ConfigDict(frozen=True, extra="forbid")

        name: label
        display_name: text
        gpu: text
        aliases: tuple[label, ...] = ()
        gpus_per_node: positive
        scale_up_gpus: positive
        scale_up_bytes_per_s: positive
        scale_out_bytes_per_s: positive
        rents_by_node: StrictBool
        # the tier links: optional (0, not known), each cited in ``sources`` when given
        host_memory_bytes: positive | None = None
        host_link_bytes_per_s: positive | None = None
        disk_bytes_per_s: positive | None = None
        sources: Annotated[dict[str, text], AfterValidator(_check_sources)]
        notes: tuple[text, ...] = ()

        @model_validator(mode="after")
        def _cited(self) -> Entry:
            for key, figure in _LINK_FIGURES.items():
                if getattr(self, figure) is not None and key not in self.sources:
                    raise ValueError(f"no source for {figure}; every figure needs its source")
            return self

    class File(BaseModel):
        model_config = ConfigDict(frozen=True, extra="forbid")

        systems: tuple[Entry, ...]

    return File, frozenset(field_names(File))
