"""NVFP4 checkpoints counted from their safetensors headers: NVIDIA ModelOpt stores each
quantized Linear weight as a U8 tensor of two 4-bit values a byte (``X.weight``) beside one FP8
E4M3 scale per 16 values (``X.weight_scale``) and FP32 scalars (``weight_scale_2``,
``input_scale``); compressed-tensors names the packed tensor ``X.weight_packed``. Counting the U8
bytes as values halved those layers' parameters."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hub_server import safetensors

import kvplan

# One llama layer of hidden 4096, 32 heads of 128, 8 KV heads, MLP 14336, vocabulary 32000.
CONFIG = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "num_hidden_layers": 1,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "vocab_size": 32000,
    "torch_dtype": "bfloat16",
    "max_position_embeddings": 8192,
    "tie_word_embeddings": False,
}
# (out, in) of each Linear weight: q, k, v, o, gate, up, down
LINEARS = {
    "self_attn.q_proj": (4096, 4096),
    "self_attn.k_proj": (1024, 4096),
    "self_attn.v_proj": (1024, 4096),
    "self_attn.o_proj": (4096, 4096),
    "mlp.gate_proj": (14336, 4096),
    "mlp.up_proj": (14336, 4096),
    "mlp.down_proj": (4096, 14336),
}
# By hand: q and o 2 x 4096 x 4096 = 33,554,432; k and v 2 x 1024 x 4096 = 8,388,608; the MLP
# 3 x 14336 x 4096 = 176,160,768: 218,103,808 NVFP4 values. The rest in bf16: embeddings and
# lm_head 2 x 32000 x 4096 = 262,144,000, two layer norms and the final one 3 x 4096 = 12,288.
NVFP4_VALUES = 218_103_808
BF16_VALUES = 262_144_000 + 12_288


def _write(path: Path, tensors: dict[str, list[Any]]) -> None:
    """A safetensors file of ``tensors``: its header, then zeros (sparse) for the data."""
    blob, _ = safetensors(tensors)
    path.write_bytes(blob.head)
    with path.open("r+b") as f:
        f.truncate(blob.size)


def _checkpoint(tmp_path: Path, packed: str) -> Path:
    tensors: dict[str, list[Any]] = {
        "model.embed_tokens.weight": ["BF16", [32000, 4096]],
        "lm_head.weight": ["BF16", [32000, 4096]],
        "model.norm.weight": ["BF16", [4096]],
        "model.layers.0.input_layernorm.weight": ["BF16", [4096]],
        "model.layers.0.post_attention_layernorm.weight": ["BF16", [4096]],
    }
    for part, (out, inner) in LINEARS.items():
        base = f"model.layers.0.{part}."
        tensors[base + packed] = ["U8", [out, inner // 2]]
        tensors[base + "weight_scale"] = ["F8_E4M3", [out, inner // 16]]
        tensors[base + "weight_scale_2"] = ["F32", []]
        tensors[base + "input_scale"] = ["F32", []]
    folder = tmp_path / packed
    folder.mkdir()
    _write(folder / "model.safetensors", tensors)
    (folder / "config.json").write_text(json.dumps(CONFIG))
    return folder


@pytest.mark.parametrize("packed", ["weight", "weight_packed"])
def test_nvfp4_weights_are_two_values_a_byte(tmp_path: Path, packed: str) -> None:
    spec = kvplan.load_model(str(_checkpoint(tmp_path, packed)))
    assert spec.num_parameters == NVFP4_VALUES + BF16_VALUES
    assert spec.num_quantized_parameters == NVFP4_VALUES
    assert spec.weight_dtype == "nvfp4"
    # nvfp4: 9 B a block of 16 values -> 218,103,808 / 16 x 9 = 122,683,392 B; bf16 2 B a value
    weights = kvplan.model_weights(spec)
    assert weights.total_bytes == NVFP4_VALUES // 16 * 9 + BF16_VALUES * 2


def test_a_u8_tensor_without_its_fp4_scale_is_not_nvfp4(tmp_path: Path) -> None:
    # a U8 weight whose scale is not an eighth of its width stays one value a byte
    _write(
        tmp_path / "model.safetensors",
        {
            "model.embed_tokens.weight": ["BF16", [32000, 4096]],
            "model.layers.0.mlp.down_proj.weight": ["U8", [4096, 7168]],
            "model.layers.0.mlp.down_proj.weight_scale": ["F8_E4M3", [4096, 448]],
        },
    )
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    from kvplan.importers.safetensors import count_parameters, read_safetensors_header

    count = count_parameters(read_safetensors_header(tmp_path / "model.safetensors"), {})
    assert count.dtypes == {"BF16": 131_072_000, "U8": 29_360_128}
    assert count.num_quantized_parameters == 0
