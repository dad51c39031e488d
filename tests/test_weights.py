from __future__ import annotations

import pytest

import kvplan
from kvplan.errors import UnitError
from kvplan.model.weights import model_weights, pipeline_partition, stage_weight_bytes

LLAMA_8B_PARAMS = 8_030_261_248
LLAMA_8B_EMBED = 128_256 * 4096  # vocab x hidden, untied: the head is as large


def test_llama_8b_bf16() -> None:
    w = model_weights(kvplan.load_model("llama-3.1-8b"))
    assert w.total_bytes == LLAMA_8B_PARAMS * 2  # 16,060,522,496 B = 14.96 GiB
    assert w.embedding_bytes == w.lm_head_bytes == LLAMA_8B_EMBED * 2


def test_dtype_override() -> None:
    w = model_weights(kvplan.load_model("llama-3.1-8b"), dtype="float32")
    assert w.total_bytes == LLAMA_8B_PARAMS * 4


@pytest.mark.parametrize(
    ("quantization", "layer_bytes"),
    [
        # the 6,979,588,096 non-embedding parameters in each format; embeddings stay bf16
        pytest.param("fp8", 6_979_588_096, id="fp8: 1 B each"),
        pytest.param("int4", 6_979_588_096 // 128 * 66, id="int4: 66 B per 128"),
        pytest.param("awq", 6_979_588_096 // 256 * 133, id="awq: 133 B per 256"),
        pytest.param("nvfp4", 6_979_588_096 // 16 * 9, id="nvfp4: 9 B per 16"),
        pytest.param("mxfp4", 6_979_588_096 // 32 * 17, id="mxfp4: 17 B per 32"),
        pytest.param("int8", 6_979_588_096 // 4096 * 4100, id="int8: +fp32 scale per 4096"),
    ],
)
def test_quantization_counts_scales(quantization: str, layer_bytes: int) -> None:
    w = model_weights(kvplan.load_model("llama-3.1-8b"), quantization=quantization)
    assert LLAMA_8B_PARAMS - 2 * LLAMA_8B_EMBED == 6_979_588_096
    assert w.layers_bytes == layer_bytes
    assert w.embedding_bytes + w.lm_head_bytes == 2 * LLAMA_8B_EMBED * 2


def test_gpt_oss_mixed_checkpoint() -> None:
    # 19,110,297,600 expert weights in MXFP4 (17 B per 32), the rest in bf16
    spec = kvplan.load_model("gpt-oss-20b")
    w = model_weights(spec)
    experts = 19_110_297_600
    embed = 201_088 * 2880
    rest = 20_910_000_000 - experts - 2 * embed
    assert w.layers_bytes == experts // 32 * 17 + rest * 2
    assert w.total_bytes == experts // 32 * 17 + (20_910_000_000 - experts) * 2


def test_deepseek_fp8_block_scales() -> None:
    # 669,065,609,216 fp8 weights with one fp32 scale per 128 x 128 block
    spec = kvplan.load_model("deepseek-v3")
    w = model_weights(spec)
    fp8 = 669_065_609_216
    bf16 = (spec.num_parameters or 0) - fp8
    assert w.total_bytes == -(-fp8 // 16384) * 16388 + bf16 * 2


def test_unknown_quantization() -> None:
    with pytest.raises(UnitError, match="allowed: fp8, int8, int4, awq, gptq, mxfp4, nvfp4"):
        model_weights(kvplan.load_model("llama-3.1-8b"), quantization="q3")


@pytest.mark.parametrize(
    ("layers", "stages", "parts"),
    [
        (32, 1, (32,)),
        (32, 2, (16, 16)),
        (32, 3, (11, 11, 10)),  # remainder 2: second-to-last, then third-to-last
        (22, 4, (5, 6, 6, 5)),
        (61, 4, (15, 15, 16, 15)),
        (61, 2, (31, 30)),
        (5, 3, (2, 2, 1)),
    ],
)
def test_pipeline_partition_as_vllm(layers: int, stages: int, parts: tuple[int, ...]) -> None:
    assert pipeline_partition(layers, stages) == parts
    assert sum(parts) == layers


def test_pipeline_partition_refuses_more_stages_than_layers() -> None:
    with pytest.raises(UnitError):
        pipeline_partition(4, 5)


def test_stage_weights_add_embeddings_and_head() -> None:
    w = model_weights(kvplan.load_model("llama-3.1-8b"))
    layers = 6_979_588_096 * 2
    first = stage_weight_bytes(w, 32, 16, True, False, 1)
    last = stage_weight_bytes(w, 32, 16, False, True, 1)
    assert first == layers // 2 + LLAMA_8B_EMBED * 2
    assert last == layers // 2 + LLAMA_8B_EMBED * 2
    assert stage_weight_bytes(w, 32, 32, True, True, 4) == -(-LLAMA_8B_PARAMS * 2 // 4)
