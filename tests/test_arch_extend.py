"""vLLM 0.32 classes that extend families kvplan already reads: Tele-FLM (a Llama), Rnj-1 (Gemma
3's layer with look-back chunks), openPangu Ultra MoE (DeepSeek's MLA), openPangu Pro MoE V2
(sink attention) and Nemotron-H Puzzle (per-layer blocks and windows), each from a config built
here (no released config.json of theirs is bundled), with every figure worked by hand from the
config and vLLM's model file in a comment. Ling / Ring 2.5's rule (lightning attention beside
MLA) is checked here too, read in place of Ling 3.0's for the ``bailing_hybrid`` type both
classes' configs name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kvplan import estimate
from kvplan.engines.vllm import layout
from kvplan.engines.vllm_config import VllmConfig
from kvplan.errors import SpecError
from kvplan.importers import parameters_from_config
from kvplan.importers.config import spec_from_config
from kvplan.importers.registry import list_architectures
from kvplan.model.layers import FullAttention, MLALatent, SlidingWindowAttention
from kvplan.model.spec import ModelSpec, parse_spec

VLLM_CLASSES = Path(__file__).parent / "data" / "vllm_0.32_text_generation_architectures.txt"

#: The vLLM classes this file's rules register.
CLASSES = (
    "TeleFLMForCausalLM",
    "Rnj1ForCausalLM",
    "PanguUltraMoEForCausalLM",
    "NemotronHPuzzleForCausalLM",
    "PanguProMoEV2ForCausalLM",
)


def _import(config: dict[str, Any]) -> ModelSpec:
    data, _ = spec_from_config(config)
    return parse_spec({"name": "x", **data})


def test_every_class_is_a_vllm_class_and_registered() -> None:
    known = set(VLLM_CLASSES.read_text().split())
    registered = {c for a in list_architectures() for c in a.architectures}
    assert set(CLASSES) <= known
    assert set(CLASSES) <= registered


# --- Tele-FLM ---------------------------------------------------------------------------------

# Tele-FLM's keys as vLLM's llama.py reads them (TeleFLMForCausalLM is its LlamaForCausalLM);
# no num_key_value_heads: every one of the 64 heads keeps its K and V.
_TELEFLM: dict[str, Any] = {
    "model_type": "TeleFLM",
    "architectures": ["TeleFLMForCausalLM"],
    "num_hidden_layers": 64,
    "hidden_size": 8192,
    "num_attention_heads": 64,
    "intermediate_size": 21824,
    "vocab_size": 80000,
    "tie_word_embeddings": False,
    "use_mup": True,
    "mup_scale_factor": 8.0,
    "output_mult": 1.0,
    "torch_dtype": "bfloat16",
}


def test_teleflm_reads_as_llama() -> None:
    spec = _import(_TELEFLM)
    assert spec.model_type == "TeleFLM"
    assert all(type(layer) is FullAttention for layer in spec.layers)
    # 64 layers x 2 (K, V) x 64 heads x (8192 / 64 = 128) x 2 B = 2,097,152 B a token
    assert estimate(spec, 1000).kv_cache_bytes == 64 * 2 * 64 * 128 * 2 * 1000
    assert estimate(spec, 1).kv_cache_bytes == 2_097_152


def test_teleflm_parameters() -> None:
    # embeddings and head (untied) 2 x 80,000 x 8,192 = 1,310,720,000
    # a layer: q, k, v, o 4 x 8,192^2 = 268,435,456; MLP 3 x 8,192 x 21,824 = 536,346,624;
    #   2 RMSNorms 16,384: 804,798,464; x 64 = 51,507,101,696
    # final norm 8,192: 52,817,829,888 (muP scales logits, it adds no weight)
    assert parameters_from_config(_TELEFLM).total == 52_817_829_888


# --- Rnj-1 ------------------------------------------------------------------------------------


def test_rnj1_defaults_are_global() -> None:
    # Gemma3TextConfig: 26 layers, 4 K/V heads of head_dim 256; without layer_types it writes
    # five sliding_attention entries to one full, and vLLM rnj1.py windows only
    # chunked_attention entries: every layer global, 26 x 2 x 4 x 256 x 2 B = 106,496 B a token
    spec = _import({"model_type": "rnj1", "torch_dtype": "bfloat16"})
    assert all(type(layer) is FullAttention for layer in spec.layers)
    assert estimate(spec, 1).kv_cache_bytes == 26 * 2 * 4 * 256 * 2 == 106_496


def test_rnj1_default_parameters() -> None:
    # Gemma3TextConfig: vocabulary 262,208 x 2,304 tied = 604,127,232
    # a layer: q 2,304 x (8 x 256) = 4,718,592, k and v 2 x 2,304 x 1,024 = 4,718,592, o
    #   2,048 x 2,304 = 4,718,592, q/k norms 2 x 256 = 512; MLP 3 x 2,304 x 9,216 =
    #   63,700,992; four RMSNorms 9,216: 77,866,496; x 26 = 2,024,528,896
    # final norm 2,304: 2,628,658,432
    assert parameters_from_config({"model_type": "rnj1"}).total == 2_628_658_432


_RNJ1: dict[str, Any] = {
    "model_type": "rnj1",
    "architectures": ["Rnj1ForCausalLM"],
    "num_hidden_layers": 8,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "intermediate_size": 16384,
    "vocab_size": 128256,
    "sliding_window": 512,
    "layer_types": ["chunked_attention"] * 3 + ["full_attention"],
    "torch_dtype": "bfloat16",
}


def test_rnj1_chunked_layers_slide_over_the_window() -> None:
    config = _RNJ1 | {"layer_types": (["chunked_attention"] * 3 + ["full_attention"]) * 2}
    spec = _import(config)
    # vLLM rnj1.py: chunked layers get per_layer_sliding_window = sliding_window 512
    # (chunk_lookback 1: chunks of 256 and the one before), a SlidingWindowSpec of 512
    windows = [getattr(layer, "window", None) for layer in spec.layers]
    assert windows == [512, 512, 512, None] * 2
    assert sum(isinstance(layer, SlidingWindowAttention) for layer in spec.layers) == 6
    # every layer keeps 2 x 8 x 128 x 2 B = 4,096 B a token below the window
    assert estimate(spec, 100).kv_cache_bytes == 8 * 4096 * 100
    # past it, the six chunked layers hold 512 tokens, the two global ones all 10,000
    assert estimate(spec, 10_000).kv_cache_bytes == (6 * 512 + 2 * 10_000) * 4096


def test_rnj1_released_configs_name_gemma3_text() -> None:
    # Rnj-1's config.json says model_type gemma3_text; architectures Rnj1ForCausalLM makes
    # vLLM build rnj1.py's layers: the chunked ones slide over 512, the rest are global
    config = _RNJ1 | {"model_type": "gemma3_text"}
    spec = _import(config | {"layer_types": ["chunked_attention", "sliding_attention"] * 4})
    assert [getattr(layer, "window", None) for layer in spec.layers] == [512, None] * 4
    assert estimate(spec, 10_000).kv_cache_bytes == (4 * 512 + 4 * 10_000) * 4096
    # Gemma3ForCausalLM's sliding_attention layers slide (vLLM gemma3.py), over 512 too
    gemma = _import(
        config | {"architectures": ["Gemma3ForCausalLM"], "layer_types": ["sliding_attention"] * 8}
    )
    assert all(isinstance(layer, SlidingWindowAttention) for layer in gemma.layers)


def test_rnj1_sliding_attention_entries_are_global() -> None:
    # Rnj1Attention: is_chunked only for "chunked_attention"; a sliding_attention entry
    # gets no window: 8 x 2 x 8 x 128 x 2 B = 32,768 B a token at any length
    spec = _import(_RNJ1 | {"layer_types": ["sliding_attention"] * 7 + ["full_attention"]})
    assert all(type(layer) is FullAttention for layer in spec.layers)
    assert estimate(spec, 10_000).kv_cache_bytes == 8 * 4096 * 10_000


def test_rnj1_refuses_a_wrong_layer_types() -> None:
    with pytest.raises(SpecError, match="layer_types: has 4 entries but 8 layers"):
        _import(_RNJ1)
    with pytest.raises(SpecError, match=r"layer_types\.0: unknown kind"):
        _import(_RNJ1 | {"layer_types": ["mamba"] * 8})


def test_rnj1_parameters() -> None:
    config = _RNJ1 | {"layer_types": ["full_attention"] * 8}
    # vocabulary 128,256 x 4,096 tied (Gemma3TextConfig default) = 525,336,576
    # a layer: q and o 2 x 4,096 x 4,096 = 33,554,432, k and v 2 x 4,096 x 1,024 = 8,388,608,
    #   q/k norms 256; MLP 3 x 4,096 x 16,384 = 201,326,592; four norms 16,384: 243,286,272
    # x 8 = 1,946,290,176; final norm 4,096: 2,471,630,848
    assert parameters_from_config(config).total == 2_471_630_848


# --- openPangu Ultra MoE ----------------------------------------------------------------------

# OpenPanguMoEConfig's defaults (openPangu-Ultra-MoE-718B) under the names vLLM openpangu.py
# reads (DeepSeek's): 61 layers, hidden 7,680, 128 heads, MLA ranks 1,536 / 512, rope 64,
# nope 128, v 128; 256 experts of 2,048 (8 a token), one shared, 3 dense layers of 18,432;
# vocabulary 153,600 untied; its depth-scaled sandwich norm and router bias.
_PANGU_ULTRA: dict[str, Any] = {
    "model_type": "pangu_ultra_moe",
    "architectures": ["PanguUltraMoEForCausalLM"],
    "num_hidden_layers": 61,
    "hidden_size": 7680,
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "kv_lora_rank": 512,
    "q_lora_rank": 1536,
    "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 128,
    "v_head_dim": 128,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "num_experts_per_tok": 8,
    "first_k_dense_replace": 3,
    "moe_intermediate_size": 2048,
    "intermediate_size": 18432,
    "vocab_size": 153600,
    "tie_word_embeddings": False,
    "sandwich_norm": True,
    "router_enable_expert_bias": True,
    "num_nextn_predict_layers": 1,
    "torch_dtype": "bfloat16",
}


def test_pangu_ultra_moe_caches_the_mla_latent() -> None:
    spec = _import(_PANGU_ULTRA)
    assert all(isinstance(layer, MLALatent) for layer in spec.layers)
    # MLAAttentionSpec: 61 layers x (512 + 64) x 2 B = 70,272 B a token, no factor 2
    assert estimate(spec, 1000).kv_cache_bytes == 61 * (512 + 64) * 2 * 1000
    assert estimate(spec, 1).kv_cache_bytes == 70_272


def test_pangu_ultra_moe_parameters() -> None:
    # embeddings and head 2 x 153,600 x 7,680 = 2,359,296,000
    # MLA a layer: q_a 7,680 x 1,536 = 11,796,480, its norm 1,536, q_b 1,536 x 128 x 192 =
    #   37,748,736, kv_a 7,680 x 576 = 4,423,680, its norm 512, kv_b 512 x 128 x 256 =
    #   16,777,216, o 16,384 x 7,680 = 125,829,120: 196,577,280; sandwich norms 4 x 7,680
    # dense layer: + MLP 3 x 7,680 x 18,432 = 424,673,280: 621,281,280
    # MoE layer: + 256 experts x 3 x 7,680 x 2,048 = 12,079,595,520, shared 47,185,920,
    #   router 256 x 7,680 + bias 256 = 1,966,336: 12,325,355,776
    # 3 dense + 58 MoE layers + final norm 7,680 (the MTP layer is not counted)
    total = 2_359_296_000 + 3 * 621_281_280 + 58 * 12_325_355_776 + 7680
    count = parameters_from_config(_PANGU_ULTRA)
    assert count.total == total == 719_093_782_528
    # a token skips 248 of the 256 experts, 248 x 47,185,920 in each of 58 layers: 40.4 B active
    assert count.total - count.inactive == total - 58 * 248 * 47_185_920 == 40_371_509_248


def test_pangu_ultra_moe_refuses_a_config_without_mla_keys() -> None:
    config = {k: v for k, v in _PANGU_ULTRA.items() if k != "kv_lora_rank"}
    with pytest.raises(SpecError, match="kv_lora_rank: required"):
        _import(config)


# --- Nemotron-H Puzzle ------------------------------------------------------------------------

# Six layers, M * E - * E, whose blocks override the top level: the first attention block slides
# over 256 tokens, the second states no window (null: the top level's, none); the first MoE block
# narrows its experts to 256 and routes one, the second keeps 4 experts; the MLP block is 1,536.
_PUZZLE: dict[str, Any] = {
    "model_type": "nemotron_h_puzzle",
    "architectures": ["NemotronHPuzzleForCausalLM"],
    "num_hidden_layers": 6,
    "hybrid_override_pattern": "M*E-*E",
    "hidden_size": 1024,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 128,
    "vocab_size": 1000,
    "tie_word_embeddings": False,
    "mamba_num_heads": 16,
    "mamba_head_dim": 64,
    "n_groups": 2,
    "ssm_state_size": 64,
    "conv_kernel": 4,
    "n_routed_experts": 8,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 512,
    "moe_shared_expert_intermediate_size": 1024,
    "intermediate_size": 2048,
    "sliding_window": None,
    "block_configs": [
        {"block_type": "mamba"},
        {"block_type": "attention", "sliding_window": 256},
        {"block_type": "moe", "moe_intermediate_size": 256, "num_experts_per_tok": 1},
        {"block_type": "mlp", "intermediate_size": 1536},
        {"block_type": "attention", "sliding_window": None},
        {"block_type": "moe", "n_routed_experts": 4},
    ],
    "torch_dtype": "bfloat16",
}


def test_nemotron_h_puzzle_windows_come_from_the_blocks() -> None:
    spec = _import(_PUZZLE)
    assert [layer.kind for layer in spec.layers] == [
        "mamba",
        "sliding_attention",
        "no_cache",
        "no_cache",
        "full_attention",
        "no_cache",
    ]
    # an attention layer keeps 2 x 2 K/V heads x 128 x 2 B = 1,024 B a token; vLLM's Mamba2
    # state: conv (16 x 64 + 2 x 2 groups x 64) x (4 - 1) = 3,840 values in bfloat16 = 7,680 B,
    # SSM 16 x 64 x 64 = 65,536 values in float32 = 262,144 B: 269,824 B a sequence
    short = estimate(spec, 100)
    assert short.state_bytes == 3840 * 2 + 65536 * 4 == 269_824
    assert short.kv_cache_bytes == 2 * 1024 * 100 + 269_824
    # at 1,000 tokens the sliding layer holds 256, the global one all 1,000
    assert estimate(spec, 1000).kv_cache_bytes == (256 + 1000) * 1024 + 269_824
    # vLLM 0.32's pages: the Mamba layer's state, the sliding and the full attention layer
    pages = [page for page in layout(spec, VllmConfig(max_model_len=4096))[0] if page]
    assert [(page.kind, page.token_bytes) for page in pages] == [
        ("mamba", 269_824),
        ("sliding", 1024),
        ("full", 1024),
    ]


def test_nemotron_h_puzzle_parameters() -> None:
    # embeddings and head 2 x 1,000 x 1,024 = 2,048,000; one RMSNorm of 1,024 a layer
    # M: in_proj 1,024 x (1,024 + 1,280 + 16) = 2,375,680, conv 1,280 x 4 + bias 1,280 = 6,400,
    #   dt bias, A_log, D 48, gated norm 1,024, out_proj 1,048,576: 3,431,728 (+ norm)
    # *: q and o 2 x 1,024 x 1,024, k and v 2 x 1,024 x 256: 2,621,440 (+ norm), twice
    # E (block 2): 8 experts of up/down 2 x 1,024 x 256 = 524,288: 4,194,304, shared 2 x 1,024
    #   x 1,024 = 2,097,152, router and bias 1,025 x 8 = 8,200: 6,299,656 (+ norm)
    # - (block 3): 2 x 1,024 x 1,536 = 3,145,728 (+ norm)
    # E (block 5): 4 experts of 2 x 1,024 x 512 = 1,048,576: 4,194,304, shared 2,097,152,
    #   router 1,025 x 4 = 4,100: 6,295,556 (+ norm); final norm 1,024
    layers = 3_431_728 + 2 * 2_621_440 + 6_299_656 + 3_145_728 + 6_295_556 + 6 * 1024
    total = 2_048_000 + layers + 1024
    count = parameters_from_config(_PUZZLE)
    assert count.total == total == 26_470_716
    # a token skips 7 of block 2's experts and 2 of block 5's
    assert count.inactive == 7 * 524_288 + 2 * 1_048_576


def test_nemotron_h_puzzle_latent_experts() -> None:
    # moe_latent_size 256 (vLLM NemotronHMoE): the experts work at 256, between fc1 1,024 x 256
    # and fc2 256 x 1,024 (524,288); router and shared expert stay at 1,024
    # block 2: 8 x (256 x 256 x 2 = 131,072) = 1,048,576 + 524,288 + 2,097,152 + 8,200
    # block 5: 4 x (256 x 512 x 2 = 262,144) = 1,048,576 + 524,288 + 2,097,152 + 4,100
    count = parameters_from_config(_PUZZLE | {"moe_latent_size": 256})
    moe = (1_048_576 + 524_288 + 2_097_152) * 2 + 8_200 + 4_100
    assert count.total == 26_470_716 - 6_299_656 - 6_295_556 + moe == 21_227_836


def _with_block(i: int, block: dict[str, Any]) -> dict[str, Any]:
    blocks = list(_PUZZLE["block_configs"])
    blocks[i] = block
    return _PUZZLE | {"block_configs": blocks}


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            _with_block(4, {"block_type": "attention", "sliding_window": 128}),
            r"block_configs: attention windows \[128, 256\]; a spec holds one window",
        ),
        (
            _with_block(4, {"block_type": "attention", "num_key_value_heads": 4}),
            r"block_configs\.4\.num_key_value_heads: differs from the top level",
        ),
        (
            {k: v for k, v in _PUZZLE.items() if k != "block_configs"},
            "block_configs: required",
        ),
        (_PUZZLE | {"block_configs": [{}]}, "block_configs: has 1 entries but 6 layers"),
        (_with_block(1, {"sliding_window": "256"}), r"block_configs\.1\.sliding_window"),
    ],
)
def test_nemotron_h_puzzle_refuses(config: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        _import(config)


# --- Ling / Ring 2.5 --------------------------------------------------------------------------

# Eight layers in groups of 4: lightning attention on layers 0-2 and 4-6, MLA on 3 and 7 (vLLM
# bailing_moe_linear.py is_linear_layer); 16 heads of 128; MLA ranks 768 / 512, rope 64;
# 16 experts of 512 (4 a token), one shared of 512, layer 0 dense (4,096).
_LING_25: dict[str, Any] = {
    "model_type": "bailing_hybrid",
    "architectures": ["BailingMoeV2_5ForCausalLM"],
    "num_hidden_layers": 8,
    "layer_group_size": 4,
    "hidden_size": 2048,
    "num_attention_heads": 16,
    "head_dim": 128,
    "kv_lora_rank": 512,
    "q_lora_rank": 768,
    "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 128,
    "v_head_dim": 128,
    "num_experts": 16,
    "num_experts_per_tok": 4,
    "moe_intermediate_size": 512,
    "num_shared_experts": 1,
    "moe_shared_expert_intermediate_size": 512,
    "first_k_dense_replace": 1,
    "intermediate_size": 4096,
    "vocab_size": 5000,
    "tie_word_embeddings": False,
    "use_qk_norm": True,
    "moe_router_enable_expert_bias": True,
    "torch_dtype": "bfloat16",
}


def test_ling_25_caches_mla_and_a_lightning_state() -> None:
    spec = _import(_LING_25)
    kinds = ["linear_attention"] * 3 + ["mla_latent"]
    assert [layer.kind for layer in spec.layers] == kinds * 2
    # MLAAttentionSpec: 2 layers x (512 + 64) x 2 B = 2,304 B a token
    assert estimate(spec, 1000).kv_cache_bytes - estimate(spec, 0).kv_cache_bytes == 2304 * 1000
    # lightning state (linear_attention_state_shape): 6 layers x 16 heads x 128 x 128 x 2 B
    # (the model dtype) = 3,145,728 B a sequence, no conv tail
    assert estimate(spec, 1).state_bytes == 6 * 16 * 128 * 128 * 2 == 3_145_728
    pages = [page for page in layout(spec, VllmConfig(max_model_len=4096))[0] if page]
    assert {(page.kind, page.token_bytes) for page in pages} == {("mamba", 524_288), ("mla", 1152)}


def test_ling_25_parameters() -> None:
    # embeddings and head 2 x 5,000 x 2,048 = 20,480,000; two RMSNorms 4,096 a layer
    # lightning: query_key_value 2,048 x 6,144 = 12,582,912, q/k norms 256, g_proj and dense
    #   2 x 2,048 x 2,048 = 8,388,608, g_norm 2,048: 20,973,824 (six layers)
    # MLA: q_a 2,048 x 768 = 1,572,864, its norm 768, q_b 768 x 16 x 192 = 2,359,296, kv_a
    #   2,048 x 576 = 1,179,648, its norm 512, kv_b 512 x 16 x 256 = 2,097,152, o 2,048 x
    #   2,048 = 4,194,304: 11,404,544 (two layers)
    # layer 0 MLP 3 x 2,048 x 4,096 = 25,165,824; layers 1-7: 16 experts x 3 x 2,048 x 512 =
    #   50,331,648, shared 3,145,728, router 16 x 2,048 + bias 16 = 32,784: 53,510,160
    # final norm 2,048
    mixers = 6 * 20_973_824 + 2 * 11_404_544
    total = 20_480_000 + mixers + 8 * 4096 + 25_165_824 + 7 * 53_510_160 + 2048
    count = parameters_from_config(_LING_25)
    assert count.total == total == 568_903_792
    # a token skips 12 of the 16 experts, 12 x 3,145,728 in each of 7 layers
    assert count.inactive == 7 * 12 * 3_145_728


def test_ling_25_without_a_group_is_all_mla() -> None:
    # layer_group_size absent: vLLM's getattr default 1, every (i + 1) % 1 == 0: all MLA
    config = {k: v for k, v in _LING_25.items() if k != "layer_group_size"}
    spec = _import(config)
    assert all(isinstance(layer, MLALatent) for layer in spec.layers)
    assert estimate(spec, 10).kv_cache_bytes == 8 * 1152 * 10


def test_ling_25_refuses_a_config_without_kv_lora_rank() -> None:
    config = {k: v for k, v in _LING_25.items() if k != "kv_lora_rank"}
    with pytest.raises(SpecError, match="kv_lora_rank: required"):
        _import(config)


# --- openPangu Pro MoE V2 ---------------------------------------------------------------------

# openPangu-R-72B-2512's shapes (its released config.json): 50 layers, hidden 4,608, 64 heads
# and 4 K/V heads, sink attention of 128 tokens with values, K 128 + 64, V 128; its MoE under the
# names vLLM openpangu.py reads, for the file's num_experts 80, mlp_only_layers 0-3 and
# shared_expert_intermediate_size 2,560 (2 x 1,280).
_PANGU_R72B: dict[str, Any] = {
    "model_type": "PanguProMoE",
    "architectures": ["PanguProMoEV2ForCausalLM"],
    "num_hidden_layers": 50,
    "hidden_size": 4608,
    "num_attention_heads": 64,
    "num_key_value_heads": 4,
    "qk_nope_dim": 128,
    "qk_rope_dim": 64,
    "v_channels": 128,
    "param_sink_number": 128,
    "param_sink_with_value": True,
    "intermediate_size": 10240,
    "moe_intermediate_size": 1280,
    "n_routed_experts": 80,
    "n_shared_experts": 2,
    "num_experts_per_tok": 8,
    "first_k_dense_replace": 4,
    "router_enable_expert_bias": True,
    "sandwich_norm": True,
    "vocab_size": 153600,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}


def test_pangu_pro_moe_v2_sink_attention_keeps_every_token() -> None:
    spec = _import(_PANGU_R72B)
    assert all(type(layer) is FullAttention for layer in spec.layers)
    # SinkFullAttentionSpec: 4 K/V heads x (K 128 + 64 = 192, V 128) x 2 B = 2,560 B a layer
    # and token; 50 layers: 128,000 B a token, at any length
    assert estimate(spec, 1).kv_cache_bytes == 50 * 4 * (192 + 128) * 2 == 128_000
    assert estimate(spec, 100_000).kv_cache_bytes == 128_000 * 100_000
    pages = layout(spec, VllmConfig(max_model_len=4096))[0]
    assert {(page.kind, page.token_bytes) for page in pages if page} == {("full", 2560)}


def test_pangu_pro_moe_v2_parameters() -> None:
    # embeddings and head 2 x 153,600 x 4,608 = 1,415,577,600
    # sink attention: qkv_proj 4,608 x (64 x 192 + 4 x 192 + 4 x 128 = 13,568) = 62,521,344,
    #   o_proj 64 x 128 x 4,608 = 37,748,736, k_layernorm 192, sink keys 128 x 4 x 192 =
    #   98,304 and values 128 x 4 x 128 = 65,536: 100,434,112; sandwich norms 4 x 4,608
    # dense layer (0-3): + MLP 3 x 4,608 x 10,240 = 141,557,760: 242,010,304
    # MoE layer: + 80 experts x 3 x 4,608 x 1,280 = 1,415,577,600, shared 3 x 4,608 x 2,560 =
    #   35,389,440, router 80 x 4,608 + bias 80 = 368,720: 1,551,788,304
    total = 1_415_577_600 + 4 * 242_010_304 + 46 * 1_551_788_304 + 4608
    count = parameters_from_config(_PANGU_R72B)
    assert count.total == total == 73_765_885_408
    # a token skips 72 of the 80 experts (3 x 4,608 x 1,280 = 17,694,720 each) in 46 layers
    assert count.inactive == 46 * 72 * 17_694_720


def test_pangu_pro_moe_v2_counts_only_vllms_expert_names() -> None:
    # the released file's num_experts is not what openpangu.py reads (n_routed_experts)
    released = {k: v for k, v in _PANGU_R72B.items() if k != "n_routed_experts"}
    with pytest.raises(SpecError, match="n_routed_experts: required to count the parameters"):
        parameters_from_config(released | {"num_experts": 80})


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"param_sink_number": 0}, "param_sink_number, qk_nope_dim, qk_rope_dim, v_channels"),
        ({"v_channels": None}, "param_sink_number, qk_nope_dim, qk_rope_dim, v_channels"),
        ({"kv_lora_rank": 512}, "kv_lora_rank: MLA keys select MLA"),
        ({"interleaved_sliding_window": 128}, "interleaved_sliding_window: a window on sink"),
    ],
)
def test_pangu_pro_moe_v2_refuses(change: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        _import(_PANGU_R72B | change)
