"""kvplan reconcile on real start-up logs (tests/data/logs): every rule reproduces, and a
rule that does not is flagged."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.errors import KvplanError, SpecError
from kvplan.files import TEXT_LIMIT_BYTES
from kvplan.logs import detect_engine, read_log, reconcile

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


# --- hostile logs ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("log", "old", "new", "problem"),
    [
        (
            "vllm-0.19-llama-3.1-8b-tp1.log",
            "(78.68/79.19 GiB)",
            "(78.68/1.2.3 GiB)",
            "total GPU memory '1.2.3' in the log: not a figure in GiB",
        ),
        (
            "vllm-0.19-llama-3.1-8b-tp1.log",
            "Available KV cache memory: 58.11 GiB",
            "Available KV cache memory: " + "9" * 400 + " GiB",
            "available KV cache memory '99999",
        ),
        (
            "vllm-0.19-llama-3.1-8b-tp1.log",
            "tensor_parallel_size=1,",
            "tensor_parallel_size=0,",
            "tensor_parallel_size '0' in the log: expected an integer 1 to 4,096",
        ),
        (
            "vllm-0.19-llama-3.1-8b-tp1.log",
            "max_seq_len=8192",
            "max_seq_len=" + "9" * 5000,
            "max_model_len '99999",
        ),
        (
            "vllm-0.19-llama-3.1-8b-tp1.log",
            "GPU KV cache size: 476,016 tokens",
            "GPU KV cache size: ,,, tokens",
            "GPU KV cache size ',,,' in the log",
        ),
        (
            "sglang-qwen3-235b-fp8-tp4.log",
            "--tp 4",
            "--tp 99999",
            "--tp '99999' in the log: expected an integer 1 to 4,096",
        ),
        (
            "llamacpp-b5781-llama-3.1-8b.log",
            "n_ctx         = 16384",
            "n_ctx         = 0",
            "n_ctx '0' in the log: expected an integer 1 to",
        ),
    ],
    ids=[
        "total-1.2.3",
        "available-400-digits",
        "tp-0",
        "len-5000-digits",
        "tokens-commas",
        "sglang-tp",
        "n-ctx-0",
    ],
)
def test_hostile_numbers_are_one_line(log: str, old: str, new: str, problem: str) -> None:
    text = read(log)
    assert old in text
    text = text.replace(old, new, 1)
    model = (
        "llama-3.1-8b" if "llamacpp" in log else ("qwen3-235b-a22b" if "sglang" in log else None)
    )
    with pytest.raises(SpecError) as info:
        reconcile(text, model=model, path="x.log")
    assert str(info.value).startswith("x.log: ")
    assert problem in str(info.value)
    assert len(info.value.problems) == 1


def test_read_log_refuses_what_is_not_a_log(tmp_path: Path) -> None:
    fifo = tmp_path / "engine.log"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero"), tmp_path):
        with pytest.raises(SpecError, match="cannot read: "):
            read_log(str(path))


def test_read_log_reads_the_start_of_a_long_log(tmp_path: Path) -> None:
    path = tmp_path / "long.log"
    start = read("vllm-0.19-llama-3.1-8b-tp1.log").encode() + b"\xff invalid UTF-8\n"
    filler = b"(EngineCore) INFO a line of a long-running server\n"  # 50 bytes
    with path.open("wb") as f:
        f.write(start + filler * (TEXT_LIMIT_BYTES // len(filler) + 1))  # 64 MiB + a line
    text = read_log(str(path))
    # the first 64 MiB only, each byte one character, the invalid byte replaced by U+FFFD
    assert len(text) == TEXT_LIMIT_BYTES
    assert "\ufffd invalid UTF-8" in text
    assert reconcile(text).settings["max_model_len"] == 8192


def test_long_model_name_in_a_log_is_one_short_line() -> None:
    text = read("vllm-0.19-llama-3.1-8b-tp1.log")
    text = text.replace("meta-llama/Llama-3.1-8B-Instruct", "x" * 300)
    with pytest.raises(SpecError) as info:
        reconcile(text, path="x.log")
    assert str(info.value).startswith("x.log: model 'xxx")
    assert "not in the catalog" in str(info.value)
    assert len(str(info.value)) < 200
