"""kvplan flags with vLLM's speculative decoding, LoRA slots and per-token-head caches: the
vLLM line carries the flags, and its verdict counts what vLLM's profile counts with them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

import kvplan
from kvplan.answers.flags import recommend
from kvplan.engines import vllm
from kvplan.engines.vllm_lora import VllmLora
from kvplan.engines.vllm_speculative import parse_speculative_config
from kvplan.errors import UnitError

runner = CliRunner()
MTP3 = '{"method": "mtp", "num_speculative_tokens": 3}'


def _flags(*args: str) -> tuple[int, dict[str, Any]]:
    from kvplan.cli import app

    result = runner.invoke(app, ["flags", *args, "-e", "vllm", "-f", "json"])
    assert result.exit_code in (0, 1), result.stderr
    (row,) = json.loads(result.stdout)["engines"]
    return result.exit_code, row


@pytest.mark.parametrize(
    ("model", "extra", "config", "words"),
    [
        # Qwen3.5 9B with MTP, 3 speculative tokens: the drafter's layer joins the pool
        ("qwen3.5-9b", ("--speculative-config", MTP3),
         {"speculative": parse_speculative_config(MTP3)},
         "--speculative-config='{\"method\": \"mtp\", \"num_speculative_tokens\": 3}'"),
        # Llama 3.1 8B with 4 adapter slots of rank 16
        ("llama-3.1-8b", ("--enable-lora", "--max-loras", "4"), {"lora": VllmLora(max_loras=4)},
         "--enable-lora --max-loras=4 --max-lora-rank=16"),
        # int8 values with an fp32 scale per token and head
        ("llama-3.1-8b", ("--kv-cache-dtype", "int8_per_token_head"),
         {"kv_cache_dtype": "int8_per_token_head"}, "--kv-cache-dtype=int8_per_token_head"),
    ],
    ids=["mtp", "lora", "int8 per token head"],
)  # fmt: skip
def test_the_vllm_line_counts_what_the_profile_counts(
    model: str, extra: tuple[str, ...], config: dict[str, Any], words: str
) -> None:
    code, row = _flags(model, "--gpu", "h100", "-c", "8K", "-n", "8", *extra)
    assert code == 0
    assert words in " ".join(row["flags"])
    # vLLM's profile of the same flags: its overhead and 8 requests' blocks, plus the null one
    cfg = vllm.config(8192, max_num_seqs=8, **config)
    profile = vllm.profile(kvplan.load_model(model), "h100", cfg)
    block = profile.page_bytes * profile.group_size
    need = (8 * profile.blocks_per_request + 1) * block
    assert row["kv_cache_bytes"] == need
    assert row["required_bytes"] == profile.stages[-1].overhead.total_bytes + need


def test_the_settings_change_the_verdict_as_they_change_the_profile() -> None:
    _, plain = _flags("llama-3.1-8b", "--gpu", "h100", "-c", "8K", "-n", "8")
    _, lora = _flags("llama-3.1-8b", "--gpu", "h100", "-c", "8K", "-n", "8", "--enable-lora")
    # one slot of rank 16 on every module: 92,356,608 B of stacks (tests/test_vllm_lora.py), and
    # the graphs captured twice
    assert lora["weights_bytes"] - plain["weights_bytes"] == 92_356_608
    assert lora["kv_cache_bytes"] == plain["kv_cache_bytes"]
    _, scaled = _flags(
        "llama-3.1-8b", "--gpu", "h100", "-c", "8K", "-n", "8", "--kv-cache-dtype",
        "int8_per_token_head",
    )  # fmt: skip
    # a 16-token block of 32 layers: 16 x 8 heads x 128 x 2 x 1 B + 16 x 8 x 2 x 4 B of scales
    # = 33,792 B a layer, 1,081,344 B a block, against 2,097,152 in bf16
    assert scaled["kv_cache_bytes"] == (8 * 512 + 1) * 1_081_344


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--enable-lora",), "--enable-lora: vLLM's setting; it applies with --engine vllm"),
        (("--speculative-config", MTP3), "--speculative-config: vLLM's setting"),
        (("-e", "vllm", "--max-loras", "4"), "--max-loras: needs --enable-lora"),
        (("-e", "vllm", "--speculative-config", "{"), "not JSON"),
    ],
)
def test_vllm_settings_elsewhere_are_refused(args: tuple[str, ...], words: str) -> None:
    from kvplan.cli import app

    result = runner.invoke(
        app, ["flags", "llama-3.1-8b", "--gpu", "h100", "-c", "8K", "-n", "8", *args]
    )
    assert result.exit_code == 2
    assert words in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_the_other_engines_have_no_per_token_head_cache() -> None:
    rows = recommend(
        "llama-3.1-8b", "h100", max_model_len=8192, concurrency=8,
        kv_cache_dtype="fp8_per_token_head",
    )  # fmt: skip
    by = {r.engine: r for r in rows}
    assert by["vllm"].fits
    assert not by["sglang"].fits
    assert "per-token-head layout" in by["sglang"].reason
    with pytest.raises(UnitError, match="--engine vllm"):
        recommend("llama-3.1-8b", "h100", max_model_len=8192, concurrency=8, lora=VllmLora())
