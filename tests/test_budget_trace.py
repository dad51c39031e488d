"""Budgets on a trace: ``min_trace_hit_rate`` and ``max_trace_load_ms`` checked against the
replay ``kvplan simulate`` gives, the trace named inside the budget's folder only."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner()
SAMPLE = Path(__file__).parent / "data" / "traces" / "mooncake_conversation_400.jsonl"
INPUT = 5_710_530  # the sample's input tokens (tests/test_simulate_cli.py)


def _budget(folder: Path, deployment: str) -> Path:
    shutil.copy(SAMPLE, folder / "conversation.jsonl")
    path = folder / "budget.yaml"
    path.write_text("deployments:\n" + deployment, encoding="utf-8")
    return path


DEPLOYMENT = """\
  - name: chat
    model: llama-3.1-8b
    gpu: h100
    engine: vllm
    trace:
      path: conversation.jsonl
{tiers}    expect:
{expect}"""


def _check(folder: Path, tiers: str, expect: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    path = _budget(folder, DEPLOYMENT.format(tiers=tiers, expect=expect))
    result = runner.invoke(app, ["check", str(path), "-f", "json"])
    return result.exit_code, (json.loads(result.stdout) if result.stdout.strip() else {})


def _results(doc: dict) -> dict[str, dict]:  # type: ignore[type-arg]
    return {r["assertion"]: r for r in doc["results"]}


def test_the_gpu_alone_misses_the_rate_a_disk_tier_reaches(tmp_path: Path) -> None:
    """The GPU alone finds what kvplan simulate finds, under the rate; with a disk tier
    holding the whole trace it finds all the trace repeats (the direct count of its hash ids,
    781,568 tokens). A rate of 0.13 asks for ceil(0.13 x 5,710,530) = 742,369 tokens."""
    from test_cache_sim_prefix import _counted

    required = -(-13 * INPUT // 100)
    assert required == 742_369
    alone = runner.invoke(
        app, ["simulate", str(SAMPLE), "-m", "llama-3.1-8b", "--gpu", "h100", "-f", "json"]
    )
    found = json.loads(alone.stdout)["hit_tokens"]  # the replay simulate gives, the same ask
    assert found < required
    code, doc = _check(tmp_path, "", "      min_trace_hit_rate: 0.13\n")
    assert code == 1
    r = _results(doc)["min_trace_hit_rate"]
    assert (r["required"], r["actual"], r["passed"]) == (required, found, False)
    tiers = "      host_tier: 64GiB\n      disk_tier: 2TiB\n"
    code, doc = _check(tmp_path, tiers, "      min_trace_hit_rate: 0.13\n")
    assert code == 0
    r = _results(doc)["min_trace_hit_rate"]
    assert (r["required"], r["actual"], r["passed"]) == (required, _counted(16), True)


def test_the_longest_load_against_the_simulates(tmp_path: Path) -> None:
    tiers = "      host_tier: 64GiB\n      disk_tier: 2TiB\n"
    shutil.copy(SAMPLE, tmp_path / "t.jsonl")
    simulated = runner.invoke(
        app,
        ["simulate", str(tmp_path / "t.jsonl"), "-m", "llama-3.1-8b", "--gpu", "h100",
         "--host-tier", "64GiB", "--disk-tier", "2TiB", "-f", "json"],
    )  # fmt: skip
    longest = json.loads(simulated.stdout)["max_load_ms"]
    assert longest > 0
    code, doc = _check(tmp_path, tiers, f"      max_trace_load_ms: {longest}\n")
    assert code == 0
    assert _results(doc)["max_trace_load_ms"]["actual"] == longest
    code, doc = _check(tmp_path, tiers, f"      max_trace_load_ms: {longest - 1}\n")
    assert code == 1


def test_a_trace_outside_the_folder_or_on_another_engine_is_refused(tmp_path: Path) -> None:
    inner = tmp_path / "ci"
    inner.mkdir()
    text = DEPLOYMENT.format(tiers="", expect="      min_trace_hit_rate: 0.1\n")
    path = _budget(inner, text.replace("conversation.jsonl", "../conversation.jsonl"))
    result = runner.invoke(app, ["check", str(path)])
    assert result.exit_code == 2
    assert "trace.path '../conversation.jsonl': a budget names traces inside its own folder" in (
        result.stderr
    )
    path = _budget(tmp_path, text.replace("engine: vllm", "engine: ideal"))
    result = runner.invoke(app, ["check", str(path)])
    assert result.exit_code == 2
    assert "trace: replayed with engine vllm or sglang on a gpu" in result.stderr
    path = _budget(tmp_path, text.replace("path: conversation.jsonl", "path: c.jsonl\n      x: 1"))
    result = runner.invoke(app, ["check", str(path)])
    assert result.exit_code == 2
    assert "x" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
