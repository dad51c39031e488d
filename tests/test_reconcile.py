"""kvplan reconcile on real start-up logs (tests/data/logs): every rule reproduces, and a
rule that does not is flagged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.errors import KvplanError, SpecError
from kvplan.reconcile import detect_engine, reconcile

LOGS = Path(__file__).parent / "data" / "logs"


def read(name: str) -> str:
    return (LOGS / name).read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("log", "engine", "model", "given"),
    [
        ("vllm-0.19-llama-3.1-8b-tp1.log", "vllm", "llama-3.1-8b", None),
        ("vllm-0.19-gemma-3-12b.log", "vllm", "gemma-3-12b", None),
        ("llamacpp-b5781-llama-3.1-8b.log", "llama.cpp", "llama-3.1-8b", "llama-3.1-8b"),
        ("llamacpp-b8164-gpt-oss-20b.log", "llama.cpp", "gpt-oss-20b", None),
        ("llamacpp-pad32-llama-3.1-8b.log", "llama.cpp", "llama-3.1-8b", "llama-3.1-8b"),
        ("llamacpp-b5274-qwen3-235b.log", "llama.cpp", "qwen3-235b-a22b", None),
        ("ikllamacpp-deepseek-r1.log", "ik_llama.cpp", "deepseek-r1", "deepseek-r1"),
        ("sglang-qwen3-235b-fp8-tp4.log", "sglang", "qwen3-235b-a22b", "qwen3-235b-a22b"),
    ],
)
def test_every_rule_reproduces(log: str, engine: str, model: str, given: str | None) -> None:
    text = read(log)
    assert detect_engine(text) == engine
    result = reconcile(text, model=given)
    assert result.model == model
    rules = [row for row in result.rows if row.reproduced is not None]
    assert rules, "a log with printed figures yields at least one rule"
    assert result.reproduced, [r for r in rules if not r.reproduced]


def test_vllm_rows_recover_settings_and_figures() -> None:
    result = reconcile(read("vllm-0.19-llama-3.1-8b-tp1.log"))
    assert result.engine_version == "0.19.0"
    assert result.settings["gpu_memory_utilization"] == "0.95"
    assert result.settings["max_model_len"] == 8192
    rows = {row.component: row for row in result.rows}
    assert rows["num_gpu_blocks (from the printed memory)"].printed == "29,751"
    assert rows["GPU KV cache size (tokens)"].kvplan == "476,016"
    assert rows["maximum concurrency"].kvplan == "58.11x"
    assert rows["weights"].kvplan == "14.99 GiB"  # printed 14.99 GiB


def test_pipeline_parallel_log_flags_the_blocks_rule() -> None:
    # one PP worker prints its memory; the minimum over stages sets the blocks
    result = reconcile(read("vllm-0.19-llama-3.1-8b-pp2.log"))
    assert not result.reproduced
    failed = [row.component for row in result.rows if row.reproduced is False]
    assert failed == ["num_gpu_blocks (from the printed memory)"]
    assert any("pipeline parallelism" in note for note in result.notes)


def test_unknown_model_asks_for_model() -> None:
    with pytest.raises(SpecError, match="pass --model"):
        reconcile(read("llamacpp-b5781-llama-3.1-8b.log"))


def test_not_a_log() -> None:
    with pytest.raises(KvplanError, match="cannot tell which engine"):
        reconcile("hello\n")


def test_cli_reconcile_json_and_exit_codes(tmp_path: Path) -> None:
    runner = CliRunner()
    ok = runner.invoke(app, ["reconcile", str(LOGS / "vllm-0.19-gemma-3-12b.log"), "-f", "json"])
    assert ok.exit_code == 0, ok.stderr
    doc = json.loads(ok.stdout)
    assert doc["schema_version"] == 1
    assert doc["reproduced"] is True
    flagged = runner.invoke(app, ["reconcile", str(LOGS / "vllm-0.19-llama-3.1-8b-pp2.log")])
    assert flagged.exit_code == 1
    assert "NOT reproduced" in flagged.stdout
    missing = runner.invoke(app, ["reconcile", str(tmp_path / "nope.log")])
    assert missing.exit_code == 2
    assert "cannot read" in missing.stderr
