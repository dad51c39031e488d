"""The formula engine against hand-worked numbers.

The first table copies every case of the public worked examples (shared reference
worked_examples.yaml) with its arithmetic in the id; the rest are worked here by hand.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import kvplan
from kvplan.errors import UnitError
from kvplan.model.estimator import bytes_per_token, estimate, explain
from kvplan.model.spec import ModelSpec, load_spec, parse_spec
from kvplan.units import GiB


def model(name: str) -> ModelSpec:
    return kvplan.load_model(name)


def test_explainer_one_layer_192_bytes(tiny_spec: Path) -> None:
    # 2 (K and V) x 4 positions x 2 heads x 3 dims x 4 bytes: a float32 cache, asked for
    # (the float32 checkpoint is served, and cached, in bfloat16 by default: half of it)
    est = estimate(load_spec(tiny_spec), 4, kv_dtype="float32")
    assert est.kv_cache_bytes == 192
    assert (est.breakdown[0].k_bytes, est.breakdown[0].v_bytes) == (96, 96)


@pytest.mark.parametrize(
    ("name", "per_token"),
    [
        pytest.param("qwen3-8b", 147_456, id="qwen3-8b: 2*36*8*128*2 = 147456 B/token"),
        pytest.param("llama-3.1-8b", 131_072, id="llama-3.1-8b: 2*32*8*128*2 = 131072 B/token"),
        pytest.param("llama-3.1-70b", 327_680, id="llama-3.1-70b: 2*80*8*128*2 = 327680 B/token"),
        pytest.param("deepseek-v3", 70_272, id="deepseek-v3: 61*(512+64)*2 = 70272 B/token"),
    ],
)
def test_worked_bytes_per_token(name: str, per_token: int) -> None:
    assert bytes_per_token(model(name)) == per_token
    assert estimate(model(name), 1).kv_cache_bytes == per_token


@pytest.mark.parametrize(
    ("tokens", "total"),
    [
        pytest.param(32768, 4_831_838_208, id="qwen3-8b@32768: 147456*32768 = 4.50 GiB"),
        pytest.param(131072, 19_327_352_832, id="qwen3-8b@131072: 147456*131072 = 18.00 GiB"),
    ],
)
def test_qwen3_8b_at_context(tokens: int, total: int) -> None:
    assert estimate(model("qwen3-8b"), tokens).kv_cache_bytes == total


def test_mha_8gib_boundary() -> None:
    # 2 x 32 x 32 x 128 x 2 = 524288 B/token; 8 GiB / 524288 = 16384 tokens; 16385 do not fit
    mha = parse_spec(
        {
            "name": "mha",
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "head_dim": 128,
            "torch_dtype": "float16",
        }
    )
    assert bytes_per_token(mha) == 524_288
    assert estimate(mha, 16384).kv_cache_bytes == 8 * GiB
    assert estimate(mha, 16385).kv_cache_bytes > 8 * GiB


def test_gemma_3_27b_hybrid_at_131072() -> None:
    # 2 x 16 x 128 x 2 x (10 x 131072 + 52 x 1024) = 11,173,625,856
    est = estimate(model("gemma-3-27b"), 131072)
    assert est.kv_cache_bytes == 11_173_625_856
    kinds = {row.kind: (row.num_layers, row.tokens_retained) for row in est.breakdown}
    assert kinds == {"sliding_attention": (52, 1024), "full_attention": (10, 131072)}
    # past the window only the 10 global layers grow: 2 x 16 x 128 x 2 x 10
    assert est.bytes_per_token == 81_920


@pytest.mark.parametrize(
    ("kv_dtype", "per_token"),
    [
        pytest.param("fp8", 65_536, id="fp8: 2*32*8*128*1"),
        pytest.param("float32", 262_144, id="f32: 2*32*8*128*4"),
        pytest.param("q8_0", 69_632, id="q8_0: 2*32*(1024/32*34)"),
        pytest.param("q4_0", 36_864, id="q4_0: 2*32*(1024/32*18)"),
        pytest.param("nvfp4", 36_864, id="nvfp4: 2*32*(1024/16*9)"),
        pytest.param("int8", 65_536, id="int8: 2*32*8*128*1"),
    ],
)
def test_cache_dtypes_llama_3_1_8b(kv_dtype: str, per_token: int) -> None:
    assert bytes_per_token(model("llama-3.1-8b"), kv_dtype) == per_token


def test_k_and_v_dtypes_differ() -> None:
    # llama.cpp -ctk q8_0 -ctv q4_0: 32 layers x (32 x 34 + 32 x 18) B
    est = estimate(model("llama-3.1-8b"), 1, k_dtype="q8_0", v_dtype="q4_0")
    assert est.kv_cache_bytes == 32 * (32 * 34 + 32 * 18)
    assert est.kv_dtype == "q8_0/q4_0"
    assert est.k_bytes == 32 * 32 * 34
    assert est.v_bytes == 32 * 32 * 18


def test_batch_multiplies_everything_and_per_token_is_per_sequence() -> None:
    one = estimate(model("jamba-v0.1"), 1000)
    eight = estimate(model("jamba-v0.1"), 1000, batch_size=8)
    assert eight.kv_cache_bytes == 8 * one.kv_cache_bytes
    assert eight.bytes_per_token == one.bytes_per_token == 16_384


def test_hybrid_state_is_constant_and_counted() -> None:
    # Jamba: 4 attention layers (2*4*8*128*2 = 16384 B/token) + 28 Mamba1 layers of
    # (8192*3 + 8192*16) float32 values = 17,432,576 B per sequence
    jamba = model("jamba-v0.1")
    assert estimate(jamba, 0).kv_cache_bytes == 17_432_576
    assert estimate(jamba, 4096).kv_cache_bytes == 17_432_576 + 4096 * 16_384
    assert estimate(jamba, 4096).state_bytes == 17_432_576


def test_mla_has_no_v_and_ignores_kv_heads() -> None:
    est = estimate(model("deepseek-v3"), 1000, kv_dtype="fp8")
    assert est.v_bytes == 0
    assert est.kv_cache_bytes == 61 * 576 * 1000


def test_sliding_layers_stop_growing_past_window() -> None:
    # gpt-oss-20b: 12 sliding (window 128) + 12 full layers, 8 KV heads x 64, bf16
    spec = model("gpt-oss-20b")
    per_layer_token = 2 * 8 * 64 * 2
    assert estimate(spec, 100).bytes_per_token == 24 * per_layer_token
    assert estimate(spec, 128).bytes_per_token == 12 * per_layer_token
    assert estimate(spec, 10_000).kv_cache_bytes == per_layer_token * (12 * 10_000 + 12 * 128)


def test_chunked_layers_cap_at_chunk() -> None:
    # Llama 4 Scout: 48 layers, 3 of 4 chunked at 8192; 8 KV heads x 128, bf16
    est = estimate(model("llama-4-scout"), 100_000)
    rows = {row.kind: row for row in est.breakdown}
    assert rows["chunked_attention"].tokens_retained == 8192
    assert rows["chunked_attention"].num_layers == 36
    assert est.kv_cache_bytes == 4096 * (36 * 8192 + 12 * 100_000)


def test_explain_works_the_numbers() -> None:
    lines = explain(estimate(model("llama-3.1-8b"), 32768, batch_size=8, kv_dtype="fp8"))
    text = "\n".join(lines)
    assert "2 (K,V) x 8 heads x 128 dims x 1 B (fp8_e4m3) x 32,768 tokens = 67,108,864 B" in text
    assert "x 32 layers x 8 sequences = 17,179,869,184 B" in text
    assert lines[-1] == "total: 17,179,869,184 = 17,179,869,184 B"


def test_auto_kv_dtype_is_model_dtype() -> None:
    spec = model("command-r")  # ships float16
    assert estimate(spec, 1).kv_dtype == "float16"
    assert estimate(spec, 1, kv_dtype="auto").kv_dtype == "float16"


@pytest.mark.parametrize(("tokens", "batch"), [(-1, 1), (1, 0)])
def test_bad_arguments(tokens: int, batch: int) -> None:
    with pytest.raises(UnitError):
        estimate(model("llama-3.1-8b"), tokens, batch_size=batch)


def test_unknown_kv_dtype() -> None:
    with pytest.raises(UnitError, match="allowed"):
        estimate(model("llama-3.1-8b"), 1, kv_dtype="fp9")
