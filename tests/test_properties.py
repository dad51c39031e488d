"""Properties that hold for any spec: hypothesis draws the specs and the arguments."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.errors import SpecError, UnitError
from kvplan.model.estimator import estimate
from kvplan.model.layers import LAYER_KINDS
from kvplan.model.spec import SPEC_KEYS, ModelSpec, parse_spec

KINDS = list(LAYER_KINDS)
small = st.integers(min_value=1, max_value=64)


@st.composite
def valid_specs(draw: st.DrawFn) -> ModelSpec:
    n = draw(st.integers(min_value=1, max_value=12))
    kv_heads = draw(small)  # each KV head shared by a whole number of query heads
    data: dict[str, Any] = {
        "name": "h",
        "num_hidden_layers": n,
        "num_attention_heads": kv_heads * draw(st.integers(min_value=1, max_value=8)),
        "num_key_value_heads": kv_heads,
        "head_dim": draw(small),
        "torch_dtype": draw(st.sampled_from(["float32", "float16", "bfloat16"])),
        "sliding_window": draw(small),
        "attention_chunk_size": draw(small),
        "mamba_d_state": draw(small),
        "mamba_d_conv": draw(small),
        "mamba_expand": draw(small),
        "hidden_size": draw(small),
        "linear_num_key_heads": draw(small),
        "linear_num_value_heads": draw(small),
        "linear_key_head_dim": draw(small),
        "linear_value_head_dim": draw(small),
        "linear_conv_kernel_dim": draw(small),
        # DeepSeek V4's compressed and MiniMax M3's sparse layers
        "qk_rope_head_dim": 1,
        "index_head_dim": draw(small),
        "compress_ratios": draw(st.lists(st.sampled_from([0, 1, 4, 128]), min_size=n, max_size=n)),
    }
    if draw(st.booleans()):
        data["v_head_dim"] = draw(small)
    data["layer_types_pattern"] = draw(st.lists(st.sampled_from(KINDS), min_size=1, max_size=6))
    if "indexed_attention" in data["layer_types_pattern"]:  # GLM-5.3: an MLA latent + pools
        data["kv_lora_rank"] = draw(small)
        data["index_kpool"] = draw(st.integers(min_value=2, max_value=64))
    return parse_spec(data)


tokens = st.integers(min_value=0, max_value=2_000_000)
batches = st.integers(min_value=1, max_value=512)
dtypes = st.sampled_from(["auto", "fp8", "q8_0", "q4_0", "nvfp4", "float32", "bf16"])


@given(valid_specs(), tokens, tokens, batches, dtypes)
def test_monotone_in_tokens(spec: ModelSpec, a: int, b: int, batch: int, dtype: str) -> None:
    lo, hi = sorted((a, b))
    small_est = estimate(spec, lo, batch_size=batch, kv_dtype=dtype)
    big_est = estimate(spec, hi, batch_size=batch, kv_dtype=dtype)
    assert small_est.kv_cache_bytes <= big_est.kv_cache_bytes


@given(valid_specs(), tokens, batches, dtypes)
def test_linear_in_batch_and_breakdown_sums(
    spec: ModelSpec, t: int, batch: int, dtype: str
) -> None:
    one = estimate(spec, t, kv_dtype=dtype)
    many = estimate(spec, t, batch_size=batch, kv_dtype=dtype)
    assert many.kv_cache_bytes == batch * one.kv_cache_bytes
    assert many.kv_cache_bytes == sum(row.bytes for row in many.breakdown)
    assert sum(row.num_layers for row in many.breakdown) == spec.num_hidden_layers


@given(valid_specs(), tokens, dtypes)
def test_bytes_per_token_is_the_marginal_cost(spec: ModelSpec, t: int, dtype: str) -> None:
    here = estimate(spec, t, kv_dtype=dtype)
    assert estimate(spec, t + 1, kv_dtype=dtype).kv_cache_bytes - here.kv_cache_bytes == (
        here.bytes_per_token
    )


@given(st.integers(1, 8), small, small, tokens, tokens)
def test_full_attention_is_linear(layers: int, heads: int, dim: int, a: int, b: int) -> None:
    spec = parse_spec(
        {
            "name": "f",
            "num_hidden_layers": layers,
            "num_attention_heads": heads,
            "head_dim": dim,
            "torch_dtype": "bfloat16",
        }
    )
    per_token = 2 * layers * heads * dim * 2
    assert estimate(spec, a).kv_cache_bytes == a * per_token
    assert estimate(spec, a + b).kv_cache_bytes == estimate(spec, a).kv_cache_bytes + b * per_token


@given(small, st.integers(0, 10_000))
def test_sliding_is_flat_past_the_window(window: int, extra: int) -> None:
    spec = parse_spec(
        {
            "name": "s",
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "head_dim": 8,
            "torch_dtype": "float16",
            "sliding_window": window,
        }
    )
    assert estimate(spec, window).kv_cache_bytes == estimate(spec, window + extra).kv_cache_bytes
    assert estimate(spec, window + extra).bytes_per_token == 0


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 300)
    | st.text(max_size=12)
    | st.sampled_from([*KINDS, "bf16", "fp9", "q8_0"]),
    lambda children: (
        st.lists(children, max_size=6) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
keys = st.sampled_from([*SPEC_KEYS, "num_kv_heads", "bogus"])


@settings(max_examples=300)
@given(st.dictionaries(keys, json_values, max_size=14) | json_values, tokens, dtypes)
def test_random_input_gives_a_result_or_a_spec_error(data: Any, t: int, dtype: str) -> None:
    try:
        spec = parse_spec(data, "random.yaml")
    except SpecError as e:
        message = str(e)
        assert message.startswith("random.yaml")
        return
    try:
        est = estimate(spec, t, kv_dtype=dtype)
    except UnitError:
        return
    assert est.kv_cache_bytes >= 0
