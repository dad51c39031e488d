"""The registry of import rules: every family registers, every fixture's model_type is
mapped, and ``list_architectures`` is sorted, unique and names only known layer kinds."""

from __future__ import annotations

import json
import pkgutil
from pathlib import Path

import pytest

from kvplan.errors import SpecError
from kvplan.importers import (
    Architecture,
    families,
    import_config,
    list_architectures,
    spec_from_config,
    supported_model_types,
)
from kvplan.importers.registry import LAYER_KINDS, register, register_class_rule
from kvplan.importers.rules import Rule
from kvplan.model.layers import LAYER_KINDS as SPEC_LAYER_KINDS

FIXTURES = Path(__file__).parent / "fixtures" / "hf"
CONFIGS = sorted(FIXTURES.glob("*/config.json"))
FAMILY_MODULES = sorted(m.name for m in pkgutil.iter_modules(families.__path__))
BY_TYPE = {a.model_type: a for a in list_architectures()}


def _model_types(config_path: Path) -> set[str]:
    """The top-level model_type and, for a wrapper, its text model's."""
    config = json.loads(config_path.read_text(encoding="utf-8"))
    inner = (config.get("text_config") or {}).get("model_type")
    return {config["model_type"]} | ({inner} if inner else set())


def test_every_family_module_registers_a_model_type() -> None:
    registered = {a.family for a in list_architectures()}
    assert sorted(families.__all__) == FAMILY_MODULES  # none forgotten in the load list
    assert set(FAMILY_MODULES) == registered


def test_every_fixture_model_type_is_registered() -> None:
    assert len(CONFIGS) >= 78
    seen = set().union(*(_model_types(p) for p in CONFIGS))
    assert seen <= set(BY_TYPE), sorted(seen - set(BY_TYPE))


def test_list_is_sorted_unique_and_valid() -> None:
    archs = list_architectures()
    names = [a.model_type for a in archs]
    assert names == sorted(names) == supported_model_types()
    assert len(names) == len(set(names))
    # the spec's layer kinds, plus MLA's latent (full attention through kv_lora_rank) and
    # Inkling's attention with a conv tail (attention layers under attention_conv_kernel)
    assert set(LAYER_KINDS) == {*SPEC_LAYER_KINDS, "mla_latent", "attention_conv"}
    for a in archs:
        assert isinstance(a, Architecture)
        assert a.layer_kinds, a.model_type
        assert set(a.layer_kinds) <= set(LAYER_KINDS), a.model_type
        assert len(a.layer_kinds) == len(set(a.layer_kinds)), a.model_type
        assert a.notes, a.model_type
        assert "\n" not in a.notes, a.model_type


@pytest.mark.parametrize("config_path", CONFIGS, ids=[p.parent.name for p in CONFIGS])
def test_imported_layers_are_among_the_listed_kinds(config_path: Path) -> None:
    spec = import_config(config_path).spec
    assert {layer.kind for layer in spec.layers} <= set(BY_TYPE[spec.model_type].layer_kinds)


@pytest.mark.parametrize(
    ("model_type", "family", "kinds"),
    [
        ("deepseek_v3", "deepseek", ("mla_latent",)),
        ("kimi_k2", "deepseek", ("mla_latent",)),
        ("qwen3_next", "qwen", ("full_attention", "linear_attention")),
        ("nemotron_h", "nemotron_h", ("full_attention", "mamba", "no_cache")),
        ("llama4_text", "llama4", ("full_attention", "chunked_attention")),
        ("minicpm3", "minicpm", ("full_attention",)),
        ("minimax_m2", "minimax", ("full_attention", "sliding_attention")),
        ("phimoe", "phi", ("full_attention", "sliding_attention")),
        ("smollm3", "smollm", ("full_attention", "sliding_attention")),
        # a wrapper lists the kinds of the text model it holds
        ("llama4", "llama4", ("full_attention", "chunked_attention")),
        ("gemma3", "gemma", ("full_attention", "sliding_attention")),
    ],
)
def test_known_architectures(model_type: str, family: str, kinds: tuple[str, ...]) -> None:
    a = BY_TYPE[model_type]
    assert (a.family, a.layer_kinds) == (family, kinds)


def test_register_refuses_a_duplicate_or_unknown_kind() -> None:
    before = list_architectures()
    with pytest.raises(ValueError, match="registered twice"):
        register("llama", "llama", Rule(), ("full_attention",), "again")
    with pytest.raises(ValueError, match="layer kinds"):
        register("test", "test_only_kind", Rule(), ("bogus",), "unknown kind")
    with pytest.raises(ValueError, match="one line"):
        register("test", "test_only_notes", Rule(), ("full_attention",), "two\nlines")
    assert list_architectures() == before


def test_unmapped_error_points_at_the_registry() -> None:
    with pytest.raises(SpecError) as err:
        spec_from_config({"model_type": "rwkv", "num_hidden_layers": 24}, "x/config.json")
    message = str(err.value)
    assert "model_type: 'rwkv' is not an architecture" in message
    assert f"`kvplan architectures` lists the {len(supported_model_types())} it reads" in message
    assert "docs/importers.md" in message


# vLLM's text-generation registries (_TEXT_GENERATION_MODELS in
# vllm/model_executor/models/registry.py, 0.32.0 and 0.33.0) and multimodal ones
# (_MULTIMODAL_MODELS), one class name a line.
DATA = Path(__file__).parent / "data"
VLLM_TEXT = DATA / "vllm_0.32_text_generation_architectures.txt"
VLLM_NAMES = VLLM_TEXT.read_text(encoding="utf-8").split()
VLLM_033_NAMES = (DATA / "vllm_0.33_text_generation_architectures.txt").read_text().split()
VLLM_MULTIMODAL = {
    name
    for version in ("0.32", "0.33")
    for name in (DATA / f"vllm_{version}_multimodal_architectures.txt").read_text().split()
}


def test_vllm_registry_list_is_the_whole_registry() -> None:
    assert len(VLLM_NAMES) == len(set(VLLM_NAMES)) == 118
    assert len(VLLM_033_NAMES) == len(set(VLLM_033_NAMES)) == 124
    assert len(VLLM_MULTIMODAL) == 127  # 122 in 0.32; 0.33 keeps them and adds five


def test_every_text_class_of_vllm_032_and_033_is_read() -> None:
    """Issue 24: `kvplan architectures` covers every text-generation class vLLM 0.32 registers
    and the six 0.33 adds; each is read by a rule with a fixture or a defaults test."""
    read = {c for a in list_architectures() for c in a.architectures}
    assert set(VLLM_NAMES) <= set(VLLM_033_NAMES)
    assert sorted(set(VLLM_033_NAMES) - read) == sorted(NOT_YET_READ)


#: The text classes not read yet, each with what it needs: reading one removes it here.
NOT_YET_READ: dict[str, str] = {}


def test_second_half_of_the_vllm_registry_is_read() -> None:
    """The model classes from InternLM2 on that kvplan reads; every name is vLLM's own
    spelling, text or multimodal (a class may serve two model_types: Kimi K2's config names
    DeepseekV3ForCausalLM)."""
    second = {c for a in list_architectures() for c in a.architectures if c[0].upper() >= "I"}
    known = set(VLLM_NAMES) | set(VLLM_033_NAMES) | VLLM_MULTIMODAL
    assert second <= known, sorted(second - known)
    assert len(second) >= 24, sorted(second)


def test_every_class_read_is_one_vllm_registers() -> None:
    read = {c for a in list_architectures() for c in a.architectures}
    known = set(VLLM_033_NAMES) | VLLM_MULTIMODAL
    assert sorted(read - known) == []


def test_engines_follow_the_classes() -> None:
    for a in list_architectures():
        assert set(a.engines) <= {"vllm", "vllm-transformers"}, a.model_type
        if a.architectures:
            assert "vllm" in a.engines, a.model_type
    assert BY_TYPE["smollm3"].engines == ("vllm-transformers",)
    with pytest.raises(ValueError, match="engines"):
        register("test", "test_only_engine", Rule(), ("full_attention",), "x", engines=("tgi",))


def test_sizes_in_a_nested_config_the_type_does_not_read_are_refused() -> None:
    # a Mistral 3 text_config under a text model's type: read as is, every size would be
    # Ministral3Config's default (34 layers, hidden 4096), whatever text_config says
    config = {
        "model_type": "ministral3",
        "text_config": {"model_type": "ministral3", "num_hidden_layers": 26, "hidden_size": 3072},
    }
    with pytest.raises(SpecError, match="text_config: model_type 'ministral3' reads its sizes"):
        spec_from_config(config, "x/config.json")
    # the wrapper's own type reads it
    config["model_type"] = "mistral3"
    config["text_config"] |= {"num_attention_heads": 32, "num_key_value_heads": 8}
    spec, _ = spec_from_config(config, "x/config.json")
    assert (spec["num_hidden_layers"], spec["hidden_size"]) == (26, 3072)


@pytest.mark.parametrize(
    ("name_or_path", "hf_id"),
    [
        ("lmsys/vicuna-13b-v1.5", "lmsys/vicuna-13b-v1.5"),
        ("vicuna-13b-v1.5-16k/", None),  # the folder a fine-tune was saved from
        ("./out/checkpoint", None),
        ("/data/ckpt", None),
        ("org/.hidden", None),
    ],
)
def test_only_a_hub_shaped_name_or_path_becomes_the_hf_id(
    tmp_path: Path, name_or_path: str, hf_id: str | None
) -> None:
    config = {
        "model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4,
        "hidden_size": 256, "torch_dtype": "bfloat16", "_name_or_path": name_or_path,
    }  # fmt: skip
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    assert import_config(path).spec.hf_id == hf_id


def test_two_classes_of_one_type_each_take_their_rule() -> None:
    # Ling 3.0 and Ling 2.5/2.6 both name model_type bailing_hybrid; the class decides
    hybrid = BY_TYPE["bailing_hybrid"]
    assert hybrid.architectures == ("BailingMoeV3ForCausalLM", "BailingMoeV2_5ForCausalLM")
    assert set(hybrid.layer_kinds) == {"linear_attention", "mla_latent"}
    with pytest.raises(ValueError, match="given twice"):
        register_class_rule(
            "bailing_hybrid", "BailingMoeV2_5ForCausalLM", Rule(), ("mla_latent",), "again"
        )
