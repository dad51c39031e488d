"""What vLLM 0.32's CPU build did with the 2026 cache kinds it could start, recorded by
scripts/vllm_oracle.py (tests/data/vllm_starts_0.32.0_new_kinds.json), against kvplan.

DeepSeek-V4-Flash starts (the CPU backend forces 256-token blocks): kvplan's vLLM profile
refuses it (its five page sizes are not modelled), and the recording checks what kvplan does
model, the sliding latent window of every layer. Kimi Linear does not start on the CPU build
(its KDA kernels need CUTLASS), so only the recording of the failure is kept."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import kvplan
from kvplan.engines import vllm
from kvplan.errors import UnitError
from kvplan.units import MiB, cdiv

DATA = Path(__file__).parent / "data" / "vllm_starts_0.32.0_new_kinds.json"
CASES: dict[str, dict[str, Any]] = {c["name"]: c for c in json.loads(DATA.read_text())}
V4 = Path(__file__).parent / "fixtures" / "hf" / "deepseek-v4-flash" / "config.json"


def test_the_recording_is_of_vllm_032() -> None:
    assert {c["vllm_version"] for c in CASES.values()} == {"0.32.0"}
    assert "cutlass" in CASES["kda-kimi-linear-48b-a3b"]["error"]


def test_deepseek_v4_window_pages_hold_kvplans_latent() -> None:
    spec = kvplan.load_model(str(V4))
    latent = spec.layers[0]
    # kvplan: 128 tokens of fp8_ds_mla latent, 448 fp8 + 64 bf16 RoPE values + 8 scale bytes
    # = 584 B a token, on each of the 43 layers
    assert latent.window_bytes == 128 * 584  # type: ignore[attr-defined]
    case = CASES["compressed-deepseek-v4-flash-8g"]
    windows = [
        g for g in case["groups"]
        if g["spec"] == "SlidingWindowMLASpec" and g["sliding_window"] == 128
        and g["block_size"] == 64
    ]  # fmt: skip
    assert sum(g["num_layers"] for g in windows) == len(spec.layers) == 43
    # vLLM pages 64 tokens of 584 B, padded to whole 576 B units: 65 x 576 = 37,440 B
    assert {g["page_size_bytes"] for g in windows} == {cdiv(64 * 584, 576) * 576} == {37_440}
    assert case["printed"] == [
        "KV cache size: 20,869 tokens",
        "Maximum concurrency for 8,192 tokens per request: 2.55x",
    ]


def test_kvplan_refuses_the_vllm_profile_vllm_could_start() -> None:
    spec = kvplan.load_model(str(V4))
    cfg = vllm.config(8192, kv_cache_memory_bytes=8192 * MiB, block_size=256)
    with pytest.raises(UnitError, match="compressed_attention layers"):
        vllm.profile(spec, "H200", cfg)
