from __future__ import annotations

import pytest

from kvplan.hardware import UnknownGPUError, custom_gpu, find_gpu, list_gpus
from kvplan.units import GiB, format_bytes

REQUIRED = [
    "h100-sxm",
    "h100-pcie",
    "h100-nvl",
    "h200",
    "h20",
    "b200",
    "b300",
    "gb200",
    "a100-40gb",
    "a100-80gb",
    "a10g",
    "l4",
    "l40s",
    "v100-32gb",
    "t4",
    "rtx-3090",
    "rtx-4090",
    "rtx-5090",
    "rtx-6000-ada",
    "rtx-pro-6000",
    "mi300x",
    "mi325x",
    "mi355x",
]


def test_catalog_size_and_required_entries() -> None:
    names = {g.name for g in list_gpus()}
    assert len(names) >= 25
    assert set(REQUIRED) <= names
    assert any(g.vendor == "apple" and g.unified_memory for g in list_gpus())


def test_names_and_aliases_unique() -> None:
    seen: dict[str, str] = {}
    for g in list_gpus():
        for label in (g.name, *g.aliases):
            assert seen.setdefault(label.lower(), g.name) == g.name, label


@pytest.mark.parametrize("gpu", list_gpus(), ids=lambda g: g.name)
def test_every_entry_is_plausible(gpu: object) -> None:
    from kvplan.hardware import GPU

    assert isinstance(gpu, GPU)
    assert 8 * GiB < gpu.memory_bytes < 600 * GiB
    assert gpu.bandwidth_bytes_per_s > 10**11
    assert gpu.bf16_flops > 10**12
    assert gpu.fp8_flops is None or gpu.fp8_flops >= gpu.bf16_flops
    assert gpu.source


def test_h100_reports_79_19_gib_not_80() -> None:
    h100 = find_gpu("h100")
    assert h100.name == "h100-sxm"
    assert format_bytes(h100.memory_bytes) == "79.19 GiB"


@pytest.mark.parametrize(("alias", "name"), [("H100", "h100-sxm"), ("a100", "a100-80gb")])
def test_aliases(alias: str, name: str) -> None:
    assert find_gpu(alias).name == name


def test_unknown_gpu_suggests() -> None:
    with pytest.raises(UnknownGPUError, match="did you mean h100-sxm"):
        find_gpu("h100-sxn")


def test_custom_gpu() -> None:
    assert custom_gpu(24 * GiB).memory_bytes == 24 * GiB
    based = custom_gpu(20 * GiB, find_gpu("l4"))
    assert based.memory_bytes == 20 * GiB
    assert based.bandwidth_bytes_per_s == find_gpu("l4").bandwidth_bytes_per_s
