"""Ministral 3 (Devstral 2) and Qwen3.5 read from released config.json files, worked by hand:
the Ministral3Config defaults, Qwen3.5's hybrid cache (gated full attention every fourth layer,
a gated delta net's recurrent state in the others) and both parameter counts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvplan import estimate, load_model
from kvplan.engines import vllm
from kvplan.importers import import_config, parameters_from_config
from kvplan.importers.config import spec_from_config
from kvplan.model.layers import FullAttention, RecurrentState
from kvplan.model.spec import parse_spec

FIXTURES = Path(__file__).parent / "fixtures" / "hf"


def _config(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name / "config.json").read_text())  # type: ignore[no-any-return]


def test_devstral_2_cache() -> None:
    spec = import_config(FIXTURES / "devstral-2-123b").spec
    assert spec.model_type == "ministral3"
    assert {type(layer) for layer in spec.layers} == {FullAttention}  # sliding_window null
    # 88 layers x 2 (K, V) x 8 K/V heads x 128 x 2 B = 360,448 B a token
    assert estimate(spec, 0).bytes_per_token == 360448


def test_devstral_2_parameters() -> None:
    # embeddings and head 2 x 131,072 x 12,288 = 3,221,225,472
    # per layer: q and o 2 x 12,288 x 12,288 (96 heads x 128) = 301,989,888; k and v
    #   2 x 12,288 x 1,024 = 25,165,824; MLP 3 x 12,288 x 28,672 = 1,056,964,608: 1,384,120,320
    #   Linear weights, + 2 RMSNorms 24,576; x 88 layers; + final norm 12,288
    linear_per_layer = 301_989_888 + 25_165_824 + 1_056_964_608
    assert linear_per_layer == 1_384_120_320
    total = 3_221_225_472 + 88 * (linear_per_layer + 24_576) + 12_288
    count = parameters_from_config(_config("devstral-2-123b"))
    assert count.total == total == 125_025_988_608
    # quantization_config fp8: the decoder layers' Linear weights, lm_head left out
    spec = import_config(FIXTURES / "devstral-2-123b").spec
    assert (spec.weight_dtype, spec.num_quantized_parameters) == ("fp8_e4m3", 88 * 1_384_120_320)


def test_ministral3_class_defaults() -> None:
    # Ministral3Config: 8 K/V heads, head_dim 128 and no sliding window when the file is silent
    config = {"model_type": "ministral3", "num_hidden_layers": 26, "num_attention_heads": 32}
    data, notes = spec_from_config(config | {"torch_dtype": "bfloat16"}, "x/config.json")
    assert (data["num_key_value_heads"], data["head_dim"]) == (8, 128)
    assert "sliding_window" not in data
    assert any("the ministral3 default" in note for note in notes)
    # 26 layers x 2 x 8 x 128 x 2 B = 106,496 B a token
    assert estimate(parse_spec({"name": "m3"} | data), 0).bytes_per_token == 106496


def test_devstral_small_2_reads_its_ministral3_text_model() -> None:
    spec = import_config(FIXTURES / "devstral-small-2-24b").spec
    assert spec.model_type == "ministral3"
    assert spec.max_position_embeddings == 393216
    # 40 layers x 2 x 8 x 128 x 2 B = 163,840 B a token
    assert estimate(spec, 0).bytes_per_token == 163840


def test_qwen3_5_9b_cache() -> None:
    spec = import_config(FIXTURES / "qwen3.5-9b").spec
    kinds = [type(layer).__name__ for layer in spec.layers]
    assert kinds == (["RecurrentState", "RecurrentState", "RecurrentState", "FullAttention"] * 8)
    state = spec.layers[0]
    assert isinstance(state, RecurrentState)
    # conv tail (2 x 16 x 128 + 32 x 128) x (4 - 1) = 24,576; state 32 x 128 x 128 = 524,288
    assert (state.conv_values, state.ssm_values) == (24576, 524288)
    # 8 full layers x 2 x 4 K/V heads x 256 x 2 B = 32,768 B a token
    assert estimate(spec, 0).bytes_per_token == 32768
    # + 24 x (24,576 x 2 B (bf16 conv tail) + 524,288 x 4 B (float32 state, the config's
    # mamba_ssm_dtype)) = 51,511,296 B a sequence
    assert estimate(spec, 1000).kv_cache_bytes == 32768 * 1000 + 51_511_296


def test_qwen3_5_9b_parameters() -> None:
    # text: embeddings and head 2 x 248,320 x 4,096 = 2,034,237,440
    # full layer: q_proj with its gate 4,096 x 8,192, k/v 2 x 4,096 x 1,024, o 4,096 x 4,096,
    #   q/k norms 2 x 256 = 58,720,768
    full = 4096 * 8192 + 2 * 4096 * 1024 + 4096 * 4096 + 2 * 256
    assert full == 58_720_768
    # delta layer: qkvz 4,096 x (2 x 2,048 + 2 x 4,096), b/a 4,096 x 64, conv 8,192 x 4,
    #   dt_bias/A_log 64, gated norm 128, out 4,096 x 4,096 = 67,403,968
    delta = 4096 * 12288 + 4096 * 64 + 8192 * 4 + 64 + 128 + 4096 * 4096
    assert delta == 67_403_968
    rest = 3 * 4096 * 12288 + 2 * 4096  # gated MLP and two RMSNorms a layer
    text = 2_034_237_440 + 8 * (full + rest) + 24 * (delta + rest) + 4096
    assert text == 8_953_803_264
    # vision: Conv3d 3 x 2 x 16 x 16 x 1,152 + 1,152; positions 2,304 x 1,152; 27 blocks of
    #   2 LayerNorms, qkv, proj, fc1, fc2 (all biased); merger LayerNorm, fc1 4,608^2, fc2 to 4,096
    block = 4 * 1152 + (1152 * 3456 + 3456) + (1152**2 + 1152) + 2 * 1152 * 4304 + 4304 + 1152
    merger = 2 * 1152 + 4608 * 4608 + 4608 + 4608 * 4096 + 4096
    tower = 3 * 2 * 16 * 16 * 1152 + 1152 + 2304 * 1152 + 27 * block + merger
    assert tower == 456_010_480
    count = parameters_from_config(_config("qwen3.5-9b"))
    assert count.total == text + tower == 9_409_813_744


def test_qwen3_5_without_layer_types_takes_the_interval() -> None:
    # Qwen3_5TextConfig: full attention every full_attention_interval (default 4) layers
    text = _config("qwen3.5-9b")["text_config"]
    del text["layer_types"], text["full_attention_interval"]
    data, notes = spec_from_config(text, "x/config.json")
    assert data["layer_types"] == (
        ["linear_attention", "linear_attention", "linear_attention", "full_attention"] * 8
    )
    assert any("full_attention_interval 4" in note for note in notes)


def test_qwen3_5_moe_every_layer_is_sparse() -> None:
    # Qwen3.5-35B-A3B: 256 experts of 3 x 2,048 x 512, 8 active; the 248 idle experts in all
    # 40 layers are the inactive parameters
    count = parameters_from_config(_config("qwen3.5-35b-a3b"))
    assert count.inactive == 40 * 248 * 3 * 2048 * 512
    spec = import_config(FIXTURES / "qwen3.5-35b-a3b").spec
    # 10 full layers x 2 x 2 K/V heads x 256 x 2 B = 20,480 B a token
    assert estimate(spec, 0).bytes_per_token == 20480


@pytest.mark.parametrize(
    ("asked", "state_bytes"),
    [
        # auto: the config's mamba_ssm_dtype float32, the conv tail in bf16 (vLLM's Qwen3_5
        # config hook): 24,576 x 2 B + 524,288 x 4 B
        (None, 2_146_304),
        # a flag the user gives wins over the config: 24,576 x 2 B + 524,288 x 2 B
        ("bfloat16", 1_097_728),
    ],
)
def test_qwen3_5_state_in_vllm_follows_the_config(asked: str | None, state_bytes: int) -> None:
    spec = load_model("qwen3.5-9b")
    specs, *_ = vllm.layout(spec, vllm.config(8192, mamba_ssm_cache_dtype=asked))
    states = {s.token_bytes for s in specs if s is not None and s.kind == "mamba"}
    assert states == {state_bytes}
