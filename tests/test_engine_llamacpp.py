"""llama.cpp / ik_llama.cpp profile: the reference logs, then each rule by hand.

The reference figures are copied from shared/reference/engine_logs.yaml (not read at test
time). A figure printed as ``%7.2f`` MiB pins the bytes only to a range: ``X.XX`` MiB means
``(X.XX - 0.005) x 2^20 <= bytes < (X.XX + 0.005) x 2^20``; each test asserts the exact bytes
computed lie in that range and that the formatted string equals the printed one.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

import kvplan
from kvplan.engines.base import EngineResult, UnknownEngineError
from kvplan.engines.llamacpp import (
    cells_per_stream,
    format_mib,
    ggml_row_bytes,
    kv_cache,
    mla_row_values,
    n_ctx_padding,
    swa_cells,
)
from kvplan.errors import UnitError
from kvplan.model.layers import MLALatent
from kvplan.units import MiB


def _assert_mib(num_bytes: int | float | str, printed: str) -> None:
    """``num_bytes`` prints as ``printed`` (``%7.2f``) and lies in the range it pins."""
    assert isinstance(num_bytes, int)
    assert format_mib(num_bytes).strip() == printed
    half = Decimal("0.005")
    low, high = (Decimal(printed) - half) * MiB, (Decimal(printed) + half) * MiB
    assert low <= num_bytes < high


def _check(result: EngineResult, prefix: str, k: str, v: str) -> None:
    log = result.engine_log
    _assert_mib(log[f"{prefix}k_bytes"], k)
    _assert_mib(log[f"{prefix}v_bytes"], v)
    total = log[f"{prefix}k_bytes"]
    assert isinstance(total, int)
    assert log[f"{prefix}k_mib"] == float(k)
    assert log[f"{prefix}v_mib"] == float(v)


# --- reference cases (shared/reference/engine_logs.yaml) ----------------------------------

#: The shared reference's log ids these tests check, one test each (counted by test_docs.py).
REFERENCE_LOG_IDS = (
    "llamacpp-b5781-llama31-8b-vulkan-ctx16384",
    "llamacpp-b5274-qwen3-235b-a22b-ctx32768-q8_0",
    "llamacpp-b5331-deepseek-v3-0324-mla-ctx16384",
    "llamacpp-b8164-gpt-oss-20b-metal-ctx131072-ubatch512-iswa",
    "llamacpp-llama31-8b-ctx4096-cpu-pad32",
    "ikllamacpp-qwen3-32b-ctx16768-pad-q8_0-vulkan",
    "ikllamacpp-deepseek-r1-ctx65536-q8_0",
)



def test_b5781_llama31_8b_vulkan_ctx16384() -> None:
    """llamacpp-b5781-llama31-8b-vulkan-ctx16384: 16384 x 32 x 1024 x 2 B = 1024 MiB per K/V."""
    result = kv_cache(kvplan.load_model("llama-3.1-8b"), n_ctx=16384, n_ubatch=1024, build=5781)
    assert result.engine_log["cells"] == 16384
    assert result.engine_log["layers"] == 32
    assert result.engine_log["seqs"] == 1
    _check(result, "", "1024.00", "1024.00")
    _assert_mib(result.kv_cache_bytes, "2048.00")
    assert result.log_lines == (
        "llama_kv_cache_unified: size = 2048.00 MiB ( 16384 cells,  32 layers,  1 seqs),"
        " K (f16): 1024.00 MiB, V (f16): 1024.00 MiB",
    )


def test_b5274_qwen3_235b_q8_0_ctx32768() -> None:
    """llamacpp-b5274-qwen3-235b-a22b-ctx32768-q8_0: 32768 x 94 x (512/32 x 34) B = 1598 MiB."""
    result = kv_cache(
        kvplan.load_model("qwen3-235b-a22b"),
        n_ctx=32768,
        cache_type_k="q8_0",
        cache_type_v="q8_0",
        build=5274,
    )
    assert result.num_blocks == result.kv_cache_tokens == 32768
    _check(result, "", "1598.00", "1598.00")
    _assert_mib(result.kv_cache_bytes, "3196.00")
    assert result.log_lines == (
        "llama_kv_cache_unified: KV self size  = 3196.00 MiB, K (q8_0): 1598.00 MiB,"
        " V (q8_0): 1598.00 MiB",
    )


def test_b5331_deepseek_v3_mla_ctx16384() -> None:
    """llamacpp-b5331-deepseek-v3-0324-mla-ctx16384: K 16384 x 61 x 576 x 2 = 1098 MiB,
    V 16384 x 61 x 512 x 2 = 976 MiB (MLA after b5137, V still stored)."""
    result = kv_cache(kvplan.load_model("deepseek-v3"), n_ctx=16384, n_ubatch=1024, build=5331)
    assert result.engine_log["cells"] == 16384
    _check(result, "", "1098.00", "976.00")
    _assert_mib(result.kv_cache_bytes, "2074.00")
    assert result.log_lines == (
        "llama_kv_cache_unified: KV self size  = 2074.00 MiB, K (f16): 1098.00 MiB,"
        " V (f16):  976.00 MiB",
    )


def test_b8164_gpt_oss_20b_iswa_ctx131072() -> None:
    """llamacpp-b8164-gpt-oss-20b-metal-ctx131072-ubatch512-iswa: 131072 x 12 x 512 x 2 =
    1536 MiB per K/V; SWA PAD(min(131072, 128 + 512), 256) = 768 cells, 768 x 12 x 512 x 2 =
    9 MiB per K/V."""
    result = kv_cache(kvplan.load_model("gpt-oss-20b"), n_ctx=131072, n_ubatch=512, build=8164)
    log = result.engine_log
    assert (log["cells"], log["layers"], log["swa_cells"], log["swa_layers"]) == (
        131072,
        12,
        768,
        12,
    )
    _check(result, "", "1536.00", "1536.00")
    _check(result, "swa_", "9.00", "9.00")
    _assert_mib(result.kv_cache_bytes, "3090.00")
    assert result.num_blocks == 131072
    assert result.log_lines == (
        "llama_kv_cache_iswa: creating non-SWA KV cache, size = 131072 cells",
        "llama_kv_cache: size = 3072.00 MiB (131072 cells,  12 layers,  1/1 seqs),"
        " K (f16): 1536.00 MiB, V (f16): 1536.00 MiB",
        "llama_kv_cache_iswa: creating     SWA KV cache, size = 768 cells",
        "llama_kv_cache: size =   18.00 MiB (   768 cells,  12 layers,  1/1 seqs),"
        " K (f16):    9.00 MiB, V (f16):    9.00 MiB",
    )


def test_may2025_llama31_8b_cpu_pad32_ctx4096() -> None:
    """llamacpp-llama31-8b-ctx4096-cpu-pad32: no build line in the quote; 'KV self size'
    printed by llama_kv_cache_unified pins it to b5262-b5440 (May 2025), so b5400.
    PAD(4096, 32) = 4096 cells; 4096 x 32 x 1024 x 2 = 256 MiB per K/V."""
    result = kv_cache(kvplan.load_model("llama-3.1-8b"), n_ctx=4096, flash_attn=False, build=5400)
    assert result.engine_log["cells"] == 4096
    _check(result, "", "256.00", "256.00")
    _assert_mib(result.kv_cache_bytes, "512.00")
    assert result.log_lines == (
        "llama_kv_cache_unified: KV self size  =  512.00 MiB, K (f16):  256.00 MiB,"
        " V (f16):  256.00 MiB",
    )


def test_ik_3732_qwen3_32b_ctx16768_q8_0() -> None:
    """ikllamacpp-qwen3-32b-ctx16768-pad-q8_0-vulkan: PAD(16768, 256) = 16896 cells;
    16896 x 64 x (1024/32 x 34) B = 1122 MiB per K/V."""
    result = kv_cache(
        kvplan.load_model("qwen3-32b"),
        n_ctx=16768,
        cache_type_k="q8_0",
        cache_type_v="q8_0",
        build=3732,
        fork="ik_llama.cpp",
    )
    assert result.engine_log["cells"] == 16896
    _check(result, "", "1122.00", "1122.00")
    _assert_mib(result.kv_cache_bytes, "2244.00")
    assert result.log_lines == (
        "llama_new_context_with_model: KV self size  = 2244.00 MiB, K (q8_0): 1122.00 MiB,"
        " V (q8_0): 1122.00 MiB",
    )


def test_ik_deepseek_r1_mla_ctx65536_q8_0() -> None:
    """ikllamacpp-deepseek-r1-ctx65536-q8_0: one c^KV latent, 65536 x 61 x (576/32 x 34) B =
    2333.25 MiB, no V (-mla 2, flash attention). The quote's version is 'May 2025'."""
    result = kv_cache(
        kvplan.load_model("deepseek-r1"),
        n_ctx=65536,
        cache_type_k="q8_0",
        fork="ik_llama.cpp",
    )
    assert result.engine_log["cells"] == 65536
    _check(result, "", "2333.25", "0.00")
    _assert_mib(result.kv_cache_bytes, "2333.25")
    assert result.log_lines == (
        "llama_new_context_with_model: KV self size  = 2333.25 MiB, c^KV (q8_0): 2333.25 MiB,"
        " kv^T: not used",
    )


# --- rules, by hand ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        pytest.param({"build": 5781, "flash_attn": True}, 256, id="b5781 FA: pad 256"),
        pytest.param({"build": 5781, "flash_attn": False}, 32, id="b5781 no FA: pad 32"),
        pytest.param({"build": 6900, "flash_attn": True}, 1, id="b6868-b6974: no padding"),
        pytest.param({"build": 6975, "flash_attn": False}, 256, id="b6975+ no FA: pad 256"),
        pytest.param({"build": None, "flash_attn": False}, 256, id="newest: pad 256"),
        pytest.param(
            {"build": 4000, "flash_attn": False, "fork": "ik_llama.cpp"}, 32, id="ik no FA: 32"
        ),
    ],
)
def test_padding(kwargs: dict[str, object], expected: int) -> None:
    assert n_ctx_padding(**kwargs) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("n_ctx", "kwargs", "expected"),
    [
        pytest.param(4000, {"build": 5400, "flash_attn": False}, (4000, 1), id="PAD(4000,32)=4000"),
        pytest.param(4001, {"build": 5400, "flash_attn": False}, (4032, 1), id="PAD(4001,32)=4032"),
        pytest.param(4001, {"build": 5400}, (4096, 1), id="FA: PAD(4001,256)=4096"),
        pytest.param(
            8192, {"build": 5400, "n_seq_max": 4}, (8192, 1), id="pre-b5913: one buffer, 4 seqs"
        ),
        pytest.param(
            8192,
            {"build": 6000, "n_seq_max": 3},
            (2816, 3),
            id="b6000: PAD(ceil(8192/3)=2731,256)=2816 x 3 streams",
        ),
        pytest.param(
            8192,
            {"build": 6000, "n_seq_max": 3, "kv_unified": True},
            (8192, 1),
            id="b6000 unified: 8192 x 1",
        ),
        pytest.param(
            1000,
            {"n_seq_max": 3},
            (512, 3),
            id="newest: PAD(PAD(1000,256)=1024 // 3 = 341, 256) = 512 x 3",
        ),
        pytest.param(
            8192,
            {"build": 6900, "n_seq_max": 3, "flash_attn": False},
            (2731, 3),
            id="b6900: ceil(8192/3)=2731 unpadded",
        ),
        pytest.param(
            8192,
            {"build": 6950, "n_seq_max": 3},
            (2730, 3),
            id="b6950: floor(8192/3)=2730 unpadded",
        ),
        pytest.param(
            8192, {"n_seq_max": 4, "fork": "ik_llama.cpp"}, (8192, 1), id="ik: one buffer"
        ),
    ],
)
def test_cells_and_streams(
    n_ctx: int, kwargs: dict[str, object], expected: tuple[int, int]
) -> None:
    assert cells_per_stream(n_ctx, **kwargs) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        pytest.param({}, 768, id="newest: PAD(min(131072, 128+512), 256) = 768"),
        pytest.param({"n_seq_max": 4}, 768, id="newest, 4 streams: 128x1+512 -> 768"),
        pytest.param(
            {"n_seq_max": 4, "kv_unified": True}, 1024, id="unified, 4 seqs: 128x4+512 = 1024"
        ),
        pytest.param({"swa_full": True}, 131072, id="swa_full: the base 131072"),
        pytest.param({"n_ubatch": 2048}, 2304, id="n_ubatch 2048: 128+2048=2176 -> 2304"),
        pytest.param(
            {"build": 5500, "n_seq_max": 4, "flash_attn": False},
            1024,
            id="b5500 no FA: min(base, PAD(128x4+512, 32)) = 1024",
        ),
        pytest.param(
            {"build": 6000, "n_seq_max": 4, "flash_attn": False},
            640,
            id="b6000 streams no FA: PAD(128+512, 32) = 640",
        ),
    ],
)
def test_swa_cells(kwargs: dict[str, object], expected: int) -> None:
    assert swa_cells(131072, n_swa=128, **kwargs) == expected  # type: ignore[arg-type]


def test_swa_cells_capped_by_small_context() -> None:
    """newest: PAD(min(256, 1024 + 512), 256) = 256: a short context caps the SWA cache."""
    assert swa_cells(256, n_swa=1024) == 256


@pytest.mark.parametrize(
    ("cache_type", "num_values", "expected"),
    [
        pytest.param("f16", 1024, 2048, id="f16: 1024 x 2 = 2048 B"),
        pytest.param("f32", 1024, 4096, id="f32: 32 blocks x 128 = 4096 B"),
        pytest.param("bf16", 576, 1152, id="bf16: 576 x 2 = 1152 B"),
        pytest.param("q8_0", 1024, 1088, id="q8_0: 32 blocks x 34 = 1088 B"),
        pytest.param("q8_0", 576, 612, id="q8_0: 18 blocks x 34 = 612 B"),
        pytest.param("q4_0", 1024, 576, id="q4_0: 32 blocks x 18 = 576 B"),
        pytest.param("q4_1", 1024, 640, id="q4_1: 32 blocks x 20 = 640 B"),
        pytest.param("q5_0", 1024, 704, id="q5_0: 32 blocks x 22 = 704 B"),
        pytest.param("q5_1", 1024, 768, id="q5_1: 32 blocks x 24 = 768 B"),
        pytest.param("iq4_nl", 1024, 576, id="iq4_nl: 32 blocks x 18 = 576 B"),
    ],
)
def test_row_bytes(cache_type: str, num_values: int, expected: int) -> None:
    assert ggml_row_bytes(cache_type, num_values) == expected


def test_q8_0_k_q4_0_v_separately() -> None:
    """-ctk q8_0 -ctv q4_0, llama-3.1-8b, 4096 cells: K 4096 x 32 x 1088 = 136 MiB,
    V 4096 x 32 x 576 = 72 MiB."""
    result = kv_cache(
        kvplan.load_model("llama-3.1-8b"), n_ctx=4096, cache_type_k="q8_0", cache_type_v="q4_0"
    )
    assert result.engine_log["k_bytes"] == 4096 * 32 * 1088 == 136 * MiB
    assert result.engine_log["v_bytes"] == 4096 * 32 * 576 == 72 * MiB


@pytest.mark.parametrize(
    ("build", "fork", "expected"),
    [
        pytest.param(5000, "llama.cpp", (24576, 16384), id="b5000: 128 x 192 K, 128 x 128 V"),
        pytest.param(5137, "llama.cpp", (576, 512), id="b5137-b7831: 512+64 K, 512 V"),
        pytest.param(7832, "llama.cpp", (576, 0), id="b7832+: 576 K, no V"),
        pytest.param(None, "llama.cpp", (576, 0), id="newest: 576 K, no V"),
        pytest.param(3700, "ik_llama.cpp", (576, 0), id="ik: one 576 c^KV"),
    ],
)
def test_mla_rows(build: int | None, fork: str, expected: tuple[int, int]) -> None:
    spec = kvplan.load_model("deepseek-v3")
    layer = next(layer for layer in spec.layers if isinstance(layer, MLALatent))
    assert mla_row_values(layer, spec, build=build, fork=fork) == expected


def test_mla_old_build_bytes() -> None:
    """b5000, deepseek-v3, 4096 cells f16: K 4096 x 61 x 24576 x 2 = 11712 MiB,
    V 4096 x 61 x 16384 x 2 = 7808 MiB; printed by llama_context."""
    result = kv_cache(kvplan.load_model("deepseek-v3"), n_ctx=4096, build=5000)
    assert result.engine_log["k_bytes"] == 4096 * 61 * 24576 * 2 == 11712 * MiB
    assert result.engine_log["v_bytes"] == 4096 * 61 * 16384 * 2 == 7808 * MiB
    assert result.log_lines[0].startswith("llama_context: KV self size  = 19520.00 MiB")


def test_ik_sliding_layers_get_full_context() -> None:
    """ik, gpt-oss-20b, 8192 cells: all 24 layers x 8192 x 512 x 2 x 2 (K,V) = 384 MiB."""
    result = kv_cache(kvplan.load_model("gpt-oss-20b"), n_ctx=8192, fork="ik_llama.cpp")
    assert result.kv_cache_bytes == 24 * 8192 * 512 * 2 * 2 == 384 * MiB
    assert "swa_cells" not in result.engine_log


def test_swa_forced_f16_only_in_b8633_to_b8643() -> None:
    """gpt-oss-20b q8_0, SWA 768 cells x 12 x 512: f16 at b8633 (= 9 MiB per K/V), q8_0 at
    b8644 (768 x 12 x 544 = 4.78125 MiB)."""
    spec = kvplan.load_model("gpt-oss-20b")
    forced = kv_cache(spec, n_ctx=8192, cache_type_k="q8_0", cache_type_v="q8_0", build=8633)
    reverted = kv_cache(spec, n_ctx=8192, cache_type_k="q8_0", cache_type_v="q8_0", build=8644)
    assert forced.engine_log["swa_k_bytes"] == 768 * 12 * 512 * 2 == 9 * MiB
    assert reverted.engine_log["swa_k_bytes"] == 768 * 12 * 544
    assert "K (f16)" in forced.log_lines[-1]


def test_streams_total_bytes() -> None:
    """newest, llama-3.1-8b, n_ctx 8192, 3 non-unified seqs: 2816 cells x 3 streams x 32 x
    4096 B = 1056 MiB; the line prints the per-stream cells and '3/3 seqs'."""
    result = kv_cache(kvplan.load_model("llama-3.1-8b"), n_ctx=8192, n_seq_max=3)
    assert result.engine_log["cells"] == 2816
    assert result.num_blocks == 2816 * 3
    assert result.kv_cache_bytes == 2816 * 3 * 32 * 4096 == 1056 * MiB
    assert "(  2816 cells,  32 layers,  3/3 seqs)" in result.log_lines[0]


def test_recurrent_state_one_cell_per_sequence() -> None:
    """nemotron-h-8b, 4 seqs: state f32, 4 cells whatever n_ctx (R 11.25 MiB, S 384 MiB)."""
    spec = kvplan.load_model("nemotron-h-8b")
    short = kv_cache(spec, n_ctx=4096, n_seq_max=4)
    long = kv_cache(spec, n_ctx=65536, n_seq_max=4)
    assert short.engine_log["recurrent_cells"] == 4
    assert short.engine_log["recurrent_v_bytes"] == long.engine_log["recurrent_v_bytes"]
    _assert_mib(short.engine_log["recurrent_k_bytes"], "11.25")
    _assert_mib(short.engine_log["recurrent_v_bytes"], "384.00")
    assert short.log_lines[-1].startswith(
        "llama_memory_recurrent: size =  395.25 MiB (     4 cells"
    )


def test_errors() -> None:
    spec = kvplan.load_model("llama-3.1-8b")
    with pytest.raises(UnknownEngineError):
        kv_cache(spec, n_ctx=4096, fork="vllm")
    with pytest.raises(UnknownEngineError):
        kv_cache(spec, n_ctx=4096, build=4000)
    with pytest.raises(UnitError):
        kv_cache(spec, n_ctx=4096, cache_type_k="fp8")
    with pytest.raises(UnitError):
        kv_cache(spec, n_ctx=0)
