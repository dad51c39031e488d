"""Importers of the attention-free state-space models from released config.json files: Mamba
and Falcon Mamba (Mamba1) and Mamba2 (Codestral Mamba); of MiMo-V2-Flash's per-kind K/V heads,
Llama-Nemotron NAS block configs, Gemma 3n and Gemma 4, Zamba2, OLMo Hybrid and HRM-Text, each
worked by hand; and the vLLM 0.32 classes they register."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan import estimate
from kvplan.errors import SpecError
from kvplan.importers import import_config, parameters_from_config
from kvplan.importers.config import spec_from_config
from kvplan.importers.registry import list_architectures
from kvplan.model.layers import (
    AttentionAndState,
    FullAttention,
    NoCache,
    RecurrentState,
    SharedKV,
    SlidingWindowAttention,
)
from kvplan.model.spec import ModelSpec, parse_spec

FIXTURES = Path(__file__).parent / "fixtures" / "hf"
VLLM_CLASSES = Path(__file__).parent / "data" / "vllm_0.32_text_generation_architectures.txt"
CLASSES = ("MambaForCausalLM", "FalconMambaForCausalLM", "Mamba2ForCausalLM")


def _config(name: str) -> dict[str, object]:
    return json.loads((FIXTURES / name / "config.json").read_text())  # type: ignore[no-any-return]


def _import(config: dict[str, object]) -> ModelSpec:
    data, _ = spec_from_config(config)
    return parse_spec({"name": "x", **data})


def _state(spec: ModelSpec) -> RecurrentState:
    assert {type(layer) for layer in spec.layers} == {RecurrentState}
    layer = spec.layers[0]
    assert isinstance(layer, RecurrentState)
    return layer


def test_falcon_mamba_7b() -> None:
    spec = import_config(FIXTURES / "falcon-mamba-7b").spec
    layer = _state(spec)
    # vLLM reads intermediate_size 8,192 (not expand 16 x 4,096): conv tail 8,192 x (4 - 1)
    # = 24,576 values, SSM 8,192 x 16 = 131,072 values, in bf16 (the model dtype)
    assert (layer.conv_values, layer.ssm_values) == (24576, 131072)
    assert layer.state_dtype.name == "bfloat16"
    # nothing per token; 64 layers x (24,576 + 131,072) x 2 B = 19,922,944 B a sequence
    assert estimate(spec, 0).bytes_per_token == 0
    assert estimate(spec, 100_000).kv_cache_bytes == 64 * 155_648 * 2 == 19_922_944


def test_falcon_mamba_7b_parameters() -> None:
    # embeddings and head 2 x 65,024 x 4,096 = 532,676,608
    # per layer: in_proj 4,096 x 16,384 = 67,108,864; conv 8,192 x 4 + 8,192 = 40,960;
    #   x_proj 8,192 x (256 + 32) = 2,359,296; dt_proj 256 x 8,192 + 8,192 = 2,105,344;
    #   A_log 8,192 x 16 + D 8,192 = 139,264; out_proj 8,192 x 4,096 = 33,554,432; norm 4,096
    #   = 105,312,256; x 64 = 6,739,984,384; final norm 4,096
    per_layer = 67_108_864 + 40_960 + 2_359_296 + 2_105_344 + 139_264 + 33_554_432 + 4096
    assert per_layer == 105_312_256
    count = parameters_from_config(_config("falcon-mamba-7b"))
    # 7.27B, the model card's size
    assert count.total == 532_676_608 + 64 * per_layer + 4096 == 7_272_665_088


def test_mamba_130m() -> None:
    spec = import_config(FIXTURES / "mamba-130m").spec
    layer = _state(spec)
    assert spec.torch_dtype == "float32"  # the file states none: the config class's float32
    # intermediate 1,536: conv 1,536 x 3 = 4,608; SSM 1,536 x 16 = 24,576 values
    assert (layer.conv_values, layer.ssm_values) == (4608, 24576)
    # 24 layers x (4,608 + 24,576) x 4 B = 2,801,664 B a sequence
    assert estimate(spec, 2048).kv_cache_bytes == 24 * 29_184 * 4 == 2_801_664


def test_mamba_130m_parameters() -> None:
    # tied embeddings 50,280 x 768 = 38,615,040
    # per layer: in_proj 768 x 3,072 = 2,359,296; conv 1,536 x 5 = 7,680; x_proj 1,536 x 80
    #   = 122,880; dt_proj 48 x 1,536 + 1,536 = 75,264; A_log and D 1,536 x 17 = 26,112;
    #   out_proj 1,536 x 768 = 1,179,648; norm 768: 3,771,648; x 24 = 90,519,552; final 768
    per_layer = 2_359_296 + 7680 + 122_880 + 75_264 + 26_112 + 1_179_648 + 768
    assert per_layer == 3_771_648
    count = parameters_from_config(_config("mamba-130m"))
    assert count.total == 38_615_040 + 24 * per_layer + 768 == 129_135_360


def test_mamba_codestral_7b() -> None:
    spec = import_config(FIXTURES / "mamba-codestral-7b").spec
    layer = _state(spec)
    # conv tail over 2 x 4,096 + 2 x 8 groups x 128 = 10,240 channels x 3 = 30,720 values;
    # SSM 128 heads x 64 x 128 = 1,048,576 values
    assert (layer.conv_values, layer.ssm_values) == (30720, 1_048_576)
    # 64 layers x (30,720 + 1,048,576) x 2 B = 138,149,888 B a sequence, nothing per token
    assert estimate(spec, 0).bytes_per_token == 0
    assert estimate(spec, 1).kv_cache_bytes == 64 * 1_079_296 * 2 == 138_149_888


def test_mamba_codestral_7b_parameters() -> None:
    # embeddings and head 2 x 32,768 x 4,096 = 268,435,456
    # per layer: in_proj 4,096 x (8,192 + 10,240 + 128) = 76,021,760; conv 10,240 x 5 = 51,200;
    #   dt_bias, A_log, D 3 x 128 = 384; gated norm 8,192; out_proj 8,192 x 4,096 = 33,554,432;
    #   norm 4,096: 109,640,064; x 64 = 7,016,964,096; final norm 4,096
    per_layer = 76_021_760 + 51_200 + 384 + 8192 + 33_554_432 + 4096
    assert per_layer == 109_640_064
    count = parameters_from_config(_config("mamba-codestral-7b"))
    assert count.total == 268_435_456 + 64 * per_layer + 4096 == 7_285_403_648


def test_mamba1_without_intermediate_size_takes_expand() -> None:
    # MambaConfig: intermediate_size = expand x hidden_size when the file states none
    config = {k: v for k, v in _config("mamba-130m").items() if k != "intermediate_size"}
    layer = _state(_import(config | {"expand": 3}))
    # 3 x 768 = 2,304 channels: conv 2,304 x 3, SSM 2,304 x 16
    assert (layer.conv_values, layer.ssm_values) == (6912, 36864)


def test_mamba1_width_not_a_multiple_of_hidden_is_refused() -> None:
    with pytest.raises(SpecError, match="intermediate_size: 1000 is not a multiple"):
        _import(_config("mamba-130m") | {"intermediate_size": 1000})


def test_mamba2_heads_must_cover_the_mixer_width() -> None:
    with pytest.raises(SpecError, match="num_heads: 64 x head_dim 64 is not expand x hidden"):
        _import(_config("mamba-codestral-7b") | {"num_heads": 64})


def test_registered_classes_are_vllm_text_generation_classes() -> None:
    known = set(VLLM_CLASSES.read_text().split())
    registered = {c for a in list_architectures() for c in a.architectures}
    assert set(CLASSES) <= known & registered
    mine = [a for a in list_architectures() if a.family == "mamba"]
    assert {a.model_type for a in mine} == {"mamba", "falcon_mamba", "mamba2"}
    for architecture in mine:
        assert set(architecture.architectures) <= known
        assert architecture.layer_kinds == ("mamba",)


# --- attention models with per-layer geometry --------------------------------------------------

NEW_CLASSES = {
    "mimo_v2_flash": "MiMoV2FlashForCausalLM",
    "mimo_v2": "MiMoV2ForCausalLM",
    "nemotron-nas": "DeciLMForCausalLM",
    "gemma3n_text": "Gemma3nForCausalLM",
    "gemma4_text": "Gemma4ForCausalLM",
    "zamba2": "Zamba2ForCausalLM",
    "olmo_hybrid": "OlmoHybridForCausalLM",
    "hrm_text": "HrmTextForCausalLM",
}


def test_mimo_v2_flash() -> None:
    spec = import_config(FIXTURES / "mimo-v2-flash").spec
    full = [layer for layer in spec.layers if layer.kind == "full_attention"]
    sliding = [layer for layer in spec.layers if isinstance(layer, SlidingWindowAttention)]
    # hybrid_layer_pattern: 0 (full) at layers 0, 5, 11, 17, ..., 47; 1 (sliding) elsewhere
    assert (len(full), len(sliding)) == (9, 39)
    assert {(a.num_kv_heads, a.head_dim, a.v_head_dim) for a in full} == {(4, 192, 128)}
    assert {(a.num_kv_heads, a.head_dim, a.v_head_dim, a.window) for a in sliding} == {
        (8, 192, 128, 128)
    }
    # 9 x 4 x (192 + 128) x 2 B = 23,040; 39 x 8 x 320 x 2 B = 199,680
    assert estimate(spec, 0).bytes_per_token == 23_040 + 199_680 == 222_720


def test_mimo_v2_flash_parameters() -> None:
    # embeddings and head 2 x 152,576 x 4,096 = 1,249,902,592; final norm 4,096
    # attention: q 4,096 x 64 x 192 + o 64 x 128 x 4,096 = 83,886,080, plus k and v
    #   full: 4,096 x 4 x (192 + 128) = 5,242,880; sliding: 4,096 x 8 x 320 + 64 sinks
    #   = 10,485,824; two norms 8,192 a layer
    # layer 0: dense MLP 3 x 4,096 x 16,384 = 201,326,592
    # layers 1-47: 256 experts x 3 x 4,096 x 2,048 = 6,442,450,944; router 256 x 4,096 + 256
    full = 83_886_080 + 5_242_880 + 8192
    sliding = 83_886_080 + 10_485_824 + 8192
    experts = 6_442_450_944 + 1_048_832
    total = 1_249_902_592 + 4096 + 9 * full + 39 * sliding + 201_326_592 + 47 * experts
    count = parameters_from_config(_config("mimo-v2-flash"))
    # 308.8B total, 15.4B active: the model card's 309B / 15B
    assert count.total == total == 308_778_780_864
    assert count.total - count.inactive == total - 47 * 248 * 3 * 4096 * 2048 == 15_445_936_320


def test_mimo_v2_without_swa_keys_takes_the_transformers_reading() -> None:
    config = {
        k: v
        for k, v in _config("mimo-v2-flash").items()
        if not k.startswith("swa_") and k not in ("hybrid_layer_pattern", "sliding_window_size")
    }
    spec = _import(config)
    # MiMoV2FlashConfig: full on layer 0 and every sixth; twice the K/V heads on sliding layers
    assert [i for i, a in enumerate(spec.layers) if a.kind == "full_attention"] == [
        0,
        5,
        11,
        17,
        23,
        29,
        35,
        41,
        47,
    ]
    assert estimate(spec, 0).bytes_per_token == 222_720


def test_mimo_v2_sliding_head_dims_must_match_the_full_ones() -> None:
    # vLLM gives a sliding layer V heads of swa_head_dim when swa_v_head_dim is absent
    config = {k: v for k, v in _config("mimo-v2-flash").items() if k != "swa_v_head_dim"}
    with pytest.raises(SpecError, match="swa_head_dim, swa_v_head_dim: 192/192 differ"):
        _import(config)


def test_mimo_v2_without_config_class_reads_like_flash() -> None:
    spec = _import(_config("mimo-v2-flash") | {"model_type": "mimo_v2"})
    assert estimate(spec, 0).bytes_per_token == 222_720


def test_nemotron_super_49b() -> None:
    spec = import_config(FIXTURES / "llama-3.3-nemotron-super-49b").spec
    kinds = [type(layer) for layer in spec.layers]
    # 31 block_configs with attention no_op keep nothing; 49 keep 64 / 8 = 8 K/V heads of 128
    assert (kinds.count(NoCache), kinds.count(FullAttention)) == (31, 49)
    assert spec.layers[6] == NoCache()
    assert spec.layers[0] == FullAttention(8, 128, 128)
    # 2 x 49 x 8 x 128 x 2 B = 200,704 B a token
    assert estimate(spec, 0).bytes_per_token == 200_704


def test_nemotron_super_49b_parameters() -> None:
    # embeddings and head 2 x 128,256 x 8,192 = 2,101,346,304; final norm 8,192
    # 49 attention layers: q, o 2 x 8,192^2 + k, v 2 x 8,192 x 1,024 + norm 8,192 = 151,003,136
    # MLP widths int(2 x ffn_mult x 8,192 / 3) rounded up to 256: 5.25 -> 28,672 (49 layers),
    #   1.3125 -> 7,168 (10), 1.0 -> 5,461 -> 5,632 (8), 2.625 -> 14,336 (6),
    #   0.5 -> 2,730 -> 2,816 (6), 3.28125 -> 17,920 (1); 3 x 8,192 x width + norm 8,192 each
    widths = 49 * 28_672 + 10 * 7168 + 8 * 5632 + 6 * 14_336 + 6 * 2816 + 17_920
    total = 2_101_346_304 + 49 * 151_003_136 + 3 * 8192 * widths + 80 * 8192 + 8192
    # 49.9B, the model card's size
    assert parameters_from_config(_config("llama-3.3-nemotron-super-49b")).total == total
    assert total == 49_867_145_216


def test_nemotron_nas_refuses_linear_replacements() -> None:
    config = _config("llama-3.3-nemotron-super-49b")
    blocks = [dict(b) for b in config["block_configs"]]  # type: ignore[attr-defined]
    blocks[0] = blocks[0] | {"attention": {"replace_with_linear": True, "no_op": False}}
    with pytest.raises(SpecError, match=r"block_configs\.0\.attention\.replace_with_linear"):
        _import(config | {"block_configs": blocks})


def test_gemma3n_from_the_config_class() -> None:
    # Gemma3nTextConfig's defaults are Gemma 3n E4B's text model: 35 layers, four sliding
    # (512) then one full, 2 K/V heads of 256, the last 15 layers reusing earlier K/V.
    spec = _import({"model_type": "gemma3n", "text_config": {"model_type": "gemma3n_text"}})
    assert sum(isinstance(layer, SharedKV) for layer in spec.layers) == 15
    # 20 own caches (16 sliding + 4 full) x 2 x 2 x 256 x 2 B = 40,960 B a token
    assert estimate(spec, 0).bytes_per_token == 40_960
    with pytest.raises(SpecError, match="gemma3n_text is not counted"):
        parameters_from_config({"model_type": "gemma3n_text"})


def test_gemma3n_e2b_geometry() -> None:
    # E2B: 30 layers, the last 10 sharing: 20 own caches, 4 of them full
    spec = _import({"model_type": "gemma3n_text", "num_hidden_layers": 30})
    assert sum(isinstance(layer, SharedKV) for layer in spec.layers) == 15
    spec = _import(
        {"model_type": "gemma3n_text", "num_hidden_layers": 30, "num_kv_shared_layers": 10}
    )
    assert [type(a) for a in spec.layers].count(FullAttention) == 4
    assert estimate(spec, 0).bytes_per_token == 20 * 2 * 2 * 256 * 2


GEMMA4_26B = {
    "model_type": "gemma4_text",
    "num_hidden_layers": 30,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 256,
    "global_head_dim": 512,
    "num_global_key_value_heads": 2,
    "attention_k_eq_v": True,
    "sliding_window": 1024,
    "dtype": "bfloat16",
}


def test_gemma4_full_layers_have_their_own_heads() -> None:
    spec = _import(GEMMA4_26B)
    assert spec.layers[5] == FullAttention(2, 512, 512)
    assert spec.layers[0] == SlidingWindowAttention(8, 256, 256, 1024)
    # 25 sliding x 2 x 8 x 256 x 2 B = 204,800; 5 full x 2 x 2 x 512 x 2 B = 20,480
    assert estimate(spec, 0).bytes_per_token == 204_800 + 20_480


def test_gemma4_global_kv_heads_only_with_k_eq_v() -> None:
    # Gemma4TextConfig overrides the full layers' K/V heads only when attention_k_eq_v is set
    spec = _import(GEMMA4_26B | {"attention_k_eq_v": False})
    assert spec.layers[5] == FullAttention(8, 512, 512)


def test_gemma4_defaults_force_the_last_layer_global() -> None:
    # 7 layers: five sliding, one full, and the seventh forced full (Gemma4TextConfig)
    spec = _import({"model_type": "gemma4_text", "num_hidden_layers": 7})
    assert [a.kind for a in spec.layers].count("full_attention") == 2
    assert spec.layers[-1] == FullAttention(4, 512, 512)
    bidirectional = _import(GEMMA4_26B | {"use_bidirectional_attention": "all"})
    assert spec.sliding_window == 512
    assert bidirectional.sliding_window == 1024 // 2 + 1


def test_gemma4_shared_layers() -> None:
    spec = _import(GEMMA4_26B | {"num_kv_shared_layers": 10})
    assert sum(isinstance(layer, SharedKV) for layer in spec.layers) == 10


def test_zamba2_from_the_config_class() -> None:
    # Zamba2Config defaults: 54 layers, 9 "hybrid" (shared attention + Mamba2), hidden 2560,
    # 32 heads; vLLM keeps a KV cache per hybrid layer, MHA, head_dim 2 x 2,560 / 32 = 160
    spec = _import({"model_type": "zamba2", "torch_dtype": "bfloat16"})
    hybrid = [layer for layer in spec.layers if isinstance(layer, AttentionAndState)]
    assert len(hybrid) == 9
    assert hybrid[0].attention == FullAttention(32, 160, 160)
    # Mamba2: 8 heads of 2 x 2,560 / 8 = 640; conv (5,120 + 2 x 64) x 3 = 15,744 values;
    # SSM 8 x 640 x 64 = 327,680 values, in bf16, on all 54 layers
    assert (hybrid[0].state.conv_values, hybrid[0].state.ssm_values) == (15_744, 327_680)
    # 9 x 2 x 32 x 160 x 2 B = 184,320 B a token; 54 x 343,424 x 2 B of state
    assert estimate(spec, 0).bytes_per_token == 184_320
    assert estimate(spec, 0).kv_cache_bytes == 54 * 343_424 * 2 == 37_089_792


def test_zamba2_ignores_kv_heads_as_vllm_does() -> None:
    spec = _import({"model_type": "zamba2", "num_key_value_heads": 8})
    assert {a.attention.num_kv_heads for a in spec.layers if isinstance(a, AttentionAndState)} == {
        32
    }


def test_olmo_hybrid_from_the_config_class() -> None:
    # OlmoHybridConfig defaults: 32 layers, full attention where i % 4 == 3 (8 layers), 30
    # heads of 3,840 / 30 = 128 (K/V heads = heads); gated delta net: 30 key and value heads,
    # key dim 0.75 x 3,840 / 30 = 96, value dim 192, conv kernel 4
    spec = _import({"model_type": "olmo_hybrid", "torch_dtype": "bfloat16"})
    states = [a for a in spec.layers if isinstance(a, RecurrentState)]
    assert len(states) == 24
    # conv (2 x 30 x 96 + 30 x 192) x 3 = 34,560; state 30 x 96 x 192 = 552,960
    assert (states[0].conv_values, states[0].ssm_values) == (34_560, 552_960)
    # 8 x 2 x 30 x 128 x 2 B = 122,880 B a token
    assert estimate(spec, 0).bytes_per_token == 122_880
    assert estimate(spec, 0).kv_cache_bytes == 24 * 587_520 * 2


def test_hrm_text_caches_every_layer_run() -> None:
    # HrmTextConfig: 16 layers a stack, H_cycles 2 x (L_cycles 3 + 1) = 8 runs: 128 caches of
    # 12 heads (MHA) x 128: 128 x 2 x 12 x 128 x 2 B = 786,432 B a token
    legacy = _import({"model_type": "hrm_text", "torch_dtype": "bfloat16"})
    saved = _import(
        {"model_type": "hrm_text", "num_hidden_layers": 128, "num_layers_per_stack": 16}
    )
    for spec in (legacy, saved):
        assert spec.num_hidden_layers == 128
        assert estimate(spec, 0).bytes_per_token == 786_432
    with pytest.raises(SpecError, match="num_hidden_layers: 100 is not"):
        _import({"model_type": "hrm_text", "num_hidden_layers": 100, "num_layers_per_stack": 16})


def test_new_classes_are_registered_vllm_classes() -> None:
    known = set(VLLM_CLASSES.read_text().split())
    by_type = {a.model_type: a for a in list_architectures()}
    for model_type, name in NEW_CLASSES.items():
        assert name in known
        assert name in by_type[model_type].architectures


def test_gemma4_26b_a4b() -> None:
    spec = import_config(FIXTURES / "gemma-4-26b-a4b").spec
    assert spec.layers[5] == FullAttention(2, 512, 512)
    assert spec.layers[0] == SlidingWindowAttention(8, 256, 256, 1024)
    assert estimate(spec, 0).bytes_per_token == 225_280


def test_gemma4_26b_a4b_parameters() -> None:
    # tied embeddings 262,144 x 2,816 = 738,197,504; final norm 2,816
    # sliding attention: q, k + v, o 3 x 11,534,336 + q/k norms 2 x 256 = 34,603,520
    # full attention (k_eq_v: no v): q 2,816 x 8,192 = 23,068,672, k 2,816 x 1,024 =
    #   2,883,584, o 23,068,672, q/k norms 2 x 512: 49,021,952
    # every layer: MLP 3 x 2,816 x 2,112 = 17,842,176; 4 norms 11,264; router 128 x 2,816 +
    #   2,816 + 128 = 363,392; experts 128 x 3 x 2,816 x 704 = 761,266,176; 3 norms 8,448
    rest = 17_842_176 + 11_264 + 363_392 + 761_266_176 + 8448
    text = 738_197_504 + 2816 + 25 * (34_603_520 + rest) + 5 * (49_021_952 + rest)
    # vision: patches 3 x 16 x 16 x 1,152 = 884,736; positions 2 x 10,240 x 1,152 =
    #   23,592,960; 27 layers of q/k/v/o 4 x 1,152^2 + norms 2 x 72 + MLP 3 x 1,152 x 4,304 +
    #   4 x 1,152 = 20,187,792; projector 1,152 x 2,816 = 3,244,032
    tower = 884_736 + 23_592_960 + 27 * 20_187_792 + 3_244_032
    count = parameters_from_config(_config("gemma-4-26b-a4b"))
    assert (text, tower) == (25_233_141_760, 572_792_112)
    assert count.total == text + tower
    # 8 of 128 experts a token: 120 x 3 x 2,816 x 704 a layer inactive
    assert count.inactive == 30 * 120 * 3 * 2816 * 704


def test_gemma4_audio_tower_is_not_counted() -> None:
    config = _config("gemma-4-26b-a4b") | {"audio_config": {"hidden_size": 1024}}
    with pytest.raises(SpecError, match="audio tower is not counted"):
        parameters_from_config(config)


def test_hrm_text_1b() -> None:
    spec = import_config(FIXTURES / "hrm-text-1b").spec
    # num_hidden_layers 16 is the stack depth: 16 x 2 x (3 + 1) = 128 caches of 12 x 128
    assert spec.num_hidden_layers == 128
    assert set(spec.layers) == {FullAttention(12, 128, 128)}
    assert estimate(spec, 0).bytes_per_token == 128 * 2 * 12 * 128 * 2 == 786_432


def test_hrm_text_1b_parameters() -> None:
    # embeddings and head 2 x 65,536 x 1,536 = 201,326,592; z_L_init 1,536
    # per layer: g, q, k, v 1,536 x 4 x 1,536 = 9,437,184; o 2,359,296;
    #   MLP 3 x 1,536 x 4,096 = 18,874,368: 30,670,848; 2 stacks x 16 layers
    per_layer = 9_437_184 + 2_359_296 + 18_874_368
    total = 201_326_592 + 32 * per_layer + 1536
    assert parameters_from_config(_config("hrm-text-1b")).total == total == 1_182_795_264
    # KoHRM-Text-1.4B's card (vocabulary 131,072, the same layers) gives 1,384,120,320
    # trainable parameters: 2 x 131,072 x 1,536 + 32 x 30,670,848, z_L_init aside
    assert 2 * 131_072 * 1536 + 32 * per_layer == 1_384_120_320


def test_olmo_hybrid_example() -> None:
    spec = import_config(FIXTURES / "olmo-hybrid-example").spec
    states = [a for a in spec.layers if isinstance(a, RecurrentState)]
    # 6 gated delta net layers: conv (2 x 8 x 96 + 8 x 192) x 3 = 9,216; state 8 x 96 x 192
    assert len(states) == 6
    assert (states[0].conv_values, states[0].ssm_values) == (9216, 147_456)
    assert states[0].state_dtype.name == "float32"  # no dtype in the file: the default
    # 2 full layers x 2 x 8 heads x 64 (512 / 8) x 2 B = 4,096 B a token (bf16 cache)
    assert spec.layers[3] == FullAttention(8, 64, 64)
    assert estimate(spec, 0, kv_dtype="bfloat16").bytes_per_token == 4096


def test_olmo_hybrid_example_parameters() -> None:
    # tied embeddings 49,152 x 512 = 25,165,824; final norm 512
    # every layer: MLP 3 x 512 x 1,536 = 2,359,296 and two norms 1,024
    # 2 attention layers: q, k, v, o 4 x 512 x 512 = 1,048,576; q/k norms 2 x 512
    # 6 delta layers: q, k 2 x 512 x 768, v, g 2 x 512 x 1,536, a, b 2 x 512 x 8:
    #   2,367,488; o 1,536 x 512 = 786,432; conv (768 x 2 + 1,536) x 4 = 12,288;
    #   A_log, dt_bias 16; gated norm 192: 3,166,416
    common = 2_359_296 + 1024
    attention = 1_048_576 + 1024
    delta = 2_367_488 + 786_432 + 12_288 + 16 + 192
    total = 25_165_824 + 512 + 2 * (attention + common) + 6 * (delta + common)
    assert parameters_from_config(_config("olmo-hybrid-example")).total == total == 65_146_592
