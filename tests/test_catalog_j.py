"""Attention-only architectures of vLLM 0.32: TeleChat 2/3, Laguna, Orion, MiniCPM, IQuest-Coder
Loop and Hunyuan 3 from their released config.json files, and Solar, HyperCLOVA X (and its vision
v2 wrapper), Step 1 / 3 text / 3.5, Granite SWA / shared MoE, Command A MoE, K-EXAONE,
IQuest-Coder, PLaMo 3 and MuseGlimmer from configs built here out of their config classes'
defaults (no released file of theirs is bundled). Every figure is worked by hand in a comment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvplan import estimate
from kvplan.errors import SpecError
from kvplan.importers import import_config, parameters_from_config
from kvplan.importers.config import spec_from_config
from kvplan.importers.registry import list_architectures
from kvplan.model.layers import FullAttention, SlidingWindowAttention
from kvplan.model.spec import ModelSpec, parse_spec

FIXTURES = Path(__file__).parent / "fixtures" / "hf"
VLLM_CLASSES = Path(__file__).parent / "data" / "vllm_0.32_text_generation_architectures.txt"

#: The vLLM classes this catalog registers.
CLASSES = (
    "TeleChat2ForCausalLM",
    "TeleChat3ForCausalLM",
    "LagunaForCausalLM",
    "OrionForCausalLM",
    "MiniCPMForCausalLM",
    "SolarForCausalLM",
    "HyperCLOVAXForCausalLM",
    "Step3TextForCausalLM",
    "GraniteSWAForCausalLM",
    "GraniteMoeSWAForCausalLM",
    "GraniteMoeSharedForCausalLM",
    "Cohere2MoeForCausalLM",
    "ExaoneMoEForCausalLM",
    "ExaoneMoeForCausalLM",
    "IQuestCoderForCausalLM",
    "IQuestLoopCoderForCausalLM",
    "HYV3ForCausalLM",
    "Step1ForCausalLM",
    "Step3p5ForCausalLM",
    "Plamo3ForCausalLM",
    "MuseGlimmerForCausalLM",
    "HCXVisionV2ForCausalLM",
)


def _config(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name / "config.json").read_text())  # type: ignore[no-any-return]


def _import(config: dict[str, Any]) -> ModelSpec:
    data, _ = spec_from_config(config)
    return parse_spec({"name": "x", **data})


def _kinds(spec: ModelSpec) -> tuple[int, int]:
    sliding = sum(isinstance(layer, SlidingWindowAttention) for layer in spec.layers)
    full = sum(type(layer) is FullAttention for layer in spec.layers)
    return full, sliding


def test_every_class_is_a_vllm_class_and_registered() -> None:
    known = set(VLLM_CLASSES.read_text().split())
    registered = {c for a in list_architectures() for c in a.architectures}
    assert set(CLASSES) <= known
    assert set(CLASSES) <= registered


@pytest.mark.parametrize(
    ("name", "model_type", "bytes_per_token"),
    [
        # n_layer 96 x 2 x 8 K/V heads x (8192 / 64 = 128) x 2 B (float32 weights, no dtype
        # stated: the cache is kept in bfloat16, as for every float32 model)
        ("telechat2-115b", "telechat", 96 * 2 * 8 * 128 * 2),
        # 64 x 2 x 8 x 128 x 2 B
        ("telechat3-36b-thinking", "telechat3", 64 * 2 * 8 * 128 * 2),
        # 40 x 2 x 40 heads (no GQA) x (5120 / 40 = 128) x 2 B
        ("orion-14b", "orion", 40 * 2 * 40 * 128 * 2),
        # 40 x 2 x 36 x (2304 / 36 = 64) x 2 B
        ("minicpm-2b", "minicpm", 40 * 2 * 36 * 64 * 2),
    ],
)
def test_full_attention_models(name: str, model_type: str, bytes_per_token: int) -> None:
    spec = import_config(FIXTURES / name).spec
    assert spec.model_type == model_type
    assert _kinds(spec) == (spec.num_hidden_layers, 0)
    assert estimate(spec, 1000).kv_cache_bytes == bytes_per_token * 1000


def test_telechat2_parameters_match_the_safetensors_index() -> None:
    # embeddings and head 2 x 131,072 x 8,192 = 2,147,483,648
    # per layer: query 8,192^2 = 67,108,864; key_value 8,192 x 2,048 = 16,777,216; dense
    #   67,108,864 + bias 8,192; MLP 3 x 8,192 x 40,960 = 1,006,632,960 + down bias 8,192;
    #   2 norms 16,384: 1,157,660,672; x 96 = 111,135,424,512
    # ln_f 8,192: 113,282,916,352 = 453,131,665,408 B (index total_size) / 4 B
    assert parameters_from_config(_config("telechat2-115b")).total == 453_131_665_408 // 4


def test_laguna_xs2() -> None:
    spec = import_config(FIXTURES / "laguna-xs.2").spec
    assert _kinds(spec) == (10, 30)  # one global then three sliding, ten times
    assert {layer.window for layer in spec.layers if isinstance(layer, SlidingWindowAttention)} == {
        512
    }
    # all 40 layers add 2 x 8 x 128 x 2 B = 4,096 B a token below the window: 163,840 B
    assert estimate(spec, 100).kv_cache_bytes == 40 * 4096 * 100


def test_laguna_xs2_parameters() -> None:
    # embeddings and head 2 x 100,352 x 2,048 = 411,041,792
    # attention, global layer (48 heads): q 2,048 x 6,144 + k/v 2 x 2,048 x 1,024 + o 6,144 x
    #   2,048 + g_proj 2,048 x 48 + q/k norms 256 = 29,458,688; sliding (64 heads): 8,192 wide
    #   q and o, g_proj x 64: 37,880,064
    # dense MLP (layer 0) 3 x 2,048 x 8,192 = 50,331,648; sparse: 256 experts x 3 x 2,048 x 512
    #   = 805,306,368, shared 3,145,728, router 256 x 2,048 + 256 = 524,544: 808,976,640
    # 2 norms 4,096 a layer, final norm 2,048
    attention = 10 * 29_458_688 + 30 * 37_880_064
    ffn = 50_331_648 + 39 * 808_976_640
    total = 411_041_792 + attention + ffn + 40 * 4096 + 2048
    count = parameters_from_config(_config("laguna-xs.2"))
    assert count.total == total == 33_442_617_088
    # active: 8 of 256 experts, so 248 x 3 x 2,048 x 512 = 780,140,544 skipped in 39 layers
    assert count.total - count.inactive == total - 39 * 780_140_544


def test_laguna_without_layer_types_is_global() -> None:
    config = {"model_type": "laguna", "torch_dtype": "bfloat16"}
    spec = _import(config)
    # LagunaConfig: 40 layers, 8 K/V heads of 128, all global: 40 x 2 x 8 x 128 x 2 B
    assert _kinds(spec) == (40, 0)
    assert estimate(spec, 10).kv_cache_bytes == 40 * 4096 * 10


def test_orion_ignores_a_stated_head_dim() -> None:
    # vLLM orion.py: head_dim is hidden_size / heads = 128 whatever the file says
    spec = _import(_config("orion-14b") | {"head_dim": 64})
    assert estimate(spec, 1).kv_cache_bytes == 40 * 2 * 40 * 128 * 2


def test_solar_reads_as_llama() -> None:
    # Solar Pro shapes: 64 layers, 40 heads of 5120 / 40 = 128, 10 K/V heads
    config = {
        "model_type": "solar",
        "num_hidden_layers": 64,
        "hidden_size": 5120,
        "num_attention_heads": 40,
        "num_key_value_heads": 10,
        "torch_dtype": "bfloat16",
    }
    assert estimate(_import(config), 1).kv_cache_bytes == 64 * 2 * 10 * 128 * 2


def test_hyperclovax_defaults() -> None:
    # HyperCLOVAXConfig: 32 layers, 32 heads, K/V heads = heads, head_dim 4096 / 32 = 128
    spec = _import({"model_type": "hyperclovax", "torch_dtype": "bfloat16"})
    assert estimate(spec, 1).kv_cache_bytes == 32 * 2 * 32 * 128 * 2


def test_step3_text_caches_one_kv_head() -> None:
    # vLLM step3_text.py: num_kv_heads=1 whatever the file says; Step3TextConfig: 61 layers,
    # head_dim 256: 61 x 2 x 1 x 256 x 2 B = 62,464 B a token; max_seq_len 65,536
    spec = _import({"model_type": "step3_text", "num_attention_groups": 8, "dtype": "bfloat16"})
    assert spec.max_position_embeddings == 65536
    assert estimate(spec, 1).kv_cache_bytes == 61 * 2 * 1 * 256 * 2
    with pytest.raises(SpecError, match="step3_text is not counted"):
        parameters_from_config({"model_type": "step3_text"})


def test_granite_swa_defaults() -> None:
    # GraniteSWAConfig: 24 layers, global where i % 4 == 0 (6), else window 128 (18); 4 K/V
    # heads of 2560 / 20 = 128: every layer adds 2 x 4 x 128 x 2 = 2,048 B while below 128
    spec = _import({"model_type": "granite_swa", "torch_dtype": "bfloat16"})
    assert _kinds(spec) == (6, 18)
    first = spec.layers[0]
    assert isinstance(first, FullAttention)
    assert (first.num_kv_heads, first.head_dim) == (4, 128)
    assert estimate(spec, 100).kv_cache_bytes == 24 * 2048 * 100


def test_granitemoe_swa_and_shared() -> None:
    base: dict[str, Any] = {"num_hidden_layers": 8, "hidden_size": 1024, "num_attention_heads": 16}
    base |= {"num_key_value_heads": 4, "head_dim": 256, "torch_dtype": "bfloat16"}
    # vLLM granitemoe.py: head_dim 1024 / 16 = 64, not the stated 256
    swa = _import({"model_type": "granitemoe_swa", "sliding_window": 64} | base)
    assert _kinds(swa) == (2, 6)  # layers 0 and 4 global
    assert estimate(swa, 10).kv_cache_bytes == 8 * 2 * 4 * 64 * 2 * 10
    shared = _import({"model_type": "granitemoeshared"} | base)
    assert _kinds(shared) == (8, 0)
    # vocab 1,000, untied: 2 x 1,000 x 1,024 = 2,048,000; per layer: attention 2 x 1,024^2 +
    # 2 x 1,024 x (4 x 64) = 2,621,440; experts of the class default 11,008: 8 x 3 x 1,024 x
    # 11,008 = 270,532,608; router 8 x 1,024 = 8,192; shared MLP 3 x 1,024 x 512 = 1,572,864;
    # 2 norms 2,048: 274,737,152 a layer; final norm 1,024
    config = {"model_type": "granitemoeshared", "vocab_size": 1000, "shared_intermediate_size": 512}
    count = parameters_from_config(config | base)
    assert count.total == 2_048_000 + 8 * 274_737_152 + 1024


def test_cohere2_moe_prefix_and_window() -> None:
    # Cohere2MoeConfig: first_k_dense_replace 2 prefix layers with pattern 1 are global, then
    # (i + 1) % 4 over the other 6: S S S G S S; the class default window 4,096
    config = {"model_type": "cohere2_moe", "num_hidden_layers": 8, "hidden_size": 1024}
    config |= {"num_attention_heads": 8, "num_key_value_heads": 2, "first_k_dense_replace": 2}
    config |= {"torch_dtype": "bfloat16"}
    spec = _import(config)
    assert _kinds(spec) == (3, 5)
    assert {layer.window for layer in spec.layers if isinstance(layer, SlidingWindowAttention)} == {
        4096
    }
    # head_dim the class default 128: 8 x 2 x 2 x 128 x 2 = 8,192 B a token at short context
    assert estimate(spec, 10).kv_cache_bytes == 8 * 2 * 2 * 128 * 2 * 10


def test_exaone_moe_pattern() -> None:
    # ExaoneMoeConfig: sliding_window 4096, pattern 4: layers 3 and 7 of 8 global
    config = {"model_type": "exaone_moe", "num_hidden_layers": 8, "hidden_size": 1024}
    config |= {"num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 128}
    config |= {"torch_dtype": "bfloat16"}
    spec = _import(config)
    assert _kinds(spec) == (2, 6)
    assert isinstance(spec.layers[0], SlidingWindowAttention)
    assert type(spec.layers[3]) is FullAttention
    assert estimate(spec, 10).kv_cache_bytes == 8 * 2 * 2 * 128 * 2 * 10
    with pytest.raises(SpecError, match="sliding_windows"):
        _import(config | {"sliding_windows": [128, 4096] * 4})


def test_iquest_loop_caches_a_window_per_extra_pass() -> None:
    spec = import_config(FIXTURES / "iquest-coder-v1-40b-loop-instruct").spec
    # vLLM iquest_loopcoder.py: 80 decoder layers x loop_num 2 -> layers 0-79 full, 80-159 of
    # loop_window_size 64; head_dim 5120 / 40 = 128, 8 K/V heads: 2 x 8 x 128 x 2 = 4,096 B
    assert spec.num_hidden_layers == 160
    assert _kinds(spec) == (80, 80)
    assert {layer.window for layer in spec.layers if isinstance(layer, SlidingWindowAttention)} == {
        64
    }
    assert all(type(layer) is FullAttention for layer in spec.layers[:80])
    assert estimate(spec, 10).kv_cache_bytes == 160 * 4096 * 10
    # past the window: 80 x 4,096 x 1,000 + 80 x 4,096 x 64 = 327,680,000 + 20,971,520
    assert estimate(spec, 1000).kv_cache_bytes == 327_680_000 + 20_971_520


def test_iquest_loop_parameters() -> None:
    # embeddings and head 2 x 76,800 x 5,120 = 786,432,000; per layer q and o 2 x 5,120^2 =
    # 52,428,800, k and v 2 x 5,120 x 1,024 = 10,485,760, MLP 3 x 5,120 x 27,648 = 424,673,280,
    # 2 norms 10,240, loop gate 40 x 128 + 40 = 5,160: 487,603,240; x 80 = 39,008,259,200;
    # final norm 5,120
    count = parameters_from_config(_config("iquest-coder-v1-40b-loop-instruct"))
    assert count.total == 786_432_000 + 39_008_259_200 + 5_120 == 39_794_696_320


def test_iquest_loop_defaults_and_more_loops() -> None:
    # vLLM defaults loop_num 2, loop_window_size 64; three loops: 3 x 4 cache layers, 4 full
    base: dict[str, Any] = {"model_type": "iquestloopcoder", "num_hidden_layers": 4}
    base |= {"hidden_size": 1024, "num_attention_heads": 8, "num_key_value_heads": 2}
    base |= {"head_dim": 64, "torch_dtype": "bfloat16"}  # head_dim unread: 1024 / 8 = 128
    two = _import(base)
    assert (two.num_hidden_layers, _kinds(two)) == (8, (4, 4))
    three = _import(base | {"loop_num": 3, "loop_window_size": 16})
    assert (three.num_hidden_layers, _kinds(three)) == (12, (4, 8))
    # below the window every cache layer adds 2 x 2 x 128 x 2 = 1,024 B a token
    assert estimate(three, 10).kv_cache_bytes == 12 * 1024 * 10
    with pytest.raises(SpecError, match="first pass would slide"):
        _import(base | {"sliding_window": 4096})


def test_iquestcoder_defaults() -> None:
    # IQuestCoderConfig: 80 layers, 8 K/V heads of head_dim 128: 80 x 2 x 8 x 128 x 2 B;
    # max_position_embeddings 16,384; a stated sliding_window slides every layer (vLLM llama)
    config: dict[str, Any] = {"model_type": "iquestcoder", "torch_dtype": "bfloat16"}
    spec = _import(config)
    assert (spec.max_position_embeddings, _kinds(spec)) == (16384, (80, 0))
    assert estimate(spec, 1).kv_cache_bytes == 80 * 2 * 8 * 128 * 2
    assert _kinds(_import(config | {"sliding_window": 4096})) == (0, 80)


def test_hy3() -> None:
    spec = import_config(FIXTURES / "hy3").spec
    # 80 x 2 x 8 K/V heads x 128 x 2 B = 327,680 B a token, every layer global
    assert _kinds(spec) == (80, 0)
    assert estimate(spec, 1000).kv_cache_bytes == 327_680 * 1000


def test_hy3_parameters() -> None:
    # embeddings and head 2 x 120,832 x 4,096 = 989,855,744
    # attention: q and o 2 x 4,096 x 8,192 + k and v 2 x 4,096 x 1,024 = 75,497,472, q/k norms
    #   256, 2 norms 8,192: 75,505,920 a layer
    # layer 0 dense MLP 3 x 4,096 x 13,312 = 163,577,856
    # layers 1-79: 192 experts x 3 x 4,096 x 1,536 = 3,623,878,656, shared 18,874,368, router
    #   192 x 4,096 + expert bias 192 = 786,624: 3,643,539,648
    # final norm 4,096
    sparse = 75_505_920 + 3_643_539_648
    total = 989_855_744 + 75_505_920 + 163_577_856 + 79 * sparse + 4_096
    count = parameters_from_config(_config("hy3"))
    assert count.total == total == 295_033_543_488
    # a token skips 184 of 192 experts in 79 layers: 79 x 184 x 18,874,368
    assert count.inactive == 79 * 184 * 18_874_368


def test_hy_v3_defaults_are_bfloat16() -> None:
    # HYV3Config: 80 layers, 8 K/V heads of 128; no dtype stated: bfloat16
    spec = _import({"model_type": "hy_v3"})
    assert (spec.torch_dtype, spec.max_position_embeddings) == ("bfloat16", 131072)
    assert estimate(spec, 1).kv_cache_bytes == 80 * 2 * 8 * 128 * 2


def test_step1_reads_attention_groups() -> None:
    # StepConfig: 48 layers, num_attention_groups 8 K/V heads of 5120 / 40 = 128 (a stated
    # head_dim is unread by vLLM step1.py): 48 x 2 x 8 x 128 x 2 B; max_seq_len 4,096
    spec = _import({"model_type": "step1", "head_dim": 64, "torch_dtype": "bfloat16"})
    assert spec.max_position_embeddings == 4096
    assert estimate(spec, 1).kv_cache_bytes == 48 * 2 * 8 * 128 * 2
    groups = _import({"model_type": "step1", "num_attention_groups": 4, "num_key_value_heads": 2})
    # no dtype stated: float32 weights, the cache kept in bfloat16 as for every float32 model
    assert estimate(groups, 1).kv_cache_bytes == 48 * 2 * 4 * 128 * 2
    # tied vocabulary 65,536 x 5,120 = 335,544,320; per layer q and o 2 x 5,120^2, k and v
    # 2 x 5,120 x 1,024, MLP 3 x 5,120 x 13,312, 2 norms: 267,397,120; x 48; final norm 5,120
    count = parameters_from_config({"model_type": "step1"})
    assert count.total == 335_544_320 + 48 * 267_397_120 + 5_120


def test_step3p5_per_layer_heads() -> None:
    # four decoder layers (a fifth layer_types entry is the MTP layer's, dropped); sliding
    # layers take attention_other_setting's 4 K/V heads of 64: 2 x 4 x 64 x 2 = 1,024 B,
    # full layers 8 groups of 128: 2 x 8 x 128 x 2 = 4,096 B
    config: dict[str, Any] = {"model_type": "step3p5", "num_hidden_layers": 4}
    config |= {"hidden_size": 1024, "num_attention_heads": 8, "num_attention_groups": 8}
    config |= {"head_dim": 128, "sliding_window": 512, "torch_dtype": "bfloat16"}
    config["layer_types"] = ["full_attention", "sliding_attention", "sliding_attention"]
    config["layer_types"] += ["full_attention", "full_attention"]
    other = {"attention_type": "sliding_attention", "num_attention_heads": 16}
    config["attention_other_setting"] = other | {"num_attention_groups": 4, "head_dim": 64}
    spec = _import(config)
    assert _kinds(spec) == (2, 2)
    assert estimate(spec, 10).kv_cache_bytes == (2 * 4096 + 2 * 1024) * 10
    with pytest.raises(SpecError, match="attention_other_setting: head_dim"):
        _import(config | {"attention_other_setting": other | {"num_attention_groups": 4}})


def test_step3p5_defaults() -> None:
    # Step3p5Config: 48 layers, 8 groups of 5120 / 40 = 128, no window: all global
    spec = _import({"model_type": "step3p5", "torch_dtype": "bfloat16"})
    assert (spec.max_position_embeddings, _kinds(spec)) == (4096, (48, 0))
    assert estimate(spec, 1).kv_cache_bytes == 48 * 2 * 8 * 128 * 2
    # with a window and no layer_types vLLM slides the even layers
    assert _kinds(_import({"model_type": "step3p5", "sliding_window": 128})) == (24, 24)


def test_plamo3_pattern_and_window() -> None:
    # Plamo3Config: 32 layers, global where (i + 1) % 8 == 0: 7, 15, 23, 31; 4 K/V heads of
    # 128: 32 x 2 x 4 x 128 x 2 = 65,536 B a token below the window
    config: dict[str, Any] = {"model_type": "plamo3", "torch_dtype": "bfloat16"}
    spec = _import(config | {"window_size": 1024})
    assert _kinds(spec) == (4, 28)
    assert [i for i, layer in enumerate(spec.layers) if type(layer) is FullAttention] == [
        7,
        15,
        23,
        31,
    ]
    assert estimate(spec, 100).kv_cache_bytes == 65_536 * 100
    legacy = _import(config | {"sliding_window": [1024] * 7 + [None]})
    assert {
        layer.window for layer in legacy.layers if isinstance(layer, SlidingWindowAttention)
    } == {1024}
    with pytest.raises(SpecError, match="different windows"):
        _import(config | {"sliding_window": [1024, 2048, None]})
    with pytest.raises(SpecError, match="window_size: required"):
        _import(config)
    # tied 32,000 x 4,096 = 131,072,000; per layer q and o 2 x 4,096^2, k and v 2 x 4,096 x
    # 512, q/k norms 256, MLP 3 x 4,096 x 13,312, 4 norms 16,384: 201,343,232; x 32; final 4,096
    count = parameters_from_config(config | {"window_size": 1024})
    assert count.total == 131_072_000 + 32 * 201_343_232 + 4_096


def test_muse_glimmer_slides_its_rope_layers() -> None:
    # MuseGlimmerTextConfig: 52 layers, NoPE (global) where (51 - i) % 4 == 0: 13 global, 39
    # sliding over 2,048; 2 K/V heads of 128: 52 x 2 x 2 x 128 x 2 = 53,248 B a token
    config: dict[str, Any] = {"model_type": "muse_glimmer", "torch_dtype": "bfloat16"}
    spec = _import(config | {"text_config": {}})
    assert _kinds(spec) == (13, 39)
    assert type(spec.layers[51]) is FullAttention
    assert estimate(spec, 100).kv_cache_bytes == 53_248 * 100
    # vLLM reads no_rope_layers, not layer_types
    text = {"num_hidden_layers": 4, "layer_types": ["full_attention"] * 4}
    assert _kinds(_import(config | {"text_config": text})) == (1, 3)
    assert _kinds(_import(config | {"text_config": text | {"no_rope_layers": [0] * 4}})) == (4, 0)
    assert _kinds(_import(config | {"text_config": text | {"sliding_window": None}})) == (4, 0)
    with pytest.raises(SpecError, match="muse_glimmer is not counted"):
        parameters_from_config({"model_type": "muse_glimmer_text"})


def test_hcx_vision_v2_reads_its_text_config() -> None:
    # HyperCLOVAXVisionV2Config: a text_config naming no model_type is hyperclovax
    text = {"num_hidden_layers": 4, "hidden_size": 1024, "num_attention_heads": 8}
    text |= {"num_key_value_heads": 2}
    config = {"model_type": "hyperclovax_vision_v2", "text_config": text, "dtype": "bfloat16"}
    spec = _import(config)
    assert spec.model_type == "hyperclovax"
    # 4 x 2 x 2 x (1024 / 8 = 128) x 2 B
    assert estimate(spec, 1).kv_cache_bytes == 4 * 2 * 2 * 128 * 2
