"""vLLM's LoRA slots (kvplan.engines.vllm_lora) against the stacks vLLM 0.32.0's CPU build
allocated (tests/data/vllm_lora_0.32.0.json, scripts/vllm_lora_oracle.py) and hand counts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import kvplan
from kvplan.engines.vllm_lora import LORA_CUDA_GRAPH_CASES, VllmLora, lora_bytes
from kvplan.errors import UnitError

RECORDING = Path(__file__).parent / "data" / "vllm_lora_0.32.0.json"
CASES: list[dict[str, Any]] = json.loads(RECORDING.read_text(encoding="utf-8"))


def test_the_recording_ran_every_case_on_vllm_0_32() -> None:
    assert len(CASES) >= 4
    assert all("error" not in case and case["vllm_version"] == "0.32.0" for case in CASES)


@pytest.mark.parametrize("case", CASES, ids=[case["name"] for case in CASES])
def test_stack_bytes_are_what_vllm_allocated(case: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(case["config"]), encoding="utf-8")
    spec = kvplan.load_model(path)
    modules = case["target_modules"]
    lora = VllmLora(
        max_loras=case["max_loras"],
        max_lora_rank=case["max_lora_rank"],
        target_modules=None if modules is None else tuple(modules),
    )
    assert lora_bytes(spec, lora) == case["lora_bytes"]


def test_llama_3_1_8b_by_hand() -> None:
    spec = kvplan.load_model("llama-3.1-8b")
    layer = (
        3 * 16 * 4096 + 6144 * 16  # qkv: A a slice each, B q + 2 kv
        + 16 * 4096 + 4096 * 16  # o
        + 2 * 16 * 4096 + 2 * 14336 * 16  # gate_up
        + 16 * 14336 + 4096 * 16  # down
    )  # fmt: skip
    embeddings = 2 * (128256 + 4096) * 16
    assert lora_bytes(spec, VllmLora(1, 16)) == (32 * layer + embeddings) * 2 == 92_356_608
    # TP 2: column B and row A halve, the embeddings do not
    layer_tp2 = (
        3 * 16 * 4096 + (2048 + 2 * 512) * 16
        + 16 * 2048 + 4096 * 16
        + 2 * 16 * 4096 + 2 * 7168 * 16
        + 16 * 7168 + 4096 * 16
    )  # fmt: skip
    assert lora_bytes(spec, VllmLora(4, 16), tp=2) == (32 * layer_tp2 + embeddings) * 2 * 4
    # TP 16 over 8 KV heads: each rank keeps one KV head (q 256 + 2 x 128)
    qkv_b = lora_bytes(spec, VllmLora(1, 16, ("qkv_proj",)), tp=16)
    assert qkv_b == 32 * (3 * 16 * 4096 + (256 + 2 * 128) * 16) * 2


def test_fully_sharded_splits_the_other_half() -> None:
    spec = kvplan.load_model("llama-3.1-8b")
    o_proj = lora_bytes(spec, VllmLora(1, 16, ("o_proj",), fully_sharded=True), tp=2)
    assert o_proj == 32 * (16 * 2048 + 2048 * 16) * 2
    assert LORA_CUDA_GRAPH_CASES == 2


@pytest.mark.parametrize(
    ("model", "lora", "message"),
    [
        ("llama-3.1-8b", {"max_lora_rank": 24}, "max_lora_rank: 24 is not a rank vLLM takes"),
        ("llama-3.1-8b", {"target_modules": ("w1",)}, "lora_target_modules w1"),
        ("qwen2.5-7b", {"target_modules": ("lm_head", "o_proj")}, "wraps embeddings only"),
        ("deepseek-v2-lite", {}, "dense attention models"),
        ("mixtral-8x7b", {}, "dense attention models"),
    ],
)
def test_refusals_name_the_setting(model: str, lora: dict[str, Any], message: str) -> None:
    with pytest.raises(UnitError, match=message):
        lora_bytes(kvplan.load_model(model), VllmLora(**lora))


def test_the_stacks_and_twice_the_graphs_come_out_of_vllms_pool() -> None:
    from kvplan.engines import vllm

    spec = kvplan.load_model("llama-3.1-8b")
    lora = VllmLora(4, 16)
    plain = vllm.profile(spec, "h100", vllm.config(131072))
    served = vllm.profile(spec, "h100", vllm.config(131072, lora=lora))
    before, after = plain.stages[0].overhead, served.stages[0].overhead
    assert after.weights_bytes - before.weights_bytes == lora_bytes(spec, lora) == 369_426_432
    assert after.cuda_graph_bytes == 2 * before.cuda_graph_bytes > 0
    grown = after.total_bytes - before.total_bytes
    assert plain.stages[0].available_bytes - served.stages[0].available_bytes == grown


def test_pipeline_stages_split_layers_embeddings_and_head() -> None:
    from kvplan.engines import vllm
    from kvplan.engines.vllm_lora import lora_parts

    spec = kvplan.load_model("llama-3.1-8b")
    lora = VllmLora(1, 16)
    plain = vllm.profile(spec, "h100", vllm.config(8192, pipeline_parallel_size=2))
    served = vllm.profile(spec, "h100", vllm.config(8192, pipeline_parallel_size=2, lora=lora))
    layer, embed, head = lora_parts(spec, lora)
    grown = [
        b.overhead.weights_bytes - a.overhead.weights_bytes
        for a, b in zip(plain.stages, served.stages, strict=True)
    ]
    assert grown == [16 * layer + embed, 16 * layer + head]


def _tokens(*args: str) -> tuple[int, str]:
    from typer.testing import CliRunner

    from kvplan.cli import app

    result = CliRunner().invoke(
        app, ["plan", "llama-3.1-8b", "--gpu", "h100", "-c", "32K", "--format", "json", *args]
    )
    return result.exit_code, result.stdout if result.exit_code != 2 else result.stderr


def test_plan_takes_the_lora_flags_and_refuses_them_without_enable_lora() -> None:
    code, out = _tokens("--engine", "vllm", "--max-loras", "4")
    assert code == 2
    assert "--max-loras: needs --enable-lora" in out
    code, out = _tokens("--enable-lora")
    assert code == 2
    assert "not read by --engine ideal" in out
    sglang = ("--engine", "sglang")
    plain = json.loads(_tokens(*sglang)[1])
    lora = ("--enable-lora", "--max-lora-rank", "16", "--lora-target-modules", "all")
    served = json.loads(_tokens(*sglang, *lora)[1])
    # SGLang: 8 slots of rank 16 on Llama 3.1 8B are 671,088,640 B, 5,120 tokens of 128 KiB
    assert plain["kv_cache_tokens"] - served["kv_cache_tokens"] == 671_088_640 // 131_072
