"""kvplan import: Hugging Face config.json files and model folders into specs.

tests/fixtures/hf/<name>/config.json holds the released config.json of a real model of each
mapped architecture; a folder named like a bundled spec must import to the same cache.
"""

from __future__ import annotations

import json
import struct
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import hub_server
import pytest
import yaml
from typer.testing import CliRunner

from kvplan import estimate, load_model, parse_spec, resolve_dtype
from kvplan.catalog.lookup import specs_dir
from kvplan.cli import app
from kvplan.errors import SpecError
from kvplan.importers import (
    HUB_HINT,
    count_parameters,
    import_config,
    list_architectures,
    read_safetensors_header,
    spec_from_config,
    supported_model_types,
)
from kvplan.importers.safetensors import DTYPE_BITS

runner = CliRunner()
FIXTURES = Path(__file__).parent / "fixtures" / "hf"
FOLDERS = sorted(p.name for p in FIXTURES.iterdir() if (p / "config.json").is_file())
BUNDLED = [n for n in FOLDERS if (specs_dir() / f"{n}.yaml").is_file()]


def test_every_bundled_model_has_a_fixture() -> None:
    bundled = sorted(p.stem for p in specs_dir().glob("*.yaml"))
    assert sorted(BUNDLED) == bundled


#: Types registered from their config class's defaults (and vLLM's model file) because no
#: released config.json of theirs could be read: each must be imported by a test in the named
#: file from a config built out of those defaults. A released fixture replaces the entry.
FROM_DEFAULTS = {
    "axk1": "test_catalog_h.py",
    "longcat_flash": "test_catalog_h.py",
    "param2moe": "test_catalog_h.py",
    "sarvam_mla": "test_catalog_h.py",
    "sarvam_moe": "test_catalog_h.py",
    "gemma3n": "test_catalog_i.py",
    "gemma3n_text": "test_catalog_i.py",
    "mimo_v2": "test_catalog_i.py",
    "zamba2": "test_catalog_i.py",
    "cohere2_moe": "test_catalog_j.py",
    "exaone_moe": "test_catalog_j.py",
    "granite_swa": "test_catalog_j.py",
    "granitemoe_swa": "test_catalog_j.py",
    "granitemoeshared": "test_catalog_j.py",
    "hyperclovax": "test_catalog_j.py",
    "hyperclovax_vision_v2": "test_catalog_j.py",
    "iquestcoder": "test_catalog_j.py",
    "muse_glimmer": "test_catalog_j.py",
    "muse_glimmer_text": "test_catalog_j.py",
    "plamo3": "test_catalog_j.py",
    "solar": "test_catalog_j.py",
    "step1": "test_catalog_j.py",
    "step3_text": "test_catalog_j.py",
    "step3p5": "test_catalog_j.py",
    "TeleFLM": "test_arch_extend.py",
    "inkling_model": "test_arch_inkling.py",
    "inkling_mm_model": "test_arch_inkling.py",
    "inkling_text": "test_arch_inkling.py",
    "qwen4_exp": "test_arch_qwen4_exp.py",
    "qwen4_exp_text": "test_arch_qwen4_exp.py",
    "PanguProMoE": "test_arch_extend.py",
    "pangu_ultra_moe": "test_arch_extend.py",
    "nemotron_h_puzzle": "test_arch_extend.py",
    "rnj1": "test_arch_extend.py",
    "alice_ai": "test_arch_v033.py",
    "beam": "test_arch_v033.py",
    "domyn_edge": "test_arch_v033.py",
    "dory": "test_arch_v033.py",
    "flint": "test_arch_v033.py",
    "step5": "test_arch_v033.py",
    "minimax_m3_text": "test_arch_sparse.py",
    "bailing_hybrid": "test_arch_delta.py",
    "hy_v4": "test_arch_delta.py",
    "k2_horizon": "test_arch_delta.py",
    "glm5_next_text": "test_arch_compressed.py",
}


def _fixture_model_types() -> set[str]:
    """The model_type of every fixture, and of the text model a wrapper nests."""
    seen = set()
    for name in FOLDERS:
        config = json.loads((FIXTURES / name / "config.json").read_text())
        seen.add(config["model_type"])
        seen.add((config.get("text_config") or {}).get("model_type"))
    return seen


def test_every_mapped_architecture_has_a_fixture() -> None:
    seen = _fixture_model_types()
    # minimax_text_01 is the released file's name for the minimax architecture
    mapped = {a.model_type for a in list_architectures()} - {"minimax"}
    assert sorted(mapped - seen - set(FROM_DEFAULTS)) == []
    assert {"gemma3", "llama4", "mistral3"} <= seen  # the wrappers around a text_config


@pytest.mark.parametrize(("model_type", "test_file"), sorted(FROM_DEFAULTS.items()))
def test_a_type_without_a_fixture_is_tested_from_its_defaults(
    model_type: str, test_file: str
) -> None:
    assert model_type in supported_model_types()
    assert model_type not in _fixture_model_types(), "a released fixture replaces the entry"
    assert f'"{model_type}"' in (Path(__file__).parent / test_file).read_text(encoding="utf-8")


@pytest.mark.parametrize("name", BUNDLED)
def test_import_matches_the_bundled_spec(name: str) -> None:
    imported = import_config(FIXTURES / name)
    bundled = load_model(name)
    # the same cache, layer for layer (kinds, heads, dims, windows, latent, state)
    assert imported.spec.layers == bundled.layers
    assert imported.spec.torch_dtype == bundled.torch_dtype
    assert imported.spec.max_position_embeddings == bundled.max_position_embeddings
    assert imported.spec.mtp_layers == bundled.mtp_layers  # the drafter of vLLM's MTP
    for tokens in (1, 4096, 131072):
        assert estimate(imported.spec, tokens).kv_cache_bytes == (
            estimate(bundled, tokens).kv_cache_bytes
        )


def _kinds(name: str) -> dict[str, int]:
    spec = import_config(FIXTURES / name).spec
    return dict(Counter(type(layer).__name__ for layer in spec.layers))


# (folder, model_type, layer kinds, KV bytes per token at the model dtype) worked by hand
GEOMETRY: list[tuple[str, str, dict[str, int], int]] = [
    ("gpt2", "gpt2", {"FullAttention": 12}, 12 * 2 * 12 * 64 * 4),
    ("opt-6.7b", "opt", {"FullAttention": 32}, 32 * 2 * 32 * 128 * 2),
    ("starcoder2-15b", "starcoder2", {"SlidingWindowAttention": 40}, 40 * 2 * 4 * 128 * 4),
    ("internlm2.5-7b-chat", "internlm2", {"FullAttention": 32}, 32 * 2 * 8 * 128 * 2),
    ("glm-4-9b-0414", "glm4", {"FullAttention": 40}, 40 * 2 * 2 * 128 * 2),
    # traps: multi_query -> one K/V head; chatglm group num and kv_channels; DBRX attn_config
    ("falcon-7b", "falcon", {"FullAttention": 32}, 32 * 2 * 1 * 64 * 2),
    ("falcon-40b", "falcon", {"FullAttention": 60}, 60 * 2 * 8 * 64 * 2),
    ("glm-4-9b", "chatglm", {"FullAttention": 40}, 40 * 2 * 2 * 128 * 2),
    ("dbrx", "dbrx", {"FullAttention": 40}, 40 * 2 * 8 * 128 * 2),
    # Qwen2.5: sliding_window is stated but use_sliding_window is false: every layer is full
    ("qwen2.5-7b", "qwen2", {"FullAttention": 28}, 28 * 2 * 4 * 128 * 2),
    # Gemma 3 4B: heads, KV heads, head_dim and the 5:1 pattern are all defaults
    (
        "gemma-3-4b",
        "gemma3_text",
        {"SlidingWindowAttention": 29, "FullAttention": 5},
        34 * 2 * 4 * 256 * 2,
    ),
    # Gemma 2 9B base is a float32 checkpoint
    (
        "gemma-2-9b",
        "gemma2",
        {"SlidingWindowAttention": 21, "FullAttention": 21},
        42 * 2 * 8 * 256 * 4,
    ),
    (
        "llama-4-scout",
        "llama4_text",
        {"ChunkedLocalAttention": 36, "FullAttention": 12},
        48 * 2 * 8 * 128 * 2,
    ),
    (
        "gpt-oss-20b",
        "gpt_oss",
        {"SlidingWindowAttention": 12, "FullAttention": 12},
        24 * 2 * 8 * 64 * 2,
    ),
    # MLA: one latent of kv_lora_rank + rope dims per layer, no factor 2
    ("deepseek-v3", "deepseek_v3", {"MLALatent": 61}, 61 * (512 + 64) * 2),
    ("kimi-k2", "kimi_k2", {"MLALatent": 61}, 61 * (512 + 64) * 2),
    ("deepseek-v2-lite", "deepseek_v2", {"MLALatent": 27}, 27 * (512 + 64) * 2),
    ("jamba-v0.1", "jamba", {"RecurrentState": 28, "FullAttention": 4}, 4 * 2 * 8 * 128 * 2),
    (
        "nemotron-h-8b",
        "nemotron_h",
        {"RecurrentState": 24, "NoCache": 24, "FullAttention": 4},
        4 * 2 * 8 * 128 * 2,
    ),
    (
        "granite-4.0-h-small",
        "granitemoehybrid",
        {"RecurrentState": 36, "FullAttention": 4},
        4 * 2 * 8 * 128 * 2,
    ),
    (
        "qwen3-next-80b-a3b",
        "qwen3_next",
        {"RecurrentState": 36, "FullAttention": 12},
        12 * 2 * 2 * 256 * 2,
    ),
    # no torch_dtype in the file; the checkpoint is bfloat16
    (
        "minimax-text-01",
        "minimax_text_01",
        {"RecurrentState": 70, "FullAttention": 10},
        10 * 2 * 8 * 128 * 2,
    ),
]


@pytest.mark.parametrize(
    ("name", "model_type", "kinds", "per_token"), GEOMETRY, ids=[g[0] for g in GEOMETRY]
)
def test_kv_geometry(name: str, model_type: str, kinds: dict[str, int], per_token: int) -> None:
    spec = import_config(FIXTURES / name).spec
    assert spec.model_type == model_type
    assert _kinds(name) == kinds
    dtype = resolve_dtype(spec.torch_dtype)
    kv_per_token = sum(
        layer.k_token_bytes(dtype) + layer.v_token_bytes(dtype) for layer in spec.layers
    )
    assert kv_per_token == per_token


def test_minimax_lightning_state_by_hand() -> None:
    # 70 linear layers x 64 heads x 128 x 128 float32, no conv tail
    one = estimate(import_config(FIXTURES / "minimax-text-01").spec, 1)
    assert one.state_bytes == 70 * 64 * 128 * 128 * 4 == 293_601_280


def test_derivations_are_recorded() -> None:
    gemma = import_config(FIXTURES / "gemma-3-4b")
    assert "max_position_embeddings 131072: the gemma3_text default (not in file)" in gemma.notes
    assert "sliding_window_pattern 6: the gemma3_text default (not in file)" in gemma.notes
    assert gemma.spec.source is not None
    assert "text_config" in gemma.spec.source
    falcon = import_config(FIXTURES / "falcon-7b")
    assert "num_key_value_heads 1: multi_query shares one K/V head" in falcon.notes
    qwen = import_config(FIXTURES / "qwen2.5-7b")
    assert any("inactive: use_sliding_window is false" in n for n in qwen.notes)


def test_unmapped_model_type_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "rwkv", "num_hidden_layers": 24}))
    with pytest.raises(SpecError) as err:
        import_config(config)
    message = str(err.value)
    assert message.startswith(f"{config}: model_type: 'rwkv' is not an architecture")
    assert "kvplan architectures" in message
    assert "docs/spec.md" in message
    assert "docs/importers.md" in message
    result = runner.invoke(app, ["import", str(config)])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert "rwkv" in result.stderr


def test_supported_list_covers_the_issue() -> None:
    wanted = [
        "llama",
        "mistral",
        "mixtral",
        "qwen2",
        "qwen2_moe",
        "qwen3",
        "qwen3_moe",
        "qwen3_next",
        "gemma",
        "gemma2",
        "gemma3",
        "gemma3_text",
        "phi",
        "phi3",
        "falcon",
        "gpt2",
        "opt",
        "deepseek_v2",
        "deepseek_v3",
        "kimi_k2",
        "gpt_oss",
        "llama4",
        "jamba",
        "nemotron_h",
        "granitemoehybrid",
        "minimax",
        "glm4",
        "glm4_moe",
        "chatglm",
        "cohere",
        "dbrx",
        "olmo2",
        "starcoder2",
        "internlm2",
    ]
    assert set(wanted) <= set(supported_model_types())


LLAMA = {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 8}


@pytest.mark.parametrize(
    ("config", "problem"),
    [
        ({"model_type": "llama"}, "num_hidden_layers, num_attention_heads: required in the config"),
        (
            {
                "model_type": "nemotron_h",
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "hybrid_override_pattern": "M",
            },
            "hybrid_override_pattern: needs one character per layer (2)",
        ),
        ([1, 2], "a config.json must be a JSON object"),
        # values of the wrong type or range: refused naming the key, never a traceback
        (
            {**LLAMA, "model_type": "dbrx", "attn_config": "x"},
            "attn_config: must be an object, got 'x'",
        ),
        (
            {**LLAMA, "model_type": "jamba", "attn_layer_period": 0},
            "attn_layer_period: must be an integer from 1 to 10,000, got 0",
        ),
        (
            {**LLAMA, "model_type": "jamba", "attn_layer_offset": -1},
            "attn_layer_offset: must be an integer from 0 to 10,000, got -1",
        ),
        (
            {**LLAMA, "model_type": "qwen3_next", "full_attention_interval": 0},
            "full_attention_interval: must be an integer from 1 to 10,000, got 0",
        ),
        (
            {**LLAMA, "model_type": "gemma3_text", "sliding_window_pattern": 10**9},
            "sliding_window_pattern: must be an integer from 1 to 2, got 1000000000",
        ),
        (
            {**LLAMA, "model_type": "llama4_text", "no_rope_layer_interval": 0},
            "no_rope_layer_interval: must be an integer from 1 to 10,000, got 0",
        ),
        (
            {**LLAMA, "model_type": "llama4_text", "no_rope_layers": "x"},
            "no_rope_layers: must be a list, got 'x'",
        ),
        ({**LLAMA, "torch_dtype": ["bfloat16"]}, "torch_dtype: must be a dtype name, got a list"),
        ({**LLAMA, "layer_types": "full_attention"}, "layer_types: must be a list, got"),
        (
            {**LLAMA, "layer_types": ["full_attention"] * 3},
            "layer_types: has 3 entries but 2 layers",
        ),
        (
            {**LLAMA, "layer_types": [{"a": 1}, "full_attention"]},
            "layer_types.0: unknown kind a dict; allowed:",
        ),
        (
            {**LLAMA, "num_hidden_layers": 10**9},
            "num_hidden_layers: must be an integer from 1 to 10,000, got 1000000000",
        ),
        ({**LLAMA, "num_hidden_layers": True}, "num_hidden_layers: must be an integer"),
        ({**LLAMA, "model_type": ["llama"]}, "model_type: a list is not an architecture"),
    ],
    ids=[
        "no-layers",
        "pattern-length",
        "not-object",
        "attn-config-string",
        "period-0",
        "offset-negative",
        "interval-0",
        "pattern-1e9",
        "no-rope-interval-0",
        "no-rope-string",
        "dtype-list",
        "layer-types-string",
        "layer-types-length",
        "layer-types-dict",
        "1e9-layers",
        "bool-layers",
        "type-list",
    ],
)
def test_malformed_configs(config: Any, problem: str) -> None:
    with pytest.raises(SpecError) as err:
        spec_from_config(config, "x/config.json")
    assert str(err.value).startswith(f"x/config.json: {problem}")
    assert len(err.value.problems) == 1


def test_kv_heads_must_divide_heads_in_import(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**LLAMA, "num_key_value_heads": 3, "torch_dtype": "bfloat16"}))
    with pytest.raises(SpecError, match="num_key_value_heads: 3 does not divide"):
        import_config(path)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"num_hidden_layers": ' + "9" * 5000 + "}", "an integer of more than 4,300 digits"),
        ("[" * 100_000 + "]" * 100_000, "malformed JSON: nested too deeply"),
        ("{\n  x\n}", "malformed JSON: Expecting property name"),
    ],
    ids=["huge-int", "deep", "malformed"],
)
def test_unreadable_json(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(text)
    with pytest.raises(SpecError) as err:
        import_config(path)
    assert str(err.value).startswith(str(path))
    assert problem in str(err.value)


# --- safetensors ----------------------------------------------------------------------------


def _write_safetensors(path: Path, tensors: dict[str, tuple[str, list[int]]]) -> None:
    """A valid safetensors file: header, then zero bytes for the data (the served Hub's
    builder, tests/hub_server.py, written out whole)."""
    blob, _ = hub_server.safetensors({name: list(entry) for name, entry in tensors.items()})
    path.write_bytes(blob.read(0, blob.size - 1))


def _llama_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "Tiny-Llama"
    folder.mkdir()
    (folder / "config.json").write_text(
        json.dumps(
            {
                "model_type": "llama",
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "num_key_value_heads": 2,
                "hidden_size": 64,
                "vocab_size": 100,
                "intermediate_size": 128,
                "torch_dtype": "bfloat16",
                "max_position_embeddings": 4096,
                "tie_word_embeddings": False,
            }
        )
    )
    return folder


def test_safetensors_headers_give_exact_parameters(tmp_path: Path) -> None:
    folder = _llama_folder(tmp_path)
    _write_safetensors(
        folder / "model-00001-of-00002.safetensors",
        {
            "model.embed_tokens.weight": ("BF16", [100, 64]),
            "model.layers.0.self_attn.q_proj.weight": ("BF16", [64, 64]),
        },
    )
    _write_safetensors(
        folder / "model-00002-of-00002.safetensors",
        {"lm_head.weight": ("BF16", [100, 64]), "model.norm.weight": ("F32", [64])},
    )
    imported = import_config(folder)
    assert imported.spec.name == "tiny-llama"
    assert imported.spec.num_parameters == 100 * 64 + 64 * 64 + 100 * 64 + 64 == 16_960
    assert imported.spec.weight_dtype is None
    assert any(
        "safetensors headers of 2 file(s) (BF16 16,896, F32 64)" in n for n in imported.notes
    )
    # a header is all that is read: the file's data may be absent
    _write_safetensors(tmp_path / "a.safetensors", {"w": ("BF16", [1024, 1024])})
    head = (tmp_path / "a.safetensors").read_bytes()
    truncated = tmp_path / "b.safetensors"
    truncated.write_bytes(head[: 8 + struct.unpack("<Q", head[:8])[0]])
    assert read_safetensors_header(truncated)["w"]["shape"] == [1024, 1024]


def test_mixed_formats_counted_per_component() -> None:
    headers = {
        # gpt-oss style: MXFP4 experts (2 values a byte, U8 scales are storage) + bf16 rest
        "model.layers.0.mlp.experts.gate_up_proj_blocks": {"dtype": "U8", "shape": [4, 8, 90, 16]},
        "model.layers.0.mlp.experts.gate_up_proj_scales": {"dtype": "U8", "shape": [4, 8, 90]},
        "model.layers.0.self_attn.q_proj.weight": {"dtype": "BF16", "shape": [64, 32]},
    }
    count = count_parameters(headers, {"quant_method": "mxfp4"})
    assert count.num_quantized_parameters == 4 * 8 * 90 * 16 * 2 == 92_160
    assert count.num_parameters == 92_160 + 64 * 32
    assert count.weight_dtype == "mxfp4"
    # DeepSeek style fp8 blocks with fp32 weight_scale_inv; GPTQ 4-bit int32 packing
    fp8 = count_parameters(
        {
            "w.weight": {"dtype": "F8_E4M3", "shape": [256, 256]},
            "w.weight_scale_inv": {"dtype": "F32", "shape": [2, 2]},
        },
        {"quant_method": "fp8"},
    )
    assert (fp8.num_parameters, fp8.weight_dtype) == (65_536, "fp8_e4m3")
    gptq = count_parameters(
        {
            "w.qweight": {"dtype": "I32", "shape": [16, 64]},
            "w.scales": {"dtype": "BF16", "shape": [1, 64]},
            "w.qzeros": {"dtype": "I32", "shape": [1, 8]},
        },
        {"quant_method": "gptq", "bits": 4},
    )
    assert (gptq.num_parameters, gptq.weight_dtype) == (16 * 64 * 8, "int4")


def test_index_alone_gives_parameters_when_unquantized(tmp_path: Path) -> None:
    folder = _llama_folder(tmp_path)
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 16_060_522_496}, "weight_map": {}})
    )
    assert import_config(folder).spec.num_parameters == 8_030_261_248


_DTYPES = ", ".join(DTYPE_BITS)
_OFFSETS = "w: data_offsets must be [begin, end], 0 <= begin <= end"


def test_a_header_in_utf16_is_not_safetensors(tmp_path: Path) -> None:
    # the format's header is UTF-8 JSON; json.loads would also read UTF-16
    path = tmp_path / "x.safetensors"
    raw = json.dumps({"w": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}})
    path.write_bytes(struct.pack("<Q", 2 * len(raw) + 2) + raw.encode("utf-16"))
    with pytest.raises(SpecError, match="the header is not a JSON object"):
        read_safetensors_header(path)


def test_tensors_in_any_order_tile_the_data(tmp_path: Path) -> None:
    path = tmp_path / "x.safetensors"
    raw = json.dumps(
        {
            "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]},
            "a": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]},
            "empty": {"dtype": "F4", "shape": [0], "data_offsets": [12, 12]},
        }
    ).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw)
    assert set(read_safetensors_header(path)) == {"a", "b", "empty"}


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ({"dtype": "BF16", "shape": ["x"]}, "w: shape 'x' is not a size"),
        ({"dtype": "BF16", "shape": [True]}, "w: shape True is not a size"),
        ({"dtype": "BF16", "shape": [2**49]}, "w: shape 562949953421312 is not a size"),
        ({"dtype": "BF16", "shape": [1] * 17}, "w: shape must be a list of at most 16 sizes"),
        ({"dtype": 7, "shape": [1]}, f"w: dtype 7 is not a safetensors dtype; one of {_DTYPES}"),
        # a name of the right look that the format does not have
        (
            {"dtype": "Q7_ZZ", "shape": [1]},
            f"w: dtype 'Q7_ZZ' is not a safetensors dtype; one of {_DTYPES}",
        ),
        # byte ranges: backwards, missing, or not the tensor's size (2 x BF16 is 4 B; 3 x F4 is
        # 1.5 B, which no byte range holds)
        ({"dtype": "BF16", "shape": [2], "data_offsets": [5, 2]}, _OFFSETS),
        ({"dtype": "BF16", "shape": [2]}, _OFFSETS),
        ({"dtype": "BF16", "shape": [2], "data_offsets": [0, 2.0]}, _OFFSETS),
        (
            {"dtype": "BF16", "shape": [2], "data_offsets": [0, 8]},
            "w: data_offsets span 8 B; 2 x BF16 is 4 B",
        ),
        (
            {"dtype": "F4", "shape": [3], "data_offsets": [0, 2]},
            "w: data_offsets span 2 B; 3 x F4 is 1.5 B",
        ),
        (
            {"dtype": "BF16", "shape": [2], "data_offsets": [4, 8]},
            "w: data_offsets start at 4, not 0",
        ),
        ({"dtype": "BF16"}, "w: shape must be a list of at most 16 sizes"),
        ("x", "w: must be an object with dtype and shape"),
    ],
    ids=[
        "string-dim",
        "bool-dim",
        "huge-dim",
        "rank-17",
        "int-dtype",
        "unknown-dtype",
        "backwards",
        "no-offsets",
        "float-offset",
        "long-span",
        "half-byte",
        "gap",
        "no-shape",
        "string",
    ],
)
def test_malformed_safetensors_entries(tmp_path: Path, entry: Any, problem: str) -> None:
    path = tmp_path / "x.safetensors"
    raw = json.dumps({"w": entry}).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw)
    with pytest.raises(SpecError) as err:
        read_safetensors_header(path)
    assert str(err.value) == f"{path}: not a safetensors file: {problem}"


@pytest.mark.parametrize(
    ("quant", "problem"),
    [
        ("fp8", "quantization_config: must be an object, got 'fp8'"),
        ({"quant_method": "gptq", "bits": 0}, "quantization_config.bits: must be an integer"),
        ({"quant_method": "gptq", "bits": "4"}, "quantization_config.bits: must be an integer"),
    ],
    ids=["string", "bits-0", "bits-string"],
)
def test_malformed_quantization_config(tmp_path: Path, quant: Any, problem: str) -> None:
    folder = _llama_folder(tmp_path)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "quantization_config": quant}))
    _write_safetensors(folder / "model.safetensors", {"w.qweight": ("I32", [4, 4])})
    with pytest.raises(SpecError) as err:
        import_config(folder)
    assert str(err.value).startswith(f"{folder / 'config.json'}: {problem}")


@pytest.mark.parametrize(
    ("metadata", "problem"),
    [
        ([1], "metadata: must be an object, got a list"),
        ({"total_size": -2}, "metadata.total_size: must be an integer"),
        ({"total_size": "16"}, "metadata.total_size: must be an integer"),
    ],
    ids=["list", "negative", "string"],
)
def test_malformed_index(tmp_path: Path, metadata: Any, problem: str) -> None:
    folder = _llama_folder(tmp_path)
    index = folder / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": metadata, "weight_map": {}}))
    with pytest.raises(SpecError) as err:
        import_config(folder)
    assert str(err.value).startswith(f"{index}: {problem}")


def test_not_regular_shard(tmp_path: Path) -> None:
    import os

    folder = _llama_folder(tmp_path)
    os.mkfifo(folder / "model.safetensors")
    with pytest.raises(SpecError, match=r"model\.safetensors: cannot read: not a regular file"):
        import_config(folder)


def test_not_a_safetensors_file(tmp_path: Path) -> None:
    bad = tmp_path / "x.safetensors"
    bad.write_bytes(struct.pack("<Q", 4) + b"nope")
    with pytest.raises(SpecError, match=r"x\.safetensors: not a safetensors file"):
        read_safetensors_header(bad)


# --- the command line ---------------------------------------------------------------------


def test_import_to_stdout_round_trips() -> None:
    result = runner.invoke(app, ["import", str(FIXTURES / "falcon-7b")])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("# Imported from ")
    spec = parse_spec(yaml.safe_load(result.stdout))
    assert spec.name == "falcon-7b"
    assert spec.num_key_value_heads == 1
    assert spec.layers == load_model("falcon-7b").layers


def test_output_file_is_never_overwritten_without_force(tmp_path: Path) -> None:
    out = tmp_path / "mine.yaml"
    out.write_text("my notes\n")
    args = ["import", str(FIXTURES / "qwen3-8b" / "config.json"), "-o", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert result.stderr == f"kvplan: error: {out}: exists; pass --force to overwrite it\n"
    assert out.read_text() == "my notes\n"
    result = runner.invoke(app, [*args, "--force", "--name", "my-qwen"])
    assert result.exit_code == 0, result.stderr
    assert yaml.safe_load(out.read_text())["name"] == "my-qwen"
    assert not list(tmp_path.glob(".*kvplan-tmp"))


def test_commands_take_a_config_or_folder(tmp_path: Path) -> None:
    for target in (FIXTURES / "llama-3.1-8b", FIXTURES / "llama-3.1-8b" / "config.json"):
        result = runner.invoke(app, ["calc", str(target), "-c", "8K", "-f", "json"])
        assert result.exit_code == 0, result.stderr
        assert json.loads(result.stdout)["kv_cache_bytes"] == 32 * 2 * 8 * 128 * 2 * 8192
    # a folder with weights plans: 2 layers x 2 KV heads x 16 dims x (K + V) x 2 B = 256 B/token
    folder = _llama_folder(tmp_path)
    _write_safetensors(folder / "model.safetensors", {"w": ("BF16", [1000, 1000])})
    result = runner.invoke(
        app, ["plan", str(folder), "-g", "h100", "--max-model-len", "4096", "-f", "json"]
    )
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["weights_bytes"] == 1000 * 1000 * 2
    assert doc["ideal_request_bytes"] == 256 * 4096


def test_hub_without_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    result = runner.invoke(app, ["import", "--hub", "meta-llama/Llama-3.1-8B"])
    assert result.exit_code == 3
    assert result.stderr == f"kvplan: error: {HUB_HINT}\n"
    assert "pip install 'kvplan[hub]'" in HUB_HINT


def test_path_or_hub_exactly_one() -> None:
    result = runner.invoke(app, ["import"])
    assert result.exit_code == 2
    assert "give a config.json, a model folder or a .gguf file, or --hub ORG/NAME" in result.stderr


def test_folder_and_hub_headers_count_alike(tmp_path: Path) -> None:
    # One function counts headers wherever they were read: a folder's files, or the Hub's.
    from kvplan.importers.safetensors import weights_from_headers, weights_in_folder

    folder = _llama_folder(tmp_path)
    tensors = {"a": ("BF16", [100, 64]), "b": ("F32", [64])}
    _write_safetensors(folder / "model.safetensors", tensors)
    local = weights_in_folder(folder, {}, "bfloat16")
    # the same header as written: BF16 a 100 x 64 x 2 = 12,800 B from 0, F32 b 256 B after it
    header = {
        "a": {"dtype": "BF16", "shape": [100, 64], "data_offsets": [0, 12_800]},
        "b": {"dtype": "F32", "shape": [64], "data_offsets": [12_800, 13_056]},
    }
    remote = weights_from_headers({"acme/x@main/model.safetensors": header}, {}, " on the Hub")
    assert local is not None
    # 100 x 64 = 6,400 BF16 and 64 F32: 6,464 parameters
    assert local.num_parameters == remote.num_parameters == 6_464
    assert local.dtypes == remote.dtypes == {"BF16": 6_400, "F32": 64}
    assert remote.how == "safetensors headers of 1 file(s) on the Hub"
    with pytest.raises(SpecError, match=r"^acme/x@main/model.safetensors: not a safetensors"):
        weights_from_headers({"acme/x@main/model.safetensors": {"a": {"dtype": "BF16"}}}, {})


# --- the written spec reads like a bundled one -----------------------------------------------

# Keys the bundled spec states from elsewhere than its config.json (a model card's total, a
# key the config leaves out, the layer kinds written out); the cache is the same layer for
# layer (test_import_matches_the_bundled_spec).
STATED_ELSEWHERE: dict[str, set[str]] = {
    **{
        n: {"num_parameters", "num_active_parameters"}
        for n in ("deepseek-r1", "deepseek-v2", "deepseek-v2-lite", "deepseek-v3", "glm-4.5")
    },
    **{n: {"num_parameters", "num_active_parameters"} for n in ("gpt-oss-20b", "gpt-oss-120b")},
    **{n: {"num_parameters"} for n in ("llama-2-7b", "llama-2-13b", "llama-2-70b")},
    **{n: {"intermediate_size"} for n in ("dbrx", "falcon-7b", "falcon-40b", "lfm2-1.2b")},
    **{
        n: {"num_active_parameters"}
        for n in ("kimi-k2", "kimi-k2-0905", "llama-4-scout", "llama-4-scout-instruct")
    },
    **{n: {"num_active_parameters"} for n in ("mixtral-8x7b", "mixtral-8x22b")},
    "llama-4-maverick": {"num_active_parameters", "tie_word_embeddings"},
    "mistral-small-3.1-24b": {"tie_word_embeddings"},
    "kimi-k2.5": {"weight_dtype", "num_quantized_parameters"},
    "llama-3.3-70b": {"head_dim"},
    "minicpm3-4b": {"num_key_value_heads"},
    # 40 layers, a pattern of 10 repeated 4 times: the bundled spec lists all 40
    "granite-4.0-h-small": {"layer_types", "layer_types_pattern"},
}
_NAMING_KEYS = {"name", "hf_id", "aliases", "source"}


def _spec_keys(spec: Any) -> list[str]:
    import dataclasses

    return [f.name for f in dataclasses.fields(spec) if not f.name.startswith("_")]


@pytest.mark.parametrize("name", BUNDLED)
def test_written_spec_loads_to_the_bundled_spec(name: str) -> None:
    from kvplan.importers import spec_yaml

    text = spec_yaml(import_config(FIXTURES / name))
    written = parse_spec(yaml.safe_load(text))
    bundled = load_model(name)
    differ = {
        key
        for key in _spec_keys(bundled)
        if key not in _NAMING_KEYS and getattr(written, key) != getattr(bundled, key)
    }
    assert differ == STATED_ELSEWHERE.get(name, set())
    assert written.layers == bundled.layers


def _body(text: str) -> list[str]:
    return [line for line in text.splitlines() if not line.startswith("#")]


def test_import_reads_like_the_bundled_qwen3_8b() -> None:
    result = runner.invoke(app, ["import", str(FIXTURES / "qwen3-8b" / "config.json")])
    assert result.exit_code == 0, result.stderr
    lines = _body(result.stdout)
    assert not any(line.startswith(("{", " ")) for line in lines)  # block style, one line a key
    keys = [line.split(":", 1)[0] for line in lines]
    bundled = (specs_dir() / "qwen3-8b.yaml").read_text(encoding="utf-8")
    bundled_keys = [line.split(":", 1)[0] for line in _body(bundled)]
    # the bundled spec's order; it also names its HF id and Ollama alias, which a file lacks
    assert keys == [k for k in bundled_keys if k not in ("hf_id", "aliases")]
    source = next(line for line in lines if line.startswith("source: "))
    assert source.startswith('source: "')
    assert "config.json; num_parameters computed from the config's shapes: 8,190,735,360" in source
    assert lines[0] == "name: qwen3-8b"


@pytest.mark.parametrize("name", BUNDLED)
def test_written_keys_follow_the_spec_order(name: str) -> None:
    from kvplan.importers import spec_yaml
    from kvplan.model.spec import ModelSpec

    imported = import_config(FIXTURES / name)
    lines = _body(spec_yaml(imported))
    keys = [line.split(":", 1)[0] for line in lines if not line.startswith(" ")]
    order = [k for k in _spec_keys(ModelSpec) if k in imported.data]
    assert keys == order
    # no key's value runs onto a second line; a nested block (multimodal) has one a key
    nested = sum(len(v) for v in imported.data.values() if isinstance(v, dict))
    assert len(keys) + nested == len(lines)


def test_periodic_layer_types_written_as_the_pattern() -> None:
    # gpt-oss-20b config.json: 24 layer_types alternating sliding_attention, full_attention
    data = import_config(FIXTURES / "gpt-oss-20b").data
    assert "layer_types" not in data
    assert data["layer_types_pattern"] == ["sliding_attention", "full_attention"]
    # SmolLM3: 36 full_attention layers and no window: the default, so no key at all
    data = import_config(FIXTURES / "smollm3-3b").data
    assert "layer_types" not in data
    assert "layer_types_pattern" not in data


def test_a_line_break_read_from_the_file_stays_in_its_value(tmp_path: Path) -> None:
    config = json.loads((FIXTURES / "qwen3-8b" / "config.json").read_text(encoding="utf-8"))
    config["quantization_config"] = {"quant_method": "odd\nname: other\n# x"}
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    result = runner.invoke(app, ["import", str(tmp_path / "config.json"), "--name", "q"])
    assert result.exit_code == 0, result.stderr
    doc = yaml.safe_load(result.stdout)
    assert doc["name"] == "q"
    assert "odd\nname: other" in doc["source"]
    assert sum(line.startswith("name:") for line in result.stdout.splitlines()) == 1


def test_existing_output_is_kept_when_the_import_fails(tmp_path: Path) -> None:
    out = tmp_path / "mine.yaml"
    out.write_text("my notes\n")
    bad = tmp_path / "config.json"
    bad.write_text('{"model_type": "no-such-type", "num_hidden_layers": 2}')
    result = runner.invoke(app, ["import", str(bad), "-o", str(out), "--force"])
    assert result.exit_code == 2
    assert out.read_text() == "my notes\n"
    # without --force the file is refused before the model is read (the Hub may be slow):
    # a model that does not exist is not even looked for
    result = runner.invoke(app, ["import", str(tmp_path / "missing"), "-o", str(out)])
    assert result.exit_code == 2
    assert result.stderr == f"kvplan: error: {out}: exists; pass --force to overwrite it\n"
    result = runner.invoke(app, ["import", str(FIXTURES / "falcon-7b"), "-o", str(out)])
    assert result.exit_code == 2
    assert "exists; pass --force" in result.stderr
    assert out.read_text() == "my notes\n"
