"""A layer kind an engine's rules do not model is refused by that engine, by name, with exit 2:
never sized as nothing. DeepSeek V4's compressed latents (kvplan.model.sparse) are modelled by
the ideal cache alone; every engine profile refuses them, in plan and in calc."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

import kvplan
from kvplan.cli import app
from kvplan.engines import llamacpp, sglang
from kvplan.errors import UnitError

V4 = str(Path(__file__).parent / "fixtures" / "hf" / "deepseek-v4-flash" / "config.json")
runner = CliRunner()


@pytest.mark.parametrize("engine", ["vllm", "sglang", "llama.cpp", "trtllm"])
def test_plan_refuses_compressed_latents_with_every_engine(engine: str) -> None:
    done = runner.invoke(app, ["plan", V4, "--gpu", "H200", "-c", "32K", "--engine", engine])
    assert done.exit_code == 2, done.output
    assert "compressed_attention layers" in done.stderr
    assert "not modelled" in done.stderr


@pytest.mark.parametrize("engine", ["llama.cpp", "transformers"])
def test_calc_refuses_them_with_an_engine_and_sizes_them_without(engine: str) -> None:
    done = runner.invoke(app, ["calc", V4, "-c", "32K", "--engine", engine])
    assert done.exit_code == 2
    assert "compressed_attention layers are not modelled" in done.stderr
    assert runner.invoke(app, ["calc", V4, "-c", "32K"]).exit_code == 0


def test_the_library_refuses_alike() -> None:
    spec = kvplan.load_model(V4)
    with pytest.raises(UnitError, match="SGLang profile: compressed_attention layers"):
        sglang.kv_cache(spec, "H200", max_total_tokens=100_000)
    with pytest.raises(UnitError, match=r"llama\.cpp profile: compressed_attention layers"):
        llamacpp.kv_cache(spec, n_ctx=32_768)
