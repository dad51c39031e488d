"""kvplan simulate: the trace replayed on the pool plan --engine vllm gives the deployment, the
same figures in the library and on the command line, and a bad trace refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
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
    # less the null block vLLM's block pool keeps from 0.32 (vllm/v1/core/block_pool.py)
    assert doc["num_blocks"] == planned["num_blocks"] - 1
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


def _run(*extra: str) -> dict:  # type: ignore[type-arg]
    args = ["simulate", str(SAMPLE), "-m", "llama-3.1-8b", "--gpu", "h100", "-f", "json"]
    result = runner.invoke(app, [*args, *extra])
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_a_host_tier_in_the_engines_units_and_over_the_systems_link() -> None:
    """Llama 3.1 8B in bf16: a 16-token block of its 32 layers is 2 x 32 x 8 x 128 x 2 B x 16 =
    2 MiB; 256 GiB of host memory is 131,072 of them, written through from the GPU. HGX
    H100's host link is PCIe Gen5 x16 = 64 GB/s each way, so each block loaded costs 2 MiB /
    64 GB/s, and the loads' time is the blocks loaded at that rate (ceiling, ms a request)."""
    doc = _run("--host-tier", "256GiB")
    (host,) = doc["tiers"]
    block = 2 * 32 * 8 * 128 * 2 * 16
    assert doc["block_bytes"] == block == 2 * 2**20
    assert (host["size_bytes"], host["num_blocks"]) == (256 * 2**30, 131_072)
    assert host["link_bytes_per_s"] == 64 * 10**9
    assert host["loaded_bytes"] == host["loaded_blocks"] * block
    assert host["hit_tokens"] == 16 * host["loaded_blocks"] > 0
    assert doc["reused_tokens"] == doc["hit_tokens"] + host["hit_tokens"]
    assert doc["computed_tokens"] == doc["input_tokens"] - doc["reused_tokens"]
    lower = host["loaded_bytes"] * 1000 // (64 * 10**9)
    assert lower <= doc["load_ms"] <= lower + doc["num_requests"]
    # the GPU's figures are those of the replay without a tier
    alone = _run()
    assert (doc["hit_tokens"], doc["num_blocks"]) == (alone["hit_tokens"], alone["num_blocks"])
    assert alone["tiers"] == []
    assert alone["reused_tokens"] == alone["hit_tokens"]


def test_a_tier_that_holds_the_trace_finds_the_direct_count() -> None:
    """With a disk tier bigger than all the trace's blocks, GPU and tiers together reuse
    exactly what the trace's hash ids repeat (the direct count, tests/test_cache_sim_prefix.py:
    781,568 tokens of 16-token blocks), and the curve grows to it."""
    from test_cache_sim_prefix import _counted

    doc = _run("--host-tier", "64GiB", "--disk-tier", "2TiB", "--link", "disk=7GB/s", "--curve")
    assert doc["reused_tokens"] == _counted(16) == 781_568
    disk = doc["tiers"][1]
    assert disk["link_bytes_per_s"] == 7 * 10**9
    assert disk["evicted_blocks"] == 0
    points = doc["curve"]["points"]
    assert doc["curve"]["tier"] == "disk"
    assert [p["size_bytes"] for p in points] == [
        int(2 * 2**40 * m) for m in (0, 0.125, 0.25, 0.5, 1, 2, 4)
    ]
    reuse = [p["reuse_ratio"] for p in points]
    assert reuse == sorted(reuse)
    assert reuse[-1] == round(781_568 / 5_710_530, 6)


def test_tier_options_refused_in_one_line() -> None:
    cases = {
        ("--host-tier", "64G"): "--host-tier: ambiguous or unknown memory unit",
        ("--link", "nvme=7GB/s", "--disk-tier", "1TiB"): "--link nvme=7GB/s: expected TIER=RATE",
        ("--link", "host=64GB"): "--link host: cannot read bandwidth '64GB'; write e.g. 64GB/s",
        ("--link", "disk=7GB/s"): "--link disk: no --disk-tier given",
        ("--trace-format", "csv"): "trace format 'csv': expected auto, mooncake, token-ids",
    }
    base = ["simulate", str(SAMPLE), "-m", "llama-3.1-8b", "--gpu", "h100"]
    for extra, message in cases.items():
        result = runner.invoke(app, [*base, *extra])
        assert result.exit_code == 2, extra
        assert message in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_a_gpu_whose_system_has_no_disk_figure_asks_for_the_link() -> None:
    result = runner.invoke(
        app, ["simulate", str(SAMPLE), "-m", "llama-3.1-8b", "--gpu", "rtx-3090",
              "--disk-tier", "1TiB"]
    )  # fmt: skip
    assert result.exit_code == 2
    assert "give it (e.g. --link disk=64GB/s)" in result.stderr


def test_sglang_replays_its_radix_tree_on_the_pool_plan_gives() -> None:
    """-e sglang: the token pool plan --engine sglang gives (pages of 1 token), and with a
    tree that holds every page, the direct count (781,593 tokens at 1-token pages, counted
    in tests/test_cache_sim_prefix.py's way)."""
    from test_cache_sim_prefix import _counted

    planned = json.loads(
        runner.invoke(app, ["plan", "llama-3.1-8b", "--gpu", "h100", "-e", "sglang", "-f", "json"])
        .stdout
    )  # fmt: skip
    doc = _run("-e", "sglang")
    assert doc["engine"] == "sglang"
    assert (doc["num_blocks"], doc["block_tokens"]) == (planned["kv_cache_tokens"], 1)
    assert doc["block_bytes"] == 2 * 32 * 8 * 128 * 2
    big = _run("-e", "sglang", "--gpu", "b200", "--curve")
    assert big["curve"]["points"][-1]["hit_ratio"] == round(_counted(1) / 5_710_530, 6)
    # HiCache's host tier below it: a page of 1 token is 128 KiB, 1 TiB is 2^23 of them, and
    # the tree and the tier together find what the trace repeats
    tiered = _run("-e", "sglang", "--host-tier", "1TiB")
    assert tiered["tiers"][0]["num_blocks"] == 2**40 // (2 * 32 * 8 * 128 * 2) == 2**23
    assert tiered["reused_tokens"] == _counted(1)


def test_the_curve_drawn_and_not_overwritten(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "curve.png"
    base = ["simulate", str(SAMPLE), "-m", "llama-3.1-8b", "--gpu", "h100", "--plot", str(out)]
    result = runner.invoke(app, [*base, "--host-tier", "64GiB"])
    assert result.exit_code == 0, result.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    again = runner.invoke(app, base)
    assert again.exit_code == 2
    assert "exists; pass --force" in again.stderr
    assert runner.invoke(app, [*base, "--force"]).exit_code == 0
