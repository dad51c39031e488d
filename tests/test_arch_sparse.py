"""Compressed and sparse caches read from vLLM 0.32: DeepSeek V4 (compressed latents beside a
sliding latent window, fp32 compressor rings) from its released config.json, and MiniMax M3
(GQA plus a bf16 indexer key on its sparse layers) from vLLM's MiniMaxM3TextConfig defaults,
since no released config.json could be found. Every figure is worked by hand from the config
and vLLM's source (models/deepseek_v4/attention.py, compressor.py,
v1/attention/backends/mla/sparse_swa.py; models/minimax_m3/nvidia/model.py,
common/indexer.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kvplan import estimate, explain
from kvplan.engines.vllm_layout import page_spec
from kvplan.errors import SpecError, UnitError
from kvplan.importers import import_config, parameters_from_config
from kvplan.importers.config import spec_from_config
from kvplan.importers.registry import list_architectures
from kvplan.model.layers import FullAttention
from kvplan.model.sparse import CompressedLatent, SparseAttention
from kvplan.model.spec import ModelSpec, parse_spec
from kvplan.units import resolve_dtype

FIXTURES = Path(__file__).parent / "fixtures" / "hf"
VLLM_CLASSES = Path(__file__).parent / "data" / "vllm_0.32_text_generation_architectures.txt"

CLASSES = {
    "DeepseekV4ForCausalLM": "deepseek_v4",
    "MiniMaxM3SparseForCausalLM": "minimax_m3_text",
}


def _import(config: dict[str, Any]) -> ModelSpec:
    data, _ = spec_from_config(config)
    return parse_spec({"name": "x", **data})


def _v4_config() -> dict[str, Any]:
    path = FIXTURES / "deepseek-v4-flash" / "config.json"
    return json.loads(path.read_text())  # type: ignore[no-any-return]


# --- DeepSeek V4 ------------------------------------------------------------------------------

# One latent in vLLM's default fp8_ds_mla layout (head_dim 512, qk_rope_head_dim 64):
# 448 fp8 + 64 x 2 B bf16 RoPE + 448 / 64 + 1 = 8 scale bytes = 584 B. The window keeps the
# last sliding_window 128 tokens: 128 x 584 = 74,752 B in every layer.
# Ratio 4 (compressed sparse attention): an entry per 4 tokens of 584 + the indexer's key
# 128 fp8 + 4 B scale = 716 B; the compressor's ring, coff 2: 8 slots of 2 x 2 x 512 fp32
# = 8 x 8,192 = 65,536 B, the indexer's compressor 8 slots of 2 x 2 x 128 fp32 = 16,384 B.
# Ratio 128: an entry per 128 tokens of 584 B; ring coff 1: 128 slots of 2 x 512 fp32
# = 128 x 4,096 = 524,288 B.
WINDOW_ONLY = CompressedLatent(0, 0, 74_752, 0)
CSA = CompressedLatent(4, 716, 74_752, 65_536 + 16_384)
HCA = CompressedLatent(128, 584, 74_752, 524_288)


def test_deepseek_v4_flash_layers() -> None:
    spec = import_config(FIXTURES / "deepseek-v4-flash").spec
    # compress_ratios [0, 0, then 4, 128 twenty times, 4] (its 44th entry is the MTP layer)
    assert spec.layers == (WINDOW_ONLY,) * 2 + (CSA, HCA) * 20 + (CSA,)
    assert dict(spec.layer_groups) == {WINDOW_ONLY: 2, CSA: 21, HCA: 20}


def test_deepseek_v4_flash_bytes() -> None:
    spec = import_config(FIXTURES / "deepseek-v4-flash").spec
    # per sequence, whatever the context: 43 windows x 74,752 = 3,214,336; 21 x 81,920
    # = 1,720,320; 20 x 524,288 = 10,485,760: 15,420,416 B
    assert estimate(spec, 0).kv_cache_bytes == 15_420_416
    # at 1,048,576 tokens: 21 x 262,144 entries x 716 = 3,941,597,184 and 20 x 8,192 x 584
    # = 95,682,560, plus 15,420,416 = 4,052,700,160 B
    assert estimate(spec, 1_048_576).kv_cache_bytes == 4_052_700_160
    # 1,027 tokens hold 256 whole groups of 4 and 8 of 128, as 1,024 do
    assert estimate(spec, 1_027).kv_cache_bytes == estimate(spec, 1_024).kv_cache_bytes
    # one more token after 3 closes a group of 4: 21 x 716 = 15,036 B; after 127 also one
    # of 128: 15,036 + 20 x 584 = 26,716 B; after 4 nothing
    assert estimate(spec, 3).bytes_per_token == 15_036
    assert estimate(spec, 127).bytes_per_token == 26_716
    assert estimate(spec, 4).bytes_per_token == 0


def test_deepseek_v4_explained() -> None:
    spec = import_config(FIXTURES / "deepseek-v4-flash").spec
    lines = explain(estimate(spec, 1_000))
    # 1,000 tokens: 250 whole groups of 4, 7 of 128; 716 x 250 + 156,672 = 335,672 B;
    # 2 x 74,752 = 149,504; 21 x 335,672 = 7,049,112; 20 x (7 x 584 + 599,040) = 12,062,560
    assert "716 B x 250 entries (1 per 4 tokens) + 156,672 B (window + rings) = 335,672 B" in (
        "\n".join(lines)
    )
    assert lines[-1] == "total: 149,504 + 7,049,112 + 12,062,560 = 19,261,176 B"


def test_deepseek_v4_cache_is_fixed_by_its_layout() -> None:
    spec = import_config(FIXTURES / "deepseek-v4-flash").spec
    # fp8_ds_mla whatever --kv-cache-dtype: the same bytes in an fp8 cache
    fp8 = estimate(spec, 65_536, kv_dtype="fp8")
    assert fp8.kv_cache_bytes == estimate(spec, 65_536).kv_cache_bytes
    # replicated on every rank (max_tp_shards 1): TP 8 keeps all of it
    assert CSA.shard(8) == CSA


def test_deepseek_v4_flash_parameters() -> None:
    config = _v4_config()
    # embeddings and head 2 x 129,280 x 4,096 = 1,059,061,760
    # attention: wq_a + wkv 4,096 x (1,024 + 512) = 6,291,456; q and kv norms 1,024 + 512;
    # wq_b 1,024 x 64 x 512 = 33,554,432; wo_a (64 x 512 / 8) x (8 x 1,024) = 33,554,432;
    # wo_b 8,192 x 4,096 = 33,554,432; sink 64: 106,956,352
    # MoE: 256 experts x 3 x 4,096 x 2,048 = 6,442,450,944; shared 25,165,824; router
    # 256 x 4,096 = 1,048,576 (+ 256 bias on the 40 layers past num_hash_layers 3)
    # two norms 8,192; hyper-connections 2 x (24 x 16,384 + 24 + 3) = 786,486
    # a layer before its compressors: 6,576,416,374
    # ratio 4: compressor ape 4 x 1,024 + wkv/wgate 4,096 x 2,048 + norm 512 = 8,393,216;
    # indexer wq_b 1,024 x 8,192 = 8,388,608, weights_proj 262,144, its compressor
    # 1,024 + 4,096 x 512 + 128 = 2,098,304: 19,142,272 in all
    # ratio 128: ape 128 x 512 + 4,096 x 1,024 + 512 = 4,260,352
    # final norm 4,096; the head's mixer 4 x 16,384 + 4 + 1 = 65,541
    total = (
        1_059_061_760
        + 43 * 6_576_416_374
        + 21 * 19_142_272
        + 20 * 4_260_352
        + 40 * 256
        + 4_096
        + 65_541
    )
    assert total == 284_332_240_471
    count = parameters_from_config(config)
    assert count.total == total
    # a token skips 250 of the 256 experts of 25,165,824 in each of the 43 layers
    assert count.total - count.inactive == total - 43 * 250 * 25_165_824 == 13_799_632_471


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"compress_ratios": None}, "compress_ratios: required, or layer_types"),
        (
            {"compress_ratios": None, "layer_types": ["sliding_attention", "full_attention"]},
            "layer_types: full_attention is not one of",
        ),
        ({"compress_ratios": [0, 4]}, "compress_ratios: has 2 entries but 43 layers"),
        ({"compress_ratios": [0, 8] + [4] * 42}, "compress_ratios.1: must be one of 0, 1, 4, 128"),
    ],
)
def test_deepseek_v4_refuses_what_vllm_cannot_build(change: dict[str, Any], message: str) -> None:
    config = {k: v for k, v in (_v4_config() | change).items() if v is not None}
    with pytest.raises(SpecError, match=message):
        _import(config)


def test_deepseek_v4_reads_transformers_layer_types() -> None:
    # transformers' DeepseekV4Config (and vLLM 0.33) name each layer's kind and map it to a
    # ratio through compress_rates; the layer types leave out the MTP layer
    ratios = _v4_config()["compress_ratios"][:43]
    names = {0: "sliding_attention", 4: "compressed_sparse_attention"}
    types = [names.get(ratio, "heavily_compressed_attention") for ratio in ratios]
    config = {k: v for k, v in _v4_config().items() if k != "compress_ratios"}
    spec = _import(config | {"layer_types": types})
    assert spec.layers == import_config(FIXTURES / "deepseek-v4-flash").spec.layers
    # a config's own rates win: every compressed sparse layer at 128 gives 41 HCA layers
    rates = {"compressed_sparse_attention": 128}
    spec = _import(config | {"layer_types": types, "compress_rates": rates})
    assert dict(spec.layer_groups) == {WINDOW_ONLY: 2, HCA: 41}


def test_deepseek_v4_spec_checks_its_keys() -> None:
    base = {"name": "x", "num_hidden_layers": 2, "num_attention_heads": 4, "torch_dtype": "bf16"}
    kinds = {"layer_types": ["compressed_attention"] * 2}
    with pytest.raises(SpecError, match="compress_ratios: absent"):
        parse_spec(base | kinds | {"head_dim": 512})
    full = base | kinds | {"head_dim": 512, "qk_rope_head_dim": 64, "sliding_window": 128}
    with pytest.raises(SpecError, match="index_head_dim: required"):
        parse_spec(full | {"compress_ratios": [0, 4]})
    # without the indexer, ratio 128 needs none: 584 B per 128 tokens
    spec = parse_spec(full | {"compress_ratios": [0, 128]})
    assert spec.layers[1] == HCA


def test_vllm_profile_refuses_the_compressed_caches() -> None:
    with pytest.raises(UnitError, match="compressed_attention layers"):
        page_spec(CSA, 1, "auto", 16, resolve_dtype("float32"))


# --- MiniMax M3 -------------------------------------------------------------------------------

# vLLM's MiniMaxM3TextConfig defaults: 60 layers, 64 heads, 4 K/V heads of 128, hidden 6,144,
# the first 3 layers dense, sparse_index_dim 128 with 4 indexer query heads.
M3 = {"model_type": "minimax_m3_text", "torch_dtype": "bfloat16"}


def test_minimax_m3_defaults_cache() -> None:
    spec = _import(M3)
    dense = FullAttention(4, 128, 128)
    sparse = SparseAttention(dense, 128)
    assert spec.layers == (dense,) * 3 + (sparse,) * 57
    # 60 x 2 x 4 x 128 x 2 B = 122,880, plus 57 indexer keys of 128 bf16 = 14,592: 137,472
    assert estimate(spec, 0).bytes_per_token == 137_472
    # the indexer's key stays bf16 in an fp8 cache: 60 x 1,024 + 14,592 = 76,032
    assert estimate(spec, 0, kv_dtype="fp8").bytes_per_token == 76_032
    # TP 4: one K/V head a rank, the indexer key whole: 2 x 128 x 2 + 256 = 768 a layer
    shard = sparse.shard(4)
    assert (
        shard.k_token_bytes(resolve_dtype("bf16")) + shard.v_token_bytes(resolve_dtype("bf16"))
        == 768
    )


def test_minimax_m3_defaults_parameters() -> None:
    # embeddings and head 2 x 200,064 x 6,144 = 2,458,386,432
    # attention: qkv 6,144 x (8,192 + 2 x 512) = 56,623,104, o 8,192 x 6,144 = 50,331,648,
    # per-head q/k norms 256: 106,955,008; a sparse layer adds the indexer's q (4 heads) and
    # key, 6,144 x 5 x 128 = 3,932,160, and its two norms 256: 110,887,424
    # dense MLP 3 x 6,144 x 12,288 = 226,492,416; MoE 128 x 3 x 6,144 x 3,072
    # = 7,247,757,312, shared 56,623,104, router 786,432 + bias 128: 7,305,166,976
    # layers 0-2: 3 x (106,955,008 + 226,492,416 + 12,288) = 1,000,379,136
    # layers 3-59: 57 x (110,887,424 + 7,305,166,976 + 12,288) = 422,715,801,216
    total = 2_458_386_432 + 1_000_379_136 + 422_715_801_216 + 6_144
    assert parameters_from_config(M3).total == total == 426_174_572_928


def test_minimax_m3_without_sparse_layers_is_plain_gqa() -> None:
    config = M3 | {
        "num_hidden_layers": 2,
        "moe_layer_freq": [0, 0],
        "sparse_attention_config": {"sparse_attention_freq": [0, 0]},
    }
    spec = _import(config)
    assert spec.layers == (FullAttention(4, 128, 128),) * 2
    # vLLM takes the indices of the non-zero entries: past the list, layers are plain GQA
    sparse = {"sparse_attention_freq": [1], "sparse_index_dim": 64}
    short = _import(config | {"sparse_attention_config": sparse})
    assert short.layers == (
        SparseAttention(FullAttention(4, 128, 128), 64),
        FullAttention(4, 128, 128),
    )
    # without sparse_index_dim vLLM's MiniMaxM3SparseAttention cannot start
    with pytest.raises(SpecError, match=r"sparse_attention_config\.sparse_index_dim: must be"):
        _import(
            config
            | {"sparse_attention_config": {"sparse_attention_freq": [1, 1], "sparse_index_dim": 0}}
        )


# --- registration -----------------------------------------------------------------------------


def test_classes_are_vllm_classes_and_registered() -> None:
    known = set(VLLM_CLASSES.read_text().split())
    by_type = {a.model_type: a for a in list_architectures()}
    for name, model_type in CLASSES.items():
        assert name in known, name
        assert name in by_type[model_type].architectures, name
        assert by_type[model_type].engines == ("vllm",)
