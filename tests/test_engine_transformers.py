"""transformers profile: DynamicCache and StaticCache bytes, worked by hand.

Every expected figure is hand arithmetic on ``[batch, kv_heads, tokens, head_dim]`` tensors,
written out in the test id; none is copied from kvplan's output.
"""

from __future__ import annotations

import pytest

from kvplan import load_model, parse_spec
from kvplan.engines import transformers as hf
from kvplan.engines.base import UnknownEngineError
from kvplan.errors import UnitError
from kvplan.model.spec import ModelSpec


def _spec(**fields: object) -> ModelSpec:
    return parse_spec({"name": "t", "torch_dtype": "bfloat16", **fields})


LLAMA8B = load_model("llama-3.1-8b")
GPT_OSS_20B = load_model("gpt-oss-20b")
DEEPSEEK_V3 = load_model("deepseek-v3")


@pytest.mark.parametrize(
    ("spec", "tokens", "batch", "expected"),
    [
        pytest.param(
            LLAMA8B,
            1000,
            2,
            2 * 32 * 8 * 128 * 2 * 1000 * 2,
            id="llama3.1-8b dynamic: 2 (K,V) x 32 x 8 x 128 x 2 B x 1000 x 2 = 262144000",
        ),
        pytest.param(
            GPT_OSS_20B,
            1000,
            1,
            12 * 2 * 8 * 64 * 2 * 127 + 12 * 2 * 8 * 64 * 2 * 1000,
            id="gpt-oss-20b: 12 sliding x 2048 B x 127 + 12 full x 2048 B x 1000 = 27697152",
        ),
        pytest.param(
            GPT_OSS_20B,
            100,
            1,
            24 * 2 * 8 * 64 * 2 * 100,
            id="gpt-oss-20b at 100 < 127 tokens: every layer keeps 100 = 4915200",
        ),
        pytest.param(
            DEEPSEEK_V3,
            100,
            1,
            61 * (512 + 64) * 2 * 100,
            id="deepseek-v3 (5.24, latent): 61 x (512 K + 64 V) x 2 B x 100 = 7027200",
        ),
    ],
)
def test_dynamic_cache_bytes(spec: ModelSpec, tokens: int, batch: int, expected: int) -> None:
    result = hf.kv_cache(spec, context_tokens=tokens, batch_size=batch)
    assert result.kv_cache_bytes == expected
    assert result.engine == "transformers"


def test_dynamic_engine_log_per_kind_and_tensors() -> None:
    log = hf.kv_cache(GPT_OSS_20B, context_tokens=1000).engine_log
    assert log["sliding_attention_bytes"] == 12 * 2 * 8 * 64 * 2 * 127  # 3,121,152
    assert log["full_attention_bytes"] == 12 * 2 * 8 * 64 * 2 * 1000  # 24,576,000
    assert log["tensors"] == 24 * 2  # one K and one V tensor per layer
    assert log["k_bytes"] == log["v_bytes"] == 12 * 8 * 64 * 2 * (127 + 1000)


def test_mla_latent_from_5_24() -> None:
    # transformers 5.24 caches K = the 512-value latent and V = the 64-value RoPE part, one head
    log = hf.kv_cache(DEEPSEEK_V3, context_tokens=10).engine_log
    assert log["k_bytes"] == 61 * 512 * 2 * 10
    assert log["v_bytes"] == 61 * 64 * 2 * 10
    assert log["mla_latent_bytes"] == 61 * 576 * 2 * 10


def test_mla_k_and_v_are_split_by_their_own_head_dims() -> None:
    log = hf.kv_cache(DEEPSEEK_V3, context_tokens=10, version="5").engine_log
    assert log["k_bytes"] == 61 * 128 * 192 * 2 * 10  # nope 128 + rope 64 = 192
    assert log["v_bytes"] == 61 * 128 * 128 * 2 * 10  # v_head_dim 128
    assert log["mla_decompressed_bytes"] == 61 * 128 * 320 * 2 * 10


@pytest.mark.parametrize(
    ("tokens", "window", "kept"),
    [
        pytest.param(1000, 128, 127, id="past the window: window - 1 = 127"),
        pytest.param(127, 128, 127, id="exactly window - 1: all 127"),
        pytest.param(128, 128, 127, id="window tokens: slice [-127:] keeps 127"),
        pytest.param(50, 128, 50, id="short: all 50"),
        pytest.param(1000, 1, 1000, id="window 1 slices [0:]: all 1000"),
    ],
)
def test_sliding_tokens_kept(tokens: int, window: int, kept: int) -> None:
    assert hf.sliding_tokens_kept(tokens, window) == kept


@pytest.mark.parametrize(
    ("spec", "max_len", "expected"),
    [
        pytest.param(
            LLAMA8B,
            4096,
            2 * 32 * 8 * 128 * 2 * 4096,
            id="llama static 4096: 131072 B/token x 4096 = 536870912",
        ),
        pytest.param(
            GPT_OSS_20B,
            4096,
            12 * 2048 * 128 + 12 * 2048 * 4096,
            id="gpt-oss static: 12 sliding x 2048 x 128 (full window) + 12 x 2048 x 4096",
        ),
        pytest.param(
            GPT_OSS_20B,
            64,
            24 * 2048 * 64,
            id="gpt-oss static 64 < window: sliding layers min(128, 64) = 64",
        ),
        pytest.param(
            DEEPSEEK_V3,
            256,
            61 * (512 + 64) * 2 * 256,
            id="deepseek-v3 static (5.24, latent): 61 x 576 x 2 B x 256",
        ),
    ],
)
def test_static_cache_preallocates(spec: ModelSpec, max_len: int, expected: int) -> None:
    result = hf.kv_cache(spec, context_tokens=10, cache="static", max_cache_len=max_len)
    assert result.kv_cache_bytes == expected
    assert result.kv_cache_tokens == max_len


def test_static_ignores_tokens_written() -> None:
    a = hf.kv_cache(LLAMA8B, context_tokens=1, cache="static", max_cache_len=512)
    b = hf.kv_cache(LLAMA8B, context_tokens=500, cache="static", max_cache_len=512)
    assert a.kv_cache_bytes == b.kv_cache_bytes == 131072 * 512


def test_static_mla_refused_before_v5() -> None:
    with pytest.raises(UnitError, match="v5"):
        hf.kv_cache(DEEPSEEK_V3, context_tokens=8, cache="static", version="4.57")


def test_chunked_layers_keep_chunk_minus_one() -> None:
    spec = _spec(
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        attention_chunk_size=16,
    )
    # 2 layers x 2 tensors x 2 heads x 15 tokens x 8 dims x 2 B
    assert hf.kv_cache(spec, context_tokens=100).kv_cache_bytes == 2 * 2 * 2 * 15 * 8 * 2


def test_cache_dtype_float32_doubles() -> None:
    result = hf.kv_cache(LLAMA8B, context_tokens=10, dtype="float32")
    assert result.kv_cache_bytes == 2 * 32 * 8 * 128 * 4 * 10


def test_recurrent_state_conv_in_model_dtype_ssm_in_state_dtype() -> None:
    spec = _spec(
        num_hidden_layers=1,
        num_attention_heads=4,
        hidden_size=16,
        layer_types=["mamba"],
        mamba_d_state=8,
        mamba_d_conv=4,
        mamba_expand=2,
    )
    # Mamba1: d_inner 32; transformers keeps the whole kernel of conv history: 32 x 4 values
    # x 2 B (bf16), + ssm 32 x 8 values x 4 B (fp32)
    for tokens in (1, 1000):
        result = hf.kv_cache(spec, context_tokens=tokens, batch_size=3)
        assert result.kv_cache_bytes == 3 * (32 * 4 * 2 + 32 * 8 * 4)
        assert result.engine_log["tensors"] == 0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"context_tokens": -1},
        {"context_tokens": 1, "batch_size": 0},
        {"context_tokens": 10, "cache": "static", "max_cache_len": 5},
        {"context_tokens": 1, "dtype": "q8_0"},
    ],
)
def test_bad_input_is_a_unit_error(kwargs: dict[str, object]) -> None:
    with pytest.raises(UnitError):
        hf.kv_cache(LLAMA8B, **kwargs)  # type: ignore[arg-type]


def test_unknown_version() -> None:
    with pytest.raises(UnknownEngineError):
        hf.kv_cache(LLAMA8B, context_tokens=1, version="4.40")


def test_attention_beside_state_float32_ssm_and_the_indexer() -> None:
    from pathlib import Path

    from kvplan.importers import import_config

    falcon = import_config(Path(__file__).parent / "fixtures" / "hf" / "falcon-h1-7b").spec
    found = hf.kv_cache(falcon, context_tokens=1000)
    # K: 44 layers x 2 KV heads x 128 dims x 2 B x 1,000 tokens = 22,528,000 B (V the same);
    # state: 44 x (3,584 conv channels x 4 columns x 2 B + 786,432 SSM values x 4 B, float32
    # though the model is bfloat16) = 44 x 3,174,400 = 139,673,600 B
    assert (found.engine_log["k_bytes"], found.engine_log["v_bytes"]) == (22_528_000, 22_528_000)
    assert found.kv_cache_bytes == 2 * 22_528_000 + 139_673_600
    dsa = hf.kv_cache("deepseek-v3.2", context_tokens=1000)
    # 61 layers x 1,000 tokens x (512 latent + 128 indexer key) x 2 B = 78,080,000 B beside the
    # rope part 61 x 1,000 x 64 x 2 B = 7,808,000 B
    assert (dsa.engine_log["k_bytes"], dsa.engine_log["v_bytes"]) == (78_080_000, 7_808_000)
