"""Decode and prefill bounds, throughput against concurrency, compare: hand-worked cases."""

from __future__ import annotations

import json
import struct
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kvplan import (
    ModelNotFoundError,
    UnknownGPUError,
    custom_gpu,
    find_gpu,
    load_model,
    model_weights,
    parse_spec,
    plan,
)
from kvplan.answers.performance import (
    Comparison,
    alternatives,
    compare,
    fit_concurrency,
    memory_curve,
    not_modelled,
    perf,
)
from kvplan.cli import app
from kvplan.errors import UnitError
from kvplan.views import perf as perfview
from kvplan.views.charts import COLORS

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
    # the pool line carries its model's marker (llama is the first series: "*")
    assert f"  -*- KV pool: llama-3.1-8b ({pool:.1f} GiB)" in result.stdout
    assert "  o gemma-3-12b, KV bfloat16" in result.stdout
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


# -- the cache dtype: float32 checkpoints are served, weighed and cached in bfloat16 ----------

# Gemma 2 9B (float32 checkpoint): 42 layers alternating sliding (window 4,096) and full, 8 KV
# heads x 256 dims. In bf16 one token of one layer is 2 (K, V) x 8 x 256 x 2 B = 8,192 B.
GEMMA_9B_TOKEN_LAYER = 2 * 8 * 256 * 2  # 8,192 B
GEMMA_9B_8K = 21 * 4096 * GEMMA_9B_TOKEN_LAYER + 21 * 8192 * GEMMA_9B_TOKEN_LAYER
# 21 x (4,096 + 8,192) x 8,192 = 2,113,929,216 B = 1.96875 GiB; float32 would be 3.9375 GiB
# Weights in bf16: 9,241,705,984 parameters, the embedding 256,000 x 3,584 tied as the head
GEMMA_9B_EMBED = 256_000 * 3_584 * 2  # 1,835,008,000 B
GEMMA_9B_LAYERS = (9_241_705_984 - 256_000 * 3_584) * 2  # 16,648,403,968 B


def test_gemma_2_9b_is_cached_in_bfloat16() -> None:
    assert GEMMA_9B_8K == 2_113_929_216
    (row,) = compare(["gemma-2-9b"], "8K")
    assert row.kv_dtype == "bfloat16"
    assert row.model_dtype == "bfloat16"
    assert "float32 checkpoint" in row.kv_dtype_reason
    # KV/token at 8,192 tokens: the 21 sliding layers are past their 4,096 window and add
    # nothing; the 21 full layers add 21 x 8,192 B = 172,032 B (168 KiB)
    assert row.bytes_per_token == 21 * GEMMA_9B_TOKEN_LAYER == 172_032
    # one token short of the 4,096 window every layer still adds: 42 x 8,192 B
    (short,) = compare(["gemma-2-9b"], 4095)
    assert short.bytes_per_token == 42 * GEMMA_9B_TOKEN_LAYER == 344_064
    assert row.kv_cache_bytes == GEMMA_9B_8K
    assert memory_curve("gemma-2-9b", [1024, 8192]) == [42 * 1024 * 8192, GEMMA_9B_8K]
    assert memory_curve("gemma-2-9b", ["8K"], "fp8") == [GEMMA_9B_8K // 2]  # 1 B a value


def test_gemma_2_9b_sequences_on_an_h100_follow_from_the_bytes() -> None:
    (row,) = compare(["gemma-2-9b"], "8K", "h100")
    pool = plan(load_model("gemma-2-9b"), H100, max_model_len=8192).kv_cache_memory_bytes
    # paged: a sliding layer reserves cdiv(4,095, 16) + 1 = 257 blocks = 4,112 tokens
    request = 21 * (4112 + 8192) * GEMMA_9B_TOKEN_LAYER
    assert request == 2_116_681_728
    assert row.max_concurrency == pool // request == 25
    # the pool holds 26 ideal caches of 1.97 GiB but not 26 paged ones (the extra sliding
    # block per layer); float32's paged 3.94 GiB would have fit 12
    assert 26 * GEMMA_9B_8K <= pool < 26 * request
    assert pool // (2 * request) == 12


def test_gemma_2_9b_decode_reads_bfloat16_weights() -> None:
    result = perf("gemma-2-9b", "h100", context_tokens="8K")
    assert (result.model_dtype, result.kv_dtype) == ("bfloat16", "bfloat16")
    step = result.decode
    # layers + tied head + one embedding row of 3,584 x 2 B
    assert step.weight_read_bytes == GEMMA_9B_LAYERS + GEMMA_9B_EMBED + 7_168 == 18_483_419_136
    assert step.kv_read_bytes == GEMMA_9B_8K
    assert step.kv_write_bytes == 42 * GEMMA_9B_TOKEN_LAYER
    moved = 18_483_419_136 + GEMMA_9B_8K + 344_064  # 20,597,692,416 B
    assert step.memory_seconds == Fraction(moved, 3_350_000_000_000)
    assert round(float(step.tokens_per_second()), 1) == 162.6  # 3.35e12 / 20.598e9


def test_explicit_cache_dtype_names_itself() -> None:
    result = perf(LLAMA, H100, context_tokens=8192, kv_cache_dtype="fp8")
    assert result.kv_dtype == "fp8_e4m3"
    assert result.model_dtype == "bfloat16"
    assert "as given" in result.kv_dtype_reason
    assert result.decode.kv_read_bytes == 8192 * PER_TOKEN // 2


def test_perf_json_names_the_dtype_and_what_is_left_out() -> None:
    result = runner.invoke(app, ["perf", "gemma-2-9b", "-g", "h100", "-c", "8K", "-f", "json"])
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["kv_cache_dtype"] == "bfloat16"
    assert doc["model_dtype"] == "bfloat16"
    assert doc["engine"] == "ideal"
    assert "float32 checkpoint" in doc["kv_cache_dtype_reason"]
    assert doc["decode"]["kv_read_bytes"] == GEMMA_9B_8K
    assert doc["max_concurrency"] == 25
    as_given, fp8, _ = doc["alternatives"]
    assert (as_given["kv_cache_dtype"], as_given["resolved_kv_cache_dtype"]) == (None, "bfloat16")
    assert fp8["resolved_kv_cache_dtype"] == "fp8_e4m3"
    left_out = doc["not_modelled"]
    assert any(item.startswith("speculative decoding") for item in left_out)
    assert any(item.startswith("pipeline parallelism") for item in left_out)
    # one GPU, a dense model: neither tensor-parallel traffic nor MoE routing applies
    assert not any(item.startswith(("tensor-parallel", "MoE")) for item in left_out)


def test_not_modelled_names_tp_traffic_and_moe_routing_where_they_apply() -> None:
    moe = perf("qwen3-30b-a3b", H100, context_tokens=1024, tensor_parallel_size=2)
    assert moe.not_modelled[0].startswith("tensor-parallel communication")
    assert "2 ranks" in moe.not_modelled[0]
    assert moe.not_modelled[1].startswith("MoE routing")
    assert not_modelled(LLAMA, 1)[0].startswith("pipeline parallelism")
    table = runner.invoke(app, ["perf", "qwen3-30b-a3b", "-g", "h100", "-tp", "2", "-c", "1K"])
    assert table.exit_code == 0, table.stderr
    assert "not modelled (the bounds leave out):" in table.stdout
    assert "  - tensor-parallel communication" in table.stdout
    assert "  - MoE routing" in table.stdout
    assert "KV cache bfloat16 (the checkpoint's torch_dtype), weights bfloat16\n" in table.stdout


def test_perf_table_marks_the_most_that_fit() -> None:
    result = runner.invoke(app, ["perf", "gemma-2-9b", "-g", "h100", "-c", "8K"])
    assert result.exit_code == 0, result.stderr
    (line,) = [s for s in result.stdout.splitlines() if "the most that fit" in s]
    assert line.split("│")[1].strip() == "25"


# -- compare: only the columns that have values, every one labelled -------------------------


def _columns(rows: list[Comparison], gpu: str | None) -> dict[str, list[str]]:
    from rich.table import Table

    table = perfview.compare_view(8192, gpu, rows)[0]
    assert isinstance(table, Table)
    return {str(c.header): [str(cell) for cell in c.cells] for c in table.columns}


def test_compare_without_a_gpu_shows_only_columns_with_values() -> None:
    rows = compare(["gemma-2-9b", "llama-3.1-8b"], "8K")
    columns = _columns(rows, None)
    assert list(columns) == ["model", "KV dtype", "KV/token", "KV / sequence"]
    # at 8,192 tokens: gemma's 21 full layers x 8,192 B = 172,032 B (its sliding layers are past
    # their window); llama 2 x 32 x 8 x 128 x 2 = 131,072 B
    assert columns["KV/token"] == ["168.00 KiB", "128.00 KiB"]
    # 2,113,929,216 B = 1.97 GiB; 8,192 x 131,072 B = 1.00 GiB
    assert columns["KV / sequence"] == ["1.97 GiB", "1.00 GiB"]
    assert all(cell.strip() not in ("", "-") for cells in columns.values() for cell in cells)


def test_compare_on_a_gpu_adds_labelled_columns() -> None:
    rows = compare(["gemma-2-9b", "llama-3.1-8b"], 8192, H100)
    columns = _columns(rows, H100.display_name)
    assert list(columns) == [
        "model",
        "KV dtype",
        "KV/token",
        "KV / sequence",
        "max sequences",
        "decode tok/s (1 seq, est.)",
    ]
    assert columns["max sequences"][0] == "25"
    assert all(name for name in columns)


def test_compare_cli_names_each_dtype_and_why() -> None:
    result = runner.invoke(app, ["compare", "gemma-2-9b", "llama-3.1-8b", "-c", "8K"])
    assert result.exit_code == 0, result.stderr
    assert "max sequences" not in result.stdout
    assert "why each cache dtype:" in result.stdout
    (line,) = [s for s in result.stdout.splitlines() if s.startswith("  gemma-2-9b")]
    assert "bfloat16: float32 checkpoint" in line
    doc = json.loads(
        runner.invoke(
            app, ["compare", "gemma-2-9b", "llama-3.1-8b", "-c", "8K", "-f", "json", "-e", "vllm"]
        ).stdout
    )
    assert doc["engine"] == "vllm"
    gemma, llama = doc["models"]
    assert (gemma["kv_cache_dtype"], gemma["model_dtype"]) == ("bfloat16", "bfloat16")
    assert gemma["kv_cache_bytes"] == GEMMA_9B_8K
    assert "float32 checkpoint" in gemma["kv_cache_dtype_reason"]
    assert llama["kv_cache_bytes"] == 8192 * PER_TOKEN


# -- chart: pool lines in their model's marker, curves stopping where they fit ---------------


def test_throughput_chart_stops_where_the_pool_is_full() -> None:
    result = runner.invoke(
        app, ["chart", "gemma-2-9b", "llama-3.1-8b", "-g", "h100", "--kind", "throughput"]
    )
    assert result.exit_code == 0, result.stderr
    fit = fit_concurrency(LLAMA, H100, 8192)
    assert fit == plan(LLAMA, H100, max_model_len=8192).max_concurrency
    assert "  * gemma-2-9b, KV bfloat16: fits up to 25" in result.stdout
    assert f"  o llama-3.1-8b, KV bfloat16: fits up to {fit}" in result.stdout
    assert "  gemma-2-9b, KV bfloat16: stops at 25 sequences, the most that fit" in result.stdout
    assert "<- fits up to 25" in result.stdout  # written beside the curve's last point


def test_throughput_chart_says_when_nothing_fits() -> None:
    # Gemma 2 27B: 27,227,128,320 parameters x 2 B = 54.5 GB of bf16 weights on a 23.7 GB A10
    result = runner.invoke(
        app, ["chart", "gemma-2-27b", "-g", "a10", "--kind", "throughput", "-c", "4K"]
    )
    assert result.exit_code == 0, result.stderr
    assert "  * gemma-2-27b, KV bfloat16: none fits at 4,096 tokens" in result.stdout
    assert "not one sequence of 4,096 tokens fits" in result.stdout
    assert "*" not in "".join(
        line.split("|", 1)[1] for line in result.stdout.splitlines() if "|" in line
    )


def test_chart_svg_colours_each_pool_as_its_model(tmp_path: Any) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "kv.svg"
    args = ["chart", "gemma-2-9b", "llama-3.1-8b", "-g", "h100", "-o", str(out)]
    assert runner.invoke(app, args).exit_code == 0
    svg = out.read_text()
    dashed = {
        style.split("stroke: ", 1)[1].split(";")[0]
        for style in svg.split('style="')[1:]
        if "stroke-dasharray" in style.split('"', 1)[0]
    }
    assert dashed == set(COLORS[:2])  # no grey: each pool line in its model's colour


# -- arguments: names, token strings, and a UnitError for everything else -------------------


def test_names_and_token_strings_are_accepted() -> None:
    by_name = perf("qwen3-8b", "h100", context_tokens="32K")
    by_value = perf(load_model("qwen3-8b"), H100, context_tokens=32768)
    assert by_name == by_value
    assert by_name.decode.kv_read_bytes == 32768 * 36 * 2 * 8 * 128 * 2 == 4_831_838_208
    assert fit_concurrency("llama-3.1-8b", "h100", "8K") == fit_concurrency(LLAMA, H100, 8192)
    assert alternatives("llama-3.1-8b", "h100", context_tokens="8K") == alternatives(
        LLAMA, H100, context_tokens=8192
    )
    assert perf(LLAMA, H100, context_tokens=1, bandwidth_efficiency="80%") == perf(
        LLAMA, H100, context_tokens=1
    )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"concurrency": True}, "concurrency: expected an integer"),
        ({"concurrency": 2.0}, "concurrency: expected an integer"),
        ({"concurrency": 0}, "concurrency: must be at least 1"),
        ({"context_tokens": 1.5}, "context_tokens: expected an integer"),
        ({"context_tokens": float("nan")}, "context_tokens: expected an integer"),
        ({"context_tokens": float("inf")}, "context_tokens: expected an integer"),
        ({"context_tokens": True}, "context_tokens: expected an integer"),
        ({"context_tokens": "1.5"}, "context_tokens: token count '1.5'"),
        ({"context_tokens": "8G"}, "context_tokens: cannot read token count"),
        ({"context_tokens": 0}, "context_tokens: must be at least 1"),
        ({"prompt_tokens": 2.5}, "prompt_tokens: expected an integer"),
        ({"tensor_parallel_size": True}, "tensor_parallel_size: expected an integer"),
        ({"tensor_parallel_size": 0}, "tensor_parallel_size: must be at least 1"),
        ({"max_concurrency": -1}, "max_concurrency: must be at least 0"),
        ({"curve": [1, True]}, r"curve\[1\]: expected an integer"),
        ({"curve": "1,2"}, "curve: expected a sequence"),
        ({"bandwidth_efficiency": float("nan")}, r"bandwidth_efficiency must be in \(0, 1\]"),
        ({"bandwidth_efficiency": float("inf")}, r"bandwidth_efficiency must be in \(0, 1\]"),
        ({"bandwidth_efficiency": True}, "bandwidth_efficiency must be a number"),
        ({"compute_efficiency": "fast"}, "compute_efficiency 'fast' is not a fraction"),
        ({"compute_efficiency": "120%"}, r"compute_efficiency must be in \(0, 1\], got 120%"),
        ({"kv_cache_dtype": 8}, "kv_cache_dtype: expected a dtype's name"),
        ({"kv_cache_dtype": "fp9"}, "fp9"),
        ({"quantization": 4}, "quantization: expected a name"),
        ({"engine": "sglang"}, "allowed: ideal, vllm"),
    ],
    ids=lambda v: str(v),
)
def test_perf_refuses_what_it_cannot_use(kwargs: dict[str, Any], match: str) -> None:
    args = {"context_tokens": 1024, **kwargs}
    with pytest.raises(UnitError, match=match):
        perf(LLAMA, H100, **args)


@pytest.mark.parametrize(
    "call",
    [
        lambda: perf(3, H100, context_tokens=1),
        lambda: perf(LLAMA, 80, context_tokens=1),
        lambda: perf(LLAMA, custom_gpu(80 * 2**30), context_tokens=1),
        lambda: fit_concurrency(LLAMA, H100, 1.5),
        lambda: fit_concurrency(LLAMA, H100, 8192, tensor_parallel_size=False),
        lambda: alternatives(LLAMA, H100, context_tokens=float("nan")),
        lambda: alternatives(LLAMA, H100, context_tokens=8192, engine="tgi"),
        lambda: memory_curve(LLAMA, [1024, 2.5]),
        lambda: memory_curve(LLAMA, 1024),
        lambda: compare(["llama-3.1-8b"], True),
        lambda: compare("llama-3.1-8b", 8192),
    ],
    ids=[
        "spec 3",
        "gpu 80",
        "gpu without rates",
        "fit 1.5 tokens",
        "fit tp False",
        "alternatives nan",
        "alternatives tgi",
        "curve 2.5",
        "curve not a list",
        "compare True",
        "compare a str",
    ],
)
def test_every_public_function_raises_unit_error(call: Any) -> None:
    with pytest.raises(UnitError):
        call()


def test_unknown_names_raise_their_lookup_errors() -> None:
    with pytest.raises(ModelNotFoundError):
        perf("qwen3-9b", H100, context_tokens=1)
    with pytest.raises(UnknownGPUError):
        fit_concurrency(LLAMA, "h10", 8192)


# -- docs ------------------------------------------------------------------------------------


def _keys(doc: Any) -> set[str]:
    if isinstance(doc, dict):
        return set(doc) | {k for v in doc.values() for k in _keys(v)}
    if isinstance(doc, list):
        return {k for v in doc for k in _keys(v)}
    return set()


@pytest.mark.parametrize(
    "args",
    [
        ["perf", "qwen3-30b-a3b", "-g", "h100", "-tp", "2", "-c", "4K", "-f", "json"],
        ["compare", "gemma-2-9b", "llama-3.1-8b", "-g", "h100", "-c", "8K", "-f", "json"],
    ],
    ids=lambda a: a[0],
)
def test_every_json_key_is_documented(args: list[str]) -> None:
    text = (Path(__file__).resolve().parent.parent / "docs" / "json.md").read_text("utf-8")
    section = text.split(f"## `kvplan {args[0]} --format json`", 1)[1].split("\n## ", 1)[0]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.stderr
    for key in sorted(_keys(json.loads(result.stdout))):
        assert f"`{key}`" in section, f"docs/json.md does not document `{key}` of {args[0]}"


@pytest.mark.parametrize(
    "command",
    [
        ["perf", "llama-3.1-8b", "-g", "h100"],
        ["compare", "llama-3.1-8b"],
        ["chart", "llama-3.1-8b", "-g", "h100", "--kind", "throughput"],
    ],
    ids=lambda c: c[0],
)
def test_a_zero_context_names_the_option(command: list[str]) -> None:
    result = runner.invoke(app, [*command, "-c", "0"])
    assert result.exit_code == 2
    assert result.stderr == "kvplan: error: --context: must be at least 1 token, got 0\n"


# -- compare: the all-reduce of each step over the system's links -----------------------------


def test_compare_adds_the_tensor_parallel_all_reduce_of_one_step() -> None:
    # Llama 3.1 70B, TP 8 on HGX H100 (450 GB/s a GPU), one sequence: a message is
    # 1 x 8,192 x 2 B; a ring moves 2 x 7/8 of it = 28,672 B, 2 a layer, 80 layers:
    # 160 x 28,672 B / 450e9 B/s added to the step.
    (row,) = compare(["llama-3.1-70b"], "8K", H100, tensor_parallel_size=8)
    assert row.system == "hgx-h100"
    assert row.decode_tokens_per_second is not None
    assert row.decode_tokens_per_second_with_communication is not None
    added = 1 / row.decode_tokens_per_second_with_communication - 1 / row.decode_tokens_per_second
    assert added == Fraction(160 * 28_672, 450 * 10**9)


def test_compare_with_a_named_system_uses_its_links() -> None:
    # Llama 3.1 8B, TP 2 on HGX B200 links (900 GB/s): 2 x 1/2 x 4,096 x 2 B = 8,192 B a
    # ring, 2 a layer x 32 layers = 64 x 8,192 B / 900e9 B/s.
    (row,) = compare(["llama-3.1-8b"], 8192, H100, tensor_parallel_size=2, system="hgx-b200")
    assert row.system == "hgx-b200"
    assert row.decode_tokens_per_second is not None
    assert row.decode_tokens_per_second_with_communication is not None
    added = 1 / row.decode_tokens_per_second_with_communication - 1 / row.decode_tokens_per_second
    assert added == Fraction(64 * 8_192, 900 * 10**9)


def test_compare_on_one_gpu_adds_nothing_and_without_a_system_says_none() -> None:
    (one,) = compare(["llama-3.1-8b"], 8192, H100)
    assert one.system is None  # one GPU: nothing to carry
    assert one.decode_tokens_per_second_with_communication == one.decode_tokens_per_second
    (a100,) = compare(["llama-3.1-8b"], 8192, "a100", tensor_parallel_size=2)
    assert a100.system is None  # no catalog system of the A100: not estimated
    assert a100.decode_tokens_per_second_with_communication is None


def test_compare_cli_shows_the_speed_with_communication() -> None:
    args = ["compare", "llama-3.1-70b", "llama-3.1-8b", "-g", "h100", "-tp", "8", "-c", "8K"]
    table = runner.invoke(app, args)
    assert table.exit_code == 0, table.output
    assert "with comm. (est.)" in table.output
    plain = runner.invoke(app, ["compare", "llama-3.1-70b", "llama-3.1-8b", "-g", "h100"])
    assert "with comm." not in plain.output  # one GPU, no --system: nothing to add
    doc = json.loads(runner.invoke(app, [*args, "-f", "json"]).output)
    assert doc["system"] == "hgx-h100"
    first = doc["models"][0]
    # 160 x 28,672 B / 450 GB/s = 10.19 us more per token of one sequence
    added = (
        1 / first["decode_tokens_per_second_with_communication"]
        - 1 / first["decode_tokens_per_second"]
    )
    assert added == pytest.approx(160 * 28_672 / 450e9, rel=1e-6)
    bad = runner.invoke(app, [*args, "--system", "nope"])
    assert bad.exit_code == 2
    assert "unknown system" in bad.output


# -- perf names the weights as plan does; no speed where nothing fits --------------------------


@pytest.mark.parametrize(
    ("model", "format_start"),
    [
        ("Qwen/Qwen3-32B-AWQ", "awq for "),  # int4, group 128: not bfloat16
        ("Qwen/Qwen3-8B-FP8", "fp8_block128 for "),  # fp8 with 128 x 128 block scales
        ("gpt-oss-20b", "mxfp4 for "),  # the experts in MXFP4
    ],
)
def test_perf_names_the_weights_as_plan_does(model: str, format_start: str) -> None:
    asked = [model, "-g", "h100", "-c", "8K"]
    planned = runner.invoke(app, ["plan", *asked, "-f", "json"])
    assert planned.exit_code == 0, planned.stderr
    expected = json.loads(planned.stdout)["weights_format"]
    assert expected.startswith(format_start)
    assert expected.endswith(", bfloat16 for the rest")
    doc = runner.invoke(app, ["perf", *asked, "-f", "json"])
    assert doc.exit_code == 0, doc.stderr
    assert json.loads(doc.stdout)["weights_format"] == expected
    table = runner.invoke(app, ["perf", *asked])
    assert table.exit_code == 0, table.stderr
    assert f", weights {expected}\n" in table.stdout
    assert "weights bfloat16" not in table.stdout


# Llama 3.1 70B in bf16: 70,553,706,496 parameters x 2 B = 141,107,412,992 B of weights, more
# than an H100's 80 GiB (85,899,345,920 B): not one sequence fits at any context.
LLAMA_70B_WEIGHTS = 70_553_706_496 * 2


def test_compare_shows_no_speed_for_a_model_that_fits_nothing() -> None:
    assert LLAMA_70B_WEIGHTS > 80 * 2**30
    big, small = compare(["llama-3.1-70b", "llama-3.1-8b"], "8K", H100)
    assert big.max_concurrency == 0
    assert big.decode_tokens_per_second is None
    assert big.decode_tokens_per_second_with_communication is None
    assert big.no_speed_reason == "0 sequences of 8,192 tokens fit (kvplan's planner)"
    assert small.max_concurrency == fit_concurrency("llama-3.1-8b", H100, 8192) > 0
    assert small.decode_tokens_per_second is not None
    assert small.no_speed_reason is None
    columns = _columns([big, small], H100.display_name)
    assert columns["max sequences"] == ["0", f"{small.max_concurrency:,}"]
    assert columns["decode tok/s (1 seq, est.)"][0] == "-"
    doc = runner.invoke(
        app, ["compare", "llama-3.1-70b", "llama-3.1-8b", "-g", "h100", "-c", "8K", "-f", "json"]
    )
    assert doc.exit_code == 0, doc.stderr
    first = json.loads(doc.stdout)["models"][0]
    assert first["decode_tokens_per_second"] is None
    assert first["decode_tokens_per_second_with_communication"] is None
    assert first["no_speed_reason"] == "0 sequences of 8,192 tokens fit (kvplan's planner)"
    table = runner.invoke(app, ["compare", "llama-3.1-70b", "llama-3.1-8b", "-g", "h100"])
    assert "llama-3.1-70b: no decode speed, 0 sequences of 32,768 tokens fit" in table.stdout


def test_compare_with_vllm_names_vllm_when_nothing_fits() -> None:
    (row,) = compare(["llama-3.1-70b"], "8K", H100, engine="vllm")
    assert row.max_concurrency == 0
    assert row.decode_tokens_per_second is None
    assert row.no_speed_reason == "0 sequences of 8,192 tokens fit (vLLM's block pool)"


def test_perf_shows_no_speed_for_a_batch_that_does_not_fit() -> None:
    doc = json.loads(
        runner.invoke(app, ["perf", "llama-3.1-70b", "-g", "h100", "-c", "8K", "-f", "json"]).stdout
    )
    assert doc["max_concurrency"] == 0
    reason = "1 x 8,192 tokens do not fit: at most 0 sequences do (kvplan's planner)"
    decode = doc["decode"]
    assert (decode["fits"], decode["no_speed_reason"]) == (False, reason)
    for key in ("estimated_tokens_per_second", "bound_tokens_per_second", "estimated_seconds"):
        assert decode[key] is None, key
    assert decode["weight_read_bytes"] > 0  # what such a step would read is still shown
    assert doc["prefill"]["estimated_seconds"] is None
    assert doc["prefill"]["no_speed_reason"] == reason
    assert doc["replica"]["estimated_tokens_per_second_per_gpu"] is None
    assert all(s["estimated_tokens_per_second"] is None for s in doc["curve"])
    assert doc["compute_bound_from"] is None
    assert all(a["decode"] is None and a["no_speed_reason"] for a in doc["alternatives"])
    table = runner.invoke(app, ["perf", "llama-3.1-70b", "-g", "h100", "-c", "8K"]).stdout
    assert "no speed, the step never runs: " + reason in " ".join(table.split())
    assert "tok/s (estimate)" not in table
    assert "does not fit" in table


def test_perf_curve_past_the_pool_has_no_speed() -> None:
    # gemma-2-9b on an H100 at 8K: 25 sequences fit (test_perf_table_marks_the_most_that_fit);
    # asking for 32 draws the ladder 1, 2, 4, 8, 16, 32: the last row never runs
    doc = json.loads(
        runner.invoke(
            app, ["perf", "gemma-2-9b", "-g", "h100", "-c", "8K", "-n", "32", "-f", "json"]
        ).stdout
    )
    assert doc["max_concurrency"] == 25
    sizes = [(s["batch_size"], s["fits"]) for s in doc["curve"]]
    assert sizes == [(1, True), (2, True), (4, True), (8, True), (16, True), (32, False)]
    assert doc["curve"][-1]["estimated_tokens_per_second"] is None
    assert doc["curve"][-2]["estimated_tokens_per_second"] > 0
    assert doc["decode"]["no_speed_reason"] == (
        "32 x 8,192 tokens do not fit: at most 25 sequences do (kvplan's planner)"
    )


def test_perf_rates_with_tensor_parallel_are_the_groups() -> None:
    # TP 2: bytes and FLOPs are per rank; a step's tokens come from both ranks together
    table = runner.invoke(app, ["perf", "llama-3.1-8b", "-g", "h100", "-c", "8K", "-tp", "2"])
    assert table.exit_code == 0, table.stderr
    assert "tok/s (2 ranks together)" in table.stdout
    assert "tok/s (TP group)" in table.stdout
    assert "tok/s total" not in table.stdout
    one = runner.invoke(app, ["perf", "llama-3.1-8b", "-g", "h100", "-c", "8K"]).stdout
    assert "ranks together" not in one
    assert "tok/s total" in one
