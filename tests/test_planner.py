"""Planner answers against hand-worked plans, and the fits / one-more-does-not invariant."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kvplan
from kvplan.errors import UnitError
from kvplan.hardware.gpus import custom_gpu
from kvplan.hardware.lookup import find_gpu
from kvplan.model.spec import parse_spec
from kvplan.planner import Plan, plan, valid_tensor_parallel_sizes
from kvplan.units import GiB

H100 = find_gpu("h100")
H100_TOTAL = 85_029_027_840  # torch total_memory of an H100 SXM 80GB: 79.19 GiB
LLAMA_8B_WEIGHTS = 8_030_261_248 * 2
LLAMA_8B_BLOCK = 16 * 131_072  # 16 tokens x 2 x 32 layers x 8 heads x 128 x 2 B


def llama8b(**kw: object) -> Plan:
    return plan(kvplan.load_model("llama-3.1-8b"), H100, **kw)  # type: ignore[arg-type]


def assert_concurrency_invariant(p: Plan) -> None:
    """The reported maximum fits on every stage and one more does not fit on some stage."""
    assert p.max_concurrency is not None
    for s in p.stages:
        assert s.request_bytes is not None
        if p.max_concurrency:  # the shared prefix is stored once there is a request
            assert p.max_concurrency * s.request_bytes + s.shared_bytes <= s.kv_cache_memory_bytes
    assert any(
        (p.max_concurrency + 1) * (s.request_bytes or 0) + s.shared_bytes > s.kv_cache_memory_bytes
        for s in p.stages
    )


def test_llama_8b_on_one_h100_hand_checked() -> None:
    p = llama8b(max_model_len=8192, gpu_memory_utilization=0.9, overhead_bytes=2 * GiB)
    usable = H100_TOTAL * 9 // 10  # 76,526,125,056
    pool = usable - LLAMA_8B_WEIGHTS - 2 * GiB
    assert p.usable_memory_bytes == usable == 76_526_125_056
    assert p.weights_bytes == LLAMA_8B_WEIGHTS == 16_060_522_496
    assert p.kv_cache_memory_bytes == pool == 58_318_118_912
    assert p.num_blocks == pool // LLAMA_8B_BLOCK == 27_808
    assert p.kv_cache_tokens == 27_808 * 16 == 444_928
    assert p.max_concurrency == 27_808 // (8192 // 16) == 54
    assert p.fits
    assert_concurrency_invariant(p)


def test_vllm_reference_budget_within_half_a_percent() -> None:
    # vLLM v0.19 on an H100 at utilization 0.95 logged 29,751 blocks for Llama 3.1 8B
    # (weights 14.99, activation 1.89, non-torch 0.25 GiB). The estimate lands within 0.5%.
    p = llama8b(max_model_len=8192, gpu_memory_utilization=0.95)
    assert abs(p.num_blocks - 29_751) / 29_751 < 0.005


def test_kv_cache_memory_skips_the_budget() -> None:
    p = llama8b(max_model_len=32768, kv_cache_memory_bytes=40 * GiB)
    assert p.kv_cache_memory_bytes == 40 * GiB
    assert p.num_blocks == 40 * GiB // LLAMA_8B_BLOCK == 20_480
    assert p.max_concurrency == 20_480 // 2048 == 10


@pytest.mark.parametrize(
    ("tp", "heads_per_rank"),
    [(1, 8), (2, 4), (4, 2), (8, 1), (16, 1)],  # 8 KV heads: replicated past TP 8
)
def test_tensor_parallel_kv_heads(tp: int, heads_per_rank: int) -> None:
    spec = kvplan.load_model("llama-3.1-70b")
    p = plan(
        spec, H100, tensor_parallel_size=tp, max_model_len=1024, kv_cache_memory_bytes=10 * GiB
    )
    per_token = 80 * 2 * heads_per_rank * 128 * 2
    assert p.num_blocks == 10 * GiB // (16 * per_token)
    assert_concurrency_invariant(p)


def test_mla_latent_is_replicated_under_tp() -> None:
    spec = kvplan.load_model("deepseek-v3")
    one = plan(
        spec,
        find_gpu("h200"),
        tensor_parallel_size=1,
        max_model_len=4096,
        kv_cache_memory_bytes=20 * GiB,
    )
    eight = plan(
        spec,
        find_gpu("h200"),
        tensor_parallel_size=8,
        max_model_len=4096,
        kv_cache_memory_bytes=20 * GiB,
    )
    block = 16 * 61 * 576 * 2  # 61 layers x (512 + 64) x 2 B, not divided by 8
    assert one.num_blocks == eight.num_blocks == 20 * GiB // block == 19_099
    assert eight.max_concurrency == 19_099 // 256 == 74


def test_sliding_window_concurrency_is_not_pool_over_context() -> None:
    # gpt-oss-20b: 12 sliding layers (window 128) need cdiv(127, 16) + 1 = 9 blocks each,
    # 12 full layers 8192 / 16 = 512; a page is 16 x 2 x 8 x 64 x 2 = 32,768 B.
    spec = kvplan.load_model("gpt-oss-20b")
    p = plan(spec, H100, max_model_len=8192, kv_cache_memory_bytes=4 * GiB)
    request = (12 * 9 + 12 * 512) * 32_768
    assert p.request_bytes == request == 204_865_536
    assert p.max_concurrency == 4 * GiB // request == 20
    naive = 4 * GiB // (8192 * 24 * 2 * 8 * 64 * 2)
    assert naive == 10 != p.max_concurrency
    # ideal retention is 12 x 128 + 12 x 8192 tokens; blocks add the sliding layers' slack
    assert p.ideal_request_bytes == (12 * 128 + 12 * 8192) * 2048
    assert p.paged_waste_bytes == request - (12 * 128 + 12 * 8192) * 2048
    assert_concurrency_invariant(p)


def test_hybrid_state_counts_per_request() -> None:
    # Jamba: 4 attention layers (page 16 x 4096 B) + 28 Mamba1 layers of 622,592 B state
    spec = kvplan.load_model("jamba-v0.1")
    p = plan(spec, H100, max_model_len=4096, kv_cache_memory_bytes=8 * GiB)
    request = 4 * 256 * 16 * 4096 + 17_432_576
    assert p.request_bytes == request
    assert p.max_concurrency == 8 * GiB // request


def test_pipeline_parallel_tightest_stage() -> None:
    spec = kvplan.load_model("llama-3.1-8b")
    p = plan(spec, H100, pipeline_parallel_size=2, max_model_len=8192, overhead_bytes=2 * GiB)
    embed = 128_256 * 4096 * 2
    layers = (8_030_261_248 - 2 * 128_256 * 4096) * 2
    assert [s.weights_bytes for s in p.stages] == [layers // 2 + embed] * 2
    pool = H100_TOTAL * 9 // 10 - (layers // 2 + embed) - 2 * GiB
    # each stage holds 16 layers: a block is half as large
    assert p.stages[0].num_blocks == pool // (LLAMA_8B_BLOCK // 2)
    assert p.max_concurrency == p.stages[0].num_blocks // 512
    assert (p.stages[0].first_layer, p.stages[0].last_layer) == (0, 15)
    assert p.num_gpus == 2
    assert_concurrency_invariant(p)


def test_uneven_pipeline_stages_take_the_minimum() -> None:
    spec = kvplan.load_model("llama-3.1-8b")  # 32 layers on 3 stages: 11, 11, 10
    p = plan(
        spec, H100, pipeline_parallel_size=3, max_model_len=8192, kv_cache_memory_bytes=10 * GiB
    )
    assert [s.last_layer - s.first_layer + 1 for s in p.stages] == [11, 11, 10]
    assert p.num_blocks == 10 * GiB // (16 * 11 * 4096)
    assert_concurrency_invariant(p)


def test_shared_prefix_is_stored_once() -> None:
    # 8 GiB pool; 8192-token requests of 512 blocks of 2 MiB; a 4096-token prefix = 256 blocks
    p = llama8b(max_model_len=8192, kv_cache_memory_bytes=8 * GiB, shared_prefix_tokens=4096)
    shared = 256 * LLAMA_8B_BLOCK
    assert p.max_concurrency == (8 * GiB - shared) // (256 * LLAMA_8B_BLOCK) == 15
    assert llama8b(max_model_len=8192, kv_cache_memory_bytes=8 * GiB).max_concurrency == 8
    assert_concurrency_invariant(p)


def test_shared_prefix_counts_whole_blocks_only() -> None:
    a = llama8b(max_model_len=8192, kv_cache_memory_bytes=8 * GiB, shared_prefix_tokens=4096)
    b = llama8b(max_model_len=8192, kv_cache_memory_bytes=8 * GiB, shared_prefix_tokens=4111)
    assert a.max_concurrency == b.max_concurrency


def test_length_mix() -> None:
    # 1,200 + 5,800 + 400 tokens: 75 + 363 + 25 = 463 blocks of 2 MiB
    p = llama8b(kv_cache_memory_bytes=8 * GiB, lengths=[1200, 5800, 400])
    mix = p.length_mix
    assert mix is not None
    assert mix.paged_bytes == 463 * LLAMA_8B_BLOCK
    assert mix.expected_concurrency == 8 * GiB * 3 // (463 * LLAMA_8B_BLOCK) == 26
    assert mix.ideal_bytes == 7400 * 131_072
    assert mix.paged_waste_bytes == 8 * 131_072  # 5,800 rounds up to 5,808
    assert mix.worst_case_concurrency == 8 * GiB // (363 * LLAMA_8B_BLOCK) == 11
    assert (mix.mean_tokens, mix.p50_tokens, mix.max_tokens) == (2466, 1200, 5800)


def test_max_context_for_concurrency() -> None:
    # 16 requests in a 40 GiB pool: 20,480 blocks / 16 = 1,280 blocks = 20,480 tokens each
    p = llama8b(concurrency=16, kv_cache_memory_bytes=40 * GiB)
    assert p.max_context_tokens == 20_480
    assert llama8b(max_model_len=20_480, kv_cache_memory_bytes=40 * GiB).max_concurrency == 16
    assert llama8b(max_model_len=20_481, kv_cache_memory_bytes=40 * GiB).max_concurrency == 15


def test_max_context_capped_by_the_model() -> None:
    p = llama8b(concurrency=1, kv_cache_memory_bytes=40 * GiB)
    assert p.max_context_tokens == 131_072
    assert "model's maximum" in p.message


def test_does_not_fit_says_what_to_change() -> None:
    p = llama8b(
        max_model_len=131_072,
        concurrency=64,
        tensor_parallel_size=1,
        kv_cache_memory_bytes=40 * GiB,
    )
    assert not p.fits
    assert p.max_concurrency == 2
    assert "more than the 40.00 GiB available" in p.message
    assert "lower --max-model-len" in p.message
    assert "64 fit up to 5,120 tokens" in p.message  # 20,480 blocks / 64 = 320 blocks


def test_weights_larger_than_gpu() -> None:
    p = plan(kvplan.load_model("llama-3.1-405b"), H100, max_model_len=8192)
    assert not p.fits
    assert p.kv_cache_memory_bytes == 0
    assert "add GPUs" in p.message


def test_model_without_any_cache_is_refused() -> None:
    spec = parse_spec(
        {
            "name": "mlp",
            "num_hidden_layers": 2,
            "num_attention_heads": 1,
            "head_dim": 8,
            "torch_dtype": "bf16",
            "layer_types_pattern": ["no_cache"],
            "num_parameters": 1000,
        }
    )
    with pytest.raises(UnitError, match="no per-request cache"):
        plan(spec, H100, max_model_len=10, kv_cache_memory_bytes=GiB)


def test_valid_tensor_parallel_sizes() -> None:
    assert valid_tensor_parallel_sizes(kvplan.load_model("llama-3.1-8b")) == [1, 2, 4, 8]
    # Falcon 7B: 71 query heads divide by nothing but 1
    assert valid_tensor_parallel_sizes(kvplan.load_model("falcon-7b")) == [1]


def test_smallest_deployment_beats_every_smaller_one() -> None:
    spec = kvplan.load_model("llama-3.1-70b")
    best = plan(spec, H100, max_model_len=32768, concurrency=64, overhead_bytes=3 * GiB)
    assert best.fits
    assert best.searched
    assert (best.max_concurrency or 0) * best.replicas >= 64
    # brute force: no (tp, pp, replicas) with fewer GPUs holds 64 requests
    for tp in valid_tensor_parallel_sizes(spec):
        for pp in range(1, 9):
            p = plan(
                spec,
                H100,
                tensor_parallel_size=tp,
                pipeline_parallel_size=pp,
                max_model_len=32768,
                overhead_bytes=3 * GiB,
            )
            per_replica = p.max_concurrency or 0
            if per_replica and tp * pp * -(-64 // per_replica) < best.num_gpus:
                pytest.fail(f"TP {tp} x PP {pp} holds 64 on fewer GPUs than {best.num_gpus}")


def test_custom_gpu_memory() -> None:
    gpu = custom_gpu(24 * GiB)
    p = plan(kvplan.load_model("qwen3-8b"), gpu, max_model_len=4096, overhead_bytes=GiB)
    weights = p.weights_bytes
    assert p.kv_cache_memory_bytes == 24 * GiB * 9 // 10 - weights - GiB


@pytest.mark.parametrize("bad", [0, "1.5", -0.1, "x"])
def test_bad_utilization(bad: object) -> None:
    with pytest.raises(UnitError):
        llama8b(max_model_len=1024, gpu_memory_utilization=bad)  # type: ignore[arg-type]


def test_utilization_is_exact() -> None:
    assert llama8b(max_model_len=1024).gpu_memory_utilization == Fraction(9, 10)


# --- property: every answer fits and one more does not, for random specs and budgets ---------

kinds = st.sampled_from(
    ["full_attention", "sliding_attention", "chunked_attention", "mamba", "no_cache"]
)


@st.composite
def random_specs(draw: st.DrawFn) -> kvplan.ModelSpec:
    # layer 0 always caches, so that every model keeps something per request
    pattern = [draw(st.sampled_from(["full_attention", "sliding_attention"]))]
    pattern += draw(st.lists(kinds, max_size=3))
    return parse_spec(
        {
            "name": "r",
            "num_hidden_layers": draw(st.integers(1, 16)),
            "num_attention_heads": 8,
            "num_key_value_heads": draw(st.sampled_from([1, 2, 4, 8])),
            "head_dim": draw(st.sampled_from([32, 64, 128])),
            "hidden_size": 512,
            "torch_dtype": "bfloat16",
            "max_position_embeddings": draw(st.integers(1, 200_000)),
            "sliding_window": draw(st.integers(1, 5000)),
            "attention_chunk_size": draw(st.integers(1, 5000)),
            "mamba_d_state": 16,
            "mamba_d_conv": 4,
            "mamba_expand": 2,
            "layer_types_pattern": pattern,
            "num_parameters": 1_000_000,
        }
    )


@settings(max_examples=120, deadline=None)
@given(
    random_specs(),
    st.integers(1, 64 * GiB),
    st.integers(1, 70_000),
    st.sampled_from([1, 2, 4]),
    st.sampled_from([1, 16, 64]),
    st.integers(0, 5000),
)
def test_invariant_max_concurrency(
    spec: kvplan.ModelSpec, pool: int, length: int, tp: int, block: int, prefix: int
) -> None:
    p = plan(
        spec,
        H100,
        tensor_parallel_size=tp,
        max_model_len=length,
        kv_cache_memory_bytes=pool,
        block_size=block,
        shared_prefix_tokens=min(prefix, length),
    )
    assert_concurrency_invariant(p)


@settings(max_examples=120, deadline=None)
@given(random_specs(), st.integers(1, 64 * GiB), st.integers(1, 500), st.sampled_from([1, 16]))
def test_invariant_max_context(spec: kvplan.ModelSpec, pool: int, n: int, block: int) -> None:
    p = plan(spec, H100, concurrency=n, kv_cache_memory_bytes=pool, block_size=block)
    best = p.max_context_tokens
    assert best is not None
    cap = spec.max_position_embeddings or 0
    if best >= 1:
        at = plan(spec, H100, max_model_len=best, kv_cache_memory_bytes=pool, block_size=block)
        assert (at.max_concurrency or 0) >= n
    if 1 <= best < cap:
        over = plan(
            spec, H100, max_model_len=best + 1, kv_cache_memory_bytes=pool, block_size=block
        )
        assert (over.max_concurrency or 0) < n


def test_shared_prefix_waste_is_never_negative() -> None:
    p = llama8b(max_model_len=8192, kv_cache_memory_bytes=8 * GiB, shared_prefix_tokens=4096)
    # the private part is 256 full blocks (4,096 tokens): nothing is wasted
    assert p.request_bytes == p.ideal_request_bytes == 4096 * 131_072
    assert p.paged_waste_bytes == 0


def test_mean_and_p99_lengths() -> None:
    # 8 GiB pool: a 1,500-token request takes cdiv(1500, 16) = 94 blocks, a 12,000-token one 750
    p = llama8b(kv_cache_memory_bytes=8 * GiB, mean_length=1500, p99_length=12_000)
    mix = p.length_mix
    assert mix is not None
    assert mix.expected_concurrency == 8 * GiB // (94 * LLAMA_8B_BLOCK) == 43
    assert mix.worst_case_concurrency == 8 * GiB // (750 * LLAMA_8B_BLOCK) == 5
    assert (mix.mean_tokens, mix.p99_tokens, mix.num_requests) == (1500, 12_000, 0)


def test_length_mix_with_the_deployment_search() -> None:
    spec = kvplan.load_model("llama-3.1-8b")
    p = plan(
        spec,
        H100,
        max_model_len=8192,
        concurrency=100,
        lengths=[1000, 3000],
        overhead_bytes=2 * GiB,
    )
    assert p.searched
    assert p.length_mix is not None
    assert p.length_mix.num_requests == 2


def test_float32_checkpoint_is_served_in_bfloat16() -> None:
    spec = kvplan.load_model("gemma-2-9b")  # ships torch_dtype float32
    assert spec.torch_dtype == "float32"
    p = plan(spec, H100, max_model_len=4096)
    assert p.kv_dtype == "bfloat16"
    assert p.weights_model_dtype == "bfloat16"
    assert plan(spec, H100, max_model_len=4096, dtype="float32").kv_dtype == "float32"


def test_given_kv_memory_larger_than_the_gpu_does_not_fit() -> None:
    p = llama8b(max_model_len=8192, kv_cache_memory_bytes=70 * GiB)
    assert not p.fits
    assert "lower --kv-cache-memory" in p.message


def test_no_question_means_the_models_full_context() -> None:
    assert llama8b().max_model_len == 131_072


def test_mixed_checkpoint_is_described() -> None:
    p = plan(kvplan.load_model("gpt-oss-20b"), H100, max_model_len=4096)
    assert "mxfp4 for 19,110,297,600 parameters" in p.weights_format


# --- messages, advice, free memory ------------------------------------------------------------


def test_singular_when_one_request_fits() -> None:
    # gpt-oss-120b on one H100 holds one request of 131,072 tokens
    p = plan(kvplan.load_model("gpt-oss-120b"), find_gpu("h100"), max_model_len=131_072)
    assert p.max_concurrency == 1
    assert p.message == "1 concurrent request of 131,072 tokens fits"


def test_none_fits_says_so_without_at_most_zero() -> None:
    # a given 1 GiB pool; a 32,768-token request of Llama 3.1 8B needs 4 GiB
    p = plan(
        kvplan.load_model("llama-3.1-8b"),
        find_gpu("h100"),
        max_model_len=32_768,
        kv_cache_memory_bytes=GiB,
    )
    assert not p.fits
    assert "not one request fits at that length" in p.message
    assert "at most 0" not in p.message
    assert "1 fits up to 8,192 tokens each" in p.message  # 1 GiB / 131,072 B = 8,192 tokens
    assert "raise --kv-cache-memory" in p.message
    assert "--gpu-memory-utilization" not in p.message


def test_advice_leaves_out_what_is_already_set() -> None:
    p = plan(
        kvplan.load_model("llama-3.1-8b"),
        find_gpu("h100"),
        max_model_len=131_072,
        concurrency=100,
        tensor_parallel_size=1,
        kv_cache_dtype="fp8",
        gpu_memory_utilization=0.95,
        quantization="fp8",
    )
    assert not p.fits
    assert "100 requests of 131,072 tokens" in p.message
    for already in ("--kv-cache-dtype fp8", "--gpu-memory-utilization", "--quantization"):
        assert already not in p.message
    assert "add GPUs (-tp/-pp)" in p.message
    bf16 = plan(
        kvplan.load_model("llama-3.1-8b"),
        find_gpu("h100"),
        max_model_len=131_072,
        concurrency=100,
        tensor_parallel_size=1,
    )
    assert "use --kv-cache-dtype fp8" in bf16.message
    assert "raise --gpu-memory-utilization" in bf16.message


def test_free_is_what_the_deployment_could_still_use() -> None:
    # usable = floor(85,029,027,840 x 0.9) = 76,526,125,056 B; weights 16,060,522,496 B;
    # overhead 2 GiB -> pool 58,318,118,912 B. A 32,768-token request: 4,294,967,296 B.
    spec, h100 = kvplan.load_model("llama-3.1-8b"), find_gpu("h100")
    p = plan(spec, h100, max_model_len=32_768, overhead_bytes=2 * GiB)
    assert p.kv_cache_memory_bytes == 58_318_118_912
    assert p.max_concurrency == 13
    assert p.free_memory_bytes == 58_318_118_912 - 13 * 4_294_967_296 == 2_483_544_064
    assert p.headroom_bytes == 85_029_027_840 - 76_526_125_056 == 8_502_902_784
    ten = plan(
        spec, h100, max_model_len=32_768, concurrency=10, tensor_parallel_size=1,
        overhead_bytes=2 * GiB,
    )
    assert ten.free_memory_bytes == 58_318_118_912 - 10 * 4_294_967_296 == 15_368_445_952


def test_pool_note_explains_sliding_layers() -> None:
    # gpt-oss-120b: 18 sliding (window 128) + 18 full layers, 2 x 8 x 64 x 2 = 2,048 B a token
    # a layer. A sliding layer holds cdiv(128, 16) + 1 = 9 blocks = 144 tokens. One request of
    # 131,072 tokens: 18 x 2,048 x (131,072 + 144) = 4,837,146,624 B; a 16-token block of every
    # layer is 16 x 36 x 2,048 = 1,179,648 B, so the request is 4,837,146,624 x 16 / 1,179,648
    # = 65,608 pool tokens.
    p = plan(kvplan.load_model("gpt-oss-120b"), find_gpu("h100"), max_model_len=131_072)
    assert p.request_bytes == 18 * 2048 * (131_072 + 144) == 4_837_146_624
    note = p.pool_note()
    assert "takes the room of 65,608 of them" in note
    assert "18 sliding_attention layers keep at most 144 tokens" in note
    dense = plan(kvplan.load_model("llama-3.1-8b"), find_gpu("h100"), max_model_len=8192)
    assert dense.pool_note() == ""


def test_pool_note_says_nothing_of_layers_that_cache_nothing() -> None:
    # one sliding (window 1,024), one full and two no_cache layers (Dory's MLP layers, NAS's
    # no-op attention): the note names the sliding layer alone; a no_cache layer keeps no state
    spec = parse_spec(
        {
            "name": "mixed", "num_hidden_layers": 4, "num_attention_heads": 8,
            "num_key_value_heads": 8, "head_dim": 128, "torch_dtype": "bfloat16",
            "sliding_window": 1024, "num_parameters": 10**9,
            "layer_types": ["sliding_attention", "no_cache", "full_attention", "no_cache"],
        },
        "mixed.yaml",
    )
    note = plan(spec, find_gpu("h100"), max_model_len=32_768).pool_note()
    # cdiv(1,024, 16) + 1 = 65 blocks = 1,040 tokens
    assert note.endswith("since its 1 sliding_attention layers keep at most 1,040 tokens")
    assert "no_cache" not in note
