"""Every bundled spec validates, matches its hand-derived golden numbers, and resolves."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kvplan.catalog.lookup import list_models, load_model, specs_dir
from kvplan.errors import ModelNotFoundError
from kvplan.model.estimator import bytes_per_token, estimate
from kvplan.model.spec import load_spec

GOLDEN_DIR = Path(__file__).parent / "golden"
GOLDEN = {
    entry["name"]: entry
    for path in sorted(GOLDEN_DIR.glob("specs_*.yaml"))
    for entry in yaml.safe_load(path.read_text(encoding="utf-8"))
}
SPEC_FILES = sorted(specs_dir().glob("*.yaml"))


def test_catalog_counts_its_models() -> None:
    # 251 bundled, each from its config.json with a golden entry; 300 is the goal for sites
    # without the Hub
    assert len(SPEC_FILES) >= 251
    assert len(list_models()) == len(SPEC_FILES)


def test_every_spec_has_a_golden_entry_and_back() -> None:
    assert {p.stem for p in SPEC_FILES} == set(GOLDEN)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(
            name, id=f"{name}: {entry['formula']} = {entry['bytes_per_token_bf16']} B/token"
        )
        for name, entry in GOLDEN.items()
    ],
)
def test_golden_bytes_per_token_bf16(name: str) -> None:
    spec = load_spec(specs_dir() / f"{name}.yaml")
    entry = GOLDEN[name]
    assert bytes_per_token(spec, "bfloat16") == entry["bytes_per_token_bf16"]
    assert estimate(spec, 0).kv_cache_bytes == entry.get("state_bytes_per_sequence", 0)


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: p.stem)
def test_bundled_spec_metadata(path: Path) -> None:
    spec = load_spec(path)
    assert spec.name == path.stem
    assert spec.hf_id
    assert "/" in spec.hf_id
    assert spec.source
    assert spec.model_type
    assert spec.max_position_embeddings
    assert spec.num_parameters
    if spec.num_active_parameters is not None:
        assert spec.num_active_parameters < spec.num_parameters


def test_names_aliases_and_hf_ids_are_unique() -> None:
    owner: dict[str, str] = {}
    for spec in list_models():
        for name in {spec.name, spec.hf_id or "", *spec.aliases} - {""}:
            key = name.lower()
            assert owner.setdefault(key, spec.name) == spec.name, f"{name} names two models"


REQUIRED = [
    ("llama-2-7b", "meta-llama/Llama-2-7b-hf"),
    ("llama-2-13b", None),
    ("llama-2-70b", None),
    ("llama-3-8b", "meta-llama/Meta-Llama-3-8B"),
    ("llama-3-70b", None),
    ("llama-3.1-8b", "meta-llama/Llama-3.1-8B"),
    ("llama-3.1-70b", None),
    ("llama-3.1-405b", None),
    ("llama-3.2-1b", None),
    ("llama-3.2-3b", None),
    ("llama-3.3-70b", None),
    ("llama-4-scout", None),
    ("llama-4-maverick", None),
    ("codellama-7b", None),
    ("codellama-34b", None),
    ("mistral-7b-v0.1", None),
    ("mistral-7b-v0.3", None),
    ("mixtral-8x7b", None),
    ("mixtral-8x22b", None),
    ("mistral-nemo", None),
    ("mistral-small-24b-2501", None),
    ("mistral-small-3.1-24b", None),
    ("mistral-large-2407", None),
    ("qwen2.5-0.5b", None),
    ("qwen2.5-7b", None),
    ("qwen2.5-14b", None),
    ("qwen2.5-32b", None),
    ("qwen2.5-72b", None),
    ("qwen3-0.6b", None),
    ("qwen3-4b", None),
    ("qwen3-8b", "Qwen/Qwen3-8B"),
    ("qwen3-14b", None),
    ("qwen3-32b", None),
    ("qwen3-30b-a3b", None),
    ("qwen3-235b-a22b", None),
    ("qwen3-coder-480b-a35b", None),
    ("qwen3-next-80b-a3b", None),
    ("qwen1.5-moe-a2.7b", None),
    ("gemma-7b", None),
    ("gemma-2-2b", None),
    ("gemma-2-9b", None),
    ("gemma-2-27b", None),
    ("gemma-3-1b", None),
    ("gemma-3-4b", None),
    ("gemma-3-12b", None),
    ("gemma-3-27b", None),
    ("phi-2", "microsoft/phi-2"),
    ("phi-3-mini", None),
    ("phi-3-medium", None),
    ("phi-4", None),
    ("phi-4-mini", None),
    ("deepseek-v2", None),
    ("deepseek-v2-lite", None),
    ("deepseek-v3", "deepseek-ai/DeepSeek-V3"),
    ("deepseek-r1", None),
    ("kimi-k2", None),
    ("gpt-oss-20b", "openai/gpt-oss-20b"),
    ("gpt-oss-120b", None),
    ("falcon-7b", None),
    ("falcon-40b", None),
    ("granite-3.1-2b", None),
    ("granite-3.1-8b", None),
    ("granite-3.3-8b", None),
    ("granite-4.0-h-small", None),
    ("jamba-v0.1", None),
    ("nemotron-h-8b", None),
    ("glm-4-9b", None),
    ("glm-4.5", None),
    ("command-r", None),
    ("yi-34b", "01-ai/Yi-34B"),
    ("dbrx", None),
    ("olmo-2-7b", None),
]


@pytest.mark.parametrize(("name", "hf_id"), REQUIRED, ids=[n for n, _ in REQUIRED])
def test_required_models_resolve_by_name_and_hf_id(name: str, hf_id: str | None) -> None:
    spec = load_model(name)
    assert spec.name == name
    assert load_model(spec.hf_id or "").name == name
    assert load_model((spec.hf_id or "").upper()).name == name
    if hf_id is not None:
        assert spec.hf_id == hf_id


def test_alias_resolves() -> None:
    assert load_model("meta-llama/Llama-3.1-8B-Instruct").name == "llama-3.1-8b"


def test_hf_id_fast_path_checks_the_owner() -> None:
    # a fine-tune with the same last component is not Llama 3.1 8B
    with pytest.raises(ModelNotFoundError, match=r"llama-3\.1-8b"):
        load_model("someone/Llama-3.1-8B")


def test_unknown_model_suggests_closest() -> None:
    with pytest.raises(ModelNotFoundError) as info:
        load_model("qwen3-7b")
    assert "qwen3-8b" in info.value.suggestions


def test_path_loads_a_spec_file(tiny_spec: Path) -> None:
    assert load_model(str(tiny_spec)).name == "tiny"
    assert load_model(tiny_spec).name == "tiny"


# Traps that sink other calculators: each pinned to its config.json fact.
def test_traps() -> None:
    falcon = load_model("falcon-7b")
    assert bytes_per_token(falcon) == 2 * 32 * 1 * 64 * 2  # multi_query: one KV head
    qwen3_0_6b = load_model("qwen3-0.6b")
    assert qwen3_0_6b.head_dim == 128 != (qwen3_0_6b.hidden_size or 0) // 16
    qwen25 = load_model("qwen2.5-7b")  # ships sliding_window with use_sliding_window false
    assert {row.kind for row in estimate(qwen25, 10).breakdown} == {"full_attention"}
    nemotron = load_model("nemotron-h-8b")  # hybrid: only 4 of 52 layers cache KV
    kinds = {row.kind: row.num_layers for row in estimate(nemotron, 10).breakdown}
    assert kinds["full_attention"] == 4
    assert kinds["mamba"] == 24
