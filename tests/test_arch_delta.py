"""Delta-attention and indexed-MLA classes of vLLM 0.32: Kimi Linear (KimiLinearForCausalLM,
Kimi delta attention beside MLA) from its released config.json; Ling 3.0
(BailingMoeV3ForCausalLM, KDA beside MLA) and HY V4 (HYV4ForCausalLM, MLA with a lightning
indexer on some layers) from configs built here out of their config classes' defaults (no
released file of theirs is bundled); K2 Horizon (K2HorizonForCausalLM, GQA with MoVA value
experts) from a config built here with the keys vLLM reads (it has no config class outside its
checkpoint). Every figure is worked by hand in a comment from the config and vLLM's source
(models/kimi_k3, bailing_moe_v3.py, models/hy_v4, k2_horizon.py, mamba_utils.py
``kda_state_shape`` and ``kda_state_dtype``, kv_cache_interface.py ``MLAAttentionSpec``)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from kvplan.engines.vllm import layout
from kvplan.engines.vllm_config import VllmConfig
from kvplan.errors import SpecError
from kvplan.importers import parameters_from_config
from kvplan.importers.config import spec_from_config
from kvplan.importers.registry import list_architectures
from kvplan.model.layers import MLALatent, RecurrentState
from kvplan.model.spec import ModelSpec, parse_spec
from kvplan.units import resolve_dtype

FIXTURES = Path(__file__).parent / "fixtures" / "hf"
VLLM_CLASSES = Path(__file__).parent / "data" / "vllm_0.32_text_generation_architectures.txt"
BF16 = resolve_dtype("bfloat16")

#: The vLLM classes this file registers.
CLASSES = (
    "KimiLinearForCausalLM",
    "BailingMoeV3ForCausalLM",
    "HYV4ForCausalLM",
    "K2HorizonForCausalLM",
)


def _config(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name / "config.json").read_text())  # type: ignore[no-any-return]


def _import(config: dict[str, Any]) -> ModelSpec:
    data, _ = spec_from_config(config)
    return parse_spec({"name": "x", **data})


def _token_bytes(spec: ModelSpec) -> int:
    return sum(layer.k_token_bytes(BF16) + layer.v_token_bytes(BF16) for layer in spec.layers)


def _state_bytes(spec: ModelSpec) -> int:
    return sum(layer.state_bytes for layer in spec.layers)


def test_every_class_is_a_vllm_class_and_registered() -> None:
    known = set(VLLM_CLASSES.read_text().split())
    registered = {c for a in list_architectures() for c in a.architectures}
    assert set(CLASSES) <= known
    assert set(CLASSES) <= registered


def test_kimi_linear_48b_cache() -> None:
    spec = _import(_config("kimi-linear-48b-a3b-instruct"))
    # kda_layers 1-based: layers 4, 8, ..., 24 and 27 (0-based 3, 7, 11, 15, 19, 23, 26) are
    # the 7 MLA layers, the other 20 run KDA
    mla = [i for i, layer in enumerate(spec.layers) if isinstance(layer, MLALatent)]
    assert mla == [3, 7, 11, 15, 19, 23, 26]
    assert sum(isinstance(layer, RecurrentState) for layer in spec.layers) == 20
    # MLA: one latent of kv_lora_rank 512 + qk_rope_head_dim 64 a token, no factor 2 and no
    # heads (MLAAttentionSpec, num_kv_heads 1, head_size 576): 7 x 576 x 2 B = 8,064 B
    assert _token_bytes(spec) == 7 * (512 + 64) * 2 == 8064
    # KDA (kda_state_shape): conv (32 x 128 + 2 x 32 x 128 = 12,288 channels) x (4 - 1) =
    # 36,864 values in bf16 = 73,728 B, state 32 heads x 128 x 128 = 524,288 values in fp32 =
    # 2,097,152 B; 2,170,880 B a layer, x 20 = 43,417,600 B a sequence
    assert _state_bytes(spec) == 20 * (36_864 * 2 + 524_288 * 4) == 43_417_600
    # the file states model_max_length 1,048,576 (vLLM accepts --max-model-len up to it) and
    # no max_position_embeddings (KimiLinearConfig's 4,096, vLLM's default length)
    assert spec.max_position_embeddings == 1_048_576


def test_kimi_linear_48b_vllm_pages() -> None:
    """vLLM 0.32's pages: the KDA state page is 2,170,880 B (fp32 state, bf16 tail), so the
    MLA block grows to hold as much: cdiv(2,170,880, 1,152) = 1,885 tokens, rounded up to a
    multiple of 16 = 1,888; the 20 KDA and 7 MLA layers share groups of 7 (3 KDA groups, one
    padding layer, and one MLA group)."""
    spec = _import(_config("kimi-linear-48b-a3b-instruct"))
    _, groups, group_size, padding = layout(spec, VllmConfig(max_model_len=4096))
    kinds = [(page.kind, page.token_bytes, page.block_size) for page, _ in groups]
    assert kinds == [("mamba", 2_170_880, 1888)] * 3 + [("mla", 1152, 1888)]
    assert (group_size, padding) == (7, 1)


def test_kimi_linear_48b_parameters() -> None:
    """The count, module by module (hidden 2,304, vocabulary 163,840, untied):

    - embeddings and head: 2 x 163,840 x 2,304 = 754,974,720
    - a KDA mixer (32 heads of 128: width 4,096; kernel 4): q, k, v 3 x 2,304 x 4,096 =
      28,311,552; beta 2,304 x 32 = 73,728; f_a 2,304 x 128 = 294,912; f_b 128 x 4,096 =
      524,288; g_a 294,912; g_b 524,288; dt_bias 4,096; conv1d 3 x 4,096 x 4 = 49,152;
      A_log 32; o_norm 128; o_proj 4,096 x 2,304 = 9,437,184: 39,514,272
    - an MLA mixer (32 heads, nope 128, rope 64, v 128, no q_lora_rank): q_proj 2,304 x
      6,144 = 14,155,776; kv_a 2,304 x 576 = 1,327,104; its norm 512; kv_b 512 x 8,192 =
      4,194,304; o_proj 4,096 x 2,304 = 9,437,184: 29,114,880
    - layer 0's dense MLP: 3 x 2,304 x 9,216 = 63,700,992
    - an MoE layer: 256 experts x 3 x 2,304 x 1,024 = 1,811,939,328, one shared expert
      7,077,888, router 256 x 2,304 + correction bias 256 = 590,080: 1,819,607,296
    - two norms a layer 4,608; final norm 2,304

    754,974,720 + 20 x 39,514,272 + 7 x 29,114,880 + 63,700,992 + 26 x 1,819,607,296
    + 27 x 4,608 + 2,304 = 49,122,681,728."""
    count = parameters_from_config(_config("kimi-linear-48b-a3b-instruct"))
    assert count.total == 49_122_681_728
    # experts a token skips: 26 layers x (256 - 8) x 7,077,888
    assert count.inactive == 26 * 248 * 7_077_888


def test_kimi_linear_refusals() -> None:
    config = _config("kimi-linear-48b-a3b-instruct")
    bad = copy.deepcopy(config)
    bad["linear_attn_config"]["kda_layers"] = [0, 1]
    with pytest.raises(SpecError, match=r"linear_attn_config\.kda_layers: must be an integer"):
        spec_from_config(bad)
    bad = copy.deepcopy(config)
    del bad["kv_lora_rank"]
    with pytest.raises(SpecError, match="kv_lora_rank: required by the MLA layers"):
        spec_from_config(bad)
    bad = copy.deepcopy(config)
    del bad["linear_attn_config"]["num_heads"]
    with pytest.raises(SpecError, match=r"linear_attn_config\.num_heads"):
        spec_from_config(bad)


#: Ling 3.0 from transformers' BailingHybridConfig defaults, plus the two keys vLLM's
#: bailing_moe_v3.py needs that the class lacks (it refuses no_kda_lora false, and reads
#: moe_shared_expert_intermediate_size, here the routed experts' 768).
LING_3_DEFAULTS: dict[str, Any] = {
    "architectures": ["BailingMoeV3ForCausalLM"],
    "model_type": "bailing_hybrid",
    "torch_dtype": "bfloat16",
    "no_kda_lora": True,
    "moe_shared_expert_intermediate_size": 768,
}


def test_ling_3_cache_from_defaults() -> None:
    spec = _import(LING_3_DEFAULTS)
    # 42 layers in groups of 6: MLA on layers 5, 11, ..., 41 (42 // 6 x 6 = 42: no tail)
    mla = [i for i, layer in enumerate(spec.layers) if isinstance(layer, MLALatent)]
    assert mla == [5, 11, 17, 23, 29, 35, 41]
    # 7 MLA layers x (512 + 64) x 2 B = 8,064 B a token
    assert _token_bytes(spec) == 7 * 576 * 2 == 8064
    # 35 KDA layers of 32 heads x 128 (num_attention_heads, head_dim), kernel 4: conv
    # 3 x 4,096 x 3 = 36,864 bf16 values, state 32 x 128 x 128 = 524,288 fp32 values
    assert _state_bytes(spec) == 35 * (36_864 * 2 + 524_288 * 4) == 75_980_800
    assert spec.max_position_embeddings == 262144


def test_ling_3_parameters_from_defaults() -> None:
    """hidden 2,560, vocabulary 157,184 (untied), 32 heads:

    - embeddings and head: 2 x 157,184 x 2,560 = 804,782,080
    - KDA (width 4,096): q, k, v and b 2,560 x (3 x 4,096 + 32) = 31,539,200; f_proj and
      g_proj 2 x 2,560 x 4,096 = 20,971,520; dt_bias 4,096, conv 3 x 4,096 x 4 = 49,152,
      A_log 32; o_norm 128; o_proj 10,485,760: 63,049,888
    - MLA (no q_lora_rank, no gate): q_proj 2,560 x 6,144 = 15,728,640; kv_a 2,560 x 576 =
      1,474,560; norm 512; kv_b 512 x 8,192 = 4,194,304; dense 10,485,760: 31,883,776
    - first_k_dense_replace 2 dense MLPs of 3 x 2,560 x 6,144 = 47,185,920
    - 40 MoE layers: 512 experts x 3 x 2,560 x 768 = 3,019,898,880, shared 5,898,240,
      router 512 x 2,560 + bias 512 = 1,311,232: 3,027,108,352
    - norms 42 x 5,120 + 2,560

    804,782,080 + 35 x 63,049,888 + 7 x 31,883,776 + 2 x 47,185,920 + 40 x 3,027,108,352
    + 215,040 + 2,560 = 124,413,638,112."""
    count = parameters_from_config(LING_3_DEFAULTS)
    assert count.total == 124_413_638_112
    assert count.inactive == 40 * (512 - 8) * 5_898_240


def test_ling_3_tail_layers_are_mla() -> None:
    # 22 layers in groups of 4: 3, 7, 11, 15, 19 end a group; 20 and 21 are past the last
    # whole group (22 // 4 x 4 = 20), so vLLM builds them as MLA too
    spec = _import({**LING_3_DEFAULTS, "num_hidden_layers": 22, "layer_group_size": 4})
    mla = [i for i, layer in enumerate(spec.layers) if isinstance(layer, MLALatent)]
    assert mla == [3, 7, 11, 15, 19, 20, 21]


def test_ling_3_refusals() -> None:
    # Ling 2.5's class has its own rule (tests/test_arch_extend.py); another class is refused
    with pytest.raises(SpecError, match=r"BailingMoeV9ForCausalLM is not read"):
        spec_from_config({**LING_3_DEFAULTS, "architectures": ["BailingMoeV9ForCausalLM"]})
    with pytest.raises(SpecError, match=r"no_kda_lora: vLLM 0\.32 serves"):
        spec_from_config({**LING_3_DEFAULTS, "no_kda_lora": False})


#: HY V4 from vLLM's HYV4Config defaults (transformers_utils/configs/hy_v4.py, the class vLLM
#: registers for hy_v4), which leave layer_types unset: no layer is sparse.
HY_V4_DEFAULTS: dict[str, Any] = {
    "architectures": ["HYV4ForCausalLM"],
    "model_type": "hy_v4",
    "torch_dtype": "bfloat16",
}
#: The same with every layer sparse, as transformers' HYV4Config would fill layer_types.
HY_V4_SPARSE = {**HY_V4_DEFAULTS, "layer_types": ["deepseek_sparse_attention"] * 34}


def test_hy_v4_cache_from_defaults() -> None:
    spec = _import(HY_V4_DEFAULTS)
    # 34 MLA layers of kv_lora_rank 512 + qk_rope_head_dim 64, no indexer: 34 x 576 x 2 B
    assert all(isinstance(layer, MLALatent) and not layer.index_head_dim for layer in spec.layers)
    assert _token_bytes(spec) == 34 * 576 * 2 == 39_168
    assert _state_bytes(spec) == 0


def test_hy_v4_sparse_layers_keep_an_indexer_key_unless_shared() -> None:
    spec = _import(HY_V4_SPARSE)
    # indexer_types default: full on layer 0 and every i with (i - 1) % 4 == 0 (1, 5, ...,
    # 33), shared elsewhere: 10 layers build an indexer and cache its key of
    # index_head_dim 128 in fp8 with one fp32 scale: 128 + 4 = 132 B a token
    indexed = [i for i, layer in enumerate(spec.layers) if layer.index_head_dim]
    assert indexed == [0, 1, 5, 9, 13, 17, 21, 25, 29, 33]
    assert _token_bytes(spec) == 34 * 1152 + 10 * 132 == 40_488
    shared = {**HY_V4_SPARSE, "indexer_types": ["full"] * 34}
    assert _token_bytes(_import(shared)) == 34 * (1152 + 132)


def test_hy_v4_parameters_from_defaults() -> None:
    """hidden 2,816, vocabulary 120,832 (untied), 32 heads, 34 layers:

    - embeddings and head: 2 x 120,832 x 2,816 = 680,525,824
    - MLA: q_a 2,816 x 1,536 = 4,325,376, its norm 1,536, q_b 1,536 x 32 x 256 = 12,582,912;
      kv_a 2,816 x 576 = 1,622,016, its norm 512, kv_b 512 x 32 x 448 = 7,340,032; the
      elementwise gate 2,816 x 8,192 = 23,068,672; 32 sinks; o_proj 8,192 x 2,816 =
      23,068,672: 72,009,760
    - two iHC boundaries a layer, each hc_fn 4 x 2,816 x 8 = 90,112 + 2 scales + 8 biases:
      180,244; two norms 5,632; a layer's base 72,195,636
    - layer 0's dense MLP 3 x 2,816 x 6,912 = 58,392,576; 33 MoE layers of 256 experts x
      3 x 2,816 x 768 = 1,660,944,384, a shared expert 6,488,064, router 720,896 + bias
      256: 1,668,153,600
    - the iHC head 4 x 2,816 x 4 + 4 + 1 = 45,061; final norm 2,816

    680,525,824 + 34 x 72,195,636 + 58,392,576 + 33 x 1,668,153,600 + 45,061 + 2,816
    = 58,242,686,701. Each of the sparse model's 10 indexers adds wq_b 1,536 x 2,048 =
    3,145,728, wk and weights_proj 2,816 x 144 = 405,504 and the LayerNorm 256: 3,551,488."""
    assert parameters_from_config(HY_V4_DEFAULTS).total == 58_242_686_701
    assert parameters_from_config(HY_V4_SPARSE).total == 58_242_686_701 + 10 * 3_551_488


def test_hy_v4_refusals() -> None:
    with pytest.raises(SpecError, match=r"indexer_types\.2: must be full or shared"):
        spec_from_config({**HY_V4_SPARSE, "indexer_types": ["full", "full", "x"] + ["full"] * 31})
    with pytest.raises(SpecError, match=r"layer_types: has 2 entries but 34 layers"):
        spec_from_config({**HY_V4_DEFAULTS, "layer_types": ["sparse", "sparse"]})


#: K2 Horizon has no config class (remote code) and no released config.json is stored here:
#: a MoVA config built with the keys vLLM's k2_horizon.py reads, shaped as public ports
#: describe K2-Horizon-36B (48 layers, 3 dense, 100 experts, 64 value experts).
K2_HORIZON_MOVA: dict[str, Any] = {
    "architectures": ["K2HorizonForCausalLM"],
    "model_type": "k2_horizon",
    "torch_dtype": "bfloat16",
    "num_hidden_layers": 48,
    "hidden_size": 2560,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "intermediate_size": 6144,
    "moe_intermediate_size": 768,
    "num_experts": 100,
    "num_experts_per_tok": 8,
    "num_shared_experts": 0,
    "mova_num_experts": 64,
    "mova_num_experts_per_tok": 4,
    "mlp_only_layers": [0, 1, 2],
    "decoder_sparse_step": 1,
    "vocab_size": 250624,
    "tie_word_embeddings": False,
    "layernorm_num_groups": 2,
    "query_key_norm": True,
    "attention_bias": False,
    "attention_gate_func": "softplus",
    "moe_gate_bias": True,
}


def test_k2_horizon_cache() -> None:
    # every layer, MoVA or not, caches one K and one V of 8 heads x 128 (vLLM Attention):
    # 48 x 2 x 8 x 128 x 2 B = 196,608 B a token
    spec = _import(K2_HORIZON_MOVA)
    assert _token_bytes(spec) == 48 * 2 * 8 * 128 * 2 == 196_608
    assert _state_bytes(spec) == 0


def test_k2_horizon_parameters() -> None:
    """hidden 2,560, q 32 x 128 = 4,096, kv 8 x 128 = 1,024, vocabulary 250,624 (untied):

    - embeddings and head: 2 x 250,624 x 2,560 = 1,283,194,880
    - layers 0-2 (mlp_only_layers): qkv 2,560 x 6,144 = 15,728,640, o 10,485,760, q/k norms
      5,120, softplus gate 2,560 x 4,096 = 10,485,760, MLP 3 x 2,560 x 6,144 = 47,185,920:
      83,891,200
    - layers 3-47, MoVA: qk 2,560 x 5,120 = 13,107,200, value router 2,560 x 64 + 64 bias =
      163,904, 64 value experts x 2,560 x 1,024 = 167,772,160, o, norms and gate as above
      (20,976,640): 202,019,904; 100 experts x 3 x 2,560 x 768 = 589,824,000, router
      256,000 + 100 bias: 792,100,004 a layer
    - two norms a layer 48 x 5,120 = 245,760; final norm 2,560

    1,283,194,880 + 3 x 83,891,200 + 45 x 792,100,004 + 245,760 + 2,560 = 37,179,616,980.
    A token skips 92 of the 100 experts and 60 of the 64 value experts in each of 45 layers:
    45 x (92 x 5,898,240 + 60 x 2,621,440)."""
    count = parameters_from_config(K2_HORIZON_MOVA)
    assert count.total == 37_179_616_980
    assert count.inactive == 45 * (92 * 5_898_240 + 60 * 2_621_440)
