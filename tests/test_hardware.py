from __future__ import annotations

import re
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from kvplan.errors import SpecError
from kvplan.hardware.gpus import (
    GPU,
    UnknownGPUError,
    custom_gpu,
    gpu_specs_dir,
    gpu_words,
    list_gpus,
    load_gpu_file,
    load_gpu_specs,
    normalize_gpu_name,
)
from kvplan.hardware.lookup import find_gpu
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

MiB = 2**20
GB = 10**9  # bandwidth: GB/s; FLOP/s: GFLOP/s

# The catalog in its curated order, in the units the sources cite: memory in MiB as torch
# prints total_memory (bytes // 2**20; Apple: the working set), bandwidth in GB/s, dense
# peaks in GFLOP/s (a datasheet's sparse figure halved: H100 SXM bf16 1979/2 = 989.5 TFLOP/s).
CATALOG = [
    # name, memory MiB, GB/s, bf16 GFLOP/s, fp8 GFLOP/s
    ("h100-sxm", 81_090, 3_350, 989_500, 1_979_000),  # fp8 3958/2
    ("h100-pcie", 81_008, 2_000, 756_500, 1_513_000),  # 1513/2, 3026/2
    ("h100-nvl", 95_324, 3_900, 835_500, 1_670_500),  # 93.09 GiB x 1024 = 95324 MiB
    ("h200", 143_156, 4_800, 989_500, 1_979_000),
    ("h200-nvl", 143_156, 4_800, 835_500, 1_670_500),  # smi 143771 as H200 SXM; 1671/2, 3341/2
    ("h20", 97_285, 4_000, 148_000, 296_000),
    ("h800", 81_090, 3_350, 989_500, 1_979_000),  # smi 81559 as H100 SXM; H100's rates
    ("gh200", 97_285, 4_000, 989_500, 1_979_000),  # smi 97871 as H20 (96GB HBM3)
    ("b200", 182_642, 8_000, 2_250_000, 4_500_000),  # 4.5 PF sparse / 2
    ("b300", 274_115, 8_000, 2_250_000, 4_500_000),  # 267.69 GiB x 1024 = 274114.6 -> 274115
    ("gb200", 188_733, 8_000, 2_500_000, 5_000_000),
    ("a100-40gb", 40_335, 1_555, 312_000, None),
    ("a100-80gb", 81_050, 2_039, 312_000, None),
    ("a100-pcie-40gb", 40_326, 1_555, 312_000, None),
    ("a100-pcie-80gb", 81_050, 1_935, 312_000, None),  # smi 81920 as A100 SXM4 80GB
    ("a10g", 22_587, 600, 70_000, None),
    ("a10", 22_587, 600, 125_000, None),  # 250/2
    ("a40", 45_416, 696, 149_700, None),  # 14.5 Gb/s x 384 bit / 8 = 696 GB/s; 299.4/2
    ("l4", 22_559, 300, 121_000, 242_500),  # 242/2, 485/2
    ("l40s", 45_589, 864, 362_050, 733_000),
    ("l40", 45_589, 864, 181_050, 362_000),
    ("v100-16gb", 16_160, 900, 125_000, None),  # FP16 tensor peak
    ("v100-32gb", 32_510, 900, 125_000, None),
    ("t4", 15_095, 320, 65_000, None),
    ("rtx-3090", 24_259, 936, 71_000, None),
    ("rtx-4080", 16_375, 717, 97_500, 194_900),  # smi 16376 - 1 MiB; see the 716.8 GB/s below
    ("rtx-4090", 24_563, 1_008, 165_200, 330_300),
    ("rtx-5080", 16_302, 960, 112_600, 225_100),  # 30 Gb/s x 256 bit / 8 = 960 GB/s
    ("rtx-5090", 32_606, 1_792, 209_500, 419_000),  # nvidia-smi 32607 - 1 MiB
    ("rtx-a6000", 48_676, 768, 154_800, None),  # 16 Gb/s x 384 bit / 8 = 768 GB/s; 309.7/2
    ("rtx-6000-ada", 48_622, 960, 364_250, 728_500),
    ("rtx-pro-6000", 97_250, 1_792, 503_800, 1_007_600),
    ("mi300x", 196_592, 5_300, 1_307_400, 2_614_900),  # 192 GiB - 16 MiB = 196592 MiB
    ("mi325x", 262_128, 6_000, 1_307_400, 2_614_900),  # 256 GiB - 16 MiB
    ("mi355x", 294_896, 8_000, 2_516_600, 5_033_200),  # 288 GiB - 16 MiB
    ("mi250x", 65_520, 1_638, 191_500, None),  # one GCD: 64 GiB - 16 MiB; 3276.8/2; 383/2
    ("m2-ultra-192gb", 147_456, 800, 27_200, None),  # 75% of 192 GiB = 144 GiB
    ("m3-max-128gb", 98_304, 400, 14_200, None),  # 96 GiB
    ("m4-max-128gb", 98_304, 546, 16_100, None),
    ("m3-ultra-512gb", 475_136, 819, 28_400, None),  # 464 GiB
    # macOS's default working set: 2/3 up to 36 GB, then max(3/4, memory - 48 GiB)
    ("m4-pro-24gb", 16_384, 273, 8_050, None),  # 2/3 x 24 GiB = 16 GiB
    ("m4-pro-48gb", 36_864, 273, 8_050, None),  # 3/4 x 48 GiB = 36 GiB
    ("m4-pro-64gb", 49_152, 273, 8_050, None),  # 3/4 x 64 GiB = 48 GiB
    ("m4-max-36gb", 24_576, 410, 12_900, None),  # 2/3 x 36 GiB = 24 GiB
    ("m4-max-48gb", 36_864, 546, 16_100, None),  # 3/4 x 48 GiB = 36 GiB
    ("m4-max-64gb", 49_152, 546, 16_100, None),  # 3/4 x 64 GiB = 48 GiB
    ("m3-ultra-96gb", 73_728, 819, 21_300, None),  # 3/4 x 96 GiB = 72 GiB
    ("m3-ultra-256gb", 212_992, 819, 28_400, None),  # 256 - 48 = 208 GiB > 3/4 x 256 = 192
    # M5 (macOS 26): ceil(f x memory / 16 KiB) pages of 16 KiB = 1/64 MiB; FLOPs 4 x the M4
    ("m5-pro-24gb", Fraction(1_163_920, 64), 307, 32_200, None),  # 0.74 x 1,572,864 pages
    ("m5-pro-48gb", Fraction(2_453_668, 64), 307, 32_200, None),  # 0.78 x 3,145,728; 4 x 8,050
    ("m5-pro-64gb", Fraction(3_397_387, 64), 307, 32_200, None),  # 0.81 x 4,194,304
    ("m5-max-36gb", Fraction(1_840_251, 64), 460, 51_600, None),  # 0.78 x 2,359,296; 4 x 12,900
    ("m5-max-48gb", Fraction(2_453_668, 64), 614, 64_400, None),  # 4 x 16,100
    ("m5-max-64gb", Fraction(3_397_387, 64), 614, 64_400, None),
    ("m5-max-128gb", Fraction(7_046_431, 64), 614, 64_400, None),  # 0.84 x 8,388,608
    ("m5-ultra-256gb", 212_992, 1_200, 128_800, None),  # 256 - 48 GiB (lower bound); 2 x 64,400
]


def test_catalog_size_and_required_entries() -> None:
    names = {g.name for g in list_gpus()}
    assert len(names) >= 25
    assert set(REQUIRED) <= names
    assert any(g.vendor == "apple" and g.unified_memory for g in list_gpus())


def test_curated_order_is_kept() -> None:
    assert [g.name for g in list_gpus()] == [row[0] for row in CATALOG]


@pytest.mark.parametrize(
    ("name", "memory_mib", "bandwidth_gb_s", "bf16_gflops", "fp8_gflops"),
    CATALOG,
    ids=[row[0] for row in CATALOG],
)
def test_figures_equal_the_hand_table(
    name: str,
    memory_mib: int | Fraction,
    bandwidth_gb_s: int,
    bf16_gflops: int,
    fp8_gflops: int | None,
) -> None:
    gpu = find_gpu(name)
    assert gpu.memory_bytes == memory_mib * MiB
    # two datasheet bandwidths are not whole GB/s: RTX 4080 22.4 Gb/s x 256 bit / 8 = 716.8,
    # MI250X 3276.8 GB/s / 2 GCDs = 1638.4
    fraction = {"rtx-4080": -Fraction(2, 10), "mi250x": Fraction(4, 10)}.get(name, 0)
    assert gpu.bandwidth_bytes_per_s == (bandwidth_gb_s + fraction) * GB
    assert gpu.bf16_flops == bf16_gflops * GB
    assert gpu.fp8_flops == (None if fp8_gflops is None else fp8_gflops * GB)


PAGE = 16 * 1024  # the macOS page on Apple silicon


def macos26_working_set(memory_gib: int, percent: int) -> int:
    """macOS 26's default GPU working set: percent of the memory, rounded up to whole pages."""
    pages = memory_gib * GiB // PAGE
    return -(-pages * percent // 100) * PAGE


@pytest.mark.parametrize(
    ("memory_gib", "percent", "logged_bytes"),
    [
        (16, 74, 12_713_115_648),  # llama.cpp mem_total=12713115648 on a 16 GB M4
        (32, 78, 26_800_603_136),  # Metal recommendedMaxWorkingSetSize() on a 32 GB M2 Max
    ],
)
def test_macos26_rule_gives_the_logged_bytes(
    memory_gib: int, percent: int, logged_bytes: int
) -> None:
    # 16 GiB = 1,048,576 pages x 0.74 = 775,946.24 -> 775,947 pages x 16384 = 12,713,115,648
    assert macos26_working_set(memory_gib, percent) == logged_bytes


@pytest.mark.parametrize(
    ("name", "memory_gib", "percent", "logged_mb"),
    [
        ("m5-pro-24gb", 24, 74, "19069.67"),  # MTL0 (Apple M5 Pro)
        ("m5-pro-48gb", 48, 78, "40200.90"),  # MTL0 (Apple M5 Max) 48 GB
        ("m5-pro-64gb", 64, 81, "55662.79"),  # 64 GB M3 Max on current macOS
        ("m5-max-36gb", 36, 78, "30150.67"),  # 36 GB M3 Max on current macOS
        ("m5-max-48gb", 48, 78, "40200.90"),
        ("m5-max-64gb", 64, 81, "55662.79"),
        ("m5-max-128gb", 128, 84, "115448.73"),  # 107.52 GiB on a stock M5 Max 128 GB
    ],
)
def test_m5_memory_is_the_macos26_working_set(
    name: str, memory_gib: int, percent: int, logged_mb: str
) -> None:
    """M5 Macs ship with macOS 26: the entry is its default working set, as llama.cpp prints
    it in MB of 10^6 B."""
    memory = find_gpu(name).memory_bytes
    assert memory == macos26_working_set(memory_gib, percent)
    assert f"{memory / 10**6:.2f}" == logged_mb


def test_m5_ultra_memory_is_the_older_rule_as_a_lower_bound() -> None:
    # no macOS 26 log above 128 GB: 256 GiB - 48 GiB = 208 GiB (> 3/4 x 256 = 192 GiB), below
    # the 0.84 x 256 GiB = 215.04 GiB that the 128 GB fraction would give
    memory = find_gpu("m5-ultra-256gb").memory_bytes
    assert memory == 208 * GiB == 223_338_299_392
    assert memory < macos26_working_set(256, 84)


@pytest.mark.parametrize(
    ("name", "memory_bytes"),
    [
        ("h100-sxm", 85_029_027_840),  # 81090 x 1048576
        ("a100-80gb", 84_987_084_800),  # 81050 x 1048576
        ("l40s", 47_803_531_264),  # 45589 x 1048576
        ("mi300x", 206_141_652_992),  # 196592 x 1048576
        ("m3-max-128gb", 103_079_215_104),  # 96 x 2^30; llama.cpp "103079.22 MB"
        ("rtx-a6000", 51_040_485_376),  # 48676 x 1048576
        ("rtx-5080", 17_093_885_952),  # 16302 x 1048576
        ("mi250x", 68_702_699_520),  # (65536 - 16) x 1048576
        ("h800", 85_029_027_840),  # 81090 x 1048576, as h100-sxm
    ],
)
def test_memory_bytes_written_out(name: str, memory_bytes: int) -> None:
    assert find_gpu(name).memory_bytes == memory_bytes


def test_memory_matches_the_cited_runtime_figure() -> None:
    """Where the source quotes torch's ``total_memory=NMB`` (MiB) or derives ``N MiB x 2^20``,
    the figure is that many MiB; Apple's llama.cpp "MB" are 10^6 B."""
    checked = 0
    for gpu in list_gpus():
        memory = gpu.source.split("; bandwidth")[0]
        found = re.search(r"total_memory=(\d+)MB", memory) or re.search(
            r"(\d+) MiB x 2\^20", memory
        )
        if found:
            assert gpu.memory_bytes == int(found.group(1)) * MiB, gpu.name
            checked += 1
        apple = re.search(r"recommendedMaxWorkingSetSize = ([\d.]+) MB", memory)
        if apple:
            assert f"{gpu.memory_bytes / 10**6:.2f}" == apple.group(1), gpu.name
            checked += 1
    assert checked >= 25


@pytest.mark.parametrize(
    ("name", "cited"),
    [
        ("h100-sxm", "bandwidth/FLOPs: NVIDIA H100 datasheet, sparse/2"),
        ("a10g", "BF16: approx. 70 TFLOPS dense"),
        ("v100-16gb", "bandwidth/FLOPs: V100 datasheet"),
        ("m3-ultra-512gb", "FLOPs: approx. FP32 ALU peak"),
    ],
)
def test_sources_name_each_figure(name: str, cited: str) -> None:
    assert cited in find_gpu(name).source


def test_names_and_aliases_unique() -> None:
    seen: dict[str, str] = {}
    for g in list_gpus():
        for label in (g.name, *g.aliases):
            assert seen.setdefault(label.lower(), g.name) == g.name, label


@pytest.mark.parametrize("gpu", list_gpus(), ids=lambda g: g.name)
def test_every_entry_is_plausible(gpu: object) -> None:
    assert isinstance(gpu, GPU)
    assert 8 * GiB < gpu.memory_bytes < 600 * GiB
    assert gpu.bandwidth_bytes_per_s > 10**11
    assert gpu.bf16_flops > 10**12
    assert gpu.fp8_flops is None or gpu.fp8_flops >= gpu.bf16_flops
    assert gpu.source
    assert gpu.unified_memory == (gpu.vendor == "apple")


SPEC_FILES = sorted(gpu_specs_dir().glob("*.yaml"))


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: p.name)
def test_every_file_validates(path: Path) -> None:
    family = load_gpu_file(path)
    assert family.gpus
    assert all(isinstance(g.memory_bytes, int) for g in family.gpus)


def test_files_have_distinct_orders() -> None:
    orders = [load_gpu_file(p).order for p in SPEC_FILES]
    assert len(SPEC_FILES) >= 6
    assert len(set(orders)) == len(orders)


def test_importing_hardware_reads_no_yaml_and_no_pydantic() -> None:
    code = (
        "import sys, kvplan.hardware.gpus;"
        " print(sorted({'yaml', 'pydantic'} & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- malformed files ---------------------------------------------------------------------------

GOOD = """\
order: 10
gpus:
  - name: x1
    display_name: Example X1 24GB
    vendor: example
    aliases: [x1-24gb]
    memory_bytes: 25_769_803_776
    bandwidth_bytes_per_s: 1_000_000_000_000
    bf16_flops: 100_000_000_000_000
    fp8_flops: null
    sources:
      memory: 24 GiB
      bandwidth/FLOPs: the X1 datasheet
"""


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_good_file_loads(tmp_path: Path) -> None:
    (gpu,) = load_gpu_file(_write(tmp_path, "x.yaml", GOOD)).gpus
    assert gpu.memory_bytes == 24 * 2**30
    assert gpu.fp8_flops is None
    assert gpu.source == "memory: 24 GiB; bandwidth/FLOPs: the X1 datasheet"


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            "    bandwidth_bytes_per_s:",
            "    bandwith_bytes_per_s:",
            ":8: gpus.0.bandwith_bytes_per_s: unknown key; did you mean 'bandwidth_bytes_per_s'?",
        ),
        (
            "memory_bytes: 25_769_803_776",
            "memory_bytes: 24GiB",
            ":7: gpus.0.memory_bytes: input should be a valid integer",
        ),
        (
            "memory_bytes: 25_769_803_776",
            'memory_bytes: "25769803776"',
            ":7: gpus.0.memory_bytes: input should be a valid integer",
        ),
        (
            "      memory: 24 GiB\n",
            "",
            ":11: gpus.0.sources: no source for memory_bytes; every figure needs its source",
        ),
        (
            "      bandwidth/FLOPs: the X1 datasheet\n",
            "      bandwidth/FLOPS: the X1 datasheet\n",
            ":11: gpus.0.sources: 'FLOPS' names no figure",
        ),
        (
            "      memory: 24 GiB\n",
            "      memory: 24 GiB\n      BF16: a blog\n",
            ":11: gpus.0.sources: bf16_flops is cited twice",
        ),
        (
            "    sources:\n      memory: 24 GiB\n      bandwidth/FLOPs: the X1 datasheet\n",
            "",
            ":3: gpus.0.sources: required key is missing",
        ),
        (
            "    fp8_flops: null\n",
            "",
            ":3: gpus.0.fp8_flops: required key is missing",
        ),
        ("order: 10", "order: 10\nsystem: []", ":2: system: unknown key"),
        ("name: x1", "name: X1", ":3: gpus.0.name: 'X1': use 1 to 64 lower-case letters"),
    ],
    ids=[
        "unknown key",
        "size string where bytes",
        "quoted integer",
        "figure without source",
        "unknown source key",
        "figure cited twice",
        "no sources",
        "fp8 must be stated",
        "unknown top-level key",
        "upper-case name",
    ],
)
def test_malformed_file_names_file_line_and_field(
    tmp_path: Path, old: str, new: str, expected: str
) -> None:
    assert old in GOOD
    path = _write(tmp_path, "bad.yaml", GOOD.replace(old, new))
    with pytest.raises(SpecError) as caught:
        load_gpu_file(path)
    assert f"{path}{expected}" in str(caught.value)


def test_alias_taken_in_another_file(tmp_path: Path) -> None:
    _write(tmp_path, "a.yaml", GOOD)
    other = GOOD.replace("order: 10", "order: 20").replace("name: x1", "name: x2")
    second = _write(tmp_path, "b.yaml", other.replace("[x1-24gb]", "[x2-24gb, x1-24gb]"))
    with pytest.raises(SpecError) as caught:
        load_gpu_specs(tmp_path)
    # line 6 holds the aliases of the only GPU of b.yaml
    assert str(caught.value).startswith(f"{second}:6: gpus.0.aliases.1: 'x1-24gb' is already")


def test_two_files_with_one_order(tmp_path: Path) -> None:
    _write(tmp_path, "a.yaml", GOOD)
    second = _write(tmp_path, "b.yaml", GOOD.replace("x1", "x2"))
    with pytest.raises(SpecError, match=r"b\.yaml:1: order: 10 is also the order of"):
        load_gpu_specs(tmp_path)
    assert second.is_file()


def test_files_list_by_order_then_position(tmp_path: Path) -> None:
    _write(tmp_path, "a.yaml", GOOD.replace("order: 10", "order: 30"))
    _write(tmp_path, "b.yaml", GOOD.replace("x1", "x2"))
    assert [g.name for g in load_gpu_specs(tmp_path)] == ["x2", "x1"]


# --- lookups -----------------------------------------------------------------------------------


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


@pytest.mark.parametrize(
    ("memory_bytes", "shown"),
    [
        (16 * GiB, "a 16.00 GiB device"),  # --gpu-memory 16GiB = 17,179,869,184 B
        (24 * 10**9, "a 22.35 GiB device"),  # 24GB = 24e9 / 2^30 = 22.352 GiB
        (512, "a 512 B device"),
    ],
)
def test_a_custom_device_is_named_in_binary_units(memory_bytes: int, shown: str) -> None:
    assert custom_gpu(memory_bytes).display_name == shown


def test_a_catalog_gpu_with_memory_given_says_how_much() -> None:
    assert custom_gpu(20 * GiB, find_gpu("l4")).display_name == "NVIDIA L4 24GB, 20.00 GiB given"


def test_custom_gpu() -> None:
    assert custom_gpu(24 * GiB).memory_bytes == 24 * GiB
    based = custom_gpu(20 * GiB, find_gpu("l4"))
    assert based.memory_bytes == 20 * GiB
    assert based.bandwidth_bytes_per_s == find_gpu("l4").bandwidth_bytes_per_s


# --- the names drivers print -------------------------------------------------------------------

# Product names exactly as `nvidia-smi --query-gpu=name,memory.total --format=csv` prints them in
# public logs and issue threads (e.g. "NVIDIA H100 80GB HBM3, 81559 MiB", "NVIDIA H200, 143771
# MiB", "NVIDIA A100-SXM4-80GB, 81920 MiB", "NVIDIA A100-SXM4-40GB, 40960 MiB", "NVIDIA H100 PCIe,
# 81559 MiB", "NVIDIA H100 NVL, 95830 MiB", "NVIDIA B200, 183359 MiB", "NVIDIA B300 SXM6 AC,
# 275040 MiB", "NVIDIA GB200, 189471 MiB", "NVIDIA A10G, 23028 MiB", "NVIDIA L40S, 46068 MiB",
# "NVIDIA GeForce RTX 4090, 24564 MiB", "NVIDIA RTX 6000 Ada Generation, 49140 MiB", "NVIDIA RTX
# PRO 6000 Blackwell Server Edition, 97887 MiB", "Tesla T4, 15360 MiB", "Tesla V100-SXM2-32GB,
# 32510 MiB") and as rocm-smi's "Card Series" prints AMD's ("AMD Instinct MI300X", "AMD Instinct
# MI300X OAM"); then the same names typed without the vendor word, in other cases and with
# dashes, spaces or underscores.
DRIVER_NAMES = [
    ("NVIDIA H100 80GB HBM3", "h100-sxm"),
    ("NVIDIA H100 PCIe", "h100-pcie"),
    ("NVIDIA H100 NVL", "h100-nvl"),
    ("NVIDIA H200", "h200"),
    ("NVIDIA H20", "h20"),
    ("NVIDIA B200", "b200"),
    ("NVIDIA B300 SXM6 AC", "b300"),
    ("NVIDIA GB200", "gb200"),
    ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
    ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
    ("NVIDIA A10G", "a10g"),
    ("NVIDIA A10", "a10"),
    ("NVIDIA L4", "l4"),
    ("NVIDIA L40S", "l40s"),
    ("NVIDIA L40", "l40"),
    ("NVIDIA GeForce RTX 3090", "rtx-3090"),
    ("NVIDIA GeForce RTX 4090", "rtx-4090"),
    ("NVIDIA GeForce RTX 5090", "rtx-5090"),
    ("NVIDIA RTX 6000 Ada Generation", "rtx-6000-ada"),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", "rtx-pro-6000"),
    ("Tesla T4", "t4"),
    ("Tesla V100-SXM2-16GB", "v100-16gb"),
    ("Tesla V100-SXM2-32GB", "v100-32gb"),
    ("Tesla V100-PCIE-32GB", "v100-32gb"),
    ("AMD Instinct MI300X", "mi300x"),
    ("AMD Instinct MI300X OAM", "mi300x"),
    ("AMD Instinct MI325X", "mi325x"),
    ("AMD Instinct MI355X", "mi355x"),
    # without the vendor word, any case, separators interchangeable
    ("H100 80GB HBM3", "h100-sxm"),
    ("nvidia h100 80gb hbm3", "h100-sxm"),
    ("NVIDIA_H100_80GB_HBM3", "h100-sxm"),
    ("nvidia-h100-pcie", "h100-pcie"),
    ("  NVIDIA   H200  ", "h200"),
    ("GeForce RTX 4090", "rtx-4090"),
    ("rtx 4090", "rtx-4090"),
    ("RTX_6000_Ada_Generation", "rtx-6000-ada"),
    ("t4", "t4"),
    ("NVIDIA Tesla T4", "t4"),
    ("v100 sxm2 32gb", "v100-32gb"),
    ("Instinct MI300X", "mi300x"),
    ("amd_instinct_mi325x", "mi325x"),
    ("Apple M2 Ultra", "m2-ultra-192gb"),
    ("Apple M5 Max", "m5-max-128gb"),  # the largest size, as Metal names the chip
    ("Apple M5 Pro", "m5-pro-64gb"),
    # llama.cpp's device labels: the product in the brackets
    ("MTL0 (Apple M5 Max)", "m5-max-128gb"),
    ("CUDA0 (NVIDIA H100 80GB HBM3)", "h100-sxm"),
    ("CUDA1 (NVIDIA GeForce RTX 4090)", "rtx-4090"),
    # the memory size in the name picks the entry: 40GB and 80GB A100s are different GPUs
    ("A100 SXM4 40GB", "a100-40gb"),
    ("a100-sxm4-80gb", "a100-80gb"),
    ("A100 40GB", "a100-40gb"),
    ("A100 80GB", "a100-80gb"),
    ("H100 80GB", "h100-sxm"),
    ("NVIDIA V100-SXM2-16GB", "v100-16gb"),
    # the boards added with them, as public logs print them: nvidia-smi "NVIDIA A100 80GB PCIe,
    # 81920 MiB", "NVIDIA RTX A6000, 49140 MiB", "NVIDIA A40, 46068 MiB", "NVIDIA H800, 81559
    # MiB", "NVIDIA GH200 480GB, 97871 MiB", "NVIDIA H200 NVL, 143771 MiB", "NVIDIA GeForce RTX
    # 4080, 16376 MiB"; torch's device name "NVIDIA A100-PCIE-40GB", "NVIDIA GeForce RTX 5080",
    # "AMD Instinct MI250X"; HIP's "AMD Instinct MI250X/MI250"; the PCI database's
    # "Aldebaran/MI200 [Instinct MI250X/MI250]"
    ("NVIDIA A100 80GB PCIe", "a100-pcie-80gb"),
    ("NVIDIA A100-PCIE-40GB", "a100-pcie-40gb"),
    ("NVIDIA RTX A6000", "rtx-a6000"),
    ("NVIDIA A40", "a40"),
    ("NVIDIA H800", "h800"),
    ("NVIDIA GH200 480GB", "gh200"),
    ("NVIDIA H200 NVL", "h200-nvl"),
    ("NVIDIA GeForce RTX 4080", "rtx-4080"),
    ("NVIDIA GeForce RTX 5080", "rtx-5080"),
    ("AMD Instinct MI250X", "mi250x"),
    ("AMD Instinct MI250X/MI250", "mi250x"),
    ("Aldebaran/MI200 [Instinct MI250X/MI250]", "mi250x"),
    # the words in any order and spelling: PCIe/PCIE, SXM4/SXM5/SXM, 80GB/80G, dashes or
    # spaces, a memory kind (HBM3, HBM3e, GDDR6) or none
    ("NVIDIA A100 PCIe 80GB", "a100-pcie-80gb"),
    ("A100-80GB-PCIE", "a100-pcie-80gb"),
    ("a100_pcie_40gb", "a100-pcie-40gb"),
    ("NVIDIA A100 40GB PCIe", "a100-pcie-40gb"),
    ("NVIDIA A100 SXM 80GB", "a100-80gb"),
    ("NVIDIA A100 80GB SXM4", "a100-80gb"),
    ("NVIDIA H100 SXM5 80GB", "h100-sxm"),
    ("NVIDIA H100 SXM5 80GB HBM3", "h100-sxm"),
    ("NVIDIA H100 80G HBM3", "h100-sxm"),
    ("NVIDIA H100 PCIe 80GB", "h100-pcie"),
    ("NVIDIA H100 NVL 94GB", "h100-nvl"),
    ("H200 NVL 141GB", "h200-nvl"),
    ("NVIDIA H200 141GB HBM3e", "h200"),
    ("NVIDIA GH200 96GB HBM3", "gh200"),
    ("RTX A6000 48GB", "rtx-a6000"),
    ("NVIDIA L40S 48GB GDDR6", "l40s"),
    ("NVIDIA B300 SXM6 AC 288GB", "b300"),
    ("Apple M4 Max 36GB", "m4-max-36gb"),
]


@pytest.mark.parametrize(("printed", "name"), DRIVER_NAMES, ids=[p for p, _ in DRIVER_NAMES])
def test_driver_printed_names(printed: str, name: str) -> None:
    assert find_gpu(printed).name == name


@pytest.mark.parametrize(
    ("printed", "normalized"),
    [
        ("NVIDIA A100-SXM4-80GB", "a100-sxm4-80gb"),
        ("NVIDIA GeForce RTX 4090", "rtx-4090"),
        ("AMD Instinct MI300X", "mi300x"),
        ("a100 _ - sxm4", "a100-sxm4"),
        ("NVIDIA", "nvidia"),  # a brand word alone is kept, so it is refused, not emptied
    ],
)
def test_normalize_gpu_name(printed: str, normalized: str) -> None:
    assert normalize_gpu_name(printed) == normalized


@pytest.mark.parametrize(
    ("printed", "words"),
    [
        ("NVIDIA A100 80GB PCIe", {"a100", "80gb", "pcie"}),
        ("NVIDIA A100-PCIE-80GB", {"a100", "80gb", "pcie"}),  # the same words, reordered
        ("NVIDIA H100 80GB HBM3", {"h100", "80gb"}),  # the memory kind dropped
        ("NVIDIA GH200 144G HBM3e", {"gh200", "144gb"}),  # 144G is 144GB
        ("NVIDIA A100-SXM4-40GB", {"a100", "sxm", "40gb"}),  # SXM4, SXM5, SXM6: sxm
        ("NVIDIA GB200 (one Blackwell GPU)", {"gb200", "one", "blackwell", "gpu"}),
    ],
)
def test_gpu_words(printed: str, words: set[str]) -> None:
    assert gpu_words(normalize_gpu_name(printed)) == words


# Boards the catalog lacks are refused, never read as a neighbour (a GH200 144GB has other
# memory than the 96GB entry, an H800 PCIe other bandwidth than the SXM one), and so is a name
# two entries share the words of ("A100 PCIe": 40GB or 80GB?), with the nearest names.
@pytest.mark.parametrize(
    ("printed", "suggested"),
    [
        ("NVIDIA GH200 144G HBM3e", "gh200"),
        ("NVIDIA H800 PCIe", "h800"),
        ("NVIDIA A100 PCIe", "a100-pcie-80gb"),
        ("NVIDIA A100 SXM4", "a100-80gb"),
        ("NVIDIA RTX 6000", "rtx-6000-ada"),
        ("AMD Instinct MI210", "mi300x"),
        ("Aldebaran/MI200 [Instinct MI210]", "mi300x"),
        ("NVIDIA GB300", "gb200"),
        ("Tesla V100S-PCIE-32GB", "v100-32gb"),
        ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "rtx-pro-6000"),
    ],
)
def test_unknown_driver_names_are_refused(printed: str, suggested: str) -> None:
    with pytest.raises(UnknownGPUError) as caught:
        find_gpu(printed)
    assert suggested in caught.value.suggestions
    assert printed in str(caught.value)


def test_driver_names_are_validated(tmp_path: Path) -> None:
    entry = GOOD.replace(
        "    sources:", "    driver_names:\n      'NVIDIA X; rm': seen\n    sources:"
    )
    path = _write(tmp_path, "x.yaml", entry)
    with pytest.raises(SpecError, match=r"driver_names.*a driver name is 1 to 96"):
        load_gpu_file(path)


def test_driver_name_taken_by_another_gpu(tmp_path: Path) -> None:
    _write(tmp_path, "a.yaml", GOOD)
    other = GOOD.replace("order: 10", "order: 20").replace("x1", "x2")
    # "NVIDIA X1" reads as x1 (vendor word dropped): the name of the GPU in a.yaml
    other = other.replace("    sources:", "    driver_names:\n      NVIDIA X1: seen\n    sources:")
    _write(tmp_path, "b.yaml", other)
    with pytest.raises(
        SpecError, match=r"driver_names.NVIDIA X1: 'NVIDIA X1' is already a name of x1"
    ):
        load_gpu_specs(tmp_path)


def test_driver_names_load(tmp_path: Path) -> None:
    text = GOOD.replace(
        "    sources:", "    driver_names:\n      Example X1 HBM: seen\n    sources:"
    )
    (gpu,) = load_gpu_specs(_write(tmp_path, "x.yaml", text).parent)
    assert gpu.driver_names == ("Example X1 HBM",)


def test_local_is_reserved(tmp_path: Path) -> None:
    _write(tmp_path, "a.yaml", GOOD.replace("name: x1", "name: local"))
    with pytest.raises(SpecError, match="reserved for --gpu local"):
        load_gpu_specs(tmp_path)


def test_plan_names_a_custom_device_by_its_memory() -> None:
    from typer.testing import CliRunner

    from kvplan.cli import app

    result = CliRunner().invoke(app, ["plan", "llama-3.1-8b", "--gpu-memory", "24GiB", "-c", "8K"])
    assert result.exit_code == 0, result.output
    assert "on 1 x a 24.00 GiB device" in result.output
    assert "25,769,803,776" not in result.output  # 24 x 2^30, no longer shown as the name
