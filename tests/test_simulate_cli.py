"""kvplan simulate: the trace replayed on the pool plan --engine vllm gives the deployment, the
same figures in the library and on the command line, and a bad trace refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

import kvplan
from kvplan.answers.simulate import replay_trace
from kvplan.cache_sim.trace import read_mooncake
from kvplan.cli import app

runner = CliRunner()
SAMPLE = Path(__file__).parent / "data" / "traces" / "mooncake_conversation_400.jsonl"


def test_the_pool_is_plans_and_the_figures_the_librarys() -> None:
    args = ["simulate", str(SAMPLE), "-m", "llama-3.1-8b", "--gpu", "h100", "-f", "json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    # the pool plan --engine vllm gives the trace's longest request on one H100
    longest = max(r.input_tokens + r.output_tokens for r in read_mooncake(SAMPLE))
    planned = json.loads(
        runner.invoke(
            app,
            ["plan", "llama-3.1-8b", "--gpu", "h100", "-e", "vllm", "-c", str(longest),
             "-f", "json"],
        ).stdout
    )  # fmt: skip
    assert doc["num_blocks"] == planned["num_blocks"]
    replay = replay_trace(kvplan.load_model("llama-3.1-8b"), kvplan.find_gpu("h100"), SAMPLE)
    assert doc["hit_tokens"] == replay.result.hit_tokens
    assert doc["input_tokens"] == 5_710_530
    assert doc["computed_tokens"] == doc["input_tokens"] - doc["hit_tokens"]
    assert doc["saved_prefill_flops"] == doc["hit_tokens"] * replay.prefill_flops_per_token
    assert doc["schema_version"] >= 1


def test_a_larger_pool_finds_at_least_as_much() -> None:
    base = ["simulate", str(SAMPLE), "-m", "llama-3.1-8b", "--gpu", "h200", "-f", "json"]
    small = json.loads(runner.invoke(app, [*base, "--gpu-memory-utilization", "0.5"]).stdout)
    large = json.loads(runner.invoke(app, [*base, "--gpu-memory-utilization", "0.95"]).stdout)
    assert small["num_blocks"] < large["num_blocks"]
    assert small["hit_tokens"] <= large["hit_tokens"]
    assert small["evicted_blocks"] >= large["evicted_blocks"]


def test_a_bad_trace_is_one_line_exit_2(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text(
        '{"timestamp": 9, "input_length": 10, "output_length": 1, "hash_ids": [0]}\n'
        '{"timestamp": 3, "input_length": 10, "output_length": 1, "hash_ids": [0]}\n',
        encoding="utf-8",
    )
    result = runner.invoke(app, ["simulate", str(trace), "-m", "llama-3.1-8b", "--gpu", "h100"])
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"kvplan: error: {trace}:2: timestamp: 3 ms, before the line above's 9"
    )
