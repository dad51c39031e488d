"""TensorRT-LLM profile: budget, per-token bytes, 32-token blocks and caps, by hand."""

from __future__ import annotations

import pytest

from kvplan import custom_gpu, load_model
from kvplan.engines import trtllm
from kvplan.engines.base import UnknownEngineError
from kvplan.errors import UnitError
from kvplan.units import GiB, resolve_dtype

LLAMA8B = load_model("llama-3.1-8b")
DEEPSEEK_V3 = load_model("deepseek-v3")
GPU80 = custom_gpu(80 * GiB)
BF16 = resolve_dtype("bfloat16")


@pytest.mark.parametrize(
    ("spec", "tp", "dtype", "expected"),
    [
        pytest.param(LLAMA8B, 1, "bfloat16", 131072, id="2 x 32 x (128 x 8 // 1) x 2 B = 131072"),
        pytest.param(LLAMA8B, 2, "bfloat16", 65536, id="tp2: 2 x 32 x 512 x 2 = 65536"),
        pytest.param(LLAMA8B, 16, "bfloat16", 8192, id="tp16: 128 x 8 // 16 = 64 -> 8192"),
        pytest.param(LLAMA8B, 1, "fp8", 65536, id="fp8 counts 1 B: 2 x 32 x 1024 = 65536"),
        pytest.param(LLAMA8B, 1, "float32", 131072, id="float32 still counted as 2 B"),
        pytest.param(DEEPSEEK_V3, 8, "bfloat16", 70272, id="mla: 1 x 61 x (512+64) x 2 = 70272"),
    ],
)
def test_estimated_bytes_per_token(spec: object, tp: int, dtype: str, expected: int) -> None:
    assert isinstance(spec, type(LLAMA8B))
    got = trtllm.estimated_bytes_per_token(spec.layers, tp=tp, dtype=resolve_dtype(dtype))
    assert got == expected


def test_pool_rounds_heads_up_per_rank() -> None:
    # 8 KV heads at TP 16: the pool holds ceil(8/16) = 1 head: 2 x 32 x 1 x 128 x 2 B = 16384
    assert trtllm.pool_bytes_per_token(LLAMA8B.layers, tp=16, dtype=BF16) == 16384


def test_budget_blocks_and_log_line() -> None:
    result = trtllm.kv_cache(LLAMA8B, GPU80, peak_bytes=20 * GiB, temporary_kv_bytes=GiB)
    available = (80 - 20 + 1) * GiB * 9 // 10  # int(61 GiB x 0.9) = 58,948,426,137
    tokens = available // 131072  # 449,740
    blocks = tokens // 32  # 14,054
    assert result.engine_log["available_kv_mem_bytes"] == available == 58_948_426_137
    assert result.engine_log["max_tokens"] == tokens == 449_740
    assert result.num_blocks == blocks == 14_054
    assert result.kv_cache_tokens == blocks * 32 == 449_728
    assert result.kv_cache_bytes == 449_728 * 131072
    assert result.log_lines == (
        "Number of tokens per block: 32.",
        "[MemUsageChange] Allocated 54.90 GiB for max tokens in paged KV cache (449728).",
    )


def test_fraction_of_free_not_of_total() -> None:
    # peak 40 GiB, no temporary cache, fraction 0.5: int(40 GiB x 0.5) = 20 GiB
    result = trtllm.kv_cache(LLAMA8B, GPU80, peak_bytes=40 * GiB, free_gpu_memory_fraction=0.5)
    assert result.engine_log["available_kv_mem_bytes"] == 20 * GiB
    # 20 GiB / 128 KiB = 163,840 tokens = 5,120 blocks of 32
    assert result.num_blocks == 5120


def test_max_tokens_cap() -> None:
    result = trtllm.kv_cache(LLAMA8B, GPU80, peak_bytes=20 * GiB, max_tokens=1000)
    # min(available, 1000 x 131072) -> 1000 tokens -> 1000 // 32 = 31 blocks = 992 tokens
    assert result.engine_log["max_tokens"] == 1000
    assert result.num_blocks == 31
    assert result.kv_cache_tokens == 992


def test_byte_cap() -> None:
    result = trtllm.kv_cache(LLAMA8B, GPU80, peak_bytes=20 * GiB, max_gpu_total_bytes=131072 * 100)
    # 100 tokens of 131,072 B -> 3 blocks of 32 = 96 tokens
    assert result.num_blocks == 3
    assert result.kv_cache_tokens == 96


def test_tokens_per_block() -> None:
    result = trtllm.kv_cache(
        LLAMA8B, GPU80, peak_bytes=20 * GiB, max_tokens=1000, tokens_per_block=64
    )
    assert result.num_blocks == 1000 // 64 == 15
    assert result.block_size == 64


def test_mla_latent_pool() -> None:
    result = trtllm.kv_cache(DEEPSEEK_V3, GPU80, peak_bytes=40 * GiB, max_tokens=3200)
    # 3200 tokens -> 100 blocks; 3200 x 61 x 576 x 2 B
    assert result.num_blocks == 100
    assert result.kv_cache_bytes == 3200 * 61 * 576 * 2


def test_attention_window_clamped_to_pool() -> None:
    capped = trtllm.kv_cache(
        LLAMA8B, GPU80, peak_bytes=20 * GiB, max_tokens=8224, max_attention_window=[131072]
    )
    # 8224 tokens = 257 blocks of 32; the window cannot exceed the pool: 8224
    assert capped.engine_log["max_attention_window"] == 8224
    small = trtllm.kv_cache(LLAMA8B, GPU80, peak_bytes=20 * GiB, max_attention_window=[4096])
    assert small.engine_log["max_attention_window"] == 4096


def test_vswa_refused() -> None:
    with pytest.raises(UnitError, match="VSWA"):
        trtllm.kv_cache(LLAMA8B, GPU80, peak_bytes=GiB, max_attention_window=[512, 4096])


def test_pp_layers_first_ranks_take_the_remainder() -> None:
    assert trtllm.pp_layer_counts(61, 4) == (16, 15, 15, 15)


def test_pp_min_over_ranks() -> None:
    # 61 layers on 2 ranks: 31 + 30; the 31-layer rank sets the count:
    # int(40 GiB x 0.9) // (1 x 31 x 576 x 2 B)
    result = trtllm.kv_cache(DEEPSEEK_V3, GPU80, pp=2, peak_bytes=40 * GiB)
    tokens = 40 * GiB * 9 // 10 // (31 * 576 * 2)
    assert result.engine_log["max_tokens"] == tokens
    assert result.num_blocks == tokens // 32


def test_default_peak_is_weights_plus_temporary_kv() -> None:
    with_temp = trtllm.kv_cache(LLAMA8B, GPU80, weights_bytes=16 * GiB, temporary_kv_bytes=GiB)
    without = trtllm.kv_cache(LLAMA8B, GPU80, weights_bytes=16 * GiB)
    # the temporary cache is in the peak and added back: (80 - 16) GiB x 0.9 either way
    expected = 64 * GiB * 9 // 10
    assert with_temp.engine_log["available_kv_mem_bytes"] == expected
    assert without.engine_log["available_kv_mem_bytes"] == expected


def test_errors() -> None:
    with pytest.raises(UnitError):
        trtllm.kv_cache(LLAMA8B, GPU80, peak_bytes=GiB, free_gpu_memory_fraction=1.0)
    with pytest.raises(UnitError):
        trtllm.kv_cache(LLAMA8B, GPU80, peak_bytes=GiB, tp=0)
    with pytest.raises(UnitError, match="recurrent"):
        trtllm.kv_cache(load_model("nemotron-h-8b"), GPU80, peak_bytes=GiB)
    with pytest.raises(UnknownEngineError):
        trtllm.kv_cache(LLAMA8B, GPU80, peak_bytes=GiB, version="0.9")
