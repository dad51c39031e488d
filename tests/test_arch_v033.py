"""The text-generation classes vLLM 0.33 adds to 0.32's registry: AliceAI, Beam, Domyn Edge,
Dory, Flint and Step 5. No released config.json of theirs is bundled: Beam, Dory, Flint and
Step 5 are built here from the config classes vLLM reads them through (its own, registered
over transformers'), and from transformers' defaults where those describe a released shape;
AliceAI and Domyn Edge keep their config class with the checkpoint (remote code), so their
configs state every key the vLLM model reads. Every figure is worked by hand in a comment from
the config and vLLM 0.33's model file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kvplan import estimate
from kvplan.errors import SpecError
from kvplan.importers import parameters_from_config
from kvplan.importers.config import spec_from_config
from kvplan.importers.registry import list_architectures
from kvplan.model.layers import FullAttention, NoCache, SlidingWindowAttention
from kvplan.model.spec import ModelSpec, parse_spec

DATA = Path(__file__).parent / "data"
V032 = (DATA / "vllm_0.32_text_generation_architectures.txt").read_text().split()
V033 = (DATA / "vllm_0.33_text_generation_architectures.txt").read_text().split()

#: The classes vLLM 0.33's _TEXT_GENERATION_MODELS adds, and the model_type each is read as.
ADDED = {
    "AliceAIForCausalLM": "alice_ai",
    "BeamForCausalLM": "beam",
    "DomynEdgeForCausalLM": "domyn_edge",
    "DoryForCausalLM": "dory",
    "FlintForCausalLM": "flint",
    "Step5ForCausalLM": "step5",
}


def _import(config: dict[str, Any]) -> ModelSpec:
    data, _ = spec_from_config(config)
    return parse_spec({"name": "x", **data})


def _kinds(spec: ModelSpec) -> tuple[int, int, int]:
    """Full-attention, sliding and cache-free layers."""
    full = sum(type(layer) is FullAttention for layer in spec.layers)
    sliding = sum(isinstance(layer, SlidingWindowAttention) for layer in spec.layers)
    return full, sliding, sum(isinstance(layer, NoCache) for layer in spec.layers)


def test_the_033_list_is_the_whole_registry_and_adds_six() -> None:
    assert len(V033) == len(set(V033)) == 124
    assert set(V032) <= set(V033)
    assert sorted(set(V033) - set(V032)) == sorted(ADDED)


@pytest.mark.parametrize(("cls", "model_type"), sorted(ADDED.items()))
def test_each_added_class_is_read(cls: str, model_type: str) -> None:
    by_type = {a.model_type: a for a in list_architectures()}
    assert by_type[model_type].architectures == (cls,)
    assert "vllm" in by_type[model_type].engines
    assert "vLLM 0.33" in by_type[model_type].notes


# --- Dory -------------------------------------------------------------------------------------

#: transformers' DoryConfig defaults as its to_dict writes them (the doubled layer counts)
DORY_LOOPED: dict[str, Any] = {
    "model_type": "dory",
    "torch_dtype": "bfloat16",
    "n_input_layers": 16,
    "n_output_layers": 16,
    "n_recurrent_loops": 2,
}


def test_dory_defaults() -> None:
    # vLLM's DoryConfig: 72 layers, odd ones mlp (36, no cache); attention layer i full where
    # i % 8 == 6: 6, 14, ..., 70 = 9 full, 27 sliding over 1,024; one loop, no extra cache.
    # 4 K/V heads of 256: 2 x 4 x 256 x 2 = 4,096 B a cache; 36 x 4,096 = 147,456 B a token
    spec = _import({"model_type": "dory", "torch_dtype": "bfloat16"})
    assert (spec.num_hidden_layers, _kinds(spec)) == (72, (9, 27, 36))
    assert estimate(spec, 100).kv_cache_bytes == 147_456 * 100
    # 10,000 tokens: 9 x 4,096 x 10,000 + 27 x 4,096 x 1,024 = 368,640,000 + 113,246,208
    assert estimate(spec, 10_000).kv_cache_bytes == 368_640_000 + 113_246_208
    assert estimate(spec, 10_000).state_bytes == 0


def test_dory_loops_the_recurrent_caches() -> None:
    # input 0-15, output 56-71, recurrent 16-55: its 20 attention layers (full: 22, 30, 38,
    # 46, 54) get one more cache for the second loop (per_loop): 36 + 20 = 56 caches, 14 full
    # and 42 sliding; 56 x 4,096 = 229,376 B a token
    spec = _import(DORY_LOOPED)
    assert spec.num_hidden_layers == 72 + 20
    assert _kinds(spec) == (14, 42, 36)
    assert estimate(spec, 100).kv_cache_bytes == 229_376 * 100
    # 2,048 tokens: 14 x 4,096 x 2,048 + 42 x 4,096 x 1,024 = 117,440,512 + 176,160,768
    assert estimate(spec, 2048).kv_cache_bytes == 117_440_512 + 176_160_768


def test_dory_last_loop_and_more_loops() -> None:
    # last_loop: the loops overwrite one cache, 36 caches whatever the loop count
    last = _import(DORY_LOOPED | {"recurrent_kv_cache_mode": "last_loop", "n_recurrent_loops": 4})
    assert (last.num_hidden_layers, _kinds(last)) == (72, (9, 27, 36))
    # four per_loop loops: 3 x 20 extra caches, 36 + 60 = 96 of 4,096 B
    four = _import(DORY_LOOPED | {"n_recurrent_loops": 4})
    assert estimate(four, 10).kv_cache_bytes == 96 * 4096 * 10
    # one kind listed (no mlp layers) is not interleaved: the engine-wide window of 1,024
    # reaches every layer, 2 x 4,096 x 1,024 at most
    one = _import(
        DORY_LOOPED
        | {"num_hidden_layers": 2, "n_input_layers": 0, "n_output_layers": 0}
        | {"layer_types": ["full_attention"] * 2, "n_recurrent_loops": 1}
    )
    assert estimate(one, 5000).kv_cache_bytes == 2 * 4096 * 1024
    with pytest.raises(SpecError, match="recurrent_kv_cache_mode"):
        _import(DORY_LOOPED | {"recurrent_kv_cache_mode": "every"})
    with pytest.raises(SpecError, match="must sum to 72"):
        _import(DORY_LOOPED | {"n_recurrent_layers": 50})
    with pytest.raises(SpecError, match=r"layer_types\.1: unknown kind"):
        _import({"model_type": "dory", "num_hidden_layers": 2, "layer_types": ["mlp", "moe"]})


def test_dory_parameters() -> None:
    # vLLM dory.py, DoryConfig: V 131,072, H 2,560, 16 heads and 4 K/V heads of 256, MLP 7,168
    # embeddings 131,072 x 2,560 = 335,544,320, head as much plus logit_scale 131,072
    # attention layer: qkv 2,560 x 6,144 = 15,728,640, g and o 2 x 10,485,760, sqk and s_gate
    # 2 x 4,096, attn_alpha 2,560: 36,710,912; MLP layer: 3 x 2,560 x 7,168 = 55,050,240,
    # suv 2 x 7,168, mlp_alpha 2,560: 55,067,136; 36 of each; no final norm; the loops reuse
    # the weights
    count = parameters_from_config({"model_type": "dory"})
    assert count.total == 2 * 335_544_320 + 131_072 + 36 * (36_710_912 + 55_067_136)
    assert count.total == 3_975_229_440
    # the released Dory 1.0 4B checkpoint (16 / 40 / 16 layers, 2 passes) holds as many
    # values, as its model card counts them
    assert parameters_from_config(DORY_LOOPED).total == 3_975_229_440


# --- Beam -------------------------------------------------------------------------------------

#: transformers' BeamConfig defaults, the shape of Beam 1.0 501B-A23B
BEAM_501B: dict[str, Any] = {
    "model_type": "beam",
    "torch_dtype": "bfloat16",
    "hidden_size": 5120,
    "intermediate_size": 20480,
    "num_hidden_layers": 52,
    "num_attention_heads": 48,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "sliding_window": 512,
    "moe_intermediate_size": 2560,
    "num_experts": 256,
    "layer_types": [
        "full_attention" if (i + 1) % 6 == 0 or i == 51 else "sliding_attention" for i in range(52)
    ],
    "mlp_layer_types": ["dense"] * 3 + ["sparse"] * 49,
}


def test_beam_defaults() -> None:
    # vLLM's BeamConfig: 24 layers, all sliding over 4,096; 4 K/V heads of 2,048 / 32 = 64:
    # 2 x 4 x 64 x 2 = 1,024 B a layer, 24,576 B a token; flat past the window
    spec = _import({"model_type": "beam", "torch_dtype": "bfloat16"})
    assert _kinds(spec) == (0, 24, 0)
    assert estimate(spec, 100).kv_cache_bytes == 24_576 * 100
    assert estimate(spec, 10_000).kv_cache_bytes == 24_576 * 4096


def test_beam_501b_layers() -> None:
    # global where (i + 1) % 6 == 0 (5, 11, ..., 47: 8) and the last: 9 global, 43 sliding over
    # 512; 8 K/V heads of 128: 2 x 8 x 128 x 2 = 4,096 B a layer
    spec = _import(BEAM_501B)
    assert _kinds(spec) == (9, 43, 0)
    assert estimate(spec, 100).kv_cache_bytes == 52 * 4096 * 100
    # 1,000 tokens: 9 x 4,096 x 1,000 + 43 x 4,096 x 512 = 36,864,000 + 90,177,536
    assert estimate(spec, 1000).kv_cache_bytes == 36_864_000 + 90_177_536
    # beam clears the engine-wide window: listed global layers stay global
    stated = _import(BEAM_501B | {"num_hidden_layers": 2, "layer_types": ["full_attention"] * 2})
    assert _kinds(stated) == (2, 0, 0)
    assert _kinds(_import(BEAM_501B | {"sliding_window": None})) == (52, 0, 0)


def test_beam_parameters() -> None:
    # vLLM's BeamConfig: V 151,936, H 2,048, 32 heads and 4 K/V heads of 64; per layer q, k, v
    # and gate 2,048 x (2 x 2,048 + 2 x 256) = 9,437,184, o 2,048^2 = 4,194,304, q/k norms 128,
    # gate bias 32, 4 norms 8,192: 13,639,840; every layer MoE: 128 experts x 3 x 2,048 x 768 =
    # 603,979,776, router 128 x 2,048 + 128 = 262,272; embeddings 2 x 151,936 x 2,048; final norm
    count = parameters_from_config({"model_type": "beam"})
    layer = 13_639_840 + 603_979_776 + 262_272
    assert count.total == 2 * 151_936 * 2_048 + 24 * layer + 2_048 == 15_451_497_216


def test_beam_501b_parameters() -> None:
    # per layer q, k, v and gate 5,120 x (2 x 6,144 + 2 x 1,024) = 73,400,320, o 6,144 x 5,120
    # = 31,457,280, q/k norms 256, gate bias 48, 4 norms 20,480: 104,878,384 x 52; 3 dense MLPs
    # 3 x 5,120 x 20,480 = 314,572,800; 49 MoE layers of 256 experts x 3 x 5,120 x 2,560 =
    # 10,066,329,600 and a router 256 x 5,120 + 256: 10,067,640,576; embeddings
    # 2 x 151,936 x 5,120; final norm
    count = parameters_from_config(BEAM_501B)
    assert count.total == (
        2 * 151_936 * 5_120 + 52 * 104_878_384 + 3 * 314_572_800 + 49 * 10_067_640_576 + 5_120
    )
    assert count.total == 501_267_612_352  # Beam 1.0 501B-A23B
    # a token skips 248 of 256 experts in 49 layers: 49 x 248 x 39,321,600
    assert count.inactive == 477_836_083_200


# --- Flint ------------------------------------------------------------------------------------

#: transformers' FlintConfig defaults: its layer pattern and two dense layers
FLINT_PATTERN: dict[str, Any] = {
    "model_type": "flint",
    "torch_dtype": "bfloat16",
    "layer_types": [
        "full_attention" if i < 2 or i % 4 == 1 or i == 48 else "sliding_attention"
        for i in range(49)
    ],
    "mlp_only_layers": [0, 1],
}


def test_flint_defaults() -> None:
    # vLLM's FlintConfig: 49 layers all listed full, window 513; one kind is not interleaved,
    # so vLLM sets the engine-wide window and flint.py keeps it: every layer slides over 513.
    # 4 K/V heads of 128: 2,048 B a layer, 100,352 B a token; at most 49 x 2,048 x 513
    spec = _import({"model_type": "flint", "torch_dtype": "bfloat16"})
    assert _kinds(spec) == (0, 49, 0)
    assert estimate(spec, 100).kv_cache_bytes == 100_352 * 100
    assert estimate(spec, 1000).kv_cache_bytes == 51_480_576
    # use_sliding_window false drops the window: every layer global
    off = _import({"model_type": "flint", "use_sliding_window": False})
    assert _kinds(off) == (49, 0, 0)


def test_flint_pattern() -> None:
    # global where i < 2, i % 4 == 1 (1, 5, ..., 45: 12) or the last: {0, 1, 5, ..., 45, 48}
    # = 14, 35 sliding over 513
    spec = _import(FLINT_PATTERN)
    assert _kinds(spec) == (14, 35, 0)
    assert {layer.window for layer in spec.layers if isinstance(layer, SlidingWindowAttention)} == {
        513
    }
    assert estimate(spec, 100).kv_cache_bytes == 49 * 2048 * 100
    # 1,000 tokens: 14 x 2,048 x 1,000 + 35 x 2,048 x 513 = 28,672,000 + 36,771,840
    assert estimate(spec, 1000).kv_cache_bytes == 28_672_000 + 36_771_840


def test_flint_parameters() -> None:
    # V 150,144, H 2,048, 32 heads and 4 K/V heads of 128; per layer qkv 2,048 x 5,120 =
    # 10,485,760, o 4,096 x 2,048 = 8,388,608, q/k norms 256, sinks 32, 2 norms 4,096:
    # 18,878,752 x 49; a dense MLP 3 x 2,048 x 6,144 = 37,748,736; a MoE layer:
    # 256 x 3 x 2,048 x 512 = 805,306,368, shared 3 x 2,048 x 1,024 = 6,291,456, router
    # 256 x 2,048 = 524,288: 812,122,112; embeddings 2 x 150,144 x 2,048; final norm 2,048
    outside = 2 * 150_144 * 2_048 + 49 * 18_878_752 + 2_048
    # vLLM's FlintConfig: no dense layer
    assert parameters_from_config({"model_type": "flint"}).total == outside + 49 * 812_122_112
    assert parameters_from_config({"model_type": "flint"}).total == 41_334_034_208
    # layers 0 and 1 dense: the 39.8B of the released Flint
    count = parameters_from_config(FLINT_PATTERN)
    assert count.total == outside + 2 * 37_748_736 + 47 * 812_122_112 == 39_785_287_456


# --- Domyn Edge -------------------------------------------------------------------------------

DOMYN: dict[str, Any] = {
    "model_type": "domyn_edge",
    "torch_dtype": "bfloat16",
    "num_hidden_layers": 2,
    "hidden_size": 1024,
    "num_attention_heads": 8,
    "num_key_value_heads": 8,
    "per_layer_config": [{"head_dim": 128}, {"head_dim": 256}],
    "window_sizes": [[1023, 0], [0, 0]],
    "position_layers": ["rope", "nope"],
    "vocab_size": 1000,
    "intermediate_size": 4096,
    "tie_word_embeddings": True,
}


def test_domyn_edge_per_layer_head_dim_and_window() -> None:
    # layer 0: window (1023, 0) attends to 1,024 keys, 8 x 128: 2 x 8 x 128 x 2 = 4,096 B;
    # layer 1: global, 8 x 256: 8,192 B
    spec = _import(DOMYN)
    assert spec.layers == (
        SlidingWindowAttention(8, 128, 128, window=1024),
        FullAttention(8, 256, 256),
    )
    assert estimate(spec, 1).kv_cache_bytes == 4096 + 8192
    # 2,000 tokens: 4,096 x 1,024 + 8,192 x 2,000 = 4,194,304 + 16,384,000
    assert estimate(spec, 2000).kv_cache_bytes == 4_194_304 + 16_384_000
    with pytest.raises(SpecError, match="per_layer_config: required"):
        _import({k: v for k, v in DOMYN.items() if k != "per_layer_config"})
    with pytest.raises(SpecError, match="different windows"):
        _import(DOMYN | {"window_sizes": [[1023, 0], [511, 0]]})
    with pytest.raises(SpecError, match="window_sizes: has 1 entries"):
        _import(DOMYN | {"window_sizes": [[0, 0]]})


def test_domyn_edge_parameters() -> None:
    # tied 1,000 x 1,024; layer 0: qkv 1,024 x 3,072 = 3,145,728, o 1,024 x 1,024 = 1,048,576,
    # k_norm 128, MLP 3 x 1,024 x 4,096 = 12,582,912, 4 norms 4,096: 16,781,440; layer 1: qkv
    # 1,024 x 6,144 = 6,291,456, o 2,048 x 1,024 = 2,097,152, k_norm 256, MLP, norms:
    # 20,975,872; final norm 1,024
    count = parameters_from_config(DOMYN)
    assert count.total == 1_024_000 + 16_781_440 + 20_975_872 + 1_024 == 38_782_336


# --- AliceAI ----------------------------------------------------------------------------------

ALICE: dict[str, Any] = {
    "model_type": "alice_ai",
    "torch_dtype": "bfloat16",
    "num_hidden_layers": 4,
    "hidden_size": 2048,
    "num_attention_heads": 16,
    "num_key_value_heads": 2,
    "head_dim": 256,
    "layer_types": ["linear_attention"] * 3 + ["full_attention"],
    "linear_num_key_heads": 32,
    "linear_num_value_heads": 32,
    "linear_key_head_dim": 128,
    "linear_value_head_dim": 128,
    "linear_conv_kernel_dim": 4,
    "num_experts": 512,
    "num_experts_per_tok": 10,
    "moe_intermediate_size": 512,
    "shared_expert_intermediate_size": 512,
    "vocab_size": 129024,
    "block_attn_res_block_size": 4,
}


def test_alice_ai_kda_state_and_gated_attention() -> None:
    # the full layer: 2 K/V heads of 256: 2 x 2 x 256 x 2 = 2,048 B a token; each KDA layer
    # (kda_state_shape): conv 3 x (32 x 128) x (4 - 1) = 36,864 values in bf16 = 73,728 B,
    # state 32 x 128 x 128 = 524,288 values in float32 = 2,097,152 B; 3 KDA layers: 6,512,640 B
    spec = _import(ALICE)
    assert estimate(spec, 1000).state_bytes == 3 * (73_728 + 2_097_152) == 6_512_640
    # the cache holds both: 2,048 x 1,000 + 6,512,640
    assert estimate(spec, 1000).kv_cache_bytes == 2_048_000 + 6_512_640
    with pytest.raises(SpecError, match="layer_types: required"):
        _import({k: v for k, v in ALICE.items() if k != "layer_types"})
    with pytest.raises(SpecError, match="linear_num_value_heads"):
        _import(ALICE | {"linear_num_value_heads": 16})


def test_alice_ai_parameters() -> None:
    # head and embeddings 2 x 129,024 x 2,048 = 528,482,304, final norm and final residual
    # projection and norm 3 x 2,048; KDA layer: q, k, v 2,048 x 12,288 = 25,165,824, beta
    # 2,048 x 32 = 65,536, f and g low rank 2 x (2,048 x 128 + 128 x 4,096) = 1,572,864, dt_bias
    # 4,096, conv 3 x 4,096 x 4 = 49,152, A_log 32, o_norm 128, o 4,096 x 2,048 = 8,388,608:
    # 35,246,240; gated attention: q and gate, k, v 2,048 x (8,192 + 1,024) = 18,874,368,
    # o 8,388,608, q/k norms 512: 27,263,488; every layer 512 experts x 3 x 2,048 x 512 =
    # 1,610,612,736, shared 3,145,728, router 512 x 2,048 + 512, shared gate 2,048, 2 norms
    # and the mlp residual 4 x 2,048: 1,614,817,792; attention residuals on layers 1-3: 2 x 2,048
    count = parameters_from_config(ALICE)
    outside = 528_482_304 + 3 * 2_048
    layers = 3 * 35_246_240 + 27_263_488 + 4 * 1_614_817_792 + 3 * 4_096
    assert count.total == outside + layers == 7_120_774_112


# --- Step 5 -----------------------------------------------------------------------------------

STEP5: dict[str, Any] = {
    "model_type": "step5",
    "torch_dtype": "bfloat16",
    "sparse_config": {"enabled": False},
    "use_moe_router_bias": True,
}


def test_step5_defaults() -> None:
    # Step5Config: 48 layers, 8 groups of 5,120 / 40 = 128; no layer_types: even layers listed
    # sliding, odd full; with no sliding_window every layer attends fully: 48 x 2 x 8 x 128 x 2
    spec = _import(STEP5)
    assert _kinds(spec) == (48, 0, 0)
    assert estimate(spec, 1).kv_cache_bytes == 48 * 4096 == 196_608
    # with a window of 4,096: 24 sliding, 24 full; 10,000 tokens: 24 x 4,096 x 10,000 +
    # 24 x 4,096 x 4,096 = 983,040,000 + 402,653,184
    windowed = _import(STEP5 | {"sliding_window": 4096})
    assert _kinds(windowed) == (24, 24, 0)
    assert estimate(windowed, 10_000).kv_cache_bytes == 983_040_000 + 402_653_184


def test_step5_per_type_heads_and_mtp_entries() -> None:
    # four decoder layers; layer_types_with_mtp's fifth entry is the MTP layer's, cut off;
    # full layers 8 groups of 128: 2 x 8 x 128 x 2 = 4,096 B; sliding layers take
    # attention_other_setting's 4 groups of 64: 2 x 4 x 64 x 2 = 1,024 B
    config = STEP5 | {"num_hidden_layers": 4, "num_nextn_predict_layers": 1, "head_dim": 128}
    config |= {"hidden_size": 1024, "num_attention_heads": 8, "sliding_window": 512}
    config["layer_types_with_mtp"] = ["full_attention", "sliding_attention"] * 2
    config["layer_types_with_mtp"] += ["full_attention"]
    other = {"attention_type": "sliding_attention", "num_attention_heads": 16}
    config["attention_other_setting"] = other | {"num_attention_groups": 4, "head_dim": 64}
    config["swa_num_attention_heads"] = 16
    spec = _import(config)
    assert _kinds(spec) == (2, 2, 0)
    assert estimate(spec, 10).kv_cache_bytes == (2 * 4096 + 2 * 1024) * 10


def test_step5_refuses_what_it_does_not_model() -> None:
    with pytest.raises(SpecError, match="sparse_config: required"):
        _import({"model_type": "step5"})
    with pytest.raises(SpecError, match="DSA cache"):
        _import(STEP5 | {"sparse_config": {"topk": 512}})


def test_step5_parameters() -> None:
    # H 5,120, V 65,536, 40 heads, 8 groups of 128; per layer qkv 5,120 x 7,168 = 36,700,160,
    # o 5,120^2 = 26,214,400, q/k norms 256, 2 norms 10,240: 62,925,056 x 48; layer 0 a dense
    # MLP 3 x 5,120 x 13,312 = 204,472,320; layers 1-47: 16 experts x 3 x 5,120 x 10,240 =
    # 2,516,582,400, the shared expert of 10,240 x 4 = 40,960: 629,145,600, router 16 x 5,120
    # + 16: 3,145,809,936; untied embeddings 2 x 65,536 x 5,120; final norm 5,120
    count = parameters_from_config(STEP5)
    assert count.total == (
        2 * 65_536 * 5_120 + 48 * 62_925_056 + 204_472_320 + 47 * 3_145_809_936 + 5_120
    )
    assert count.total == 151_749_035_760


# --- malformed configs: one SpecError naming the key ------------------------------------------


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ({"model_type": "dory", "n_recurrent_loops": 0}, "n_recurrent_loops"),
        ({"model_type": "dory", "n_input_layers": "8"}, "n_input_layers"),
        ({"model_type": "dory", "layer_types": "mlp"}, "layer_types"),
        ({"model_type": "beam", "layer_types": ["mamba"] * 24}, "layer_types"),
        ({"model_type": "flint", "layer_types": ["full_attention"]}, "layer_types: has 1"),
        ({"model_type": "flint", "sliding_window": -1}, "sliding_window"),
        (DOMYN | {"per_layer_config": [5, {"head_dim": 128}]}, "per_layer_config.0"),
        (DOMYN | {"per_layer_config": [{}, {"head_dim": 128}]}, "per_layer_config.0.head_dim"),
        (DOMYN | {"window_sizes": [[-1, 0], [0, 0]]}, "window_sizes.0"),
        (DOMYN | {"window_sizes": [[], [0, 0]]}, "window_sizes.0"),
        (DOMYN | {"sliding_window": 4096}, "sliding_window"),
        (ALICE | {"layer_types": ["mamba"] * 4}, "layer_types"),
        (ALICE | {"linear_conv_kernel_dim": None}, "linear_conv_kernel_dim"),
        (STEP5 | {"sparse_config": "off"}, "sparse_config"),
        (STEP5 | {"attention_other_setting": []}, "attention_other_setting"),
        (STEP5 | {"sliding_window": 512, "swa_num_attention_heads": 0}, "swa_num_attention_heads"),
    ],
)
def test_malformed_configs(config: dict[str, Any], key: str) -> None:
    with pytest.raises(SpecError, match=key):
        _import(config)


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ({"model_type": "beam", "mlp_layer_types": ["moe"] * 24}, "mlp_layer_types"),
        ({"model_type": "flint", "mlp_only_layers": ["x"]}, "mlp_only_layers"),
        (STEP5 | {"moe_layers_enum": "1,x"}, "moe_layers_enum"),
        (ALICE | {"num_experts": None}, "num_experts"),
    ],
)
def test_malformed_counts(config: dict[str, Any], key: str) -> None:
    with pytest.raises(SpecError, match=key):
        parameters_from_config(config)
