"""The wheel carries the model and GPU specs and py.typed, and works from any directory."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from kvplan.hardware.gpus import list_gpus

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not (ROOT / "pyproject.toml").is_file():
        pytest.skip("not run from a source checkout")
    pytest.importorskip("hatchling")
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--quiet",
            "--wheel-dir",
            str(out),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    (built,) = out.glob("kvplan-*.whl")
    return built


def test_wheel_contains_specs_and_typing_marker(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    specs = {n for n in names if n.startswith("kvplan/model_specs/") and n.endswith(".yaml")}
    assert len(specs) == len(list((ROOT / "model_specs").glob("*.yaml")))
    assert "kvplan/model_specs/llama-3.1-8b.yaml" in specs
    gpus = {n for n in names if n.startswith("kvplan/gpu_specs/") and n.endswith(".yaml")}
    assert len(gpus) == len(list((ROOT / "gpu_specs").rglob("*.yaml")))  # systems/, prices/ too
    assert "kvplan/gpu_specs/nvidia-hopper.yaml" in gpus
    assert "kvplan/py.typed" in names
    assert any(n.endswith("entry_points.txt") for n in names)


def test_installed_wheel_works_from_another_directory(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--quiet",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    code = (
        "import kvplan, kvplan.catalog.lookup as c, kvplan.hardware.gpus as h;"
        f"print(c.specs_dir().is_relative_to({str(target)!r}));"
        f"print(h.gpu_specs_dir().is_relative_to({str(target)!r}));"
        "print(kvplan.estimate(kvplan.load_model('gemma-3-27b'), 131072).kv_cache_bytes);"
        "print(h.catalog_gpu('h100').memory_bytes, len(h.list_gpus()))"
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    # 81090 MiB x 2^20 = 85029027840 B: the H100 read from the wheel's gpu_specs/
    expected = ["True", "True", "11173625856", "85029027840", str(len(list_gpus()))]
    assert result.stdout.split() == expected


def test_public_functions_are_not_shadowed_by_their_modules() -> None:
    """No module is named like a public function, so importing every submodule keeps
    ``kvplan.perf``, ``kvplan.recommend``, ``kvplan.reconcile`` and ``kvplan.plan`` functions."""
    import importlib
    import pkgutil

    import kvplan

    for info in pkgutil.walk_packages(kvplan.__path__, "kvplan."):
        if info.name.split(".")[1] not in ("probe", "__main__"):
            importlib.import_module(info.name)
    for name in ("perf", "recommend", "reconcile", "plan", "estimate", "compare"):
        assert callable(getattr(kvplan, name)), name
