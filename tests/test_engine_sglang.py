"""SGLang engine profile: hand-worked rules, and the SGLang reference logs recomputed.

The reference numbers are copied in (from shared/reference/engine_logs.yaml), not read at
test time. A figure printed with 2 decimals pins bytes only to a range: the tests derive the
range (printed +- 0.005 GiB) and check the exact bytes fall in it, never round to match.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from kvplan import custom_gpu, find_gpu, load_model, parse_spec
from kvplan.engines import sglang
from kvplan.errors import UnitError
from kvplan.model.spec import ModelSpec
from kvplan.units import GiB


def _spec(**fields: object) -> ModelSpec:
    return parse_spec({"name": "t", "torch_dtype": "bfloat16", **fields})


LLAMA8B = _spec(num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8, head_dim=128)
DEEPSEEK_V3 = _spec(
    num_hidden_layers=61,
    num_attention_heads=128,
    hidden_size=7168,
    kv_lora_rank=512,
    qk_rope_head_dim=64,
    qk_nope_head_dim=128,
    v_head_dim=128,
)


def _printed_range(printed: str) -> tuple[Fraction, Fraction]:
    """Bytes whose ``/ 2^30`` prints as ``printed`` with 2 decimals: [x - 0.005, x + 0.005)."""
    value = Fraction(printed)
    half = Fraction(1, 200)
    return (value - half) * GiB, (value + half) * GiB


# --- rule 1: cell size ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "tp", "dtype", "index_head_dim", "expected"),
    [
        pytest.param(
            LLAMA8B, 1, None, None, 131072, id="gqa bf16: 8 x (128+128) x 32 x 2 = 131072"
        ),
        pytest.param(LLAMA8B, 2, None, None, 65536, id="gqa tp2: 4 x 256 x 32 x 2 = 65536"),
        pytest.param(LLAMA8B, 16, None, None, 16384, id="tp16 > 8 heads: max(1, 8//16)=1 -> 16384"),
        pytest.param(LLAMA8B, 1, "fp8_e4m3", None, 65536, id="fp8: 8 x 256 x 32 x 1 = 65536"),
        pytest.param(LLAMA8B, 1, "auto", None, 131072, id="auto = model dtype bf16"),
        pytest.param(DEEPSEEK_V3, 1, None, None, 70272, id="mla bf16: (512+64) x 61 x 2 = 70272"),
        pytest.param(DEEPSEEK_V3, 8, None, None, 70272, id="mla tp8: latent not split = 70272"),
        pytest.param(
            DEEPSEEK_V3, 1, "fp8_e4m3", 128, 43188, id="v3.2 fp8: (576 + 128+4) x 61 = 43188"
        ),
    ],
)
def test_cell_size(
    spec: ModelSpec, tp: int, dtype: str | None, index_head_dim: int | None, expected: int
) -> None:
    got = sglang.cell_size_bytes(spec, tp=tp, kv_cache_dtype=dtype, index_head_dim=index_head_dim)
    assert got == expected


def test_cell_size_refuses_block_formats() -> None:
    with pytest.raises(UnitError, match="whole-element"):
        sglang.cell_size_bytes(LLAMA8B, kv_cache_dtype="q8_0")


# --- rule 2: tokens from the rest memory ------------------------------------------------------


@pytest.mark.parametrize(
    ("rest_bytes", "page_size", "cap", "expected"),
    [
        pytest.param(GiB, 1, None, 8192, id="1 GiB // 131072 = 8192"),
        pytest.param(1000 * 131072 + 5, 1, None, 1000, id="1000 x 131072 + 5 -> 1000"),
        pytest.param(1000 * 131072 - 1, 1, None, 999, id="1000 x 131072 - 1 -> 999"),
        pytest.param(1000 * 131072, 64, None, 960, id="1000 -> page 64 -> 15 x 64 = 960"),
        pytest.param(1000 * 131072, 64, 500, 448, id="cap 500 -> page 64 -> 7 x 64 = 448"),
        pytest.param(1000 * 131072, 1, 5000, 1000, id="cap above the pool: 1000"),
        pytest.param(-GiB, 1, None, 0, id="no memory left: 0"),
    ],
)
def test_max_total_tokens(rest_bytes: int, page_size: int, cap: int | None, expected: int) -> None:
    got = sglang.max_total_tokens(
        LLAMA8B, rest_bytes=rest_bytes, page_size=page_size, max_total_tokens_cap=cap
    )
    assert got == expected


@pytest.mark.parametrize(
    ("pre", "post", "fraction", "expected"),
    [
        pytest.param(80 * GiB, 60 * GiB, 0.9, 52 * GiB, id="60 - 80 x 0.1 = 52 GiB"),
        pytest.param(100 * GiB, 70 * GiB, 0.93, 63 * GiB, id="70 - 100 x 0.07 = 63 GiB"),
        pytest.param(3, 2, 0.5, 0, id="2 - 3 x 0.5 = 0.5 -> floor 0"),
    ],
)
def test_rest_bytes(pre: int, post: int, fraction: float, expected: int) -> None:
    got = sglang.rest_bytes(
        pre_load_free_bytes=pre, post_load_free_bytes=post, mem_fraction_static=fraction
    )
    assert got == expected


# --- automatic mem_fraction_static -------------------------------------------------------------


@pytest.mark.parametrize(
    ("gpu_mib", "kwargs", "expected"),
    [
        pytest.param(
            81090, {}, 0.834, id="h100 tp1: 512+8192x1.5+256x2+128 = 13440; 67650/81090 = 0.834"
        ),
        pytest.param(81090, {"tp": 4}, 0.823, id="h100 tp4: 512+12288+512x2+512 = 14336 -> 0.823"),
        pytest.param(
            81090,
            {"chunked_prefill_size": 2048, "cuda_graph_max_bs": 8},
            0.874,
            id="h100 small sizes: 3728 < floor 10240; 70850/81090 = 0.874",
        ),
        pytest.param(
            24576, {}, 0.847, id="24 GiB: 512+2048x1.5+24x2+128 = 3760; 20816/24576 = 0.847"
        ),
        pytest.param(
            182642,
            {"tp": 8, "dp": 8, "enable_dp_attention": True},
            0.751,
            id="b200 tp8 dp8: 512+24576+1024+1024+12288+6144 = 45568 -> 0.751",
        ),
        pytest.param(
            81090,
            {"speculative_algorithm": "EAGLE"},
            0.809,
            id="h100 eagle: 13440 + 2048 = 15488 -> 0.809",
        ),
    ],
)
def test_mem_fraction_static_auto(gpu_mib: int, kwargs: dict[str, object], expected: float) -> None:
    got = sglang.mem_fraction_static_auto(gpu_mib * 2**20, **kwargs)  # type: ignore[arg-type]
    assert got == expected


# --- rule 3: pool bytes and the log line -------------------------------------------------------


def test_pool_bytes_pad_one_page() -> None:
    # 1000 tokens + 1 padded row, 32 layers x 8 heads x 128 x 2 B = 65536 B a row for K.
    assert sglang.pool_bytes(LLAMA8B, 1000) == (1001 * 65536, 1001 * 65536)
    # page 64: 1000 + 64 rows.
    assert sglang.pool_bytes(LLAMA8B, 1000, page_size=64) == (1064 * 65536, 1064 * 65536)


def test_log_line_formats() -> None:
    assert (
        sglang.format_log_line(8192, 4 * GiB, 4 * GiB)
        == "KV Cache is allocated. #tokens: 8192, K size: 4.00 GB, V size: 4.00 GB"
    )
    assert (
        sglang.format_log_line(8192, 3 * GiB // 2)
        == "KV Cache is allocated. #tokens: 8192, KV size: 1.50 GB"
    )


def test_kv_cache_hand_worked() -> None:
    # 80 GiB device, nothing used before load, 8 GiB weights, fraction 0.9:
    # rest = 0.9 x 80 - 8 = 64 GiB; 64 GiB // 131072 = 524288 tokens;
    # K = (524288 + 1) x 65536 B = 32.00006 GiB -> "32.00".
    result = sglang.kv_cache(
        LLAMA8B, custom_gpu(80 * GiB), mem_fraction_static=0.9, weights_bytes=8 * GiB
    )
    assert result.kv_cache_tokens == 524288
    assert result.block_size == 1
    assert result.kv_cache_bytes == 2 * 524289 * 65536
    assert result.engine_log["k_size_gb"] == 32.0
    assert result.log_lines == (
        "KV Cache is allocated. #tokens: 524288, K size: 32.00 GB, V size: 32.00 GB",
    )


def test_kv_cache_used_before_load_scales_by_fraction() -> None:
    # 10 GiB used before load costs 0.9 x 10 = 9 GiB of rest: 55 GiB -> 450560 tokens.
    result = sglang.kv_cache(
        LLAMA8B,
        custom_gpu(80 * GiB),
        mem_fraction_static=0.9,
        weights_bytes=8 * GiB,
        used_before_load_bytes=10 * GiB,
    )
    assert result.kv_cache_tokens == 55 * GiB // 131072 == 450560


def test_kv_cache_not_enough_memory() -> None:
    result = sglang.kv_cache(
        LLAMA8B, custom_gpu(16 * GiB), mem_fraction_static=0.5, weights_bytes=8 * GiB
    )
    assert result.kv_cache_tokens == 0
    assert result.kv_cache_bytes == 0
    assert result.log_lines[0].startswith("Not enough memory.")


def test_kv_cache_auto_fraction_on_h100() -> None:
    result = sglang.kv_cache(LLAMA8B, find_gpu("h100"), weights_bytes=16 * GiB)
    assert result.engine_log["mem_fraction_static"] == 0.834


def test_kv_cache_pipeline_takes_the_smallest_stage() -> None:
    # 32 layers on 2 stages, 16 each: 65536 B a token per stage; equal weights -> equal pools.
    one = sglang.kv_cache(
        LLAMA8B, custom_gpu(80 * GiB), mem_fraction_static=0.9, weights_bytes=8 * GiB
    )
    two = sglang.kv_cache(
        LLAMA8B, custom_gpu(80 * GiB), pp=2, mem_fraction_static=0.9, weights_bytes=8 * GiB
    )
    assert two.kv_cache_tokens == 2 * (one.kv_cache_tokens or 0)


#: The shared reference's log ids these tests check (counted by tests/test_docs.py).
REFERENCE_LOG_IDS = (
    "sglang-issue21348-qwen3-235b-a22b-fp8-tp4",
    "sglang-pr11309-deepseek-v32-exp-b200-dpattn-with-indexer",
)


# --- reference case: sglang-issue21348-qwen3-235b-a22b-fp8-tp4 ----------------------------------
# "KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, V size: 8.23 GB"
# 4x H100, --tp 4, --mem-fraction-static 0.93, kv cache auto (bf16), page_size 1.

QWEN_TOKENS = 367404
QWEN_LINE = "KV Cache is allocated. #tokens: 367404, K size: 8.23 GB, V size: 8.23 GB"


def test_qwen3_235b_tp4_tokens_from_implied_rest() -> None:
    spec = load_model("qwen3-235b-a22b")
    cell = sglang.cell_size_bytes(spec, tp=4)
    assert cell == 1 * (128 + 128) * 94 * 2 == 48128
    # The count pins the rest memory to [N x cell, (N + 1) x cell): both ends give N.
    for rest in (QWEN_TOKENS * cell, (QWEN_TOKENS + 1) * cell - 1):
        assert sglang.max_total_tokens(spec, rest_bytes=rest, tp=4) == QWEN_TOKENS
    assert sglang.max_total_tokens(spec, rest_bytes=(QWEN_TOKENS + 1) * cell, tp=4) != QWEN_TOKENS


def test_qwen3_235b_tp4_k_v_sizes() -> None:
    spec = load_model("qwen3-235b-a22b")
    k_bytes, v_bytes = sglang.pool_bytes(spec, QWEN_TOKENS, tp=4)
    # (367404 + 1 padded) x 94 layers x 1 head x 128 x 2 B = 8,841,233,920 B = 8.2340 GiB.
    assert k_bytes == v_bytes == (QWEN_TOKENS + 1) * 94 * 128 * 2 == 8_841_233_920
    low, high = _printed_range("8.23")
    assert low <= k_bytes < high
    assert sglang.format_log_line(QWEN_TOKENS, k_bytes, v_bytes) == QWEN_LINE


def test_qwen3_235b_tp4_whole_profile_at_implied_memory() -> None:
    # The log states no free memory; take the weights that leave exactly the implied rest
    # (rest = 0.93 x total - weights with nothing used before load) and check the rest of
    # the chain: tokens, bytes, and the printed line.
    spec = load_model("qwen3-235b-a22b")
    gpu = find_gpu("h100")
    implied_rest = QWEN_TOKENS * 48128
    weights = gpu.memory_bytes * 93 // 100 - implied_rest
    result = sglang.kv_cache(spec, gpu, tp=4, mem_fraction_static=0.93, weights_bytes=weights)
    assert result.kv_cache_tokens == QWEN_TOKENS
    assert result.log_lines == (QWEN_LINE,)
    assert result.engine_log["k_size_gb"] == result.engine_log["v_size_gb"] == 8.23


# --- reference case: sglang-pr11309-deepseek-v32-exp-b200-dpattn-with-indexer -------------------
# "KV Cache is allocated. #tokens: 975424, KV size: 43.67 GB" on 8x B200, --tp 8 --dp 8
# --enable-dp-attention; V3.2 defaults: fp8 cache, page_size 64, indexer head dim 128.

V32_CONFIG = {
    "name": "deepseek-v3.2-exp",
    "num_hidden_layers": 61,
    "num_attention_heads": 128,
    "hidden_size": 7168,
    "kv_lora_rank": 512,
    "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 128,
    "v_head_dim": 128,
    "torch_dtype": "bfloat16",
}
V32_INDEX_HEAD_DIM = 128
V32_TOKENS = 975424
V32_LINE = "KV Cache is allocated. #tokens: 975424, KV size: 43.67 GB"


def test_deepseek_v32_tokens_from_implied_rest() -> None:
    spec = parse_spec(V32_CONFIG)
    kwargs = {"kv_cache_dtype": "fp8_e4m3", "index_head_dim": V32_INDEX_HEAD_DIM}
    cell = sglang.cell_size_bytes(spec, tp=1, **kwargs)  # type: ignore[arg-type]
    assert cell == (512 + 64 + 128 + 4) * 61 == 43188
    # Page 64: the count pins rest to [N x cell, (N + 64) x cell).
    assert V32_TOKENS % 64 == 0
    for rest in (V32_TOKENS * cell, (V32_TOKENS + 64) * cell - 1):
        got = sglang.max_total_tokens(spec, rest_bytes=rest, page_size=64, **kwargs)  # type: ignore[arg-type]
        assert got == V32_TOKENS


def test_deepseek_v32_kv_size() -> None:
    spec = parse_spec(V32_CONFIG)
    kv_bytes, v_bytes = sglang.pool_bytes(
        spec, V32_TOKENS, kv_cache_dtype="fp8_e4m3", page_size=64, index_head_dim=128
    )
    # Latent rows: (975424 + 64) x (512 fp8 + 4 x 4 scales + 64 x 2 bf16 rope = 656 B) x 61;
    # indexer: (975424 + 65) // 64 = 15242 pages x 64 x 132 B x 61.
    latent = (V32_TOKENS + 64) * 656 * 61
    indexer = 15242 * 64 * 132 * 61
    assert (kv_bytes, v_bytes) == (latent + indexer, 0)
    low, high = _printed_range("43.67")
    assert low <= kv_bytes < high
    assert sglang.format_log_line(V32_TOKENS, kv_bytes) == V32_LINE


def test_deepseek_v32_auto_fraction_modelled() -> None:
    # Not printed in the log; the modelled default for this launch (B200 = 182,642 MiB).
    fraction = sglang.mem_fraction_static_auto(
        find_gpu("b200").memory_bytes, tp=8, dp=8, enable_dp_attention=True
    )
    assert fraction == 0.751


def test_deepseek_v32_whole_profile_at_implied_memory() -> None:
    spec = parse_spec(V32_CONFIG)
    gpu = find_gpu("b200")
    implied_rest = V32_TOKENS * 43188
    # rest = 0.751 x total - weights (nothing used before load): weights that leave it.
    weights = gpu.memory_bytes * 751 // 1000 - implied_rest
    result = sglang.kv_cache(
        spec,
        gpu,
        tp=8,
        dp=8,
        enable_dp_attention=True,
        kv_cache_dtype="fp8_e4m3",
        page_size=64,
        index_head_dim=V32_INDEX_HEAD_DIM,
        weights_bytes=weights,
    )
    assert result.kv_cache_tokens == V32_TOKENS
    assert result.block_size == 64
    assert result.log_lines == (V32_LINE,)
    assert result.engine_log["kv_size_gb"] == 43.67


def test_swa_pool_split_hand_worked() -> None:
    # Gemma 3 27B: 52 sliding + 10 full layers; 100,000 tokens counted as full across 62 layers
    # -> full = int(6,200,000 / (0.8 x 52 + 10)) = int(6,200,000 / 51.6) = 120,155,
    #    swa = int(120,155 x 0.8) = 96,124
    from kvplan.engines.sglang import swa_pool_tokens

    assert swa_pool_tokens(100_000, num_layers=62, full_layers=10, swa_layers=52) == (
        120_155,
        96_124,
    )
    # rounded down to the page
    assert swa_pool_tokens(100_000, num_layers=62, full_layers=10, swa_layers=52, page_size=64) == (
        120_128,
        96_064,
    )


def test_hybrid_swa_kv_cache_uses_the_split() -> None:
    import kvplan
    from kvplan.engines import sglang
    from kvplan.hardware.lookup import find_gpu

    spec = kvplan.load_model("gemma-3-27b")
    result = sglang.kv_cache(spec, find_gpu("h200"), mem_fraction_static=0.85)
    log = result.engine_log
    assert result.kv_cache_tokens == log["full_layer_tokens"]
    assert result.log_lines[0] == (
        f"Use sliding window memory pool. full_layer_tokens={log['full_layer_tokens']},"
        f" swa_layer_tokens={log['swa_layer_tokens']}"
    )
    # 16 KV heads x 128 x 2 B per K row; rows = tokens + 1 page per layer
    per_row = 16 * 128 * 2
    expected = (
        2
        * per_row
        * (10 * (int(log["full_layer_tokens"]) + 1) + 52 * (int(log["swa_layer_tokens"]) + 1))
    )
    assert result.kv_cache_bytes == expected
