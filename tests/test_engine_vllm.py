"""vLLM v0.19 start-up figures recomputed from each reference log's settings and config.

The cases are the vLLM v0.19.0 H100 logs of the shared reference (engine_logs.yaml, ids
``vllm-llmd-*``), numbers copied here. A log prints ``Available KV cache memory`` with 2 decimals,
which pins the bytes only to [x - 0.005, x + 0.005) GiB: the blocks for both ends must bracket
the logged ``num_gpu_blocks``; from the logged blocks, the printed tokens and concurrency follow
exactly.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from typing import NamedTuple

import pytest

import kvplan
from kvplan.engines import vllm
from kvplan.hardware.lookup import find_gpu
from kvplan.units import GiB, cdiv


class Case(NamedTuple):
    """A reference log: settings (H100, utilization 0.95, 8,192 tokens) and printed figures."""

    id: str
    model: str
    tp: int
    pp: int
    kv: str | None
    dtype: str | None
    quant: str | None
    available_gib: float
    blocks: int
    tokens: int
    concurrency: float


CASES = [
    Case(
        "llama-3-1-8b-instruct-tp1-pp1-len8192",
        "llama-3.1-8b",
        1,
        1,
        None,
        None,
        None,
        58.11,
        29751,
        476016,
        58.11,
    ),
    Case(
        "llama-3-1-8b-instruct-tp2-pp1-len8192",
        "llama-3.1-8b",
        2,
        1,
        None,
        None,
        None,
        63.76,
        65293,
        1044688,
        127.53,
    ),
    Case(
        "llama-3-1-8b-instruct-tp4-pp1-len8192",
        "llama-3.1-8b",
        4,
        1,
        None,
        None,
        None,
        67.44,
        138112,
        2209792,
        269.75,
    ),
    Case(
        "llama-3-1-8b-instruct-tp1-pp2-len8192",
        "llama-3.1-8b",
        1,
        2,
        None,
        None,
        None,
        66.54,
        67207,
        1075312,
        131.26,
    ),
    Case(
        "llama-3-1-8b-instruct-tp1-pp1-len8192-kvfp8-explicit-dtype",
        "llama-3.1-8b",
        1,
        1,
        "fp8",
        None,
        None,
        58.11,
        59502,
        952032,
        116.21,
    ),
    Case(
        "llama-3-1-8b-instruct-tp1-pp1-len8192-float32",
        "llama-3.1-8b",
        1,
        1,
        None,
        "float32",
        None,
        42.8,
        10956,
        175296,
        21.4,
    ),
    Case(
        "llama-3-1-8b-instruct-tp1-pp1-len8192-qfp8",
        "llama-3.1-8b",
        1,
        1,
        None,
        None,
        "fp8",
        64.61,
        33078,
        529248,
        64.61,
    ),
    Case(
        "qwen3-8b-tp1-pp1-len8192", "qwen3-8b", 1, 1, None, None, None, 57.5, 26168, 418688, 51.11
    ),
    Case(
        "codellama-7b-hf-tp1-pp1-len8192",
        "codellama-7b",
        1,
        1,
        None,
        None,
        None,
        61.66,
        7891,
        126256,
        15.41,
    ),
    Case(
        "deepseek-v2-lite-chat-tp1-pp1-len8192",
        "deepseek-v2-lite",
        1,
        1,
        None,
        None,
        None,
        43.61,
        94097,
        1505552,
        183.78,
    ),
    Case(
        "gemma-2-9b-it-tp1-pp1-len8192",
        "gemma-2-9b",
        1,
        1,
        None,
        None,
        None,
        54.12,
        21110,
        168880,
        20.6,
    ),
    Case(
        "gemma-3-12b-it-tp1-pp1-len8192",
        "gemma-3-12b",
        1,
        1,
        None,
        None,
        None,
        47.72,
        48867,
        130304,
        15.88,
    ),
    Case(
        "mixtral-8x7b-instruct-v0-1-tp2-pp1-len8192",
        "mixtral-8x7b",
        2,
        1,
        None,
        None,
        None,
        28.44,
        29121,
        465936,
        56.88,
    ),
    Case("phi-4-tp1-pp1-len8192", "phi-4", 1, 1, None, None, None, 46.08, 15098, 241568, 29.49),
]
IDS = [c.id for c in CASES]


def cfg(case: Case) -> vllm.VllmConfig:
    # every case: H100 80GB, utilization 0.95, max_model_len = max_num_batched_tokens = 8192,
    # max_num_seqs 1024, block size 16
    return vllm.config(
        8192,
        gpu_memory_utilization="0.95",
        tensor_parallel_size=case.tp,
        pipeline_parallel_size=case.pp,
        kv_cache_dtype=case.kv,
        dtype=case.dtype,
        quantization=case.quant,
        version="0.19",  # the reference logs are v0.19 runs
    )


#: The shared reference's log ids these tests check (counted by tests/test_docs.py).
REFERENCE_LOG_IDS = (
    *(f"vllm-llmd-{case.id}" for case in CASES),
    "vllm-v0-issue10517-llama31-8b-rtx3090-len20000",  # test_v0_engine_gpu_blocks
    "vllm-lmcache-faq-qwen3-32b-tp2",  # test_lmcache_faq_qwen3_32b_tp2
)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_blocks_bracket_the_printed_available_memory(case: Case) -> None:
    if case.pp > 1:
        pytest.skip("PP: one worker prints its memory, the minimum over stages sets the blocks")
    spec = kvplan.load_model(case.model)
    low = int((case.available_gib - 0.005) * GiB)
    high = int((case.available_gib + 0.005) * GiB)
    lo = vllm.from_available(spec, low, cfg(case)).num_gpu_blocks
    hi = vllm.from_available(spec, high, cfg(case)).num_gpu_blocks
    assert lo <= case.blocks <= hi


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_printed_tokens_and_concurrency_from_the_logged_blocks(case: Case) -> None:
    spec = kvplan.load_model(case.model)
    r = vllm.from_available(spec, GiB, cfg(case))
    # the rules applied to the logged block count, whatever memory produced it
    tokens = case.blocks // r.num_groups * 16
    per_request = r.blocks_per_request
    assert tokens == case.tokens
    assert f"{case.blocks / per_request:.2f}" == f"{case.concurrency:.2f}"


def test_gemma_3_groups_and_sliding_reservation() -> None:
    # 40 sliding (window 1024) + 8 full layers -> group size 8, 6 groups; a request of 8,192
    # tokens: full 512 blocks; each sliding group cdiv(min(1023 + 8192, 8192), 16) + 1 = 513
    r = vllm.from_available(kvplan.load_model("gemma-3-12b"), 47 * GiB, vllm.config(8192))
    assert (r.num_groups, r.group_size, r.padding_layers) == (6, 8, 0)
    assert r.blocks_per_request == 512 + 5 * 513
    # page: 16 tokens x 8 KV heads x 256 dims x 2 x 2 B
    assert r.page_bytes == 131_072
    assert r.num_gpu_blocks == 47 * GiB // 131_072 // 8


def test_sliding_window_saves_blocks_when_batches_are_small() -> None:
    # with 2,048 batched tokens, a 1024-token window needs cdiv(1023 + 2048, 16) + 1 = 193 blocks
    r = vllm.from_available(
        kvplan.load_model("gemma-3-12b"),
        47 * GiB,
        vllm.config(32768, max_num_batched_tokens=2048, version="0.19"),
    )
    assert r.blocks_per_request == 2048 + 5 * 193


def test_gpt_oss_padding_layers() -> None:
    # 12 sliding + 12 full -> two groups of 12, no padding; page 16 x 8 x 64 x 2 x 2 = 32,768
    r = vllm.from_available(kvplan.load_model("gpt-oss-20b"), 10 * GiB, vllm.config(8192))
    assert (r.num_groups, r.group_size, r.padding_layers, r.page_bytes) == (2, 12, 0, 32_768)


def test_group_padding() -> None:
    # Gemma 3 1B: 26 layers, 22 sliding + 4 full... 5:1 pattern over 26 layers: layers 5, 11,
    # 17, 23 are global -> group size 4, sliding in cdiv(22, 4) = 6 groups, 2 padding layers
    r = vllm.from_available(kvplan.load_model("gemma-3-1b"), 10 * GiB, vllm.config(8192))
    assert (r.group_size, r.num_groups, r.padding_layers) == (4, 7, 2)


def test_mla_page_is_one_latent() -> None:
    # DeepSeek-V2-Lite: 16 tokens x 576 values x 2 B per layer, 27 layers, not split by TP
    for tp in (1, 2):
        r = vllm.from_available(
            kvplan.load_model("deepseek-v2-lite"),
            10 * GiB,
            vllm.config(8192, tensor_parallel_size=tp),
        )
        assert r.page_bytes == 16 * 576 * 2
        assert r.num_gpu_blocks == 10 * GiB // (16 * 576 * 2) // 27


END_TO_END_LIMIT = 0.025  # per case; the mean is held to 1%


def test_end_to_end_from_model_gpu_and_flags_alone() -> None:
    """The whole start-up predicted without the logged memory: budget, overhead, blocks."""
    pool_errors, concurrency_errors = [], []
    for case in CASES:
        r = vllm.profile(kvplan.load_model(case.model), find_gpu("h100"), cfg(case))
        pool = abs(r.available_bytes / GiB - case.available_gib) / case.available_gib
        conc = abs(float(r.max_concurrency) - case.concurrency) / case.concurrency
        assert pool < END_TO_END_LIMIT, case.id
        assert conc < END_TO_END_LIMIT, case.id
        pool_errors.append(pool)
        concurrency_errors.append(conc)
    assert sum(pool_errors) / len(pool_errors) < 0.01
    assert sum(concurrency_errors) / len(concurrency_errors) < 0.01


def test_log_lines() -> None:
    r = vllm.from_available(
        kvplan.load_model("llama-3.1-8b"), 29751 * 65536 * 32, vllm.config(8192, version="0.19")
    )
    assert r.log_lines()[1:] == (
        "GPU KV cache size: 476,016 tokens",
        "Maximum concurrency for 8,192 tokens per request: 58.11x",
    )
    assert r.to_engine_result().engine_log["num_gpu_blocks"] == 29_751


def test_v0_engine_gpu_blocks() -> None:
    """vLLM V0 on an RTX 3090 (23.58 GiB), Llama 3.1 8B, max_model_len 20,000, utilization 0.9:
    'kv_cache_size=3.81GiB', '# GPU blocks: 1952', 'Maximum concurrency for 20000 tokens per
    request: 1.56x' (reference case vllm-v0-issue10517)."""
    spec = kvplan.load_model("llama-3.1-8b")
    low = vllm.v0_num_gpu_blocks(spec, int(3.805 * GiB))
    high = vllm.v0_num_gpu_blocks(spec, int(3.815 * GiB))
    assert low <= 1952 <= high
    # the budget from the printed profile: 23.58 x 0.9 - (17.06 peak torch + 0.35 non-torch)
    assert abs(23.58 * 0.9 - 17.06 - 0.35 - 3.81) < 0.01
    assert f"{1952 * 16 / 20000:.2f}" == "1.56"


def test_lmcache_faq_qwen3_32b_tp2() -> None:
    """Qwen3-32B at TP 2 on H100, max_model_len 40,960: '33.66 GB x 2 (or 275,760 tokens)',
    '6.73x', '0.2441 GB' per 1,000 tokens for the whole model (reference case
    vllm-lmcache-faq-qwen3-32b-tp2; GB are GiB)."""
    spec = kvplan.load_model("qwen3-32b")
    cfg = vllm.config(40960, tensor_parallel_size=2)
    low = vllm.from_available(spec, int(33.655 * GiB), cfg)
    high = vllm.from_available(spec, int(33.665 * GiB), cfg)
    assert low.gpu_kv_cache_tokens <= 275_760 <= high.gpu_kv_cache_tokens
    blocks = 275_760 // 16
    assert f"{blocks / cdiv(40960, 16):.2f}" == "6.73"
    assert f"{1000 * kvplan.bytes_per_token(spec) / GiB:.4f}" == "0.2441"  # 64 x 8 x 128 x 2 x 2


def test_mamba_hybrid_raises_the_attention_block_size() -> None:
    # Qwen3-Next (bf16, TP 1): an attention token is 2 KV heads x 256 x 2 (K, V) x 2 B = 2,048 B;
    # a gated-delta-net state is ((2 x 16 x 128 + 32 x 128) x 3 conv + 32 x 128 x 128) x 2 B
    # = 1,097,728 B -> blocks of 16 x cdiv(1,097,728, 16 x 2,048) = 544 tokens, page 1,114,112 B
    spec = kvplan.load_model("qwen3-next-80b-a3b")
    r = vllm.from_available(spec, 40 * GiB, vllm.config(8192, version="0.19"))
    assert r.block_size == 544
    assert r.page_bytes == 544 * 2048 == 1_114_112
    # 12 full + 36 linear layers -> groups of 12: one attention group, three state groups
    assert (r.group_size, r.num_groups) == (12, 4)
    assert r.num_gpu_blocks == 40 * GiB // 1_114_112 // 12
    # a request of 8,192 tokens: cdiv(8192, 544) = 16 attention blocks + 1 state page per group
    assert r.blocks_per_request == 16 + 3
    assert r.gpu_kv_cache_tokens == r.num_gpu_blocks // 4 * 544


def test_mamba1_hybrid_jamba() -> None:
    # Jamba: attention token 8 x 128 x 2 x 2 = 4,096 B; Mamba1 state (8192 x 3 + 8192 x 16) x 2 B
    # = 311,296 B -> blocks of 16 x cdiv(311,296, 65,536) = 80 tokens, page 327,680 B;
    # 4 attention + 28 mamba layers -> groups of 4: 1 + 7
    r = vllm.from_available(
        kvplan.load_model("jamba-v0.1"), 10 * GiB, vllm.config(4096, version="0.19")
    )
    assert (r.block_size, r.page_bytes, r.num_groups) == (80, 327_680, 8)
    assert r.blocks_per_request == cdiv(4096, 80) + 7


def test_fp8_ds_mla_layout() -> None:
    # 512 fp8 latent + 4 fp32 scales + 64 bf16 rope = 656 B per token per layer
    spec = kvplan.load_model("deepseek-v3")
    r = vllm.from_available(spec, 20 * GiB, vllm.config(8192, kv_cache_dtype="fp8_ds_mla"))
    assert r.page_bytes == 16 * 656
    assert r.num_gpu_blocks == 20 * GiB // (16 * 656) // 61


def test_int8_per_token_head_scales() -> None:
    # Llama 3.1 8B: (8 heads x 128 x 1 B + 8 fp32 scales) x 2 (K, V) = 2,112 B per token per layer
    spec = kvplan.load_model("llama-3.1-8b")
    r = vllm.from_available(spec, 10 * GiB, vllm.config(8192, kv_cache_dtype="int8_per_token_head"))
    assert r.page_bytes == 16 * 2112
    assert r.num_gpu_blocks == 10 * GiB // (16 * 2112) // 32


def test_version_0_8_keeps_sliding_layers_full_and_prints_tokens_over_length() -> None:
    # vLLM 0.8 (first V1): Gemma 3 12B's 48 layers form one group with full pages;
    # blocks = memory // 131,072 // 48; GPU KV cache size = blocks x 16; concurrency = tokens / L
    spec = kvplan.load_model("gemma-3-12b")
    r = vllm.from_available(spec, 47 * GiB, vllm.config(8192, version="0.8"))
    blocks = 47 * GiB // 131_072 // 48
    assert (r.num_groups, r.num_gpu_blocks) == (1, blocks)
    assert r.gpu_kv_cache_tokens == blocks * 16
    assert r.max_concurrency == Fraction(blocks * 16, 8192)


def test_unknown_version() -> None:
    from kvplan.engines.base import UnknownEngineError

    with pytest.raises(UnknownEngineError, match=r"modelled: 0\.8, 0\.19"):
        vllm.from_available(kvplan.load_model("llama-3.1-8b"), GiB, vllm.config(8, version="0.5"))


@pytest.mark.parametrize(
    ("typed", "line", "noted"),
    [
        ("0.19.1", "0.19", False),
        ("v0.19", "0.19", False),
        ("0.19.0", "0.19", False),
        ("0.9.1", "0.19", False),  # the hybrid KV cache manager arrived in v0.9.1
        ("0.9.0", "0.8", False),
        ("0.8.5", "0.8", False),
        ("0.32.0", "0.32", False),
        ("v0.32.1", "0.32", False),
        ("0.33.0", "0.33", False),  # read from its source only (no CPU build to run)
        ("0.33.1rc1", "0.33", True),
        ("0.40.0", "0.33", True),  # newer than all the lines: the newest, said so
        ("0.25.0", "0.25", False),  # its own line since the 0.25 rules were read
        ("0.27.0", "0.27", False),
        ("0.7.3", "0.8", True),
        # as vLLM prints a build: a local tag alone says nothing; a pre-release is noted
        ("0.32.0+cpu", "0.32", False),
        ("0.28.1rc1.dev50+gcac8a75a7.d20260828", "0.28", True),
        ("0.30.0rc2", "0.32", True),
        ("0.21.0.dev3", "0.24", True),
    ],
)
def test_engine_version_as_users_type_it(typed: str, line: str, noted: bool) -> None:
    choice = vllm.resolve_version(typed)
    assert choice.line == line
    assert bool(choice.note) is noted
    if noted:
        assert f"using the {line} rules" in choice.note


@pytest.mark.parametrize("typed", ["abc", "0", "0.19.1.2", "1e9.0", "v", "0.-1"])
def test_engine_version_that_is_not_a_version(typed: str) -> None:
    with pytest.raises(kvplan.KvplanError, match="write it as vLLM prints it"):
        vllm.resolve_version(typed)


def test_cli_says_which_line_stands_in() -> None:
    import json

    from typer.testing import CliRunner

    from kvplan.cli import app

    args = ["plan", "llama-3.1-8b", "-g", "h100", "-c", "8K", "-e", "vllm", "-f", "json"]
    newer = CliRunner().invoke(app, [*args, "--engine-version", "0.40.0"])
    doc = json.loads(newer.stdout)
    assert (doc["engine_version"], doc["engine_version_requested"]) == ("0.33", "0.40.0")
    assert "newer than all the modelled release lines" in doc["engine_version_note"]
    same = json.loads(CliRunner().invoke(app, [*args, "--engine-version", "0.33.0"]).stdout)
    assert same["engine_version_note"] == ""
    assert same["num_blocks"] == doc["num_blocks"]


def _cli(*args: str) -> tuple[int, str, str]:
    from typer.testing import CliRunner

    from kvplan.cli import app

    out = CliRunner().invoke(app, list(args))
    return out.exit_code, out.stdout, out.stderr


_MISTRAL_032 = ("plan", "mistral-7b-v0.1", "--gpu-memory", "80GiB", "-c", "16384", "-e", "vllm")
_MISTRAL_032 += ("--engine-version", "0.32", "--block-size", "128", "--kv-cache-memory", "1GiB")
_MISTRAL_032 += ("--max-num-batched-tokens", "2048", "-f", "json")


def test_async_scheduling_doubles_the_sliding_reservation() -> None:
    import json

    # Mistral 7B, window 4,096, 128-token pages of 32 layers x 8 heads x 128 x 2 x 2 B = 16 MiB:
    # 1 GiB is 64 blocks, 63 after the null block. Async scheduling (0.32's GPU default):
    # cdiv(4,095 + 2 x 2,048, 128) + 1 = 65 a request, refused, longest 62 x 128 = 7,936
    code, out, _ = _cli(*_MISTRAL_032)
    doc = json.loads(out)
    assert code == 1
    assert doc["blocks_per_request"] == 65
    assert doc["engine_log"]["estimated_max_model_len"] == 7936
    assert doc["vllm_settings"]["async_scheduling"] is True
    assert doc["vllm_settings"]["in_flight_tokens"] == 4096
    # without it: cdiv(4,095 + 2,048, 128) + 1 = 49; 64 / 49 = 1.31x, int(64 / 49 x 16,384)
    code, out, _ = _cli(*_MISTRAL_032, "--no-async-scheduling")
    doc = json.loads(out)
    assert code == 0
    assert doc["blocks_per_request"] == 49
    assert doc["kv_cache_tokens"] == 64 * 16384 // 49 == 21_399
    assert doc["vllm_settings"]["in_flight_tokens"] == 2048


def test_in_flight_tokens_follow_the_pipeline_stages() -> None:
    from kvplan.engines.vllm_flags import resolve

    spec = kvplan.load_model("mistral-7b-v0.1")
    base = vllm.config(16384, max_num_batched_tokens=2048, version="0.32")
    # vllm/config/vllm.py max_concurrent_batches: async on 1 stage 2, on pp stages pp + 1,
    # else pp; the 0.19 line reserves one batch
    for pp, on, batches in [(1, True, 2), (1, False, 1), (2, True, 3), (4, False, 4)]:
        cfg = replace(base, pipeline_parallel_size=pp, async_scheduling=on)
        assert resolve(spec, cfg, recurrent=False).in_flight_tokens == 2048 * batches
    assert resolve(spec, replace(base, version="0.19"), recurrent=False).in_flight_tokens == 2048


def test_prefix_caching_puts_mamba_state_in_align_mode() -> None:
    import json

    # Nemotron-H 8B, 1 GiB at block size 128: float32 state raises attention blocks to 1,152;
    # 56 blocks of 4 layers; 6 Mamba2 groups + 1 attention group of cdiv(8,192, 1,152) = 8
    args = ("plan", "nemotron-h-8b", "--gpu-memory", "80GiB", "-c", "8192", "-e", "vllm")
    args += ("--engine-version", "0.32", "--block-size", "128", "--kv-cache-memory", "1GiB")
    on = json.loads(_cli(*args, "-f", "json")[1])
    assert on["vllm_settings"]["mamba_cache_mode"] == "align"
    assert on["blocks_per_request"] == 6 * 3 + 8  # Mamba2: 2 state blocks + a checkpoint
    off = json.loads(_cli(*args, "--no-enable-prefix-caching", "-f", "json")[1])
    assert off["vllm_settings"]["mamba_cache_mode"] == "none"
    assert off["blocks_per_request"] == 6 + 8
    # --mamba-cache-mode none does not turn align off: vLLM sets it from prefix caching
    same = json.loads(_cli(*args, "--mamba-cache-mode", "none", "-f", "json")[1])
    assert same["blocks_per_request"] == 26
    # a gated delta net (Qwen3-Next) holds 2 state blocks: no checkpoint block
    spec = kvplan.load_model("qwen3-next-80b-a3b")
    cfg = vllm.config(8192, block_size=128, version="0.32", async_scheduling=False)
    groups = vllm.from_available(spec, GiB, cfg).groups
    assert {page.state_blocks for page, _ in groups if page.kind == "mamba"} == {2}


def test_prefix_caching_on_027_puts_mamba_prefix_models_in_all_mode() -> None:
    # vLLM 0.27 (vllm/platforms/interface.py, vllm/v1/kv_cache_interface.py): the all mode
    # raises the attention block in steps of lcm(Mamba chunk, block size) and holds
    # cdiv(max_model_len, block) state blocks per state group.
    # Nemotron-H 8B, float32 state: conv (8,192 + 2 x 8 x 128) x 3 x 2 B = 61,440 B + SSM
    # 128 x 64 x 128 x 4 B = 4,194,304 B = 4,255,744 B; an attention token 8 x 128 x 2 x 2 =
    # 4,096 B, so 1,039 tokens a state. Block size 16, chunk 128: 128 x cdiv(1,039, 128) =
    # 1,152 tokens (the align mode would take 16 x cdiv(1,039, 16) = 1,040).
    spec = kvplan.load_model("nemotron-h-8b")
    cfg = vllm.config(4096, block_size=16, version="0.27", async_scheduling=False)
    r = vllm.from_available(spec, GiB, cfg)
    assert r.settings is not None
    assert r.settings.mamba_cache_mode == "all"
    assert (r.block_size, r.page_bytes) == (1152, 1152 * 4096)
    # 1 GiB // (4 layers x 4,718,592 B) = 56 blocks; 6 state groups + 1 attention group of
    # cdiv(4,096, 1,152) = 4 blocks = 28 a request: 2.00x, int(2 x 4,096) = 8,192 tokens
    assert (r.num_gpu_blocks, r.blocks_per_request) == (56, 28)
    assert (f"{float(r.max_concurrency):.2f}", r.gpu_kv_cache_tokens) == ("2.00", 8192)
    # 20,000 tokens need 7 x cdiv(20,000, 1,152) = 126 > 56 blocks; the longest that fits
    # needs 7 x 8 = 56 blocks: 8 x 1,152 = 9,216 tokens (no null block held before 0.29)
    long = vllm.from_available(spec, GiB, replace(cfg, max_model_len=20_000))
    assert long.blocks_per_request == 126
    assert vllm.estimated_max_model_len(long) == 9216
    # Jamba v0.1 (Mamba1, bf16): its config names no chunk, so vLLM takes 2,048; a state is
    # (8,192 x 3 + 8,192 x 16) x 2 B = 311,296 B, 76 tokens, so blocks are 2,048 tokens
    # (8 MiB pages). 4 GiB // (4 layers x 8 MiB) = 128 blocks; 7 state groups + 1 attention
    # group of cdiv(8,192, 2,048) = 4 = 32 a request: 4.00x
    jamba = vllm.from_available(
        kvplan.load_model("jamba-v0.1"), 4 * GiB, replace(cfg, max_model_len=8192)
    )
    assert (jamba.block_size, jamba.page_bytes) == (2048, 8 * 2**20)
    assert (jamba.num_gpu_blocks, jamba.blocks_per_request) == (128, 32)
    # the 0.28 line puts both in the align mode: 2 state blocks, block 16 x cdiv(1,039, 16)
    align = vllm.from_available(spec, GiB, replace(cfg, version="0.28"))
    assert (align.block_size, align.settings and align.settings.mamba_cache_mode) == (
        1040,
        "align",
    )


def test_num_gpu_blocks_override_replaces_the_pool() -> None:
    # Llama 3.1 8B, 2 GiB at block size 128: 2 GiB / 16 MiB = 128 blocks, overridden to 100;
    # 64 blocks a request: 1.56x and 100 x 8,192 // 64 = 12,800 tokens (vLLM 0.32 printed the
    # same, tests/data/vllm_oracle_0.32.0.json override-llama-3.1-8b)
    cfg = vllm.config(8192, block_size=128, version="0.32", num_gpu_blocks_override=100)
    r = vllm.from_available(kvplan.load_model("llama-3.1-8b"), 2 * GiB, cfg)
    assert (r.num_gpu_blocks, r.gpu_kv_cache_tokens) == (100, 12_800)
    assert r.log_lines()[1:] == (
        "Overriding num_gpu_blocks=128 with num_gpu_blocks_override=100",
        "GPU KV cache size: 12,800 tokens, Maximum concurrency for 8,192 tokens per request:"
        " 1.56x",
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--engine-version", "0.19", "--async-scheduling"), "not modelled for vLLM's 0.19"),
        (("--engine-version", "0.8", "--mamba-cache-mode", "align"), "vLLM's 0.8 release line"),
        (("--engine-version", "0.32", "--mamba-cache-mode", "all"), "vLLM takes none, align"),
        (("-e", "ideal", "--num-gpu-blocks-override", "10"), "applies with --engine vllm only"),
    ],
    ids=lambda v: str(v)[:30],
)
def test_cache_flags_a_line_lacks_are_one_line(extra: tuple[str, ...], message: str) -> None:
    args = ["plan", "llama-3.1-8b", "--gpu-memory", "80GiB", "-c", "8192", "-e", "vllm"]
    code, _, err = _cli(*args, *extra)
    assert code == 2
    assert message in err
    assert err.count("\n") == 1


@pytest.mark.parametrize("line", ["0.19", "0.20"])
def test_prefix_caching_on_a_recurrent_hybrid_is_refused_before_024(line: str) -> None:
    args = ["plan", "nemotron-h-8b", "--gpu-memory", "80GiB", "-c", "8192", "-e", "vllm"]
    code, _, err = _cli(*args, "--engine-version", line, "--enable-prefix-caching")
    assert code == 2
    assert "align mode is modelled from vLLM 0.32 back to the 0.24 line" in err


@pytest.mark.parametrize(("line", "mode"), [("0.24", "all"), ("0.25", "all"), ("0.28", "align")])
def test_prefix_caching_on_the_024_line_is_the_027_rule(line: str, mode: str) -> None:
    # v0.24.0 and v0.25.0 read as v0.27.1: Nemotron-H (a SupportsMambaPrefixCaching model)
    # takes the all mode, a gated delta net (Qwen3-Next) the align mode's 2 state blocks
    asked = vllm.config(8192, enable_prefix_caching=True, version=line)
    nemotron = vllm.from_available(kvplan.load_model("nemotron-h-8b"), 4 * GiB, asked)
    assert nemotron.settings.mamba_cache_mode == mode
    gdn = vllm.from_available(kvplan.load_model("qwen3-next-80b-a3b"), 4 * GiB, asked)
    assert gdn.settings.mamba_cache_mode == "align"
    if line != "0.28":
        same = vllm.config(8192, enable_prefix_caching=True, version="0.27")
        assert nemotron.num_gpu_blocks == vllm.from_available(
            kvplan.load_model("nemotron-h-8b"), 4 * GiB, same
        ).num_gpu_blocks


@pytest.mark.parametrize("layout", ["int8_per_token_head", "fp8_per_token_head"])
def test_per_token_head_cache_through_plan(layout: str) -> None:
    from typer.testing import CliRunner

    from kvplan.cli import app

    # Qwen3 8B: 36 layers of 8 KV heads x 128; a token a layer holds 1 B x 8 x (128 + 128)
    # values and an fp32 scale a head for K and for V, 2,048 + 64 = 2,112 B: a 16-token
    # page is 33,792 B
    spec = kvplan.load_model("qwen3-8b")
    result = vllm.profile(spec, "H100", vllm.config(8192, kv_cache_dtype=layout))
    assert result.page_bytes == 16 * 2_112 == 33_792
    runner = CliRunner()
    args = ["plan", "qwen3-8b", "-g", "h100", "--max-model-len", "8K", "--kv-cache-dtype", layout]
    answer = runner.invoke(app, [*args, "--engine", "vllm"])
    assert answer.exit_code == 0, answer.output
    assert f"{result.gpu_kv_cache_tokens:,} tokens" in answer.output
    refused = runner.invoke(app, [*args, "--engine", "sglang"])
    assert refused.exit_code == 2
    assert f"--kv-cache-dtype {layout}: vLLM's per-token-head layout" in refused.output
