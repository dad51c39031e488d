"""kvplan check, schema and diff: budget files, CI outputs, and reviews of changes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner()

# Llama 3.1 8B with a 40 GiB pool: 40 GiB / (16 tokens x 131,072 B) = 20,480 blocks =
# 327,680 tokens; a 32,768-token request needs 2,048 blocks, so 10 fit; 16 requests reach
# 20,480 blocks / 16 = 1,280 blocks = 20,480 tokens each.
PASSING = """\
deployments:
  - name: chat
    model: llama-3.1-8b
    gpu: h100
    max_model_len: 32K
    kv_cache_memory: 40GiB
    expect:
      min_concurrency: 10
      min_context_at_concurrency: {concurrency: 16, tokens: 20480}
      max_kv_bytes_per_token: 128KiB
      min_kv_cache_tokens: 327680
      fits: true
"""
FAILING = PASSING.replace("min_concurrency: 10", "min_concurrency: 11").replace(
    "tokens: 20480", "tokens: 20481"
)


def write(tmp_path: Path, text: str, name: str = "budget.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_passing_budget_exits_0(tmp_path: Path) -> None:
    result = runner.invoke(app, ["check", str(write(tmp_path, PASSING)), "-f", "json"])
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["schema_version"] == 1
    assert doc["passed"] is True
    actual = {r["assertion"]: r["actual"] for r in doc["results"]}
    assert actual == {
        "min_concurrency": 10,
        "min_context_at_concurrency": 20_480,
        "max_kv_bytes_per_token": 131_072,
        "min_kv_cache_tokens": 327_680,
        "fits": True,
    }
    lines = {r["assertion"]: r["line"] for r in doc["results"]}
    assert lines["min_concurrency"] == 8


def test_failing_budget_exits_1_with_junit(tmp_path: Path) -> None:
    budget = write(tmp_path, FAILING)
    report = tmp_path / "report.xml"
    result = runner.invoke(app, ["check", str(budget), "--junit-xml", str(report)])
    assert result.exit_code == 1
    assert "2 of 5 assertions failed" in result.stdout
    root = ET.parse(report).getroot()
    cases = root.findall(".//testcase")
    assert len(cases) == 5  # one per assertion
    failed = {c.get("name"): c.find("failure") for c in cases if c.find("failure") is not None}
    assert set(failed) == {"min_concurrency", "min_context_at_concurrency"}
    message = failed["min_concurrency"]
    assert message is not None
    assert message.get("message") == "min_concurrency: required >= 11 requests, actual 10 requests"
    assert root.get("failures") == "2"
    # a rerun may overwrite its own report
    again = runner.invoke(app, ["check", str(budget), "--junit-xml", str(report)])
    assert again.exit_code == 1


def test_junit_never_overwrites_a_foreign_file(tmp_path: Path) -> None:
    other = tmp_path / "notes.xml"
    other.write_text("<mine/>", encoding="utf-8")
    budget = write(tmp_path, PASSING)
    result = runner.invoke(app, ["check", str(budget), "--junit-xml", str(other)])
    assert result.exit_code == 2
    assert "pass --force" in result.stderr
    assert other.read_text(encoding="utf-8") == "<mine/>"
    forced = runner.invoke(app, ["check", str(budget), "--junit-xml", str(other), "--force"])
    assert forced.exit_code == 0


def test_github_annotations_and_step_summary(tmp_path: Path) -> None:
    budget = write(tmp_path, FAILING)
    summary = tmp_path / "summary.md"
    result = runner.invoke(
        app,
        ["check", str(budget)],
        env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)},
    )
    assert result.exit_code == 1
    annotations = [line for line in result.stdout.splitlines() if line.startswith("::error")]
    assert annotations == [
        f"::error file={budget},line=8,title=kvplan check::chat: min_concurrency requires 11,"
        " got 10; margin -1 (-9%)",
        f"::error file={budget},line=9,title=kvplan check::chat: min_context_at_concurrency"
        " requires 20,481 tokens, got 20,480 tokens; margin -1 tokens (-0%)",
    ]
    text = summary.read_text(encoding="utf-8")
    assert "| chat | min_concurrency | 11 | 10 | -1 (-9%) | **FAIL** |" in text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            PASSING.replace("min_concurrency:", "min_concurency:"),
            ":8: deployments.0.expect.min_concurency: unknown key; did you mean 'min_concurrency'?",
        ),
        (
            PASSING.replace("max_model_len: 32K", "max_model_len: 32G"),
            ":5: deployments.0.max_model_len: cannot read token count '32G'",
        ),
        (PASSING.replace("model: llama-3.1-8b", "model: llama-9"), "unknown model 'llama-9'"),
        ("deployments: []\n", "deployments: list should have at least 1 item"),
        ("- 1\n", "a budget file is a mapping"),
        (PASSING.replace("gpu: h100", "gpu: h1000"), "unknown GPU 'h1000'"),
        (
            PASSING.replace("min_concurrency: 10", "min_concurrency: true"),
            ":8: deployments.0.expect.min_concurrency: input should be a valid integer",
        ),
        (
            PASSING.replace("fits: true", "fits: 1"),
            ":12: deployments.0.expect.fits: input should be a valid boolean",
        ),
        (
            PASSING.replace("max_model_len: 32K", "max_model_len: " + "9" * 400),
            ":5: deployments.0.max_model_len: token count 9999",
        ),
        (
            PASSING.replace("max_model_len: 32K", "max_model_len: true"),
            ":5: deployments.0.max_model_len: token count: expected an integer or a string, got"
            " bool",
        ),
        (
            PASSING.replace("gpu: h100", "gpu: h100\n    tensor_parallel_size: 4097"),
            ":5: deployments.0.tensor_parallel_size: input should be less than or equal to 4096",
        ),
        (
            PASSING.replace("gpu: h100", "gpu: h100\n    gpu_memory_utilization: true"),
            ":5: deployments.0.gpu_memory_utilization: input should be a valid number",
        ),
        (
            PASSING.replace("model: llama-3.1-8b", "model: " + "x" * 300),
            "unknown model",
        ),
    ],
    ids=[
        "unknown-key",
        "bad-tokens",
        "unknown-model",
        "empty",
        "not-mapping",
        "unknown-gpu",
        "bool-concurrency",
        "int-fits",
        "400-digits",
        "bool-tokens",
        "tp-4097",
        "bool-utilization",
        "long-model-name",
    ],
)
def test_invalid_budget_exits_2(tmp_path: Path, text: str, message: str) -> None:
    result = runner.invoke(app, ["check", str(write(tmp_path, text))])
    assert result.exit_code == 2, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_many_problems_listed_once_each_and_capped(tmp_path: Path) -> None:
    # 30 aliases of a deployment with 2 unknown keys and 3 missing ones: 30 x 5 = 150 problems
    text = "deployments:\n- &a {k0: 1, k1: 1}\n" + "- *a\n" * 29
    result = runner.invoke(app, ["check", str(write(tmp_path, text))])
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 6
    assert lines[-1].endswith(": ... and 145 more problems")  # 150 - 5


def test_assertion_lines_come_from_one_parse(tmp_path: Path) -> None:
    # 200 deployments x 1 assertion: each result carries its line without composing the file
    # again (the old lookup composed the YAML once per assertion)
    import time

    from kvplan.gate.budget import load_budget
    from kvplan.validation import line_locator

    one = PASSING.split("deployments:\n", 1)[1]
    text = "deployments:\n" + one * 200
    path = write(tmp_path, text)
    budget, loaded = load_budget(path)
    assert len(budget.deployments) == 200
    started = time.perf_counter()
    line_of = line_locator(loaded)
    lines = [line_of(("deployments", i, "expect", "fits")) for i in range(200)]
    assert time.perf_counter() - started < 0.5
    assert lines[:2] == [12, 23]  # fits is line 12 of each 11-line deployment after line 1


def test_model_path_relative_to_the_budget_file(tmp_path: Path) -> None:
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "tiny.yaml").write_text(
        "name: tiny\nnum_hidden_layers: 1\nnum_attention_heads: 2\nhead_dim: 3\n"
        "torch_dtype: float32\nnum_parameters: 1000\n",
        encoding="utf-8",
    )
    budget = write(
        tmp_path,
        "deployments:\n  - name: t\n    model: specs/tiny.yaml\n"
        "    gpu: h100\n    max_model_len: 4\n    expect:\n"
        "      max_kv_bytes_per_token: 48\n",
    )  # 2 x 2 heads x 3 dims x 4 B
    result = runner.invoke(app, ["check", str(budget)])
    assert result.exit_code == 0, result.stdout + result.stderr


@pytest.mark.parametrize("kind", ["spec", "budget"])
def test_schema(kind: str) -> None:
    result = runner.invoke(app, ["schema", kind])
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert doc["$schema"].endswith("2020-12/schema")
    assert doc["additionalProperties"] is False
    key = "num_hidden_layers" if kind == "spec" else "deployments"
    assert key in doc["properties"]


SPEC = Path(__file__).resolve().parent.parent / "model_specs" / "llama-3.1-8b.yaml"


@pytest.mark.parametrize(
    ("old", "new", "changed", "effect"),
    [
        (
            "num_key_value_heads: 8",
            "num_key_value_heads: 4",
            "num_key_value_heads",
            "bytes per token 128.00 KiB -> 64.00 KiB (-50%)",
        ),
        (
            # a float32 checkpoint is served, and cached, in bfloat16 (kvplan.model.dtypes): the
            # diff names the change and says that no answer moves
            "torch_dtype: bfloat16",
            "torch_dtype: float32",
            "torch_dtype",
            "none of the answers changes",
        ),
        (
            "head_dim: 128",
            "head_dim: 128\nsliding_window: 4096",
            "sliding_window",
            "kv cache bytes at 32,768 tokens 4.00 GiB -> 512.00 MiB (-88%)",
        ),
    ],
    ids=["kv-heads", "dtype", "layer-types"],
)
def test_diff_specs(tmp_path: Path, old: str, new: str, changed: str, effect: str) -> None:
    text = SPEC.read_text(encoding="utf-8")
    if old not in text:  # the bundled spec may not state head_dim
        text = text.replace("num_key_value_heads: 8", "num_key_value_heads: 8\nhead_dim: 128")
    before = write(tmp_path, text, "old.yaml")
    after = write(tmp_path, text.replace(old, new), "new.yaml")
    result = runner.invoke(app, ["diff", str(before), str(after)])
    assert result.exit_code == 0, result.stderr
    assert f"  {changed}:" in result.stdout
    assert effect in result.stdout
    doc = json.loads(runner.invoke(app, ["diff", str(before), str(after), "-f", "json"]).stdout)
    assert doc["schema_version"] == 1
    assert doc["kind"] == "spec"


def test_diff_budgets_shows_the_answers_moving(tmp_path: Path) -> None:
    before = write(tmp_path, PASSING, "old.yaml")
    after = write(
        tmp_path, PASSING.replace("kv_cache_memory: 40GiB", "kv_cache_memory: 30GiB"), "new.yaml"
    )
    result = runner.invoke(app, ["diff", str(before), str(after)])
    assert result.exit_code == 0, result.stderr
    # 30 GiB: 15,360 blocks / 2,048 = 7 requests of 32,768 tokens (was 10)
    assert "chat: max concurrency 10 -> 7 (-30%)" in result.stdout
    assert "chat: kv_cache_memory: 42949672960 -> 32212254720" in result.stdout


def test_diff_against_a_git_revision(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t.invalid"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    write(repo, PASSING, "budget.yaml")
    subprocess.run([*git, "add", "budget.yaml"], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    write(repo, PASSING.replace("kv_cache_memory: 40GiB", "kv_cache_memory: 20GiB"))
    result = subprocess.run(
        [sys.executable, "-m", "kvplan", "diff", "HEAD:budget.yaml", "budget.yaml"],
        cwd=repo,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert "max concurrency 10 -> 5 (-50%)" in result.stdout


def test_shell_completion() -> None:
    script = runner.invoke(app, ["--show-completion", "bash"])
    assert script.exit_code == 0
    assert "_KVPLAN_COMPLETE=complete_bash" in script.stdout
    # the completion backend completes command names
    completed = subprocess.run(
        [sys.executable, "-m", "kvplan"],
        env={
            **os.environ,
            "_KVPLAN_COMPLETE": "complete_bash",
            "COMP_WORDS": "kvplan che",
            "COMP_CWORD": "1",
        },
        capture_output=True,
        text=True,
    )
    assert "check" in completed.stdout.split()


@pytest.mark.parametrize("engine", ["ideal", "vllm"])
def test_min_free_memory_never_counts_the_headroom(tmp_path: Path, engine: str) -> None:
    # Llama 3.1 8B on one H100 at 32,768 tokens: the pool holds whole 4 GiB requests, so what
    # a deployment could still use is less than one request (4 GiB); the 10% utilization holds
    # back (85,029,027,840 - 76,526,125,056 = 8,502,902,784 B) is not free.
    text = (
        "deployments:\n  - name: d\n    model: llama-3.1-8b\n    gpu: h100\n"
        f"    engine: {engine}\n    max_model_len: 32K\n"
        "    expect:\n      min_free_memory: 7GiB\n"
    )
    result = runner.invoke(app, ["check", str(write(tmp_path, text)), "--format", "json"])
    assert result.exit_code == 1, result.stdout + result.stderr
    (checked,) = json.loads(result.stdout)["results"]
    assert 0 <= checked["actual"] < 4 * 1024**3


@pytest.mark.parametrize(("version", "requests"), [("0.19", 1), ("0.32", 0)])
def test_vllm_budget_counts_requests_as_the_version_does(
    tmp_path: Path, version: str, requests: int
) -> None:
    # 1 GiB of 2 MiB blocks (16 tokens x 32 layers x 8 heads x 128 x 2 x 2 B) = 512 blocks, and
    # an 8,192-token request needs 512: 0.19 holds it, 0.32 holds the null block back first
    text = (
        "deployments:\n  - name: d\n    model: llama-3.1-8b\n    gpu: h100\n    engine: vllm\n"
        f"    engine_version: '{version}'\n    max_model_len: 8192\n    kv_cache_memory: 1GiB\n"
        "    expect:\n      min_concurrency: 1\n"
    )
    result = runner.invoke(app, ["check", str(write(tmp_path, text)), "--format", "json"])
    (checked,) = json.loads(result.stdout)["results"]
    assert checked["actual"] == requests
    assert result.exit_code == (0 if requests else 1)


# JUnit reports each value once, with its unit (it said "required 12 (12), actual 6 (6)").
EVERY_KIND_FAILING = (
    PASSING.replace("min_concurrency: 10", "min_concurrency: 11")
    .replace("tokens: 20480", "tokens: 20481")
    .replace("max_kv_bytes_per_token: 128KiB", "max_kv_bytes_per_token: 64KiB")
    .replace("min_kv_cache_tokens: 327680", "min_kv_cache_tokens: 327681")
    .replace("fits: true", "fits: false")
)


def test_junit_states_each_value_once_with_its_unit(tmp_path: Path) -> None:
    budget = write(tmp_path, EVERY_KIND_FAILING)
    report = tmp_path / "report.xml"
    result = runner.invoke(app, ["check", str(budget), "--junit-xml", str(report)])
    assert result.exit_code == 1, result.output
    failures = {
        c.get("name"): c.find("failure") for c in ET.parse(report).getroot().iter("testcase")
    }
    messages = {name: f.get("message") for name, f in failures.items() if f is not None}
    texts = {name: f.text for name, f in failures.items() if f is not None}
    assert messages == {
        # 10 requests fit (PASSING's comment), 11 asked
        "min_concurrency": "min_concurrency: required >= 11 requests, actual 10 requests",
        # 16 requests reach 20,480 tokens each
        "min_context_at_concurrency": "min_context_at_concurrency: required >= 20,481 tokens,"
        " actual 20,480 tokens",
        # 2 x 32 layers x 8 KV heads x 128 x 2 B = 131,072 B = 128 KiB per token; 64 KiB asked
        "max_kv_bytes_per_token": "max_kv_bytes_per_token: required <= 64.00 KiB (65,536 bytes),"
        " actual 128.00 KiB (131,072 bytes)",
        # 20,480 blocks x 16 tokens = 327,680
        "min_kv_cache_tokens": "min_kv_cache_tokens: required >= 327,681 tokens,"
        " actual 327,680 tokens",
        "fits": "fits: required no, actual yes",
    }
    # margins: 10 - 11 = -1 of 11 (-9%); 64 KiB - 128 KiB = -65,536 B (-100%)
    assert texts["min_concurrency"] == (
        "chat: min_concurrency: required >= 11 requests, actual 10 requests,"
        " margin -1 request (-9%)"
    )
    assert texts["max_kv_bytes_per_token"].endswith(", margin -64.00 KiB (-65,536 bytes) (-100%)")
    assert texts["fits"] == "chat: fits: required no, actual yes"
    # no value shown twice, such as "11 (11)"
    for text in [*messages.values(), *texts.values()]:
        assert "(11)" not in text
        assert "(10)" not in text
        assert "(20480)" not in text


@pytest.mark.parametrize(
    ("assertion", "unit", "required", "actual", "described"),
    [
        # 2 GiB = 2,147,483,648 B; 1 GiB = 1,073,741,824 B
        (
            "min_free_memory",
            "bytes",
            2 << 30,
            1 << 30,
            "required >= 2.00 GiB (2,147,483,648 bytes), actual 1.00 GiB (1,073,741,824 bytes)",
        ),
        # below 1 KiB the display is already the exact count
        (
            "max_kv_bytes_per_token",
            "bytes",
            512,
            1_024,
            "required <= 512 B, actual 1.00 KiB (1,024 bytes)",
        ),
        ("min_concurrency", "requests", 1, 0, "required >= 1 request, actual 0 requests"),
        (
            "min_kv_cache_tokens",
            "tokens",
            32_768,
            4_096,
            "required >= 32,768 tokens, actual 4,096 tokens",
        ),
        ("fits", "bool", True, False, "required yes, actual no"),
    ],
)
def test_assertion_described_in_its_unit(
    assertion: str, unit: str, required: int | bool, actual: int | bool, described: str
) -> None:
    from kvplan.gate.budget import AssertionResult

    r = AssertionResult("d", assertion, required, actual, False, None, unit)
    assert r.described == described


LORA = """\
deployments:
  - name: adapters
    model: llama-3.1-8b
    gpu: h100
    engine: vllm
    max_model_len: 8K
    enable_lora: true
    max_loras: 4
    lora_target_modules: [qkv_proj, o_proj]
    expect:
      min_concurrency: 1
"""


def test_a_budget_asks_lora_slots_as_plan_does(tmp_path: Path) -> None:
    budget = write(tmp_path, LORA)
    doc = json.loads(runner.invoke(app, ["check", str(budget), "-f", "json"]).stdout)
    args = ["plan", "llama-3.1-8b", "--gpu", "h100", "-e", "vllm", "-c", "8K", "--enable-lora"]
    args += ["--max-loras", "4", "--lora-target-modules", "qkv_proj,o_proj", "-f", "json"]
    planned = json.loads(runner.invoke(app, args).stdout)
    assert doc["results"][0]["actual"] == planned["answer"]["max_concurrency"]
    # a LoRA key an engine does not read is refused by name, as plan refuses the flag
    other = write(tmp_path, LORA.replace("engine: vllm", "engine: trtllm"))
    result = runner.invoke(app, ["check", str(other)])
    assert result.exit_code == 2
    assert "--enable-lora: not read by --engine trtllm" in result.stderr
