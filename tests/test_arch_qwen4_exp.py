"""Qwen4Exp (vLLM 0.32 models/qwen4_exp/nvidia: Qwen4ExpForCausalLM,
Qwen4ExpForConditionalGeneration): gated delta nets, QSA attention every fourth layer, a PLE
block on layer 2.

No config.json of the release is stored here; FLASH_NEXT below is the text_config of
Qwen/Qwen3.8-Flash-Next as public inference ports transcribe it (the fields they read, two of
them agreeing on every key read here; split_ngram_parts and the row divisor from a third).
Every figure is worked by hand from vLLM's source: qsa.py (a FullAttentionSpec of the KV
heads), indexer_qsa.py and common/qsa_cache.py (QSACompressedKeyCache: one bf16 key per
indexer_compress_ratio tokens; QSAKeyStateCache: a ring of ratio raw bf16 keys, each with 3
int64 MRoPE positions after the key rounded up to 4 values), ple_layer.py (the PLE conv tail
over hc_count x hidden channels, dilated by ngram_size), and the parameter count from the
tensor list a public checkpoint validator expects of the release."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from typer.testing import CliRunner

from kvplan import estimate
from kvplan.cli import app
from kvplan.errors import SpecError, UnitError
from kvplan.importers import parameters_from_config
from kvplan.importers.config import spec_from_config
from kvplan.importers.families.qwen4_exp import ngram_rows
from kvplan.model.layers import FullAttention, RecurrentState
from kvplan.model.sparse import IndexedAttention
from kvplan.model.spec import ModelSpec, parse_spec
from kvplan.units import resolve_dtype

FLASH_NEXT: dict[str, Any] = {
    "model_type": "qwen4_exp_text", "dtype": "bfloat16",
    "vocab_size": 248320, "hidden_size": 2560, "num_hidden_layers": 48,
    "num_attention_heads": 24, "num_key_value_heads": 2, "head_dim": 256,
    "rms_norm_eps": 1e-06, "max_position_embeddings": 262144, "full_attention_interval": 4,
    "layer_types": ["linear_attention"] * 3 + ["full_attention"],  # x 12, below
    "rope_parameters": {
        "mrope_interleaved": True, "mrope_section": [11, 11, 10], "partial_rotary_factor": 0.25,
        "rope_theta": 10000000, "rope_type": "default",
    },
    "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
    "linear_num_key_heads": 16, "linear_num_value_heads": 48,
    "output_gate_type": "sigmoid", "hidden_act": "silu",
    "num_experts": 512, "num_experts_per_tok": 10, "moe_intermediate_size": 640,
    "shared_expert_intermediate_size": 640, "hc_count": 4, "hc_lowrank": 320,
    "ple_layer_ids": [2], "ple_embed_dim": 2560, "ple_conv_kernel_size": 4,
    "ngram_size": 3, "heads_per_ngram": 8, "ngram_vocab_size_base": 20000000,
    "split_ngram_parts": 128, "make_ngram_vocab_size_divisible_by": 128,
    "eos_token_id": 248044, "indexer_budget": 2048, "indexer_compress_ratio": 4,
    "indexer_head_dim": 128, "indexer_kv_heads": 1, "indexer_n_heads": 4,
    "tie_word_embeddings": False,
}  # fmt: skip
FLASH_NEXT["layer_types"] = FLASH_NEXT["layer_types"] * 12
VISION = {
    "depth": 27, "hidden_size": 1152, "intermediate_size": 4304, "num_heads": 16,
    "out_hidden_size": 2560, "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2,
}  # fmt: skip
WRAPPED = {
    "model_type": "qwen4_exp",
    "architectures": ["Qwen4ExpForConditionalGeneration"],
    "text_config": FLASH_NEXT,
    "vision_config": VISION,
}
BF16, F32 = resolve_dtype("bfloat16"), resolve_dtype("float32")
#: the n-gram table sizes of layer 2's 16 heads as a public PLE provider lists them
TABLE_SIZES = [
    20000003, 20000023, 20000033, 20000047, 20000059, 20000063, 20000069, 20000077,
    20000081, 20000093, 20000107, 20000147, 20000153, 20000159, 20000161, 20000171,
]  # fmt: skip


def _import(config: dict[str, Any]) -> ModelSpec:
    data, _ = spec_from_config(config)
    return parse_spec({"name": "x", **data})


# a delta net: conv tail 3 x (2 x 16 x 128 + 48 x 128) = 30,720 bf16 values (61,440 B), state
# 48 x 128 x 128 = 786,432 float32 values (3,145,728 B); layer 2 (index 1) adds the PLE tail,
# (4 - 1) x 3 positions x 4 x 2,560 channels = 92,160 bf16 values (184,320 B)
DELTA = RecurrentState("linear_attention", 30_720, 786_432, F32, BF16)
PLE = RecurrentState("linear_attention", 30_720, 786_432, F32, BF16, 92_160)
# QSA: 2 KV heads of 256; key 128 x 2 B per 4 tokens; ring 4 x (128 + 3 x 4) x 2 B = 1,120 B
QSA = IndexedAttention(FullAttention(2, 256, 256), 128, 4, 1_120)


@pytest.mark.parametrize("config", [FLASH_NEXT, WRAPPED], ids=["text", "wrapped"])
def test_layers(config: dict[str, Any]) -> None:
    spec = _import(config)
    assert spec.layers == (DELTA, PLE, DELTA, QSA) + (DELTA, DELTA, DELTA, QSA) * 11
    assert (PLE.state_bytes - DELTA.state_bytes, QSA.state_bytes) == (184_320, 1_120)


def test_bytes_at_the_full_context() -> None:
    spec = _import(WRAPPED)
    # 36 delta nets x (61,440 + 3,145,728) = 115,458,048 B, + the PLE tail 184,320 B;
    # 12 QSA layers: 262,144 x 2 x 2 x 256 x 2 B = 536,870,912 B of K and V,
    # 65,536 keys x 256 B = 16,777,216 B, ring 1,120 B: 553,649,248 B a layer
    fixed = 36 * (61_440 + 3_145_728) + 184_320
    assert estimate(spec, 262_144).kv_cache_bytes == fixed + 12 * 553_649_248 == 6_759_433_344
    # below one group of 4 tokens no compressed key is kept yet
    assert estimate(spec, 3).kv_cache_bytes == fixed + 12 * (3 * 2_048 + 1_120)


def test_tensor_parallel_keeps_the_indexer_and_ple_whole() -> None:
    # TP 4: the 2 KV heads are replicated (one a rank, vLLM's max(1, 2 // 4)); the delta nets'
    # heads and channels split; the indexer's one-head caches and the PLE tail stay whole
    assert QSA.shard(4) == IndexedAttention(FullAttention(1, 256, 256), 128, 4, 1_120)
    assert PLE.shard(4) == RecurrentState("linear_attention", 7_680, 196_608, F32, BF16, 92_160)


def test_without_mrope_the_ring_holds_the_keys_alone() -> None:
    text = {**FLASH_NEXT, "rope_parameters": {"rope_theta": 10000000, "rope_type": "default"}}
    (layer,) = {x for x in _import(text).layers if isinstance(x, IndexedAttention)}
    assert layer.ring_bytes == 4 * 128 * 2


def test_without_the_indexer_keys_attention_is_plain_gqa() -> None:
    text = {k: v for k, v in FLASH_NEXT.items() if not k.startswith("indexer_")}
    kinds = {type(x) for x in _import(text).layers}
    assert FullAttention in kinds
    assert IndexedAttention not in kinds


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"indexer_head_dim": None}, "indexer_head_dim: required with the other QSA indexer"),
        ({"indexer_kv_heads": 2}, "indexer_kv_heads: must be 1"),
        ({"ple_layer_ids": [4]}, "ple_layer_ids: layer 4 is not linear_attention"),
        ({"ple_layer_ids": [49]}, "ple_layer_ids"),
        ({"layer_types": ["sliding_attention"] * 48}, "layer_types.0: 'sliding_attention'"),
        ({"hc_count": 1 << 20}, "hc_count: must be an integer from 2 to 64"),
        # (4,096 - 1) x 3 positions x 4 x 2,560 channels = 125,798,400 values
        ({"ple_conv_kernel_size": 4096}, "a PLE tail of 125,798,400 values"),
    ],
)
def test_bad_configs_name_the_key(change: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        _import({**FLASH_NEXT, **change})


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"heads_per_ngram": 7}, "ple_embed_dim: 2560 is not a multiple of 14"),
        ({"heads_per_ngram": 1 << 12, "ple_embed_dim": 1 << 13}, "n-gram tables, over 4096"),
        ({"ngram_vocab_size_base": 10**19}, "ngram_vocab_size_base"),
    ],
)
def test_bad_parameter_keys_name_the_key(change: dict[str, Any], message: str) -> None:
    # the cache is still read; the parameter count says which key it could not use
    with pytest.raises(SpecError, match=message):
        parameters_from_config({**FLASH_NEXT, **change})
    assert _import({**FLASH_NEXT, **change}).num_parameters is None


def test_ngram_tables_are_the_next_primes() -> None:
    # 16 heads (2 orders x 8) on one PLE layer; rows padded to 128
    assert sum(TABLE_SIZES) == 320_001_446
    assert ngram_rows(20_000_000, 16, 1, 128) == [320_001_536]
    # a second PLE layer's heads take the 16 primes after those
    assert ngram_rows(20_000_000, 8, 2, 1) == [sum(TABLE_SIZES[:8]), sum(TABLE_SIZES[8:])]


def test_parameters_of_the_text_model() -> None:
    h, v, w, r, e, i = 2560, 248320, 4 * 2560, 320, 512, 640
    hyper = w + r * w + w * r + 4 * w  # hc_norm, mix down, mix up, block inject
    mixer = w + 2 * r * w  # the final mixer injects nothing
    moe = e * 2 * i * h + e * h * i + e * h + 3 * 640 * h + h  # experts, router, shared + gate
    qsa = 2 * 24 * 256 * h + 2 * 2 * 256 * h + h * 24 * 256 + 2 * 256 + 5 * 128 * h + 2 * 128
    conv = 2 * 16 * 128 + 48 * 128
    delta = conv * h + 6144 * h + 2 * 48 * h + conv * 4 + 2 * 48 + 128 + h * 6144
    ple = w * h + h * h + 3 * w + w * 4 + 320_001_536 * 160
    expected = 2 * v * h + mixer + 48 * (2 * hyper + moe) + 12 * qsa + 36 * delta + ple
    assert parameters_from_config(FLASH_NEXT).total == expected == 176_943_899_520


def _cli(tmp: Path, *args: str) -> Result:
    """``kvplan ARGS[0] TMP/config.json ARGS[1:]`` on the wrapped config."""
    path = tmp / "config.json"
    path.write_text(json.dumps(WRAPPED), encoding="utf-8")
    return CliRunner().invoke(app, [args[0], str(path), *args[1:]])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("plan", "--engine", "vllm", "-g", "h200", "--max-model-len", "32K"), "PLE conv state"),
        (("calc", "--engine", "llama.cpp", "-c", "8192"), "PLE conv state"),
        (("calc", "--engine", "transformers", "-c", "8192"), "indexed_attention"),
    ],
)
def test_engines_refuse_what_they_do_not_page(
    args: tuple[str, ...], message: str, tmp_path: Path
) -> None:
    result = _cli(tmp_path, *args)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def test_the_ideal_cache_is_the_library_answer_through_the_cli(tmp_path: Path) -> None:
    result = _cli(tmp_path, "calc", "-c", "262144", "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["kv_cache_bytes"] == 6_759_433_344


def test_unit_error_is_the_library_refusal() -> None:
    from kvplan.engines import vllm

    with pytest.raises(UnitError, match="PLE conv state"):
        vllm.profile(_import(WRAPPED), "H200", vllm.config(32768))
