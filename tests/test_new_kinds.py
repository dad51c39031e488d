"""The cache kinds of 2025-2026 architectures, each worked by hand: cross-layer KV sharing
(Gemma 3n), per-layer KV heads and head dims (DeciLM, Gemma 4), short-convolution state
(LFM2), attention and Mamba2 in one layer (Falcon-H1, Zamba2), and the DeepSeek-V3.2
indexer key beside the MLA latent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvplan import estimate, load_model, parse_spec
from kvplan.engines import sglang, trtllm, vllm
from kvplan.errors import SpecError, UnitError
from kvplan.hardware.lookup import find_gpu
from kvplan.importers import import_config
from kvplan.model.layers import AttentionAndState, RecurrentState, SharedKV

FIXTURES = Path(__file__).parent / "fixtures" / "hf"

# Gemma 3n E4B's geometry (transformers Gemma3nTextConfig): 35 layers, 4 sliding then 1 full,
# 2 KV heads of 256 dims, window 512, the last 15 layers sharing.
GEMMA3N: dict[str, Any] = {
    "name": "shared-kv",
    "num_hidden_layers": 35,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 256,
    "torch_dtype": "bfloat16",
    "sliding_window": 512,
    "layer_types_pattern": ["sliding_attention"] * 4 + ["full_attention"],
    "num_kv_shared_layers": 15,
}

FALCON_H1_LIKE: dict[str, Any] = {
    "name": "parallel-hybrid",
    "num_hidden_layers": 2,
    "hidden_size": 1024,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "torch_dtype": "bfloat16",
    "layer_types": ["attention_mamba", "attention_mamba"],
    "mamba_n_heads": 24,
    "mamba_d_head": 64,
    "mamba_n_groups": 1,
    "mamba_d_state": 128,
    "mamba_d_conv": 4,
}


def test_shared_layers_keep_no_cache() -> None:
    spec = parse_spec(GEMMA3N)
    assert sum(isinstance(layer, SharedKV) for layer in spec.layers) == 15
    # 20 layers cache: 16 sliding + 4 full, each 2 (K,V) x 2 heads x 256 x 2 B = 2,048 B/token
    assert estimate(spec, 0).bytes_per_token == 20 * 2048 == 40960
    # at 4,096 tokens the sliding layers keep 512: 16 x 2,048 x 512 + 4 x 2,048 x 4,096
    assert estimate(spec, 4096).kv_cache_bytes == 16_777_216 + 33_554_432


def test_shared_layer_without_an_earlier_one_of_its_kind_keeps_its_own() -> None:
    # vLLM leaves kv_sharing_target_layer_name unset when no earlier layer has the kind
    spec = parse_spec(
        {**GEMMA3N, "num_hidden_layers": 3, "layer_types_pattern": None}
        | {"layer_types": ["sliding_attention", "sliding_attention", "full_attention"]}
        | {"num_kv_shared_layers": 2}
    )
    kinds = [layer.kind for layer in spec.layers]
    assert kinds == ["sliding_attention", "kv_shared", "full_attention"]


@pytest.mark.parametrize("shared", [35, 36])
def test_sharing_every_layer_is_refused(shared: int) -> None:
    with pytest.raises(SpecError, match="num_kv_shared_layers"):
        parse_spec({**GEMMA3N, "num_kv_shared_layers": shared})


def test_vllm_pages_only_the_layers_that_own_their_cache() -> None:
    spec = parse_spec(GEMMA3N)
    _, groups, group_size, padding = vllm.layout(spec, vllm.config(4096))
    # 16 sliding + 4 full: groups of 4 -> 4 sliding groups and 1 full group, no padding
    assert (len(groups), group_size, padding) == (5, 4, 0)


def test_per_layer_kv_heads() -> None:
    spec = parse_spec(
        {
            "name": "per-layer",
            "num_hidden_layers": 3,
            "num_attention_heads": 16,
            "head_dim": 128,
            "torch_dtype": "bfloat16",
            "num_key_value_heads_per_layer": [8, 4, 2],
        }
    )
    # 2 x (8 + 4 + 2) heads x 128 x 2 B = 7,168 B
    assert estimate(spec, 0).bytes_per_token == 7168


def test_per_layer_lists_must_match_the_layers() -> None:
    with pytest.raises(SpecError, match="head_dim_per_layer: has 2 entries"):
        parse_spec(
            {
                "name": "x",
                "num_hidden_layers": 3,
                "num_attention_heads": 16,
                "torch_dtype": "bfloat16",
                "head_dim_per_layer": [128, 64],
            }
        )


def test_global_head_dim_and_kv_heads() -> None:
    spec = parse_spec(
        {
            "name": "gemma4-like",
            "num_hidden_layers": 6,
            "num_attention_heads": 16,
            "num_key_value_heads": 8,
            "head_dim": 256,
            "torch_dtype": "bfloat16",
            "sliding_window": 1024,
            "layer_types_pattern": ["sliding_attention"] * 5 + ["full_attention"],
            "global_head_dim": 512,
            "num_global_key_value_heads": 2,
        }
    )
    # 5 sliding x 2 x 8 x 256 x 2 B = 40,960; 1 full x 2 x 2 x 512 x 2 B = 4,096
    assert estimate(spec, 0).bytes_per_token == 40960 + 4096
    # unequal pages that divide: vLLM's unify_kv_cache_spec_page_size gives the full layer
    # 32-token blocks, 32 x 4,096 = 131,072 B, the sliding page of 16 x 8,192 B; one layer
    # a group (5 sliding : 1 full, the smaller count), so six groups and no padding
    _, groups, group_size, padding = vllm.layout(spec, vllm.config(4096))
    assert [(g.kind, g.block_size, g.page_bytes) for g, _ in groups] == [
        ("sliding", 16, 131072)
    ] * 5 + [("full", 32, 131072)]
    assert (group_size, padding) == (1, 0)


def test_lfm2_short_conv_state() -> None:
    spec = load_model("lfm2-1.2b")
    states = [layer for layer in spec.layers if isinstance(layer, RecurrentState)]
    assert len(states) == 10
    assert {(s.kind, s.conv_values, s.ssm_values) for s in states} == {("short_conv", 4096, 0)}
    # 6 x 2 x 8 x 64 x 2 B = 12,288 B/token; 10 x 2,048 x 2 x 2 B = 81,920 B state
    assert estimate(spec, 1000).kv_cache_bytes == 12288 * 1000 + 81920


def test_lfm2_in_vllm() -> None:
    spec = load_model("lfm2-1.2b")
    specs, groups, group_size, padding = vllm.layout(spec, vllm.config(4096))
    # an attention page is 16 x 2,048 B = 32,768 B, above the 8,192 B conv state, so the block
    # stays 16 and the state page is padded to 32,768 B; 6 attention + 10 conv layers: groups
    # of 6 (10 >= 1.5 x 6), one attention group and two conv groups, 2 padding layers
    assert {s.page_bytes for s in specs if s is not None} == {32768}
    assert (len(groups), group_size, padding) == (3, 6, 2)


def test_lfm2_imports_from_layer_types_as_from_full_attn_idxs(tmp_path: Path) -> None:
    config = json.loads((FIXTURES / "lfm2-1.2b" / "config.json").read_text(encoding="utf-8"))
    kinds = ["full_attention" if i in config["full_attn_idxs"] else "conv" for i in range(16)]
    config = {**config, "full_attn_idxs": None, "layer_types": kinds}
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    assert import_config(tmp_path).spec.layers == load_model("lfm2-1.2b").layers


def test_lfm2_unknown_layer_type_is_refused(tmp_path: Path) -> None:
    config = json.loads((FIXTURES / "lfm2-1.2b" / "config.json").read_text(encoding="utf-8"))
    (tmp_path / "config.json").write_text(
        json.dumps({**config, "layer_types": ["conv"] * 15 + ["mamba"]}), encoding="utf-8"
    )
    expected = r"layer_types\.15: unknown kind 'mamba'; allowed: conv, full_attention"
    with pytest.raises(SpecError, match=expected):
        import_config(tmp_path)


def test_attention_and_mamba2_in_one_layer() -> None:
    spec = parse_spec(FALCON_H1_LIKE | {"state_dtype": "float32"})
    assert all(isinstance(layer, AttentionAndState) for layer in spec.layers)
    # attention: 2 x 2 heads x 64 x 2 B = 512 B/token; Mamba2: d_inner 24 x 64 = 1,536,
    # conv (1,536 + 2 x 1 x 128) x 3 = 5,376, ssm 1,536 x 128 = 196,608 values x 4 B = 807,936 B
    assert estimate(spec, 100).kv_cache_bytes == 2 * (512 * 100 + 807_936)
    assert estimate(spec, 100).bytes_per_token == 1024


def test_attention_and_mamba2_in_vllm() -> None:
    spec = parse_spec(FALCON_H1_LIKE)
    specs, groups, _, _ = vllm.layout(spec, vllm.config(4096))
    # two cache layers a decoder layer; the state in bf16: (5,376 + 196,608) x 2 = 403,968 B
    # lifts the block to 16 x cdiv(403,968, 16 x 512) = 800 tokens, page 800 x 512 = 409,600 B
    assert [s.kind for s in specs if s is not None] == ["full", "mamba"] * 2
    assert {s.page_bytes for s in specs if s is not None} == {409_600}
    assert {g.block_size for g, _ in groups} == {800}
    # PP 2: each stage holds one decoder layer, both of its caches, so one layer per group
    # there: 10 pages of 409,600 B give 10 blocks
    cfg = vllm.config(4096, pipeline_parallel_size=2, kv_cache_memory_bytes=4_096_000)
    result = vllm.profile(spec, find_gpu("H100"), cfg)
    assert [s.num_blocks for s in result.stages] == [10, 10]


def test_attention_and_mamba2_refused_where_not_modelled() -> None:
    spec = parse_spec(FALCON_H1_LIKE)
    with pytest.raises(UnitError, match="SGLang profile"):
        sglang.cell_size_bytes(spec)
    with pytest.raises(UnitError, match="TensorRT-LLM profile: attention_mamba"):
        trtllm.pool_bytes_per_token(spec.layers, tp=1, dtype=spec.layers[0].state.state_dtype)


V32: dict[str, Any] = {
    "name": "v32-like",
    "num_hidden_layers": 61,
    "num_attention_heads": 128,
    "torch_dtype": "bfloat16",
    "kv_lora_rank": 512,
    "qk_rope_head_dim": 64,
    "index_head_dim": 128,
}


def test_deepseek_v32_indexer_key() -> None:
    spec = parse_spec(V32)
    # 61 x ((512 + 64) x 2 B + 128 fp8 + 1 fp32 scale = 132 B) = 61 x 1,284 = 78,324 B/token
    assert estimate(spec, 0).bytes_per_token == 78324
    # in fp8 the latent shrinks, the indexer key stays 132 B: 61 x (576 + 132) = 43,188 B
    assert estimate(spec, 0, kv_dtype="fp8").bytes_per_token == 43188
    # SGLang reads the indexer from the spec: (576 x 2 + 132) x 61 = 78,324 B a token
    assert sglang.cell_size_bytes(spec) == 78324


def test_deepseek_v32_refused_by_vllm() -> None:
    with pytest.raises(UnitError, match="indexer"):
        vllm.layout(parse_spec(V32), vllm.config(4096))
