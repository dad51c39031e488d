"""SGLang's speculative and version settings asked through `kvplan plan`: the same figures as
the library (kvplan.engines.sglang.kv_cache), and the draft pool's bytes derived by hand."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kvplan.catalog.lookup import load_model
from kvplan.cli import app
from kvplan.engines import sglang
from kvplan.hardware.lookup import find_gpu

runner = CliRunner()
ARGS = ["plan", "llama-3.1-8b", "--gpu", "h100", "-c", "8K", "--engine", "sglang"]


def test_a_standalone_drafter_adds_its_pool_in_its_own_cell_size() -> None:
    draft = load_model("llama-3.2-1b")
    result = runner.invoke(
        app,
        [
            *ARGS,
            "--speculative-algorithm",
            "STANDALONE",
            "--speculative-draft-model-path",
            "llama-3.2-1b",
            "--format",
            "json",
        ],
    )
    assert result.exit_code == 0, result.stderr
    library = sglang.kv_cache(
        load_model("llama-3.1-8b"),
        find_gpu("h100"),
        speculative_algorithm="STANDALONE",
        speculative_draft_model=draft,
    )
    tokens = library.engine_log["max_total_num_tokens"]
    assert isinstance(tokens, int)
    # the target's 32 layers x 8 heads x 128 x 2 (K, V) x 2 B = 131,072 B a token; the
    # drafter's 16 layers x 8 x 64 x 2 x 2 B = 32,768 B; both pools hold tokens + 1 rows
    assert library.kv_cache_bytes == (tokens + 1) * (131_072 + 32_768)
    doc = json.loads(result.stdout)
    assert doc["kv_cache_bytes"] == library.kv_cache_bytes


def test_the_engine_version_picks_sglangs_line_and_other_engines_refuse_the_drafter() -> None:
    old = runner.invoke(app, [*ARGS, "--engine-version", "0.4.6.post5", "--format", "json"])
    assert old.exit_code == 0, old.stderr
    refused = runner.invoke(app, [*ARGS[:-1], "vllm", "--speculative-algorithm", "EAGLE"])
    assert refused.exit_code == 2
    assert "--speculative-algorithm" in refused.stderr
