"""kvplan's vLLM 0.32 rules against what the real engine decided, recorded by
scripts/vllm_oracle.py (vLLM's CPU build, config-only folders, dummy weights, the pool given to
the byte with kv_cache_memory_bytes) in tests/data/vllm_oracle_0.32.0.json.

Every recorded figure must come out exactly: the number of blocks, each group's page bytes and
layers, the printed ``KV cache size`` and ``Maximum concurrency`` lines, and, for a pool too
small for one request, the refusal and vLLM's estimated maximum model length.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

import kvplan
from kvplan.engines import vllm

#: the recording kept in the repository, or a live run's (.ci/run sets KVPLAN_VLLM_ORACLE)
RECORDING = Path(
    os.environ.get("KVPLAN_VLLM_ORACLE")
    or Path(__file__).parent / "data" / "vllm_oracle_0.32.0.json"
)
CASES: list[dict[str, Any]] = json.loads(RECORDING.read_text(encoding="utf-8"))


def _kvplan(case: dict[str, Any]) -> vllm.VllmResult:
    cfg = vllm.config(
        int(case["max_model_len"]),
        block_size=int(case["block_size"]),
        max_num_batched_tokens=int(case["max_model_len"]),
        max_num_seqs=8,
        version="0.32",
        mamba_ssm_cache_dtype=case.get("mamba_ssm_cache_dtype"),
    )
    return vllm.from_available(kvplan.load_model(case["fixture"]), int(case["kv_bytes"]), cfg)


def _printed(case: dict[str, Any], pattern: str) -> list[str]:
    return [m.group(1) for line in case["printed"] for m in [re.search(pattern, line)] if m]


def test_the_recording_covers_the_cache_kinds() -> None:
    assert {c["vllm_version"] for c in CASES} == {"0.32.0"}
    kinds = {c["kind"].split(",")[0].split(" (")[0] for c in CASES}
    assert {
        "full",
        "sliding",
        "sliding/full 1:1",
        "sliding/full 5:1",
        "MLA latent",
        "Mamba2 hybrid",
        "gated delta net",
    } <= kinds
    assert any("error" in c for c in CASES), "a refusal is recorded"


@pytest.mark.parametrize("case", [c for c in CASES if "error" not in c], ids=lambda c: c["name"])
def test_blocks_groups_and_printed_lines(case: dict[str, Any]) -> None:
    if case.get("cpu_avx512_bf16") and case["fixture"] == "qwen3-next-80b-a3b":
        pytest.skip("this CPU's accelerated gated-delta-net kernel keeps the state in float32")
    ours = _kvplan(case)
    assert ours.num_gpu_blocks == case["num_blocks"]
    groups = case["groups"]
    assert ours.num_groups == len(groups)
    assert {g["page_size_bytes"] for g in groups} == {ours.page_bytes}
    # vLLM's groups hold real layers only (gemma-3-1b: 22 sliding layers in groups of 4, 4,
    # 4, 4, 3, 3); kvplan counts the layers every group is padded to
    assert max(g["num_layers"] for g in groups) == ours.group_size
    real_layers = sum(g["num_layers"] for g in groups)
    assert ours.num_groups * ours.group_size - real_layers == ours.padding_layers
    (tokens,) = _printed(case, r"KV cache size: ([\d,]+) tokens")
    assert f"{ours.gpu_kv_cache_tokens:,}" == tokens
    (concurrency,) = _printed(case, r"tokens per request: ([\d.]+)x")
    assert f"{float(ours.max_concurrency):.2f}" == concurrency
    assert ours.fit_blocks >= ours.blocks_per_request


@pytest.mark.parametrize("case", [c for c in CASES if "error" in c], ids=lambda c: c["name"])
def test_refusals_and_the_estimated_maximum_length(case: dict[str, Any]) -> None:
    ours = _kvplan(case)
    assert "To serve at least one request" in case["error"]
    assert ours.fit_blocks < ours.blocks_per_request
    (estimate,) = _printed(case, r"estimated maximum model length is (\d+)")
    assert vllm.estimated_max_model_len(ours) == int(estimate)


def test_refusal_json_carries_the_estimated_maximum_length() -> None:
    (case,) = [c for c in CASES if c["name"] == "exact-llama-3.1-8b"]
    # 1 GiB = 64 blocks of 32 layers x 524,288 B; 0.32 holds one back: 63 x 128 = 8,064 tokens
    log = _kvplan(case).to_engine_result().engine_log
    assert log["estimated_max_model_len"] == 8064
    (fits,) = [c for c in CASES if c["name"] == "gqa-llama-3.1-8b"]
    assert "estimated_max_model_len" not in _kvplan(fits).to_engine_result().engine_log


def test_json_block_size_is_the_one_the_engine_uses() -> None:
    import json as json_module

    from typer.testing import CliRunner

    from kvplan.cli import app

    (case,) = [c for c in CASES if c["name"] == "mamba2-nemotron-h-8b"]
    (attention,) = [g for g in case["groups"] if g["spec"] == "FullAttentionSpec"]
    args = ["plan", "nemotron-h-8b", "--gpu-memory", "80GiB", "-c", "8192", "-e", "vllm"]
    args += ["--engine-version", "0.32", "--block-size", "128", "--kv-cache-memory", "1GiB"]
    doc = json_module.loads(CliRunner().invoke(app, [*args, "-f", "json"]).stdout)
    assert doc["block_size"] == attention["block_size"] == 1152
    assert doc["requested_block_size"] == 128
