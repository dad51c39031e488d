"""Accelerators: memory as the runtime reports it, bandwidth and peak FLOP/s, and lookup.

``memory_bytes`` is the *total* the serving runtime sees (``torch.cuda.mem_get_info()[1]``,
``total_memory``), not the marketing figure: an "80 GB" H100 reports 79.19 GiB. Engines size
their budgets from that number, so kvplan does too.

The figures are data: ``gpu_specs/*.yaml``, one file per family, each figure with its source
(docs/hardware.md). They are read and validated once per process, on the first lookup, so
importing this module (for the ``GPU`` type) costs neither YAML nor pydantic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any, NoReturn

from kvplan.arguments import (
    as_instance,
    as_int,
    check_flags,
    check_ints,
    check_names,
    check_strs,
)
from kvplan.errors import KvplanError, SpecError, closest

#: Where the allowed keys of a GPU file are listed, named in its errors.
_DOCS = "docs/hardware.md"

#: What each key of a GPU's ``sources`` cites. A key may join several with "/"
#: (``bandwidth/FLOPs``); every figure a GPU has is cited exactly once.
SOURCE_KEYS: dict[str, tuple[str, ...]] = {
    "memory": ("memory_bytes",),
    "bandwidth": ("bandwidth_bytes_per_s",),
    "FLOPs": ("bf16_flops", "fp8_flops"),
    "BF16": ("bf16_flops",),
    "FP8": ("fp8_flops",),
    "FP4": ("fp4_flops",),
}
_FIGURES = ("memory_bytes", "bandwidth_bytes_per_s", "bf16_flops", "fp8_flops", "fp4_flops")


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
    driver_names: tuple[str, ...] = ()
    fp4_flops: int | None = None  # dense fp4 tensor peak (Blackwell, MI355X); None without

    def __post_init__(self) -> None:
        check_strs(
            name=self.name, display_name=self.display_name, vendor=self.vendor, source=self.source
        )
        check_ints(
            memory_bytes=self.memory_bytes,
            bandwidth_bytes_per_s=self.bandwidth_bytes_per_s,
            bf16_flops=self.bf16_flops,
        )
        check_ints(optional=True, fp8_flops=self.fp8_flops, fp4_flops=self.fp4_flops)
        check_flags(unified_memory=self.unified_memory)
        check_names(aliases=self.aliases, driver_names=self.driver_names)


@dataclass(frozen=True, slots=True)
class GPUFile:
    """One validated ``gpu_specs/*.yaml`` file: its place in the catalog and its GPUs."""

    path: str
    order: int
    gpus: tuple[GPU, ...]


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


@cache
def gpu_specs_dir() -> Path:
    """The folder of GPU files: inside the installed package, or the source checkout's."""
    from kvplan.files import bundled_dir

    return bundled_dir("gpu_specs")


def list_gpus() -> tuple[GPU, ...]:
    """The catalog, in its curated order (NVIDIA data center, workstation, AMD, Apple):
    files by ascending ``order``, GPUs as each file lists them."""
    return _catalog()[0]


#: What ``--gpu`` names to plan for the GPUs of this machine (kvplan.hardware.local).
LOCAL = "local"

#: Brand words a driver prints before the model (``NVIDIA GeForce RTX 4090``, ``Tesla T4``,
#: ``AMD Instinct MI300X``); dropped from the front of a name, so the vendor word is optional.
_BRAND_WORDS = frozenset({"nvidia", "geforce", "tesla", "amd", "instinct", "apple"})
_SEPARATORS = re.compile(r"[\s_-]+")
#: llama.cpp's device label: the backend device and the product, ``MTL0 (Apple M5 Max)``,
#: ``CUDA0 (NVIDIA H100 80GB HBM3)``; the product in the brackets is looked up.
_BACKEND_DEVICE = re.compile(r"\s*(?:cuda|rocm|hip|mtl|metal|vulkan|sycl)\d*\s*\((.+)\)\s*", re.I)


#: The PCI database's spelling that rocm-smi and lspci print: the chip, then the product in
#: square brackets (``Aldebaran/MI200 [Instinct MI250X/MI250]``); the product is looked up.
_PCI_PRODUCT = re.compile(r"[^\[\]]*\[([^\[\]]+)\]\s*")


def normalize_gpu_name(name: str) -> str:
    """The key a GPU name is looked up by: lower case, each run of spaces, dashes and
    underscores one dash, leading brand words dropped.

    ``"NVIDIA A100-SXM4-80GB"`` and ``"a100 sxm4 80gb"`` both give ``"a100-sxm4-80gb"``;
    ``"NVIDIA GeForce RTX 4090"`` gives ``"rtx-4090"``; llama.cpp's ``"MTL0 (Apple M5 Max)"``
    gives ``"m5-max"``; the PCI database's ``"Aldebaran/MI200 [Instinct MI250X/MI250]"``
    gives ``"mi250x/mi250"``."""
    device = _BACKEND_DEVICE.fullmatch(name) or _PCI_PRODUCT.fullmatch(name)
    if device is not None:
        name = device.group(1)
    words = _SEPARATORS.sub(" ", name.strip().lower()).split()
    while len(words) > 1 and words[0] in _BRAND_WORDS:
        words.pop(0)
    return "-".join(words)


def catalog_gpu(name: str) -> GPU:
    """A catalog GPU by name, alias or the product name its driver prints (``NVIDIA H100 80GB
    HBM3``, ``Tesla T4``, ``AMD Instinct MI300X``), compared as ``normalize_gpu_name`` keys.
    Raises UnknownGPUError with the nearest names. ``--gpu local`` is not a catalog name:
    ``kvplan.hardware.lookup.find_gpu`` takes it too."""
    key = normalize_gpu_name(name)
    known = _catalog()[1]
    if key in known:
        return known[key]
    matched = _match_words(key)
    if len(matched) == 1:
        return matched[0]
    close = closest(key, list(known), limit=6, cutoff=0.5)
    named = [g.name for g in matched] + [known[c].name for c in close]
    raise UnknownGPUError(name, list(dict.fromkeys(named))[:3])


#: Memory technologies a driver adds to a product name (``H100 80GB HBM3``, ``GH200 144G
#: HBM3e``): they tell no two catalog GPUs apart, so a name reads the same without them.
_MEMORY_KINDS = frozenset({"hbm2", "hbm2e", "hbm3", "hbm3e", "gddr6", "gddr6x", "gddr7"})
_SXM = re.compile(r"sxm\d*")  # SXM4 (A100), SXM5 (H100), SXM6 (B300): the socket, one word
_SIZE = re.compile(r"(\d+)g(?:b)?")  # 80GB, 144G: memory sizes, one spelling


def gpu_words(key: str) -> frozenset[str]:
    """The words of a ``normalize_gpu_name`` key, in one spelling each, order dropped:
    ``sxm4``/``sxm5`` read ``sxm``, ``144g`` reads ``144gb``, memory kinds (``hbm3``) and
    punctuation are dropped. ``"a100-80gb-pcie"`` and ``"a100-pcie-80gb"`` give one set."""
    words = set()
    for raw in key.split("-"):
        word = re.sub(r"[^a-z0-9.+/]", "", raw)
        size = _SIZE.fullmatch(word)
        if size is not None:
            word = f"{size.group(1)}gb"
        elif _SXM.fullmatch(word):
            word = "sxm"
        if word and word not in _MEMORY_KINDS:
            words.add(word)
    return frozenset(words)


def _match_words(key: str) -> list[GPU]:
    """The catalog GPUs a name reaches by its words, whatever their order and spelling: each
    word of the name is a word of one of the GPU's names (its name, aliases, driver names,
    display name), and the name holds every word of the GPU's catalog name that carries a
    digit (the model, ``h100``; a memory size the name gives, ``40gb``).

    ``NVIDIA A100 80GB PCIe`` reaches ``a100-pcie-80gb`` and nothing else; ``A100 PCIe``
    reaches nothing (no size, two boards); ``H100 SXM5 80GB HBM3`` reaches ``h100-sxm``."""
    words = gpu_words(key)
    if not words:
        return []
    catalog = _catalog_words()
    # One of a GPU's names in other words first: "H100 80G HBM3" is the alias h100-80gb,
    # though the words of h100-pcie's "H100 PCIe 80GB" hold it too.
    same = [g for g, labels, _, _ in catalog if words in labels]
    if len(same) == 1:
        return same
    return [g for g, _, known, required in catalog if words <= known and required <= words]


@cache
def _catalog_words() -> tuple[
    tuple[GPU, frozenset[frozenset[str]], frozenset[str], frozenset[str]], ...
]:
    """Each catalog GPU with the word sets of its names, all their words together, and the
    words of its catalog name that carry a digit."""
    out = []
    for gpu in _catalog()[0]:
        labels = frozenset(
            gpu_words(normalize_gpu_name(label)) for label in (*_labels(gpu), gpu.display_name)
        )
        required = frozenset(w for w in gpu_words(gpu.name) if any(c.isdigit() for c in w))
        out.append((gpu, labels, frozenset().union(*labels), required))
    return tuple(out)


def custom_gpu(memory_bytes: int, base: GPU | None = None) -> GPU:
    """A device described by its memory alone (named by it: ``a 16.00 GiB device``), or a
    catalog GPU with its memory replaced (``NVIDIA L4 24GB, 20.00 GiB given``).

    Raises UnitError unless ``memory_bytes`` is an integer of at least 1 byte (a wrong type:
    ArgumentTypeError, a TypeError)."""
    from kvplan.units import format_bytes

    as_int(memory_bytes, "memory_bytes", minimum=1)
    if base is not None:
        as_instance(base, GPU, "base", "a GPU or None")
    shown = format_bytes(memory_bytes)  # binary units, labelled: 16GiB -> "16.00 GiB"
    if base is not None:
        return replace(
            base,
            display_name=f"{base.display_name}, {shown} given",
            memory_bytes=memory_bytes,
            source="memory given on the command line",
            aliases=(),
        )
    return GPU(
        name="custom",
        display_name=f"a {shown} device",
        vendor="unknown",
        memory_bytes=memory_bytes,
        bandwidth_bytes_per_s=0,
        bf16_flops=0,
        fp8_flops=None,
        source="memory given on the command line",
    )


# --- reading gpu_specs/ ------------------------------------------------------------------------


@cache
def _catalog() -> tuple[tuple[GPU, ...], dict[str, GPU]]:
    # The bundled files are checked by the test suite (load_gpu_specs on gpu_specs/ equals
    # this), so a lookup builds them without pydantic; the cross-file checks still run.
    gpus = load_gpu_specs(gpu_specs_dir(), checked=True)
    return gpus, {normalize_gpu_name(label): g for g in gpus for label in _labels(g)}


def _labels(gpu: GPU) -> tuple[str, ...]:
    """Every name ``gpu`` is found by: its name, aliases and driver names."""
    return (gpu.name, *gpu.aliases, *gpu.driver_names)


def load_gpu_specs(folder: str | Path, *, checked: bool = False) -> tuple[GPU, ...]:
    """Every GPU of the ``*.yaml`` files in ``folder``: files by ascending ``order``, GPUs in
    file order. Raises SpecError naming file, line and field for an invalid file, two files
    with one ``order``, or a name, alias or driver name that two GPUs share (compared as
    ``normalize_gpu_name`` keys), across files too. ``checked``: the files were validated
    already (the bundled ones), so each is read without its per-file check."""
    paths = sorted(Path(folder).glob("*.yaml"))
    read = _read_checked_file if checked else load_gpu_file
    files = sorted((read(p) for p in paths), key=lambda f: f.order)
    owner: dict[str, tuple[str, int, str]] = {}  # key -> file, position, whose name
    orders: dict[int, str] = {}
    for f in files:
        if f.order in orders:
            _refuse(f, ("order",), f"{f.order} is also the order of {orders[f.order]}")
        orders[f.order] = f.path
        for i, gpu in enumerate(f.gpus):
            labels = [
                (("name",), gpu.name),
                *((("aliases", j), a) for j, a in enumerate(gpu.aliases)),
                *((("driver_names", d), d) for d in gpu.driver_names),
            ]
            # One GPU may reach a key twice (the alias tesla-t4 is its name t4); two may not.
            here = (f.path, i, f"{gpu.name} ({f.path})")
            for where, label in labels:
                key = normalize_gpu_name(label)
                if key == LOCAL or owner.get(key, here)[:2] != here[:2]:
                    taken = "reserved for --gpu local" if key == LOCAL else owner[key][2]
                    _refuse(f, ("gpus", i, *where), f"{label!r} is already a name of {taken}")
                owner[key] = here
    return tuple(g for f in files for g in f.gpus)


def _refuse(f: GPUFile, loc: tuple[int | str, ...], problem: str) -> NoReturn:
    from kvplan.files import read_text
    from kvplan.validation import line_of

    field = ".".join(str(part) for part in loc)
    raise SpecError(f.path, [f"{field}: {problem}"], [line_of(read_text(f.path), loc)])


def load_gpu_file(path: str | Path) -> GPUFile:
    """One GPU file, validated. Raises SpecError naming file, line and field."""
    from kvplan.validation import read_yaml, validate

    data, text = read_yaml(path)
    model, keys = _file_model()
    checked: Any = validate(model, data, str(path), text, keys, _DOCS)
    return GPUFile(str(path), checked.order, tuple(_to_gpu(e.model_dump()) for e in checked.gpus))


def _read_checked_file(path: Path) -> GPUFile:
    """A GPU file validated already: its GPUs built as ``load_gpu_file`` builds them."""
    from kvplan.validation import read_yaml

    data, _ = read_yaml(path)
    return GPUFile(str(path), data["order"], tuple(_to_gpu(e) for e in data.get("gpus", ())))


def _to_gpu(entry: dict[str, Any]) -> GPU:
    """A GPU of one checked entry of a GPU file (keys as docs/hardware.md lists them)."""
    parts = [f"{key}: {citation}" for key, citation in entry["sources"].items()]
    return GPU(
        name=entry["name"],
        display_name=entry["display_name"],
        vendor=entry["vendor"],
        memory_bytes=entry["memory_bytes"],
        bandwidth_bytes_per_s=entry["bandwidth_bytes_per_s"],
        bf16_flops=entry["bf16_flops"],
        fp8_flops=entry["fp8_flops"],
        source="; ".join([*parts, *entry.get("notes", ())]),
        aliases=tuple(entry.get("aliases", ())),
        unified_memory=entry.get("unified_memory", False),
        driver_names=tuple(entry.get("driver_names", {})),
        fp4_flops=entry.get("fp4_flops"),
    )


def _check_sources(sources: dict[str, str], figures: dict[str, Any]) -> dict[str, str]:
    """``sources`` when it cites each figure present in ``figures`` exactly once."""
    cited: dict[str, str] = {}
    for key in sources:
        for part in key.split("/"):
            if part not in SOURCE_KEYS:
                allowed = ", ".join(SOURCE_KEYS)
                raise ValueError(f"{part!r} names no figure; keys are {allowed}, joined by /")
            for figure in SOURCE_KEYS[part]:
                if figure in cited and figures.get(figure) is not None:
                    raise ValueError(f"{figure} is cited twice, by {cited[figure]!r} and {key!r}")
                cited[figure] = key
    missing = [f for f in _FIGURES if figures.get(f) is not None and f not in cited]
    if missing:
        raise ValueError(f"no source for {', '.join(missing)}; every figure needs its source")
    return sources


#: A product name as a driver prints it: letters, digits, spaces and ``-_.+()/``.
_DRIVER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9 _.+()/-]{0,95}")


def _check_driver_names(names: dict[str, str]) -> dict[str, str]:
    """``driver_names`` (printed name -> where it was seen) when each name is printable."""
    for name in names:
        if not _DRIVER_NAME.fullmatch(name):
            raise ValueError(
                f"{name[:70]!r}: a driver name is 1 to 96 letters, digits, spaces or"
                " '-_.+()/', as nvidia-smi or rocm-smi print it"
            )
    return names


@cache
def _file_model() -> tuple[Any, frozenset[str]]:
    """The pydantic model of a GPU file and its key names.

    Built on the first lookup rather than at import: every engine imports this module for the
    ``GPU`` type, and ``kvplan --help`` must not pay for pydantic."""
    from typing import Annotated

    from pydantic import (
        AfterValidator,
        BaseModel,
        ConfigDict,
        StrictBool,
        StrictInt,
        ValidationInfo,
    )
    from pydantic import field_validator as check

    from kvplan.hardware.fields import Label as label
    from kvplan.hardware.fields import Positive as positive
    from kvplan.hardware.fields import Text as text
    from kvplan.validation import field_names

    class Entry(BaseModel):
        model_config = ConfigDict(frozen=True, extra="forbid")

        name: label
        display_name: text
        vendor: label
        aliases: tuple[label, ...] = ()
        memory_bytes: positive
        bandwidth_bytes_per_s: positive
        bf16_flops: positive
        fp8_flops: positive | None
        fp4_flops: positive | None = None
        unified_memory: StrictBool = False
        driver_names: Annotated[dict[str, text], AfterValidator(_check_driver_names)] = {}
        sources: dict[str, text]
        notes: tuple[text, ...] = ()

        @check("sources")
        @classmethod
        def _cited(cls, sources: dict[str, str], info: ValidationInfo) -> dict[str, str]:
            return _check_sources(sources, info.data)

    class File(BaseModel):
        """A GPU file: ``order`` and ``gpus`` now; ``systems`` and ``prices`` are kept for
        nodes, interconnects and prices (sibling keys, docs/hardware.md)."""

        model_config = ConfigDict(frozen=True, extra="forbid")

        order: StrictInt
        gpus: tuple[Entry, ...] = ()

    return File, frozenset(field_names(File))
