"""Decode and prefill bounds, throughput against concurrency, compare: hand-worked cases."""

from __future__ import annotations

import json
import struct
from fractions import Fraction
from typing import Any

import pytest
from typer.testing import CliRunner

from kvplan import find_gpu, load_model, model_weights, parse_spec, plan
from kvplan.cli import app
from kvplan.errors import UnitError
from kvplan.perf import alternatives, fit_concurrency, perf

runner = CliRunner()
H100 = find_gpu("h100-sxm")  # 3.35 TB/s, 989.5 dense bf16 TFLOP/s
LLAMA = load_model("llama-3.1-8b")

# Llama 3.1 8B bf16: 8,030,261,248 parameters; embedding and untied head 128,256 x 4,096 each
LAYER_WEIGHTS = (8_030_261_248 - 2 * 128_256 * 4_096) * 2  # 13,959,176,192 B
HEAD = 128_256 * 4_096 * 2  # 1,050,673,152 B
ROW = 4_096 * 2  # one embedding row read per sequence
PER_TOKEN = 2 * 32 * 8 * 128 * 2  # 131,072 B of K and V per token


def test_llama_8b_batch_1_short_context_is_weight_bound() -> None:
    step = perf(LLAMA, H100, context_tokens=1).decode
    assert step.weight_read_bytes == LAYER_WEIGHTS + HEAD + ROW == 15_009_857_536
    assert step.kv_read_bytes == PER_TOKEN  # one token retained
    assert step.kv_write_bytes == PER_TOKEN  # the new token's K and V
    moved = 15_009_857_536 + 2 * PER_TOKEN
    assert step.memory_seconds == Fraction(moved, 3_350_000_000_000)
    assert step.bound == "memory"
    # at most 223.2 tokens/s; counting the whole embedding table as read gives the rough 209
    assert round(float(step.tokens_per_second()), 1) == 223.2
    weights = model_weights(LLAMA)
    assert weights.total_bytes == 8_030_261_248 * 2
    assert weights.total_bytes - weights.embedding_bytes + ROW == step.weight_read_bytes
    assert round(float(Fraction(3_350_000_000_000, weights.total_bytes))) == 209
    # 80% of bandwidth: 178.5 tokens/s
    assert step.tokens_per_second(estimated=True) == step.tokens_per_second() * Fraction(4, 5)


def test_llama_8b_batch_64_at_8k_is_dominated_by_kv_reads() -> None:
    step = perf(LLAMA, H100, context_tokens=8192, concurrency=64).decode
    assert step.kv_read_bytes == 64 * 8192 * PER_TOKEN == 68_719_476_736
    assert step.kv_read_bytes > 4 * step.weight_read_bytes
    assert step.weight_read_bytes == LAYER_WEIGHTS + HEAD + 64 * ROW
    assert step.bound == "memory"


def test_compute_binds_at_large_batches() -> None:
    # short context: bytes stay ~15.0 GB while FLOPs grow 2 x 8.03e9 a sequence; estimate
    # crosses at 15.01e9 / (3.35e12 x 0.8) = 5.60 ms = B x 16.06e9 / (989.5e12 x 0.6) -> B > 207
    result = perf(LLAMA, H100, context_tokens=1, max_concurrency=1024)
    assert [s.batch_size for s in result.curve] == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
    assert result.compute_bound_from == 256
    assert result.curve[-1].bound == "compute"
    assert result.curve[-1].flops == 1024 * (2 * 8_030_261_248 + 32 * 2 * 32 * 256 * 1)


def test_prefill_flops_by_hand() -> None:
    p = perf(LLAMA, H100, context_tokens=8192).prefill
    assert p.linear_flops == 2 * 8_030_261_248 * 8192
    # 32 layers x 2 x 32 heads x (128 + 128) dims x 8192 x 8193 / 2 causal pairs
    assert p.attention_flops == 32 * 2 * 32 * 256 * (8192 * 8193 // 2) == 17_594_333_528_064
    assert p.compute_seconds == Fraction(p.flops, 989_500_000_000_000)
    assert round(float(p.bound_seconds) * 1000, 2) == 150.74


def _spec(**extra: Any) -> Any:
    base = {
        "name": "x",
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "hidden_size": 4096,
        "torch_dtype": "bfloat16",
        "num_parameters": 7_000_000_000,
        "vocab_size": 32000,
    }
    return parse_spec({**base, **extra})


def test_sliding_window_reads_less_than_full_attention() -> None:
    full = perf(_spec(), H100, context_tokens=32768).decode
    sliding = perf(_spec(sliding_window=4096), H100, context_tokens=32768).decode
    assert full.kv_read_bytes == 32768 * PER_TOKEN
    assert sliding.kv_read_bytes == 4096 * PER_TOKEN  # capped at the window
    assert sliding.weight_read_bytes == full.weight_read_bytes
    assert sliding.tokens_per_second() > full.tokens_per_second()
    # prefill: token i attends to min(i, 4096) tokens
    pairs = 4096 * 4097 // 2 + (32768 - 4096) * 4096
    assert perf(_spec(sliding_window=4096), H100, context_tokens=32768).prefill.attention_flops == (
        32 * 2 * 32 * 256 * pairs
    )


def test_mla_reads_its_latent() -> None:
    mla = {"kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128}
    latent = perf(_spec(num_key_value_heads=32, **mla), H100, context_tokens=32768).decode
    decompressed = perf(
        _spec(num_key_value_heads=32, head_dim=192, v_head_dim=128), H100, context_tokens=32768
    ).decode
    assert latent.kv_read_bytes == 32 * 32768 * (512 + 64) * 2
    assert decompressed.kv_read_bytes == 32 * 32768 * 32 * (192 + 128) * 2
    assert latent.kv_read_bytes * 17 < decompressed.kv_read_bytes


def test_recurrent_state_is_read_once_per_step() -> None:
    spec = load_model("qwen3-next-80b-a3b")
    short, long = (perf(spec, H100, context_tokens=c).decode for c in (1024, 65536))
    state = sum(layer.state_bytes for layer in spec.layers)
    # 12 full-attention layers x 2 KV heads x 256 x (K + V) x 2 B a token, plus the states
    assert short.kv_read_bytes == 1024 * 12 * 2 * 2 * 256 * 2 + state
    assert long.kv_read_bytes - short.kv_read_bytes == (65536 - 1024) * 12 * 2 * 2 * 256 * 2


def test_moe_reads_active_weights_at_batch_1() -> None:
    spec = load_model("qwen3-30b-a3b")
    w = model_weights(spec)
    row = (spec.hidden_size or 0) * 2
    one = perf(spec, H100, context_tokens=1).decode
    many = perf(spec, H100, context_tokens=1, concurrency=64).decode
    active = spec.num_active_parameters or 0
    total = spec.num_parameters or 0
    # one sequence reads its active share of the layers; 64 sequences could touch them all
    assert one.weight_read_bytes == w.layers_bytes * active // total + w.lm_head_bytes + row
    assert many.weight_read_bytes == w.layers_bytes + w.lm_head_bytes + 64 * row


def test_tensor_parallel_splits_the_reads() -> None:
    one = perf(LLAMA, H100, context_tokens=8192).decode
    two = perf(LLAMA, H100, context_tokens=8192, tensor_parallel_size=2).decode
    assert two.kv_read_bytes * 2 == one.kv_read_bytes
    assert two.weight_read_bytes == (LAYER_WEIGHTS + HEAD) // 2 + ROW


def test_alternatives_use_the_planner() -> None:
    alts = alternatives(LLAMA, H100, context_tokens=8192)
    assert [a.label for a in alts] == ["as given", "fp8 KV cache", "half the context"]
    as_given, fp8, half = alts
    assert as_given.max_concurrency == plan(LLAMA, H100, max_model_len=8192).max_concurrency
    assert (
        fp8.max_concurrency
        == plan(LLAMA, H100, max_model_len=8192, kv_cache_dtype="fp8").max_concurrency
    )
    assert half.context_tokens == 4096
    assert fp8.step is not None
    assert as_given.step is not None
    assert fp8.step.tokens_per_second(True) > as_given.step.tokens_per_second(True)


@pytest.mark.parametrize("value", [0, 1.5, -0.1])
def test_efficiency_must_be_a_fraction(value: float) -> None:
    with pytest.raises(UnitError, match="bandwidth_efficiency must be in"):
        perf(LLAMA, H100, context_tokens=1, bandwidth_efficiency=value)


def test_perf_cli_json() -> None:
    result = runner.invoke(
        app, ["perf", "llama-3.1-8b", "-g", "h100", "-c", "8K", "-n", "64", "-f", "json"]
    )
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["schema_version"] == 1
    assert doc["decode"]["kv_read_bytes"] == 68_719_476_736
    assert doc["decode"]["bound"] == "memory"
    assert doc["max_concurrency"] == plan(LLAMA, H100, max_model_len=8192).max_concurrency
    assert doc["prefill"]["attention_flops"] == 17_594_333_528_064
    assert [a["label"] for a in doc["alternatives"]][1] == "fp8 KV cache"


def test_perf_cli_table_and_errors() -> None:
    result = runner.invoke(app, ["perf", "llama-3.1-8b", "-g", "h100", "-c", "1K"])
    assert result.exit_code == 0, result.stderr
    assert "time per token (bound: memory)" in result.stdout
    assert "what changes the ceiling" in result.stdout
    bad = runner.invoke(
        app, ["perf", "llama-3.1-8b", "-g", "h100", "--bandwidth-efficiency", "120%"]
    )
    assert bad.exit_code == 2
    assert bad.stderr == "kvplan: error: --bandwidth-efficiency: must be in (0, 1], got 120%\n"


def test_compare_cli() -> None:
    result = runner.invoke(
        app, ["compare", "llama-3.1-8b", "qwen3-8b", "gemma-3-12b", "-c", "128K", "-f", "json"]
    )
    assert result.exit_code == 0, result.stderr
    rows = {r["model"]: r for r in json.loads(result.stdout)["models"]}
    assert rows["llama-3.1-8b"]["bytes_per_token"] == PER_TOKEN
    assert rows["qwen3-8b"]["bytes_per_token"] == 36 * 2 * 8 * 128 * 2
    assert rows["llama-3.1-8b"]["kv_cache_bytes"] == 131072 * PER_TOKEN
    # Gemma 3 12B: 40 sliding layers keep 1,024 tokens, 8 global layers all 131,072
    assert rows["gemma-3-12b"]["kv_cache_bytes"] == (40 * 1024 + 8 * 131072) * 2 * 8 * 256 * 2
    assert rows["llama-3.1-8b"]["max_concurrency"] is None
    assert rows["qwen3-8b"]["note"] == "beyond its 40,960-token maximum"
    assert rows["llama-3.1-8b"]["note"] == ""
    on_gpu = runner.invoke(app, ["compare", "llama-3.1-8b", "qwen3-8b", "-g", "h100"])
    assert on_gpu.exit_code == 0, on_gpu.stderr
    assert "max sequences" in on_gpu.stdout


def test_chart_in_the_terminal() -> None:
    result = runner.invoke(app, ["chart", "llama-3.1-8b", "gemma-3-12b", "--gpu", "h100"])
    assert result.exit_code == 0, result.stderr
    pool = plan(LLAMA, H100, max_model_len=1024).kv_cache_memory_bytes / 2**30
    assert "KV cache of one sequence against context" in result.stdout
    assert f"KV pool: llama-3.1-8b ({pool:.1f})" in result.stdout
    assert "128K" in result.stdout
    throughput = runner.invoke(
        app, ["chart", "llama-3.1-8b", "-g", "h100", "--kind", "throughput", "-c", "4K"]
    )
    assert throughput.exit_code == 0, throughput.stderr
    assert "decode tokens/s against concurrency at 4,096 tokens" in throughput.stdout


def test_chart_to_png_opens(tmp_path: Any) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "kv.png"
    args = ["chart", "llama-3.1-8b", "-g", "h100", "--kv-cache-dtype", "auto"]
    result = runner.invoke(app, [*args, "--kv-cache-dtype", "fp8", "-o", str(out)])
    assert result.exit_code == 0, result.stderr
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])  # the IHDR chunk
    assert width > 300
    assert height > 200
    again = runner.invoke(app, [*args, "-o", str(out)])
    assert again.exit_code == 2
    assert out.read_bytes() == data


def test_engine_vllm_sets_the_ceiling() -> None:
    from kvplan.engines import vllm

    spec = load_model("gemma-3-12b")
    profile = vllm.profile(spec, H100, vllm.VllmConfig(max_model_len=32768))
    expected = int(profile.max_concurrency)  # vLLM prints it as a fraction; whole requests fit
    assert fit_concurrency(spec, H100, 32768, engine="vllm") == expected
    result = runner.invoke(
        app, ["perf", "gemma-3-12b", "-g", "h100", "-c", "32K", "-e", "vllm", "-f", "json"]
    )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["max_concurrency"] == expected
    bad = runner.invoke(app, ["perf", "gemma-3-12b", "-g", "h100", "-e", "sglang"])
    assert bad.exit_code == 2
    assert "allowed: ideal, vllm" in bad.stderr
