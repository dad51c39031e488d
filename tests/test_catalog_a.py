"""The first half of the catalog (vLLM architectures A to H): the architectures these families
register, the model types added with them imported from their released config.json fixtures
(the cache worked by hand), the config class defaults each rule fills in, and parameter counts
worked by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvplan.catalog.lookup import load_model
from kvplan.errors import SpecError
from kvplan.importers import import_config, parameters_from_config
from kvplan.importers.config import spec_from_config
from kvplan.importers.registry import list_architectures
from kvplan.model.estimator import bytes_per_token

FIXTURES = Path(__file__).parent / "fixtures" / "hf"
VLLM_NAMES = set(
    (Path(__file__).parent / "data" / "vllm_0.32_text_generation_architectures.txt")
    .read_text(encoding="utf-8")
    .split()
)

#: The rules modules of this half.
FAMILIES = {
    "afmoe",
    "apertus",
    "bailing",
    "cohere2",
    "dbrx",
    "deepseek",
    "ernie",
    "exaone",
    "falcon",
    "gemma",
    "glm",
    "gpt2",
    "gpt_oss",
    "granite",
}

#: Classes config.json names that vLLM 0.32 lists among its multimodal, not its text, models.
MULTIMODAL = {"Gemma3ForConditionalGeneration"}


def _registered() -> set[str]:
    return {name for a in list_architectures() if a.family in FAMILIES for name in a.architectures}


def test_every_registered_class_is_a_vllm_class() -> None:
    assert _registered() - MULTIMODAL <= VLLM_NAMES


def test_this_half_registers_its_share_of_vllm_text_classes() -> None:
    # Afmoe, Apertus, BailingMoe, BailingMoeV2, Bloom, ChatGLMModel,
    # ChatGLMForConditionalGeneration, Cohere2, Dbrx, Deepseek, DeepseekV2, DeepseekV3, Ernie4_5,
    # Ernie4_5_Moe, Exaone, Exaone4, Falcon, Gemma, Gemma2, Gemma3, Glm4, Glm4Moe, Glm4MoeLite,
    # GptOss, GPT2LMHeadModel, GPTJ, Granite, GraniteMoe, GraniteMoeHybrid: 29 of vLLM's A-H
    # names (OPTForCausalLM, in gpt2.py, lies past H)
    first_half = {n for n in _registered() & VLLM_NAMES if n[0].upper() <= "H"}
    assert len(first_half) >= 29, sorted(first_half)
    assert "OPTForCausalLM" in _registered()


# (fixture, model_type, layer kinds, KV bytes per token at bf16) worked by hand
FIXTURE_CACHES: list[tuple[str, str, dict[str, int], int]] = [
    # 3 sliding : 1 global of 32 layers; 2 x 32 x 8 K/V heads x 128 x 2 B
    ("command-r7b", "cohere2", {"SlidingWindowAttention": 24, "FullAttention": 8}, 131072),
    # 64 layers, 16 global; 2 x 64 x 8 x 128 x 2 B
    ("command-a", "cohere2", {"SlidingWindowAttention": 48, "FullAttention": 16}, 262144),
    # multi-head: 2 x 28 x 16 heads x (4096 / 16 = 256) x 2 B
    ("gpt-j-6b", "gptj", {"FullAttention": 28}, 458752),
    # multi-head, n_embed 1024: 2 x 24 x 16 heads x 64 x 2 B
    ("bloomz-560m", "bloom", {"FullAttention": 24}, 98304),
    # 2 x 18 x 2 K/V heads x 128 (stated) x 2 B
    ("ernie-4.5-0.3b", "ernie4_5", {"FullAttention": 18}, 18432),
    # 2 x 28 x 4 K/V heads x 128 x 2 B
    ("ernie-4.5-21b-a3b", "ernie4_5_moe", {"FullAttention": 28}, 57344),
    # num_layers 32: 2 x 32 x 8 x (4096 / 32 = 128) x 2 B
    ("exaone-3.0-7.8b", "exaone", {"FullAttention": 32}, 131072),
    # 3 sliding : 1 global of 64; 2 x 64 x 8 x 128 x 2 B
    ("exaone-4.0-32b", "exaone4", {"SlidingWindowAttention": 48, "FullAttention": 16}, 262144),
    # no MLA in V1: 2 x 28 x 16 K/V heads x (2048 / 16 = 128) x 2 B
    ("deepseek-moe-16b-base", "deepseek", {"FullAttention": 28}, 229376),
    # MLA: 47 x (512 + 64) x 2 B
    ("glm-4.7-flash", "glm4_moe_lite", {"MLALatent": 47}, 54144),
    # 2 x 32 x 8 K/V heads x (1536 / 24 = 64) x 2 B
    ("granite-3.1-3b-a800m", "granitemoe", {"FullAttention": 32}, 65536),
    # 3 sliding : 1 global of 56 (global_attn_every_n_layers 4); 2 x 56 x 2 x 128 x 2 B
    ("trinity-nano", "afmoe", {"SlidingWindowAttention": 42, "FullAttention": 14}, 57344),
    # 2 x 32 x 8 K/V heads x (4096 / 32 = 128) x 2 B
    ("apertus-8b", "apertus", {"FullAttention": 32}, 131072),
    # 2 x 28 x 4 K/V heads x (2048 / 16 = 128) x 2 B
    ("ling-lite-1.5", "bailing_moe", {"FullAttention": 28}, 57344),
]


@pytest.mark.parametrize(
    ("name", "model_type", "kinds", "per_token"),
    FIXTURE_CACHES,
    ids=[f"{row[0]}: {row[3]} B/token" for row in FIXTURE_CACHES],
)
def test_fixture_imports_to_the_cache_worked_by_hand(
    name: str, model_type: str, kinds: dict[str, int], per_token: int
) -> None:
    spec = import_config(FIXTURES / name).spec
    assert spec.model_type == model_type
    counts: dict[str, int] = {}
    for layer in spec.layers:
        counts[type(layer).__name__] = counts.get(type(layer).__name__, 0) + 1
        if type(layer).__name__ == "SlidingWindowAttention":
            assert layer.window == (2048 if model_type == "afmoe" else 4096)
    assert counts == kinds
    assert bytes_per_token(spec, "bfloat16") == per_token


@pytest.mark.parametrize(
    ("name", "per_token"),
    [
        ("command-r7b", 131072),
        ("command-a", 262144),
        ("gpt-j-6b", 458752),
        ("ernie-4.5-0.3b", 18432),
        ("exaone-3.0-7.8b", 131072),
        ("exaone-4.0-32b", 262144),
        ("glm-4.7-flash", 54144),
        ("trinity-nano", 57344),
        ("apertus-8b", 131072),
        ("ling-lite-1.5", 57344),
        # use_sliding_window false: 2 x 28 x 2 K/V heads x (1536 / 12 = 128) x 2 B
        ("deepseek-r1-distill-qwen-1.5b", 28672),
    ],
)
def test_bundled_models_cache_as_worked_by_hand(name: str, per_token: int) -> None:
    assert bytes_per_token(load_model(name), "bfloat16") == per_token


def _config(model_type: str, **keys: Any) -> dict[str, Any]:
    base = {
        "model_type": model_type,
        "num_hidden_layers": 8,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 128,
        "vocab_size": 100,
    }
    return {**base, **keys}


def test_cohere2_pattern_defaults_to_four() -> None:
    # a cohere2 config without sliding_window_pattern or layer_types: Cohere2Config's 4
    data, notes = spec_from_config(_config("cohere2"))
    assert data["layer_types_pattern"] == ["sliding_attention"] * 3 + ["full_attention"]
    assert data["sliding_window"] == 4096  # Cohere2Config's default window
    assert any("sliding_window_pattern 4" in note for note in notes)


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        # Exaone4Config: pattern 4 and window 4096 when the file states neither
        ({}, ["sliding_attention"] * 3 + ["full_attention"]),
        # an L/G string names each layer of the period
        ({"sliding_window_pattern": "LG"}, ["sliding_attention", "full_attention"]),
        (
            {"sliding_window": 1024, "sliding_window_pattern": 2},
            ["sliding_attention", "full_attention"],
        ),
    ],
    ids=["defaults", "string LG", "int 2"],
)
def test_exaone4_layer_types(keys: dict[str, Any], expected: list[str]) -> None:
    data, _ = spec_from_config(_config("exaone4", **keys))
    assert data["layer_types"] == expected * (8 // len(expected))
    assert data["sliding_window"] == keys.get("sliding_window", 4096)


def test_exaone4_without_a_window_is_global() -> None:
    data, notes = spec_from_config(_config("exaone4", sliding_window=None))
    assert "layer_types" not in data
    assert "sliding_window" not in data
    assert any("every layer global" in note for note in notes)


def test_exaone4_refuses_a_pattern_that_is_not_l_and_g() -> None:
    with pytest.raises(SpecError, match="sliding_window_pattern"):
        spec_from_config(_config("exaone4", sliding_window_pattern="LLX"))


@pytest.mark.parametrize(
    ("model_type", "kv_heads", "head_dim"),
    [
        # Ernie4_5Config: 2 K/V heads, head_dim 128
        ("ernie4_5", 2, 128),
        # Ernie4_5_MoeConfig: 4 K/V heads, no head_dim (64 / 4 heads = 16)
        ("ernie4_5_moe", 4, None),
    ],
)
def test_ernie_config_class_defaults(model_type: str, kv_heads: int, head_dim: int | None) -> None:
    config = _config(model_type, moe_num_experts=4, moe_k=2, moe_intermediate_size=32)
    del config["num_key_value_heads"]
    data, _ = spec_from_config(config)
    assert data["num_key_value_heads"] == kv_heads
    assert data.get("head_dim") == head_dim
    assert data["tie_word_embeddings"] is True


@pytest.mark.parametrize(
    ("name", "total"),
    [
        # Command R7B: embeddings 256000 x 4096 = 1,048,576,000 (tied); per layer q/o 2 x 4096^2
        # + k/v 2 x 4096 x 1024 = 41,943,040, MLP 3 x 4096 x 14336 = 176,160,768, one norm
        # 4096: 218,107,904 x 32 = 6,979,452,928; final norm 4096: 8,028,033,024
        ("command-r7b", 8_028_033_024),
        # GPT-J: wte 50400 x 4096 = 206,438,400; lm_head + bias 206,488,800; per layer q,k,v,o
        # 4 x 4096^2 = 67,108,864, fc_in/fc_out 2 x 4096 x 16384 + 16384 + 4096 = 134,238,208,
        # ln_1 8192: 201,355,264 x 28 = 5,637,947,392; ln_f 8192: 6,050,882,784
        ("gpt-j-6b", 6_050_882_784),
        # BLOOM-560m: 250880 x 1024 = 256,901,120 + embedding LayerNorm 2048; per layer qkv
        # 1024 x 3072 + 3072, dense 1024^2 + 1024, MLP 2 x 1024 x 4096 + 4096 + 1024, two
        # LayerNorms 4096: 12,596,224 x 24 = 302,309,376; ln_f 2048: 559,214,592
        ("bloomz-560m", 559_214_592),
        # EXAONE 4.0 32B: 102400 x 5120 x 2 (untied) = 1,048,576,000; per layer q/o 2 x 5120^2
        # + k/v 2 x 5120 x 1024 = 62,914,560, q/k norms 256, MLP 3 x 5120 x 27392 = 420,741,120,
        # two norms 10240: 483,666,176 x 64 = 30,954,635,264; final norm 5120: 32,003,216,384
        ("exaone-4.0-32b", 32_003_216_384),
    ],
)
def test_parameters_by_hand(name: str, total: int) -> None:
    config = json.loads((FIXTURES / name / "config.json").read_text(encoding="utf-8"))
    assert parameters_from_config(config).total == total
