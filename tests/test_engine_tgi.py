"""TGI profile: the warm-up block arithmetic, worked by hand."""

from __future__ import annotations

import pytest

from kvplan import custom_gpu, load_model
from kvplan.engines import tgi
from kvplan.engines.base import UnknownEngineError
from kvplan.errors import UnitError
from kvplan.units import GiB, MiB, resolve_dtype

LLAMA8B = load_model("llama-3.1-8b")
DEEPSEEK_V3 = load_model("deepseek-v3")
GPU80 = custom_gpu(80 * GiB)
BF16 = resolve_dtype("bfloat16")


@pytest.mark.parametrize(
    ("attention", "size", "block"),
    [
        pytest.param("paged", 16, 32 * 16 * 8 * 128 * 2 * 2, id="paged: 32 x 16 x 8 x 128 x 2 x 2"),
        pytest.param("flashdecoding", 256, 32 * 256 * 8 * 128 * 2 * 2, id="flashdecoding: 256"),
        pytest.param("flashinfer", 1, 32 * 1 * 8 * 128 * 2 * 2, id="flashinfer: 1 = 131072 B"),
    ],
)
def test_block_sizes(attention: str, size: int, block: int) -> None:
    assert tgi.BLOCK_SIZES[attention] == size
    assert tgi.block_bytes(LLAMA8B, block_size=size, dtype=BF16) == block


def test_mla_block_is_the_latent() -> None:
    # 61 layers x 16 x (512 + 64) x 2 B, no factor 2
    assert tgi.block_bytes(DEEPSEEK_V3, block_size=16, dtype=BF16) == 61 * 16 * 576 * 2


def test_v3_wiggle_room_scales_the_fraction() -> None:
    result = tgi.kv_cache(LLAMA8B, GPU80, free_bytes_after_warmup=60 * GiB, warmup_blocks=10)
    # free = 60 GiB - (1 - 1.0 x 0.9) x 80 GiB = 52 GiB; 52 GiB / 2 MiB = 26,624; + 10
    assert result.num_blocks == 52 * GiB // (2 * MiB) + 10 == 26_634
    assert result.engine_log["max_batch_total_tokens"] == 26_634 * 16
    assert result.kv_cache_bytes == 26_634 * 2 * MiB
    assert result.log_lines == ("KV-cache blocks: 26634, size: 16",)


def test_v2_wiggle_room_scales_the_free_memory() -> None:
    result = tgi.kv_cache(
        LLAMA8B, GPU80, free_bytes_after_warmup=60 * GiB, cuda_memory_fraction=0.9, version="2"
    )
    # free = 60 - (1 - 0.9) x 80 = 52 GiB; x 0.9 = 46.8 GiB; 46.8 x 512 = 23,961.6 blocks of 2 MiB
    assert result.num_blocks == 52 * GiB * 9 // 10 // (2 * MiB) == 23_961


def test_memory_fraction_leaves_nothing() -> None:
    # 10 GiB free, fraction 0.5 of 80 GiB total: max(0, 10 - 0.55 x 80) = 0 -> warm-up blocks only
    result = tgi.kv_cache(
        LLAMA8B, GPU80, free_bytes_after_warmup=10 * GiB, cuda_memory_fraction=0.5, warmup_blocks=7
    )
    assert result.num_blocks == 7
    assert result.engine_log["free_memory_bytes"] == 0


def test_flashdecoding_tokens() -> None:
    result = tgi.kv_cache(
        LLAMA8B, GPU80, free_bytes_after_warmup=60 * GiB, attention="flashdecoding"
    )
    # a block is 32 MiB; 52 GiB / 32 MiB = 1,664 blocks x 256 = 425,984 tokens
    assert result.num_blocks == 1664
    assert result.engine_log["max_batch_total_tokens"] == 425_984


def test_tp_and_fp8() -> None:
    result = tgi.kv_cache(
        LLAMA8B, GPU80, free_bytes_after_warmup=60 * GiB, tp=2, kv_cache_dtype="fp8"
    )
    # 4 heads per rank, 1 B: 32 x 16 x 4 x 128 x 2 x 1 = 512 KiB; 52 GiB / 512 KiB = 106,496
    assert result.engine_log["total_cache_size"] == 512 * 1024
    assert result.num_blocks == 106_496


def test_errors() -> None:
    with pytest.raises(UnitError):
        tgi.kv_cache(LLAMA8B, GPU80, free_bytes_after_warmup=GiB, cuda_memory_fraction=0.0)
    with pytest.raises(UnitError):
        tgi.kv_cache(LLAMA8B, GPU80, free_bytes_after_warmup=GiB, attention="sdpa")  # type: ignore[arg-type]
    with pytest.raises(UnitError, match="recurrent"):
        tgi.kv_cache(load_model("nemotron-h-8b"), GPU80, free_bytes_after_warmup=GiB)
    with pytest.raises(UnknownEngineError):
        tgi.kv_cache(LLAMA8B, GPU80, free_bytes_after_warmup=GiB, version="1")
