"""OLMo 3.1, EXAONE 4.5 and Kimi K2.5 read from released config.json files, worked by hand:
OLMo 3's sliding layers and Olmo3Config defaults, the two vision wrappers read through their
text models (exaone4 and Kimi K2's DeepSeek V3), and the parameter counts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvplan import estimate
from kvplan.importers import import_config, parameters_from_config
from kvplan.importers.config import spec_from_config
from kvplan.importers.registry import list_architectures
from kvplan.model.layers import FullAttention, SlidingWindowAttention

FIXTURES = Path(__file__).parent / "fixtures" / "hf"
BY_TYPE = {a.model_type: a for a in list_architectures()}


def _config(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name / "config.json").read_text())  # type: ignore[no-any-return]


@pytest.mark.parametrize("name", ["olmo-3.1-32b", "exaone-4.5-33b"])
def test_three_sliding_then_one_global(name: str) -> None:
    spec = import_config(FIXTURES / name).spec
    kinds = [type(layer) for layer in spec.layers]
    assert kinds == ([SlidingWindowAttention] * 3 + [FullAttention]) * 16
    assert {layer.window for layer in spec.layers if isinstance(layer, SlidingWindowAttention)} == {
        4096
    }
    # 2 x 64 layers x 8 K/V heads x (5120 / 40 = 128) x 2 B = 262,144 B a token below the window
    assert estimate(spec, 0).bytes_per_token == 262144


def test_olmo3_parameters() -> None:
    # embeddings and head 2 x 100,278 x 5,120 = 1,026,846,720
    # per layer: q and o 2 x 5,120^2 = 52,428,800; k and v 2 x 5,120 x 1,024 = 10,485,760;
    #   q/k RMSNorms over all heads 5,120 + 1,024; MLP 3 x 5,120 x 27,648 = 424,673,280;
    #   2 norms 10,240: 487,604,224
    layer = 52_428_800 + 10_485_760 + 6_144 + 424_673_280 + 10_240
    assert layer == 487_604_224
    total = 1_026_846_720 + 64 * layer + 5_120
    assert parameters_from_config(_config("olmo-3.1-32b")).total == total == 32_233_522_176


def test_olmo3_class_defaults() -> None:
    # Olmo3Config: window 4096, a layer slides unless (i + 1) % 4 == 0
    config = {"model_type": "olmo3", "num_hidden_layers": 8, "num_attention_heads": 32}
    data, notes = spec_from_config(config | {"torch_dtype": "bfloat16"}, "x/config.json")
    assert data["sliding_window"] == 4096
    assert data["layer_types"] == (["sliding_attention"] * 3 + ["full_attention"]) * 2
    assert any("the olmo3 default" in note for note in notes)
    # a null window leaves every layer global
    data, _ = spec_from_config(config | {"sliding_window": None}, "x/config.json")
    assert "sliding_window" not in data
    assert "layer_types" not in data


def test_exaone4_5_reads_its_exaone4_text_model() -> None:
    spec = import_config(FIXTURES / "exaone-4.5-33b").spec
    assert (spec.model_type, spec.max_position_embeddings) == ("exaone4_5_text", 262144)
    assert BY_TYPE["exaone4_5"].engines == ("vllm",)
    # text model alone: embeddings and head 2 x 153,600 x 5,120 = 1,572,864,000
    # per layer: q and o 2 x 5,120^2 + k and v 2 x 5,120 x 1,024 = 62,914,560; q/k norms
    #   2 x 128; MLP 3 x 5,120 x 27,392 = 420,741,120; 2 norms 10,240: 483,666,176
    layer = 62_914_560 + 256 + 420_741_120 + 10_240
    assert layer == 483_666_176
    total = 1_572_864_000 + 64 * layer + 5_120
    assert parameters_from_config(_config("exaone-4.5-33b")).total == total == 32_527_504_384


def test_kimi_k2_5_reads_its_deepseek_v3_text_model() -> None:
    spec = import_config(FIXTURES / "kimi-k2.5").spec
    assert (spec.model_type, spec.max_position_embeddings) == ("kimi_k2", 262144)
    assert BY_TYPE["kimi_k25"].engines == ("vllm",)
    # 61 MLA layers x (512 + 64) x 2 B = 70,272 B a token
    assert estimate(spec, 0).bytes_per_token == 70272
    # the 376 idle routed experts of 3 x 7,168 x 2,048 in each of the 60 sparse layers
    count = parameters_from_config(_config("kimi-k2.5"))
    assert count.inactive == 60 * 376 * 3 * 7168 * 2048 == 993_546_731_520
