"""DeepSeek sparse attention (DeepSeek-V3.2, GLM-5.1), openPangu Embedded, Mistral Large 3,
LongCat-Flash, A.X K1, Param2 and Sarvam read from released config.json files, or from a
config built here from the config class's or vLLM's defaults where none is released; every
figure worked by hand."""

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
from kvplan.model.layers import FullAttention, MLALatent
from kvplan.model.spec import ModelSpec, parse_spec

FIXTURES = Path(__file__).parent / "fixtures" / "hf"
VLLM_CLASSES = Path(__file__).parent / "data" / "vllm_0.32_text_generation_architectures.txt"

#: The vLLM 0.32 classes this catalog registers.
CLASSES = {
    "DeepseekV32ForCausalLM": "deepseek_v32",
    "GlmMoeDsaForCausalLM": "glm_moe_dsa",
    "MistralLarge3ForCausalLM": "deepseek_v3",
    "PanguEmbeddedForCausalLM": "PanguEmbedded",
    "LongcatFlashForCausalLM": "longcat_flash",
    "LongcatFlashNgramForCausalLM": "longcat_flash",
    "AXK1ForCausalLM": "axk1",
    "Param2MoEForCausalLM": "param2moe",
    "SarvamMoEForCausalLM": "sarvam_moe",
    "SarvamMLAForCausalLM": "sarvam_mla",
}

#: Model types registered from vLLM's code and a config class, with no released config.json.
WITHOUT_RELEASED_CONFIG = {"axk1", "longcat_flash", "param2moe", "sarvam_moe", "sarvam_mla"}


def _config(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name / "config.json").read_text())  # type: ignore[no-any-return]


def _import(config: dict[str, Any]) -> ModelSpec:
    data, _ = spec_from_config(config)
    return parse_spec({"name": "x", **data})


# --- DeepSeek sparse attention ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "num_layers", "per_token"),
    [
        # 61 x ((512 + 64) x 2 B + 128 fp8 + 4 B scale) = 61 x (1,152 + 132) = 78,324
        ("deepseek-v3.2", 61, 78_324),
        # 78 x (1,152 + 132) = 100,152
        ("glm-5.1", 78, 100_152),
    ],
)
def test_dsa_latent_and_indexer_key(name: str, num_layers: int, per_token: int) -> None:
    spec = import_config(FIXTURES / name).spec
    assert set(spec.layers) == {MLALatent(512, 64, 128)}
    assert len(spec.layers) == num_layers
    assert estimate(spec, 0).bytes_per_token == per_token
    # the indexer key stays 132 B in an fp8 cache: 61 x (576 + 132) = 43,188
    if name == "deepseek-v3.2":
        assert estimate(spec, 0, kv_dtype="fp8").bytes_per_token == 43_188


def test_deepseek_v32_parameters() -> None:
    # DeepSeek V3's shapes (the same config keys) plus the indexer in each of the 61 layers:
    # wq_b 1,536 x (64 x 128) = 12,582,912; wk 7,168 x 128 = 917,504; k_norm weight and bias
    # 2 x 128 = 256; weights_proj 7,168 x 64 = 458,752: 13,959,424 a layer
    v3 = _config("deepseek-v3.2") | {"model_type": "deepseek_v3"}
    indexer = 12_582_912 + 917_504 + 256 + 458_752
    assert indexer == 13_959_424
    count = parameters_from_config(_config("deepseek-v3.2"))
    assert count.total == parameters_from_config(v3).total + 61 * indexer == 671_877_944_064


def test_glm_moe_dsa_parameters() -> None:
    # embeddings and head 2 x 154,880 x 6,144 = 1,903,165,440
    # attention: q_a 6,144 x 2,048 + norm 2,048 + q_b 2,048 x (64 x 256) + kv_a 6,144 x 576
    #   + norm 512 + kv_b 512 x (64 x 448) + o (64 x 256) x 6,144 = 165,022,208
    # indexer: wq_b 2,048 x 4,096 + wk 6,144 x 128 + k_norm 256 + weights_proj 6,144 x 32
    #   = 9,371,904; two RMSNorms 12,288
    base = 165_022_208 + 9_371_904 + 12_288
    dense = base + 3 * 6144 * 12288  # layers 0-2
    # routed 256 x 3 x 6,144 x 2,048 = 9,663,676,416; shared 3 x 6,144 x 2,048 = 37,748,736;
    # router 256 x 6,144 + bias 256 = 1,573,120
    sparse = base + 9_663_676_416 + 37_748_736 + 1_573_120
    total = 1_903_165_440 + 3 * dense + 75 * sparse + 6144
    assert parameters_from_config(_config("glm-5.1")).total == total == 743_911_218_432
    # the released safetensors total, 753,864,139,008, adds the MTP layer: one sparse layer,
    # eh_proj 6,144 x 12,288 and three norms of 6,144
    assert total + sparse + 6144 * 12288 + 3 * 6144 == 753_864_139_008


def test_dsa_class_defaults() -> None:
    # DeepseekV32Config: index_head_dim 128 and the V3 ranks when the file leaves them out
    config = {"model_type": "deepseek_v32", "num_hidden_layers": 4, "num_attention_heads": 8}
    data, notes = spec_from_config(config | {"torch_dtype": "bfloat16"})
    ranks = (data["kv_lora_rank"], data["qk_rope_head_dim"], data["index_head_dim"])
    assert ranks == (512, 64, 128)
    assert any("index_head_dim 128: the deepseek_v32 default" in note for note in notes)


@pytest.mark.parametrize(
    "extra",
    [
        # vLLM: layer i keeps its own indexer when max(i - 2 + 1, 0) % 4 == 0: 0, 1, 5, 9...
        {"index_topk_freq": 4},
        {"index_topk_pattern": "FFFS"},
    ],
)
def test_shared_indexer_layers_are_refused(extra: dict[str, Any]) -> None:
    with pytest.raises(SpecError, match="keep no indexer key"):
        spec_from_config(_config("glm-5.1") | extra)


def test_an_all_full_pattern_is_read() -> None:
    spec = _import(_config("glm-5.1") | {"index_topk_pattern": "F" * 78})
    assert estimate(spec, 0).bytes_per_token == 100_152


# --- openPangu Embedded -------------------------------------------------------------------------


def test_openpangu_embedded_7b() -> None:
    spec = import_config(FIXTURES / "openpangu-embedded-7b").spec
    assert set(spec.layers) == {FullAttention(8, 128, 128)}
    # 2 x 34 layers x 8 K/V heads x (4,096 / 32 = 128) x 2 B = 139,264 B a token
    assert estimate(spec, 0).bytes_per_token == 139_264


def test_openpangu_embedded_parameters() -> None:
    # embeddings and head 2 x 153,376 x 4,096 = 1,256,456,192
    # per layer: q and o 2 x (4,096^2 + 4,096 bias) + k and v 2 x (4,096 x 1,024 + 1,024)
    #   = 41,953,280; MLP 3 x 4,096 x 12,800 = 157,286,400; 2 norms 8,192: 199,247,872
    layer = 41_953_280 + 157_286_400 + 8_192
    total = 1_256_456_192 + 34 * layer + 4_096
    assert parameters_from_config(_config("openpangu-embedded-7b")).total == total
    assert total == 8_030_887_936


def test_openpangu_interleaved_window() -> None:
    config = _config("openpangu-embedded-7b") | {"interleaved_sliding_window": [4096, None]}
    spec = _import(config)
    # even layers slide over 4,096 tokens, odd ones attend fully: past the window, 17 layers
    # x 2 x 8 x 128 x 2 B a token, and 17 x 4,097 tokens' worth held by the sliding ones
    assert [type(layer).__name__ for layer in spec.layers[:2]] == [
        "SlidingWindowAttention",
        "FullAttention",
    ]
    assert spec.sliding_window == 4096
    with pytest.raises(SpecError, match="interleaved_sliding_window"):
        spec_from_config(config | {"interleaved_sliding_window": [4096, 8192]})


# --- LongCat-Flash, A.X K1 (MLA; no released config read here) --------------------------------


def test_longcat_flash_two_latents_a_layer() -> None:
    # LongcatFlashConfig's defaults: 28 decoder layers, each with two MLA attentions
    spec = _import({"model_type": "longcat_flash", "torch_dtype": "bfloat16"})
    assert spec.num_hidden_layers == 56
    assert set(spec.layers) == {MLALatent(512, 64)}
    # 56 x (512 + 64) x 2 B = 64,512 B a token
    assert estimate(spec, 0).bytes_per_token == 64_512
    # vLLM builds num_layers decoder layers whatever num_hidden_layers says
    both = _import({"model_type": "longcat_flash", "num_layers": 4, "num_hidden_layers": 4})
    assert both.num_hidden_layers == 8


def test_longcat_flash_parameters() -> None:
    # LongcatFlashConfig's defaults. MLA: q_a 6,144 x 1,536 + norm 1,536 + q_b 1,536 x
    #   (64 x 192) + kv_a 6,144 x 576 + norm 512 + kv_b 512 x (64 x 256) + o (64 x 128) x 6,144
    #   = 9,437,184 + 1,536 + 18,874,368 + 3,538,944 + 512 + 8,388,608 + 50,331,648 = 90,572,800
    # dense MLP 3 x 6,144 x 12,288 = 226,492,416; a layer has two of each and four norms
    # experts 512 x 3 x 6,144 x 2,048 = 19,327,352,832; router over 512 + 256 zero experts
    #   768 x 6,144 + 768 = 4,719,360
    layer = 2 * (90_572_800 + 226_492_416) + 4 * 6_144 + 19_327_352_832 + 4_719_360
    total = 2 * 131_072 * 6_144 + 28 * layer + 6_144
    count = parameters_from_config({"model_type": "longcat_flash"})
    assert count.total == total == 560_664_980_480
    # 12 of the 512 experts a token: 500 x 3 x 6,144 x 2,048 x 28 layers idle
    assert count.inactive == 500 * 37_748_736 * 28
    with pytest.raises(SpecError, match="n-gram"):
        parameters_from_config({"model_type": "longcat_flash", "ngram_vocab_size_ratio": 4})


def test_axk1_class_defaults() -> None:
    # AXK1Config's defaults: 61 layers of MLA, 512 + 64 a latent
    spec = _import({"model_type": "axk1", "torch_dtype": "bfloat16"})
    assert set(spec.layers) == {MLALatent(512, 64)}
    assert estimate(spec, 0).bytes_per_token == 61 * 576 * 2 == 70_272
    with pytest.raises(SpecError, match="selects MHA"):
        spec_from_config({"model_type": "axk1", "qk_nope_head_dim": 0, "qk_rope_head_dim": 0})


def test_axk1_parameters() -> None:
    # DeepSeek V3's count at AXK1Config's shapes (heads 64, 192 experts, first layer dense,
    # vocabulary 163,840) plus one post-MoE RMSNorm of 7,168 in each of the 60 MoE layers
    as_v3 = {
        "model_type": "deepseek_v3",
        "num_hidden_layers": 61,
        "num_attention_heads": 64,
        "hidden_size": 7168,
        "vocab_size": 163840,
        "intermediate_size": 18432,
        "moe_intermediate_size": 2048,
        "kv_lora_rank": 512,
        "q_lora_rank": 1536,
        "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 128,
        "v_head_dim": 128,
        "n_routed_experts": 192,
        "n_shared_experts": 1,
        "num_experts_per_tok": 8,
        "first_k_dense_replace": 1,
        "topk_method": "noaux_tc",
        "tie_word_embeddings": False,
    }
    v3 = parameters_from_config(as_v3).total
    assert parameters_from_config({"model_type": "axk1"}).total == v3 + 60 * 7168


# --- Param2 and Sarvam (Bailing-style keys) -----------------------------------------------------

#: A config stating what vLLM's param2moe.py and sarvam.py read, with small values.
_BAILING_STYLE = {
    "num_hidden_layers": 3,
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "vocab_size": 100,
    "intermediate_size": 96,
    "moe_intermediate_size": 16,
    "num_experts": 4,
    "num_experts_per_tok": 2,
    "torch_dtype": "bfloat16",
    "max_position_embeddings": 4096,
}


def test_param2moe_gqa_and_vllm_defaults() -> None:
    config = _BAILING_STYLE | {"model_type": "param2moe"}
    spec = _import(config)
    # 2 x 3 layers x 2 K/V heads x 32 x 2 B = 768 B a token
    assert estimate(spec, 0).bytes_per_token == 768
    # vLLM's defaults: layer 0 dense, one shared expert, the router's expert bias
    # embeddings 2 x 100 x 64 = 12,800; qkv 64 x (128 + 2 x 64) = 16,384; o 128 x 64 = 8,192;
    # 2 norms 128: base 24,704; dense MLP 3 x 64 x 96 = 18,432
    # MoE: 4 x 3 x 64 x 16 = 12,288 routed + 3,072 shared + router 256 + bias 4 = 15,620
    total = 12_800 + 3 * 24_704 + 18_432 + 2 * 15_620 + 64
    assert parameters_from_config(config).total == total == 136_648


def test_sarvam_moe_reads_as_bailing() -> None:
    config = _BAILING_STYLE | {"model_type": "sarvam_moe", "first_k_dense_replace": 1}
    assert estimate(_import(config), 0).bytes_per_token == 768
    bailing = config | {"model_type": "bailing_moe"}
    assert parameters_from_config(config).total == parameters_from_config(bailing).total


def test_sarvam_mla() -> None:
    config = _BAILING_STYLE | {
        "model_type": "sarvam_mla",
        "kv_lora_rank": 32,
        "qk_rope_head_dim": 8,
        "qk_nope_head_dim": 16,
        "v_head_dim": 16,
    }
    spec = _import(config)
    # 3 layers x (32 + 8) x 2 B = 240 B a token, one latent a layer
    assert set(spec.layers) == {MLALatent(32, 8)}
    assert estimate(spec, 0).bytes_per_token == 240
    # MLA without q_lora_rank: q 64 x (4 x 24) = 6,144; kv_a 64 x 40 = 2,560; norm 32;
    # kv_b 32 x (4 x 32) = 4,096; o 64 x 64 = 4,096: 16,928 + 2 norms 128 = 17,056
    # layer 0 dense (vLLM's first_k_dense_replace 1): 18,432; MoE as above 15,620
    total = 12_800 + 3 * 17_056 + 18_432 + 2 * 15_620 + 64
    assert parameters_from_config(config).total == total


# --- registration ---------------------------------------------------------------------------


def test_classes_are_vllm_classes_and_registered() -> None:
    known = set(VLLM_CLASSES.read_text().split())
    by_type = {a.model_type: a for a in list_architectures()}
    for name, model_type in CLASSES.items():
        assert name in known, name
        assert name in by_type[model_type].architectures, name
        assert by_type[model_type].engines == ("vllm",)
    assert set(by_type) >= WITHOUT_RELEASED_CONFIG
