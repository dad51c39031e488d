"""Layers that keep a per-token cache AND compressed entries, read from vLLM 0.32: GLM-5.3
(Glm5NextForCausalLM: an MLA latent a token, an fp8 indexer key per index_kpool tokens, a bf16
tail ring) built from transformers 5.24's Glm5NextTextConfig defaults, since no released
config.json could be found. Every figure is worked by hand from the config class and vLLM's
source (models/glm5next/common/model.py, attention.py, kda.py, mtp.py;
v1/kv_cache_interface.py CircularBufferSpec, AttentionSpec.page_size_bytes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kvplan import estimate, explain
from kvplan.engines.vllm_layout import page_spec
from kvplan.errors import SpecError, UnitError
from kvplan.importers import parameters_from_config
from kvplan.importers.config import spec_from_config
from kvplan.importers.registry import list_architectures
from kvplan.model.layers import MLALatent, RecurrentState, layer_term
from kvplan.model.sparse import IndexedLatent
from kvplan.model.spec import ModelSpec, parse_spec
from kvplan.planner.pool import StagePlan, _group, private_bytes
from kvplan.units import resolve_dtype

VLLM_CLASSES = Path(__file__).parent / "data" / "vllm_0.32_text_generation_architectures.txt"

CLASSES = {"Glm5NextForCausalLM": "glm5_next_text"}

BF16, FP32 = resolve_dtype("bfloat16"), resolve_dtype("float32")


def _import(config: dict[str, Any]) -> ModelSpec:
    data, _ = spec_from_config(config)
    return parse_spec({"name": "x", **data})


# --- GLM-5.3 (Glm5NextForCausalLM) ------------------------------------------------------------

# Glm5NextTextConfig defaults: 45 layers, layer i KDA unless i % 4 == 3 (11 MLA layers: 3, 7,
# ..., 43), hidden 4,096, kv_lora_rank 512, qk_rope_head_dim 0 (NoPE), index_head_dim 128,
# index_kpool 16; KDA 64 heads of 128, conv kernel 4.
GLM = {"model_type": "glm5_next_text", "torch_dtype": "bfloat16"}

# MLA layer (attention.py): the latent 512 + 0 values, bf16: 1,024 B a token. Indexer key
# (Glm5NextIndexerCache: head_dim 128 + 128 // 128 x 4 = 132 uint8, tokens_per_state 16):
# 132 B per 16 tokens. Tail ring (Glm5NextTailCache -> CircularBufferSpec, block_size
# ring = 16 x next_power_of_2(cdiv(16 + 0, 16)) = 16, num_kv_heads 2, head_size 128,
# head_size_v 0, bf16): page 2 x 16 x (128 + 0) x 2 = 8,192 B, one block a request.
GLM_MLA = IndexedLatent(MLALatent(512, 0), 128, 16)
# KDA layer (kda_state_shape): conv 3 positions x (q, k, v) 3 x 64 x 128 = 73,728 values in
# bf16 = 147,456 B; state 64 x 128 x 128 = 1,048,576 values in fp32 = 4,194,304 B.
GLM_KDA = RecurrentState("linear_attention", 73_728, 1_048_576, FP32, BF16)


def test_glm5next_layers() -> None:
    spec = _import(GLM)
    assert spec.layers == ((GLM_KDA,) * 3 + (GLM_MLA,)) * 11 + (GLM_KDA,)
    assert GLM_MLA.k_token_bytes(BF16) == 1_024
    assert GLM_MLA.pool_parts == (132, 16)
    assert GLM_MLA.state_bytes == 8_192
    assert GLM_KDA.state_bytes == 147_456 + 4_194_304


def test_glm5next_bytes() -> None:
    spec = _import(GLM)
    # per request, whatever the context: 34 KDA x 4,341,760 = 147,619,840 and 11 rings
    # x 8,192 = 90,112: 147,709,952 B
    assert estimate(spec, 0).kv_cache_bytes == 147_709_952
    # a token adds 11 latents x 1,024 = 11,264 B; the 16th token also closes a pool:
    # 11,264 + 11 x 132 = 12,716 B
    assert estimate(spec, 0).bytes_per_token == 11_264
    assert estimate(spec, 15).bytes_per_token == 12_716
    # 1,000 tokens: 11 x (1,000 x 1,024 + 62 pools x 132 + 8,192) = 11 x 1,040,376
    # = 11,444,136, plus 147,619,840 = 159,063,976 B
    assert estimate(spec, 1_000).kv_cache_bytes == 159_063_976
    # 1,048,576 tokens: 11 x (1,073,741,824 + 65,536 x 132 = 8,650,752 + 8,192)
    # = 11 x 1,082,400,768 = 11,906,408,448, plus 147,619,840 = 12,054,028,288 B
    assert estimate(spec, 1_048_576).kv_cache_bytes == 12_054_028_288
    # two sequences hold twice as much
    assert estimate(spec, 1_000, batch_size=2).kv_cache_bytes == 2 * 159_063_976


def test_glm5next_breakdown_and_explanation() -> None:
    est = estimate(_import(GLM), 1_000)
    mla = next(row for row in est.breakdown if row.kind == "indexed_attention")
    # the indexer keys count with K: 11 x (1,024,000 + 8,184); the rings are state
    assert (mla.k_bytes, mla.v_bytes, mla.state_bytes) == (11 * 1_032_184, 0, 11 * 8_192)
    assert sum(row.bytes for row in est.breakdown) == est.kv_cache_bytes
    text = "\n".join(explain(est))
    assert "indexer 132 B x 62 pools + ring 8,192 B = 1,040,376 B" in text


def test_glm5next_fp8_cache_keeps_the_indexer_key() -> None:
    # an fp8 cache halves the latent (512 B) but the indexer key is fp8 with its scale anyway
    est = estimate(_import(GLM), 16, kv_dtype="fp8")
    assert est.kv_cache_bytes == 147_709_952 + 11 * (16 * 512 + 132)


def test_glm5next_pool_pages_and_ideal_bytes() -> None:
    # vLLM's block of 64 tokens holds 64 latents and 64 / 16 = 4 indexer keys on one block
    # table: 64 x 1,024 + 4 x 132 = 66,064 B a page
    group = _group(GLM_MLA, 11, BF16, BF16, 64)
    assert group.page_bytes == 66_064
    # 100 tokens: 2 pages + the ring, per layer: 11 x (2 x 66,064 + 8,192) = 1,543,520 B
    assert private_bytes((group,), 100, 0, 64) == 1_543_520
    stage = StagePlan(0, 0, 10, 0, 0, 0, 0, 0, 0, None, 0, None, (group,))
    # ideal: 11 x (100 x 1,024 + 6 pools x 132 + 8,192) = 11 x 111,384 = 1,225,224 B
    assert stage.ideal_bytes(100) == 1_225_224


def test_layer_term_carries_the_second_growing_part() -> None:
    term = layer_term(GLM_MLA, 11, BF16, BF16)
    assert (term.k_token_bytes, term.pool_bytes, term.tokens_per_pool) == (1_024, 132, 16)
    assert (term.state_bytes, term.max_tokens, term.tokens_per_entry) == (8_192, None, 1)


def test_glm5next_defaults_parameters() -> None:
    # embeddings and head 2 x 154,880 x 4,096 = 1,268,776,960; final norm 4,096
    # KDA (P = 64 x 128 = 8,192): in_proj 4,096 x (3 x 8,192 + 64 + 2 x 128) = 101,974,016,
    # f_b and g_b 2 x 128 x 8,192 = 2,097,152, dt_bias 8,192 + conv 3 x 8,192 x 4 = 98,304
    # + A_log 64, o_norm 128, o_proj 8,192 x 4,096 = 33,554,432: 137,732,288
    # MLA: qkv_a 4,096 x (1,536 + 512) = 8,388,608, norms 1,536 + 512, q_b 1,536 x 64 x 256
    # = 25,165,824, kv_b 512 x 64 x 512 = 16,777,216, o 16,384 x 4,096 = 67,108,864:
    # 117,442,560; indexer wq_b 1,536 x 32 x 128 = 6,291,456, wk + weights 4,096 x 160
    # = 655,360, k_norm 256, kpool gate 128 x 4,096 = 524,288, ape 16 x 128 = 2,048:
    # 7,473,408; MLA layer 124,915,968
    # dense MLP 3 x 4,096 x 12,288 = 150,994,944; MoE 288 x 3 x 4,096 x 2,048
    # = 7,247,757,312, shared 25,165,824, router 288 x 4,096 = 1,179,648: 7,274,102,784
    # KDA dense (layers 0-2): 3 x (137,732,288 + 150,994,944 + 8,192) = 866,206,272
    # KDA MoE: 31 x (137,732,288 + 7,274,102,784 + 8,192) = 229,767,141,184
    # MLA MoE: 11 x (124,915,968 + 7,274,102,784 + 8,192) = 81,389,296,384
    total = 1_268_776_960 + 4_096 + 866_206_272 + 229_767_141_184 + 81_389_296_384
    assert parameters_from_config(GLM).total == total == 313_291_424_896


def test_glm5next_parameters_with_mhc_router_bias_and_mtp() -> None:
    # mhc: per layer 2 mixers of (2 + 4) x 4 = 24 rows x 4 x 4,096 = 393,216 + 24 bases
    # + 3 scales = 786,486, x 45 = 35,391,870; noaux_tc: 288 biases x 42 MoE layers = 12,096;
    # one MTP layer: MLA 124,915,968 + MoE 7,274,102,784 + bias 288 + 5 norms 20,480
    # + eh_proj 8,192 x 4,096 = 33,554,432: 7,432,593,952
    config = GLM | {"mhc": True, "topk_method": "noaux_tc", "num_nextn_predict_layers": 1}
    total = 313_291_424_896 + 35_391_870 + 12_096 + 7_432_593_952
    assert parameters_from_config(config).total == total == 320_759_422_814


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"index_topk": None, "layer_types": ["full_attention"] * 45}, "index_topk: null"),
        ({"qk_rope_head_dim": 64}, "qk_rope_head_dim: must be 0"),
        ({"index_kpool": 1}, "index_kpool"),
        ({"layer_types": ["sliding_attention"] * 45}, r"layer_types\.0: 'sliding_attention'"),
        ({"layer_types": ["linear_attention"]}, "layer_types: has 1 entries but 45 layers"),
    ],
)
def test_glm5next_refuses_what_it_cannot_size(change: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        _import(GLM | change)


def test_glm5next_reads_full_attention_as_indexed() -> None:
    kinds = ["linear_attention", "full_attention"]
    spec = _import(GLM | {"num_hidden_layers": 2, "layer_types": kinds})
    assert spec.layers == (GLM_KDA, GLM_MLA)


def test_vllm_profile_refuses_the_indexed_layers() -> None:
    with pytest.raises(UnitError, match="indexed_attention layers are not modelled"):
        page_spec(GLM_MLA, 1, "auto", 64, FP32)


# --- registration -----------------------------------------------------------------------------


def test_classes_are_vllm_classes_and_registered() -> None:
    known = set(VLLM_CLASSES.read_text().split())
    by_type = {a.model_type: a for a in list_architectures()}
    for name, model_type in CLASSES.items():
        assert name in known, name
        assert name in by_type[model_type].architectures, name
        assert by_type[model_type].engines == ("vllm",)
