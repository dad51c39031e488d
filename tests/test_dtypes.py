"""One rule decides the cache dtype: every command and engine asks kvplan.model.dtypes."""

from __future__ import annotations

import pytest

import kvplan
from kvplan.engines import sglang, transformers, vllm
from kvplan.errors import UnitError
from kvplan.hardware.lookup import find_gpu
from kvplan.model.dtypes import cache_dtypes, served_dtype
from kvplan.model.estimator import estimate
from kvplan.planner import plan
from kvplan.units import GiB

FLOAT32_CHECKPOINTS = ("gemma-2-2b", "gemma-2-9b", "gemma-2-27b", "olmo-2-7b", "olmo-2-13b")


@pytest.mark.parametrize("name", FLOAT32_CHECKPOINTS)
def test_float32_checkpoints_are_served_and_cached_in_bf16(name: str) -> None:
    spec = kvplan.load_model(name)
    assert spec.torch_dtype == "float32"
    chosen = cache_dtypes(spec)
    assert (chosen.model.name, chosen.k.name, chosen.v.name) == ("bfloat16",) * 3
    assert "float32 checkpoint served in bfloat16" in chosen.reason


def test_olmo_2_7b_calc_and_plan_agree_at_4k() -> None:
    # 2 (K, V) x 32 layers x 32 KV heads x 128 dims x 2 B x 4,096 tokens = 2,147,483,648 B
    spec = kvplan.load_model("olmo-2-7b")
    assert estimate(spec, 4096).kv_cache_bytes == 2_147_483_648 == 2 * GiB
    p = plan(spec, find_gpu("h100"), max_model_len=4096)
    assert p.request_bytes == p.ideal_request_bytes == 2 * GiB
    assert p.kv_dtype == "bfloat16"


def test_gemma_2_9b_per_sequence_at_8k_in_bf16() -> None:
    # 21 full layers keep 8,192 tokens, 21 sliding layers their 4,096 window; a token in a
    # layer is 2 x 8 KV heads x 256 dims x 2 B = 8,192 B:
    # 21 x 8,192 x 8,192 + 21 x 8,192 x 4,096 = 1,409,286,144 + 704,643,072 = 2,113,929,216 B
    assert estimate("gemma-2-9b", 8192).kv_cache_bytes == 2_113_929_216


def test_explicit_flags_win_and_say_so() -> None:
    spec = kvplan.load_model("olmo-2-7b")
    fp8 = cache_dtypes(spec, kv_cache_dtype="fp8")
    assert (fp8.model.name, fp8.kv_dtype) == ("bfloat16", "fp8_e4m3")
    assert fp8.reason == "as given; the model runs in bfloat16"
    f32 = cache_dtypes(spec, dtype="float32")
    assert f32.k.name == "float32"
    assert f32.reason == "--dtype float32"
    split = cache_dtypes(spec, k_dtype="q8_0", v_dtype="q4_0")
    assert split.kv_dtype == "q8_0/q4_0"


def test_sglang_serves_float32_as_float16_except_gemma() -> None:
    # python/sglang/srt/configs/model_config.py: float32 -> bfloat16 for Gemma, float16 else
    assert served_dtype(kvplan.load_model("olmo-2-7b"), "sglang")[0].name == "float16"
    assert served_dtype(kvplan.load_model("gemma-2-9b"), "sglang")[0].name == "bfloat16"


def test_transformers_loads_by_its_version_rule() -> None:
    # Llama 3.1 8B at 1,000 tokens: 32 layers x 2 tensors x 8 heads x 1,000 x 128 values
    llama = kvplan.load_model("llama-3.1-8b")
    v4 = transformers.kv_cache(llama, context_tokens=1000, version="4.57")
    v5 = transformers.kv_cache(llama, context_tokens=1000, version="5.24")
    assert v4.kv_cache_bytes == 32 * 2 * 8 * 1000 * 128 * 4 == 262_144_000  # float32
    assert v5.kv_cache_bytes == 32 * 2 * 8 * 1000 * 128 * 2 == 131_072_000  # bfloat16
    assert "4.x loads in torch's default float32" in str(v4.engine_log["dtype_reason"])
    # a float32 checkpoint stays float32 under transformers v5 (no serving convention)
    olmo = transformers.kv_cache(kvplan.load_model("olmo-2-7b"), context_tokens=1000)
    assert olmo.engine_log["dtype"] == "float32"


def test_vllm_and_sglang_size_olmo_in_two_bytes() -> None:
    spec = kvplan.load_model("olmo-2-7b")
    _, groups, _, _ = vllm.layout(spec, vllm.VllmConfig(max_model_len=4096))
    # one 16-token page of one layer: 16 x 32 heads x 128 x 2 (K, V) x 2 B = 262,144 B
    assert groups[0][0].page_bytes == 262_144
    assert sglang.cell_size_bytes(spec) == 32 * 32 * 128 * 2 * 2


def test_unknown_engine_and_bad_dtype_are_unit_errors() -> None:
    spec = kvplan.load_model("llama-3.1-8b")
    with pytest.raises(UnitError, match="unknown engine"):
        served_dtype(spec, "nope")
    with pytest.raises(UnitError, match="a model runs in one of"):
        served_dtype(spec, dtype="fp8")
    with pytest.raises(UnitError):
        cache_dtypes(spec, kv_cache_dtype=["bfloat16"])  # type: ignore[arg-type]
