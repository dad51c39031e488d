"""Importers of the 2025 cache kinds from released config.json files: Falcon-H1 (attention and
Mamba2 in every layer) and LFM2-MoE (short convolutions and attention, routed experts), each
worked by hand; and the count of vLLM 0.32 model classes ``kvplan architectures`` reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan import estimate
from kvplan.errors import SpecError
from kvplan.importers import import_config, parameters_from_config
from kvplan.importers.config import spec_from_config
from kvplan.importers.registry import list_architectures
from kvplan.model.layers import AttentionAndState, FullAttention, RecurrentState
from kvplan.model.spec import ModelSpec, parse_spec

FIXTURES = Path(__file__).parent / "fixtures" / "hf"
VLLM_CLASSES = Path(__file__).parent / "data" / "vllm_0.32_text_generation_architectures.txt"


def test_falcon_h1_7b() -> None:
    spec = import_config(FIXTURES / "falcon-h1-7b").spec
    assert spec.torch_dtype == "bfloat16"  # not in the file: the checkpoints' dtype
    assert {type(layer) for layer in spec.layers} == {AttentionAndState}
    layer = spec.layers[0]
    assert isinstance(layer, AttentionAndState)
    # conv tail over mamba_d_ssm + 2 x groups x state = 3,072 + 2 x 1 x 256 = 3,584 channels,
    # kernel 4 keeps 3: 10,752 values; SSM 24 heads x 128 x 256 = 786,432 values
    assert (layer.state.conv_values, layer.state.ssm_values) == (10752, 786432)
    # 44 layers x 2 (K, V) x 2 heads x 128 x 2 B = 45,056 B a token
    assert estimate(spec, 0).bytes_per_token == 45056
    # + 44 x (10,752 + 786,432) x 2 B = 70,152,192 B of state per sequence
    assert estimate(spec, 1000).kv_cache_bytes == 45056 * 1000 + 70_152_192


def test_falcon_h1_7b_parameters() -> None:
    # embeddings and head 2 x 130,048 x 3,072 = 799,014,912
    # per layer: attention q/o 2 x 3,072 x 1,536 + k/v 2 x 3,072 x 256 = 11,010,048
    #   mamba in_proj 3,072 x (3,072 + 3,584 + 24) = 20,520,960; conv 3,584 x 4 + 3,584
    #   = 17,920; dt_bias/A_log/D 72; out_proj 3,072 x 3,072 = 9,437,184
    #   MLP 3 x 3,072 x 12,288 = 113,246,208; 2 norms 6,144: 154,238,536; x 44 = 6,786,495,584
    # final norm 3,072: 799,014,912 + 6,786,495,584 + 3,072 = 7,585,513,568
    per_layer = 11_010_048 + 20_520_960 + 17_920 + 72 + 9_437_184 + 113_246_208 + 6_144
    assert per_layer == 154_238_536
    total = 799_014_912 + 44 * per_layer + 3072
    count = parameters_from_config(_config("falcon-h1-7b"))
    assert count.total == total == 7_585_513_568


def test_falcon_h1_mixer_width_must_match_its_heads() -> None:
    config = _config("falcon-h1-7b") | {"mamba_d_ssm": 2048}
    with pytest.raises(SpecError, match="mamba_d_ssm: 2048 is not mamba_n_heads 24"):
        parameters_from_config(config)


def test_falcon_h1_without_mamba_d_ssm_takes_the_class_default() -> None:
    # FalconH1Config: mamba_d_ssm 1024 when absent, so 8 heads of "auto" = 1024 / 8 = 128
    config = {k: v for k, v in _config("falcon-h1-7b").items() if k != "mamba_d_ssm"}
    config |= {"mamba_n_heads": 8, "mamba_d_head": "auto"}
    layer = _import(config).layers[0]
    assert isinstance(layer, AttentionAndState)
    # (1,024 + 512) x 3 conv values; 8 x 128 x 256 SSM values
    assert (layer.state.conv_values, layer.state.ssm_values) == (4608, 262144)


def test_lfm2_8b_a1b() -> None:
    spec = import_config(FIXTURES / "lfm2-8b-a1b").spec
    assert spec.torch_dtype == "bfloat16"
    attention = [layer for layer in spec.layers if isinstance(layer, FullAttention)]
    states = [layer for layer in spec.layers if isinstance(layer, RecurrentState)]
    assert (len(attention), len(states)) == (6, 18)
    # a conv layer keeps conv_L_cache - 1 = 2 inputs of 2,048 channels: 4,096 values
    assert {(s.kind, s.conv_values, s.ssm_values) for s in states} == {("short_conv", 4096, 0)}
    # 6 x 2 x 8 heads x (2,048 / 32 = 64) x 2 B = 12,288 B a token; 18 x 4,096 x 2 B state
    assert estimate(spec, 1000).kv_cache_bytes == 12288 * 1000 + 147_456


def test_lfm2_8b_a1b_parameters() -> None:
    # tied embeddings 65,536 x 2,048 = 134,217,728
    # conv layer: in_proj 2,048 x 6,144 + kernel 2,048 x 3 + out_proj 2,048^2 = 16,783,360
    # attention layer: q/o 2 x 2,048^2 + k/v 2 x 2,048 x 512 + q/k norms 2 x 64 = 10,485,888
    # dense MLP 3 x 2,048 x 7,168 = 44,040,192 (2 layers)
    # MoE layer: 32 experts x 3 x 2,048 x 1,792 = 352,321,536 + router 32 x 2,048 + bias 32
    #   = 352,387,104 (22 layers); norms 2 x 2,048 x 24 = 98,304; final norm 2,048
    total = (
        134_217_728
        + 18 * 16_783_360
        + 6 * 10_485_888
        + 2 * 44_040_192
        + 22 * 352_387_104
        + 98_304
        + 2048
    )
    count = parameters_from_config(_config("lfm2-8b-a1b"))
    assert count.total == total == 8_339_930_560
    # a token uses 4 of the 32 experts: 28 x 3 x 2,048 x 1,792 x 22 layers skipped
    assert count.inactive == 28 * 11_010_048 * 22


def _vllm_classes() -> set[str]:
    return set(VLLM_CLASSES.read_text().split())


def test_registered_vllm_classes() -> None:
    """The distinct vLLM 0.32 text-generation classes ``kvplan architectures`` reads."""
    known = _vllm_classes()
    registered = {c for a in list_architectures() for c in a.architectures}
    assert len(registered & known) >= 56
    for name in ("FalconH1ForCausalLM", "Lfm2MoeForCausalLM"):
        assert name in registered & known


def test_new_family_classes_are_vllm_classes() -> None:
    known = _vllm_classes()
    for architecture in list_architectures():
        if architecture.family in ("falcon_h1", "lfm2_moe"):
            assert set(architecture.architectures) <= known, architecture.model_type


def _config(name: str) -> dict[str, object]:
    return json.loads((FIXTURES / name / "config.json").read_text())  # type: ignore[no-any-return]


def _import(config: dict[str, object]) -> ModelSpec:
    data, _ = spec_from_config(config)
    return parse_spec({"name": "x", **data})
