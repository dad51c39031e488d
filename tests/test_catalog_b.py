"""The model types of the second half of vLLM 0.32's registry (InternLM3 to StableLM) from
their released config.json fixtures: the cache each maps to, derived by hand, the config
class defaults each rule fills in, parameter counts worked by hand, and `kvplan architectures`
listing the classes, engines and catalog models of each."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kvplan.catalog.lookup import load_model
from kvplan.cli import app
from kvplan.importers import import_config, parameters_from_config, spec_from_config
from kvplan.model.estimator import bytes_per_token
from kvplan.model.spec import parse_spec

FIXTURES = Path(__file__).parent / "fixtures" / "hf"
runner = CliRunner()


def _config(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name / "config.json").read_text(encoding="utf-8"))


def _spec(config: dict[str, Any]) -> Any:
    data, _ = spec_from_config(config)
    return parse_spec({"name": "x", **data}, "x")


@pytest.mark.parametrize(
    ("name", "model_type", "kinds", "kv_heads", "head_dim", "expected"),
    [
        ("internlm3-8b", "internlm3", {"full_attention": 48}, 2, 128, 2 * 48 * 2 * 128 * 2),
        ("minimax-m2", "minimax_m2", {"full_attention": 62}, 8, 128, 2 * 62 * 8 * 128 * 2),
        ("mimo-7b", "mimo", {"full_attention": 36}, 8, 128, 2 * 36 * 8 * 128 * 2),
        ("minicpm3-4b", "minicpm3", {"full_attention": 62}, 40, 96, 2 * 62 * 40 * 96 * 2),
        ("nemotron-mini-4b", "nemotron", {"full_attention": 32}, 8, 128, 2 * 32 * 8 * 128 * 2),
        ("olmoe-1b-7b", "olmoe", {"full_attention": 16}, 16, 128, 2 * 16 * 16 * 128 * 2),
        ("phi-3.5-moe", "phimoe", {"sliding_attention": 32}, 8, 128, 2 * 32 * 8 * 128 * 2),
        ("seed-oss-36b", "seed_oss", {"full_attention": 64}, 8, 128, 2 * 64 * 8 * 128 * 2),
        ("smollm3-3b", "smollm3", {"full_attention": 36}, 4, 128, 2 * 36 * 4 * 128 * 2),
        ("stablelm-2-1.6b", "stablelm", {"full_attention": 24}, 32, 64, 2 * 24 * 32 * 64 * 2),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_new_model_type_imports_its_fixture(
    name: str,
    model_type: str,
    kinds: dict[str, int],
    kv_heads: int,
    head_dim: int,
    expected: int,
) -> None:
    spec = import_config(FIXTURES / name).spec
    assert spec.model_type == model_type
    found: dict[str, int] = {}
    for layer in spec.layers:
        found[layer.kind] = found.get(layer.kind, 0) + 1
    assert found == kinds
    assert {(layer.num_kv_heads, layer.head_dim) for layer in spec.layers} == {(kv_heads, head_dim)}
    assert bytes_per_token(spec, "bfloat16") == expected


def test_minicpm3_caches_expanded_heads_not_the_latent() -> None:
    # vLLM's MiniCPM3Attention: K of qk_nope 64 + qk_rope 32 = 96 per head, V padded to 96,
    # 40 K/V heads: 2 x 40 x 96 x 2 B = 15,360 B a layer, not (256 + 32) x 2 B = 576 B.
    spec = import_config(FIXTURES / "minicpm3-4b").spec
    assert bytes_per_token(spec, "bfloat16") == 62 * 15_360
    assert spec.kv_lora_rank is None


def test_smollm3_nope_layers_slide_only_with_use_sliding_window() -> None:
    config = _config("smollm3-3b")
    del config["layer_types"]
    assert {layer.kind for layer in _spec(config).layers} == {"full_attention"}
    # no_rope_layers [1, 1, 1, 0] x 9: layers 3, 7, ..., 35 are NoPE, and slide when on
    config.update(use_sliding_window=True, sliding_window=4096)
    kinds = [layer.kind for layer in _spec(config).layers]
    assert [i for i, k in enumerate(kinds) if k == "sliding_attention"] == list(range(3, 36, 4))
    del config["no_rope_layers"]  # derived from no_rope_layer_interval 4: the same layers
    kinds = [layer.kind for layer in _spec(config).layers]
    assert [i for i, k in enumerate(kinds) if k == "sliding_attention"] == list(range(3, 36, 4))


@pytest.mark.parametrize(
    ("name", "dropped", "kv_heads", "head_dim"),
    [
        # StableLmConfig: num_key_value_heads 32; head_dim 2048 / 32 = 64
        ("stablelm-2-1.6b", ("num_key_value_heads",), 32, 64),
        # SeedOssConfig: num_key_value_heads 8, head_dim 128
        ("seed-oss-36b", ("num_key_value_heads", "head_dim"), 8, 128),
        # MiniMaxM2Config: num_key_value_heads 8, head_dim 128
        ("minimax-m2", ("num_key_value_heads", "head_dim"), 8, 128),
        # PhiMoEConfig: num_key_value_heads 8; head_dim 4096 / 32 = 128
        ("phi-3.5-moe", ("num_key_value_heads",), 8, 128),
        # SmolLM3Config: num_key_value_heads 4; head_dim 2048 / 16 = 128
        ("smollm3-3b", ("num_key_value_heads",), 4, 128),
        # OlmoeConfig / NemotronConfig: absent means one K/V head per head
        ("olmoe-1b-7b", ("num_key_value_heads",), 16, 128),
        ("nemotron-mini-4b", ("num_key_value_heads", "head_dim"), 24, 128),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_config_class_defaults_fill_absent_keys(
    name: str, dropped: tuple[str, ...], kv_heads: int, head_dim: int
) -> None:
    config = {k: v for k, v in _config(name).items() if k not in dropped}
    layer = _spec(config).layers[0]
    assert (layer.num_kv_heads, layer.head_dim) == (kv_heads, head_dim)


@pytest.mark.parametrize(
    ("name", "total"),
    [
        pytest.param(
            "olmoe-1b-7b",
            50304 * 2048 * 2
            + 16 * (4 * 2048 * 2048 + 2 * 2048 + 64 * 3 * 2048 * 1024 + 64 * 2048 + 2 * 2048)
            + 2048,
            id="olmoe: 2*50304*2048 + 16*(attention 4*2048^2 + q/k norms 2*2048"
            " + 64 experts 3*2048*1024 + router 64*2048 + 2 norms) + 2048 = 6,919,161,856",
        ),
        pytest.param(
            "phi-3.5-moe",
            32064 * 4096 * 2
            + 32
            * (
                4096 * 6144
                + 6144
                + 4096 * 4096
                + 4096
                + 16 * 3 * 4096 * 6400
                + 16 * 4096
                + 2 * 2 * 4096
            )
            + 32064
            + 2 * 4096,
            id="phi-3.5-moe: 2*32064*4096 + 32*(biased qkv and o + 16 experts 3*4096*6400"
            " + router + 2 LayerNorms) + head bias 32064 + final LayerNorm = 41,873,153,344",
        ),
        pytest.param(
            "minicpm3-4b",
            73448 * 2560
            + 62
            * (
                2560 * 768
                + 768
                + 768 * 40 * 96
                + 2560 * (256 + 32)
                + 256
                + 256 * 40 * (64 + 64)
                + 40 * 64 * 2560
                + 3 * 2560 * 6400
                + 2 * 2560
            )
            + 2560,
            id="minicpm3: tied 73448*2560 + 62*(q_a, norm, q_b, kv_a, norm, kv_b, o, MLP,"
            " 2 norms) + 2560 = 4,073,875,968",
        ),
    ],
)
def test_parameters_by_hand(name: str, total: int) -> None:
    assert parameters_from_config(_config(name)).total == total
    assert load_model(name).num_parameters == total


def test_architectures_json_lists_classes_engines_and_models() -> None:
    result = runner.invoke(app, ["architectures", "--format", "json"])
    assert result.exit_code == 0, result.output
    rows = {row["model_type"]: row for row in json.loads(result.stdout)["architectures"]}
    assert rows["minicpm3"]["architectures"] == ["MiniCPM3ForCausalLM"]
    assert rows["minicpm3"]["engines"] == ["vllm"]
    assert rows["minicpm3"]["models"] == ["minicpm3-4b"]
    assert rows["seed_oss"]["engines"] == ["vllm-transformers"]
    assert rows["seed_oss"]["architectures"] == []
    assert rows["llama"]["architectures"] == ["LlamaForCausalLM", "LLaMAForCausalLM"]
    assert {"qwen3-4b", "qwen3-4b-2507"} <= set(rows["qwen3"]["models"])
    assert all(row["notes"] for row in rows.values())


def test_unsupported_model_type_is_refused_by_name(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {"model_type": "rwkv7", "architectures": ["Rwkv7ForCausalLM"], "num_hidden_layers": 2}
        )
    )
    result = runner.invoke(app, ["import", str(config)])
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1
    assert (
        "model_type: 'rwkv7' is not an architecture kvplan can import"
        " (config.json architectures: 'Rwkv7ForCausalLM');"
    ) in lines[0]
    assert "`kvplan architectures` lists the" in lines[0]
