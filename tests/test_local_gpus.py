"""``--gpu local``: the smi parsers on recorded outputs (tests/data/smi, sources in its README),
the choice of the GPU to plan for, and the command line with a fake nvidia-smi on PATH."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.errors import UnavailableError
from kvplan.hardware.local import (
    NVIDIA_SMI,
    LocalGPU,
    LocalGPUError,
    describe,
    local_gpus,
    parse_nvidia_smi,
    parse_rocm_smi,
    run_tool,
)

SMI = Path(__file__).parent / "data" / "smi"
MiB = 2**20


def recorded(name: str) -> str:
    return (SMI / name).read_text(encoding="utf-8")


# --- parsers -------------------------------------------------------------------------------------


def test_eight_h100s() -> None:
    devices = parse_nvidia_smi(recorded("nvidia-smi-8x-h100.txt"))
    assert [d.index for d in devices] == list(range(8))
    assert {d.name for d in devices} == {"NVIDIA H100 80GB HBM3"}
    # 81559 MiB x 2^20 = 85,520,809,984 B, exactly
    assert {d.memory_total_bytes for d in devices} == {85_520_809_984}
    assert devices[3].memory_used_bytes == 1843 * MiB
    assert not any(d.mig_enabled for d in devices)


def test_one_rtx_4090_without_mig() -> None:
    (device,) = parse_nvidia_smi(recorded("nvidia-smi-1x-rtx4090.txt"))
    # 24564 MiB x 2^20 = 25,757,220,864 B; MIG "[N/A]" on a GeForce board
    assert device == LocalGPU(0, "NVIDIA GeForce RTX 4090", 25_757_220_864, 412 * MiB, False)


def test_mig_column_read() -> None:
    devices = parse_nvidia_smi(recorded("nvidia-smi-mig.txt"))
    assert [d.mig_enabled for d in devices] == [True, False]


def test_four_columns_are_enough() -> None:
    (device,) = parse_nvidia_smi("0, Tesla T4, 15360, 0\n")
    assert device.memory_total_bytes == 15360 * MiB  # 16,106,127,360 B


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("nvidia-smi-no-devices.txt", "nvidia-smi printed 'No devices were found'"),
        ("nvidia-smi-no-driver.txt", 'nvidia-smi printed "NVIDIA-SMI has failed'),
    ],
)
def test_nvidia_smi_garbage_is_one_error_line(name: str, expected: str) -> None:
    with pytest.raises(LocalGPUError) as caught:
        parse_nvidia_smi(recorded(name))
    assert str(caught.value).startswith(expected)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("text", ["", "\n\n"])
def test_nvidia_smi_listing_nothing(text: str) -> None:
    with pytest.raises(LocalGPUError, match="nvidia-smi listed no GPU"):
        parse_nvidia_smi(text)


def test_eight_mi300x() -> None:
    devices = parse_rocm_smi(recorded("rocm-smi-8x-mi300x.txt"))
    assert len(devices) == 8
    assert {d.name for d in devices} == {"AMD Instinct MI300X OAM"}
    # bytes as printed: 206158430208 B = 196608 MiB x 2^20
    assert {d.memory_total_bytes for d in devices} == {196_608 * MiB}
    assert devices[0].memory_used_bytes == 283_930_624


def test_rocm_smi_older_key_and_system_object() -> None:
    devices = parse_rocm_smi(recorded("rocm-smi-2x-mi250x.txt"))
    assert [(d.index, d.name) for d in devices] == [
        (0, "AMD Instinct MI250X"),
        (1, "AMD Instinct MI250X"),
    ]
    assert devices[1].memory_total_bytes == 65_520 * MiB  # 68702699520 B


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "WARNING: No AMD GPUs specified",
            "rocm-smi printed 'WARNING: No AMD GPUs specified', not JSON",
        ),
        ("{}", "rocm-smi listed no GPU"),
        ('{"card0": {"Card Series": "AMD Instinct MI300X"}}', "rocm-smi's card0 has no"),
    ],
)
def test_rocm_smi_garbage_is_one_error_line(text: str, expected: str) -> None:
    with pytest.raises(LocalGPUError) as caught:
        parse_rocm_smi(text)
    assert str(caught.value).startswith(expected)


# --- what is planned ----------------------------------------------------------------------------


def test_h100s_plan_with_the_runtime_memory() -> None:
    found = describe("nvidia-smi", parse_nvidia_smi(recorded("nvidia-smi-8x-h100.txt")))
    assert found.num_gpus == 8
    assert found.gpu.name == "h100-sxm"
    assert found.gpu.display_name == "NVIDIA H100 80GB HBM3 (local)"
    # nvidia-smi 81559 MiB includes the driver's 469 MiB; CUDA reports 81090 MiB (torch
    # total_memory of an 'NVIDIA H100 80GB HBM3', gpu_specs/nvidia-hopper.yaml)
    assert found.gpu.memory_bytes == 81_090 * MiB
    assert found.summary == (
        "local: 8 x NVIDIA H100 80GB HBM3, 81,559 MiB each; up to 1,843 MiB already in use;"
        " planned as h100-sxm with the 81,090 MiB the runtime reports"
    )


def test_mixed_plans_for_the_smallest() -> None:
    found = describe("nvidia-smi", parse_nvidia_smi(recorded("nvidia-smi-mixed.txt")))
    assert found.num_gpus == 2
    assert found.gpu.name == "rtx-5090"
    assert found.gpu.memory_bytes == 32_606 * MiB  # 32607 printed, 1 MiB kept by the driver
    assert found.summary.startswith(
        "local: 1 x NVIDIA RTX 6000 Ada Generation (49,140 MiB) + 1 x NVIDIA GeForce RTX 5090"
        " (32,607 MiB); mixed, planning for the smallest, NVIDIA GeForce RTX 5090"
    )


def test_an_rtx_a6000_plans_with_the_runtime_memory() -> None:
    found = describe("nvidia-smi", parse_nvidia_smi(recorded("nvidia-smi-1x-a6000.txt")))
    assert found.gpu.name == "rtx-a6000"
    # nvidia-smi 49140 MiB, torch total_memory 48676 MiB: 464 MiB kept, under the 2 GiB margin
    assert found.gpu.memory_bytes == 48_676 * MiB
    assert found.gpu.bandwidth_bytes_per_s == 768 * 10**9


@pytest.mark.parametrize(
    ("line", "name", "runtime_mib"),
    [
        ("0, NVIDIA A100 80GB PCIe, 81920, 0, Disabled", "a100-pcie-80gb", 81_050),  # 870 kept
        ("0, NVIDIA A100-PCIE-40GB, 40960, 0, Disabled", "a100-pcie-40gb", 40_326),  # 634 kept
        ("0, NVIDIA H800, 81559, 0, Disabled", "h800", 81_090),  # 469 kept, as on an H100
        ("0, NVIDIA GH200 480GB, 97871, 0, Disabled", "gh200", 97_285),  # 586, as on an H20
        ("0, NVIDIA H200 NVL, 143771, 0, Disabled", "h200-nvl", 143_156),  # 615, as on an H200
        ("0, NVIDIA A40, 46068, 0, [N/A]", "a40", 45_416),
        ("0, NVIDIA GeForce RTX 4080, 16376, 0, [N/A]", "rtx-4080", 16_375),
    ],
)
def test_boards_added_to_the_catalog_plan_as_their_entry(
    line: str, name: str, runtime_mib: int
) -> None:
    found = describe("nvidia-smi", parse_nvidia_smi(line + "\n"))
    assert (found.gpu.name, found.gpu.memory_bytes) == (name, runtime_mib * MiB)


def test_a_board_outside_the_catalog_plans_with_its_memory_only() -> None:
    # the 144GB HBM3e GH200 is not the 96GB entry: its printed memory alone is planned
    found = describe(
        "nvidia-smi", parse_nvidia_smi("0, NVIDIA GH200 144G HBM3e, 146831, 0, [N/A]\n")
    )
    assert found.gpu.name == "local"
    assert found.gpu.memory_bytes == 146_831 * MiB  # 153,963,462,656 B as printed
    assert found.gpu.bandwidth_bytes_per_s == 0
    assert "not in the catalog" in found.summary


def test_mi250x_rocm_plans_one_gcd_each() -> None:
    found = describe("rocm-smi", parse_rocm_smi(recorded("rocm-smi-2x-mi250x.txt")))
    # each GCD is a device: rocm-smi 65520 MiB = torch (ROCm) total_memory 65520MB
    assert (found.num_gpus, found.gpu.name) == (2, "mi250x")
    assert found.gpu.memory_bytes == 65_520 * MiB


def test_mi300x_rocm_plans_with_the_runtime_memory() -> None:
    found = describe("rocm-smi", parse_rocm_smi(recorded("rocm-smi-8x-mi300x.txt")))
    # rocm-smi 196608 MiB, torch (ROCm) 196592 MiB: 16 MiB kept
    assert found.gpu.name == "mi300x"
    assert found.gpu.memory_bytes == 196_592 * MiB
    assert found.summary.startswith("local: 8 x AMD Instinct MI300X OAM, 196,608 MiB each")


@pytest.mark.parametrize(
    ("printed_mib", "planned_mib"),
    [
        (81_090 + 2048, 81_090),  # a reserve of up to 2 GiB: the catalog's runtime figure
        (81_090 + 2049, 81_090 + 2049),  # more: a larger board than the entry, as printed
        (40_000, 40_000),  # less than the entry: as printed
    ],
)
def test_which_memory_is_planned(printed_mib: int, planned_mib: int) -> None:
    found = describe("nvidia-smi", [LocalGPU(0, "NVIDIA H100 80GB HBM3", printed_mib * MiB)])
    assert found.gpu.memory_bytes == planned_mib * MiB


def test_mig_is_refused() -> None:
    with pytest.raises(LocalGPUError, match=r"GPU 0 \(NVIDIA A100-SXM4-40GB\) has MIG enabled"):
        describe("nvidia-smi", parse_nvidia_smi(recorded("nvidia-smi-mig.txt")))


def test_local_gpu_error_is_an_unavailable_error() -> None:
    assert issubclass(LocalGPUError, UnavailableError)  # exit 3 at the command line


# --- the tool on PATH ----------------------------------------------------------------------------


def fake_tool(folder: Path, program: str, output: str, exit_code: int = 0) -> Path:
    """An executable ``program`` in ``folder`` printing ``output`` (shell builtins only, so
    PATH can hold nothing else) and exiting ``exit_code``."""
    text = folder / f"{program}.out"
    text.write_text(output, encoding="utf-8")
    script = folder / program
    script.write_text(
        "#!/bin/sh\n"
        'while IFS= read -r line || [ -n "$line" ]; do printf \'%s\\n\' "$line";'
        f" done < '{text}'\n"
        f"exit {exit_code}\n",
        encoding="utf-8",
    )
    script.chmod(0o755)
    return folder


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty folder that is the whole PATH: no real nvidia-smi or rocm-smi is found."""
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", str(folder))
    return folder


def test_run_tool_reads_stdout(bin_dir: Path) -> None:
    fake_tool(bin_dir, "nvidia-smi", recorded("nvidia-smi-1x-rtx4090.txt"))
    assert run_tool(NVIDIA_SMI) == recorded("nvidia-smi-1x-rtx4090.txt")


def test_run_tool_absent(bin_dir: Path) -> None:
    assert run_tool(NVIDIA_SMI) is None


def test_run_tool_failing_says_its_first_line(bin_dir: Path) -> None:
    fake_tool(bin_dir, "nvidia-smi", recorded("nvidia-smi-no-devices.txt"), exit_code=6)
    with pytest.raises(
        LocalGPUError, match=r"^nvidia-smi failed \(exit 6\): No devices were found$"
    ):
        run_tool(NVIDIA_SMI)


def test_run_tool_timeout(bin_dir: Path) -> None:
    script = bin_dir / "nvidia-smi"
    script.write_text("#!/bin/sh\nwhile :; do :; done\n", encoding="utf-8")
    script.chmod(0o755)
    with pytest.raises(LocalGPUError, match=r"did not answer within 0\.2 s"):
        run_tool(NVIDIA_SMI, timeout_s=0.2)


def test_rocm_smi_when_nvidia_smi_is_absent(bin_dir: Path) -> None:
    fake_tool(bin_dir, "rocm-smi", recorded("rocm-smi-2x-mi250x.txt"))
    found = local_gpus()
    assert found.tool == "rocm-smi"
    assert found.num_gpus == 2
    assert found.gpu.memory_bytes == 65_520 * MiB


# --- the command line ----------------------------------------------------------------------------

runner = CliRunner()


def plan_json(*args: str) -> tuple[int, dict[str, object], str]:
    result = runner.invoke(app, ["plan", "llama-3.1-8b", "--format", "json", *args])
    doc = json.loads(result.stdout) if result.exit_code in (0, 1) else {}
    return result.exit_code, doc, result.stderr


def test_cli_gpu_local_with_eight_h100s(bin_dir: Path) -> None:
    fake_tool(bin_dir, "nvidia-smi", recorded("nvidia-smi-8x-h100.txt"))
    code, doc, err = plan_json("--gpu", "local")
    assert code == 0, err
    assert err.splitlines() == [
        "kvplan: local: 8 x NVIDIA H100 80GB HBM3, 81,559 MiB each; up to 1,843 MiB already in"
        " use; planned as h100-sxm with the 81,090 MiB the runtime reports"
    ]
    assert doc["gpu"] == "h100-sxm"
    assert doc["total_memory_bytes"] == 81_090 * MiB  # 85,029,027,840 B
    code, same, _ = plan_json("--gpu", "h100")
    assert same["max_concurrency"] == doc["max_concurrency"]


def test_cli_gpu_by_its_printed_name(bin_dir: Path) -> None:
    code, doc, err = plan_json("--gpu", "NVIDIA H100 80GB HBM3")
    assert code == 0, err
    assert doc["gpu"] == "h100-sxm"


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({}, "kvplan: error: --gpu local: neither nvidia-smi nor rocm-smi is on PATH;"),
        (
            {"nvidia-smi": ("nvidia-smi-no-driver.txt", 9)},
            "kvplan: error: nvidia-smi failed (exit 9): NVIDIA-SMI has failed because",
        ),
        ({"nvidia-smi": ("nvidia-smi-mig.txt", 0)}, "kvplan: error: GPU 0 (NVIDIA A100-SXM4-40GB)"),
    ],
)
def test_cli_gpu_local_unavailable_is_one_line_exit_3(
    bin_dir: Path, files: dict[str, tuple[str, int]], expected: str
) -> None:
    for program, (name, exit_code) in files.items():
        fake_tool(bin_dir, program, recorded(name), exit_code)
    code, _, err = plan_json("--gpu", "local")
    assert code == 3
    assert len(err.splitlines()) == 1, err
    assert err.startswith(expected)
    assert "Traceback" not in err
