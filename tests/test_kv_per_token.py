"""KV/token means one thing in every command that shows it: the bytes one more token of one
sequence adds to the cache at the question's context (docs/formulas.md#bytes_per_token).

``kvplan calc``, ``kvplan models --context`` and ``kvplan compare`` must print the same figure
for the same model and context; the figures below are worked by hand from the bundled specs.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from kvplan import bytes_per_token, load_model
from kvplan.cli import app

runner = CliRunner()

# Llama 3.1 8B (model_specs/llama-3.1-8b.yaml): 32 full-attention layers, 8 KV heads of 128,
# bfloat16: 2 (K and V) x 32 x 8 x 128 x 2 B, at every context.
LLAMA_8B = 2 * 32 * 8 * 128 * 2  # 131,072 B
# Gemma 3 27B (model_specs/gemma-3-27b.yaml): 62 layers in the pattern 5 sliding + 1 full, so
# 10 full and 52 sliding (window 1,024); 16 KV heads of 128, bfloat16: one layer, one token
# 2 x 16 x 128 x 2 = 8,192 B. Below 1,024 tokens every layer adds; from 1,024 on only the 10 full.
GEMMA_LAYER = 2 * 16 * 128 * 2  # 8,192 B
GEMMA_SHORT = 62 * GEMMA_LAYER  # 507,904 B
GEMMA_LONG = 10 * GEMMA_LAYER  # 81,920 B

CASES = [
    pytest.param("llama-3.1-8b", "8K", LLAMA_8B, id="llama-3.1-8b@8K: 2*32*8*128*2 = 131072 B"),
    pytest.param("llama-3.1-8b", "128K", LLAMA_8B, id="llama-3.1-8b@128K: 2*32*8*128*2 = 131072 B"),
    pytest.param(
        "gemma-3-27b", "128K", GEMMA_LONG, id="gemma-3-27b@128K: 10 full x 2*16*128*2 = 81920 B"
    ),
    pytest.param(
        "gemma-3-27b", "1023", GEMMA_SHORT, id="gemma-3-27b@1023: 62 x 2*16*128*2 = 507904 B"
    ),
]


def _json(args: list[str]) -> dict[str, Any]:
    result = runner.invoke(app, [*args, "--format", "json"])
    assert result.exit_code == 0, result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def _models_figure(model: str, context: str | None) -> int:
    asked = ["models", model] + ([] if context is None else ["--context", context])
    (row,) = [r for r in _json(asked)["models"] if r["name"] == model]
    figure: int = row["bytes_per_token"]
    return figure


@pytest.mark.parametrize(("model", "context", "expected"), CASES)
def test_calc_models_and_compare_print_the_same_kv_per_token(
    model: str, context: str, expected: int
) -> None:
    calc = _json(["calc", model, "--context", context])["bytes_per_token"]
    compared = _json(["compare", model, "llama-3.1-8b", "--context", context])["models"][0]
    assert compared["model"] == model
    assert calc == _models_figure(model, context) == compared["bytes_per_token"] == expected
    assert bytes_per_token(load_model(model), context_tokens=context) == expected


def test_models_without_a_context_shows_a_short_context() -> None:
    # no --context: the first tokens of a sequence, where every attention layer adds
    assert _models_figure("gemma-3-27b", None) == GEMMA_SHORT
    assert _json(["models", "gemma-3-27b"])["context_tokens"] == 0
    assert _json(["models", "gemma-3-27b", "-c", "128K"])["context_tokens"] == 131_072


def test_models_sorts_by_kv_per_token_at_the_context() -> None:
    # at a short context gemma-3-27b (507,904 B) takes more a token than llama-3.1-8b
    # (131,072 B); at 128K less (81,920 B): --sort kv follows the context asked
    def order(*context: str) -> list[str]:
        doc = _json(["models", "--sort", "kv", *context])
        names = [r["name"] for r in doc["models"]]
        return [n for n in names if n in ("gemma-3-27b", "llama-3.1-8b")]

    assert order() == ["llama-3.1-8b", "gemma-3-27b"]
    assert order("-c", "128K") == ["gemma-3-27b", "llama-3.1-8b"]


DEFINITION = "KV/token: the bytes one more token of one sequence adds to the cache at"


@pytest.mark.parametrize(
    ("args", "at"),
    [
        (["calc", "gemma-3-27b", "-c", "128K"], "131,072 tokens"),
        (["models", "gemma-3-27b", "-c", "128K"], "131,072 tokens"),
        (["models", "gemma-3-27b"], "a short context"),
        (["compare", "gemma-3-27b", "llama-3.1-8b", "-c", "128K"], "131,072 tokens"),
    ],
    ids=["calc", "models --context", "models", "compare"],
)
def test_every_table_states_the_definition(args: list[str], at: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.stderr
    text = " ".join(result.stdout.split())  # rich may wrap a long line
    if args[0] == "calc":
        # calc words the same figure "per token ... per sequence at this context" (81,920 B)
        assert "Per token: 80.00 KiB (81,920 bytes) per sequence at this context" in text
    else:
        assert f"{DEFINITION} {at}" in text


def test_compare_and_calc_name_the_figure_alike() -> None:
    result = runner.invoke(app, ["compare", "gemma-3-27b", "llama-3.1-8b", "-c", "128K"])
    assert result.exit_code == 0, result.stderr
    # 81,920 B = 80.00 KiB, 131,072 B = 128.00 KiB
    (gemma,) = [line for line in result.stdout.splitlines() if "gemma-3-27b" in line]
    (llama,) = [line for line in result.stdout.splitlines() if "llama-3.1-8b" in line]
    assert "80.00 KiB" in gemma
    assert "128.00 KiB" in llama
    assert "KV/token" in result.stdout
    assert "KV / token" not in result.stdout
