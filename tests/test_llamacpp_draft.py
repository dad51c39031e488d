"""llama-server's draft model (-md, -ngld, -ctkd, -ctvd, --draft-max) in plan --engine llama.cpp:
a second context of the draft model with the target's -c, -np, -ub and flash attention
(common_base_params_to_speculative in llama.cpp 0c1e570), its buffers beside the target's."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from typer.testing import CliRunner

import kvplan
from kvplan.answers.plans import answer
from kvplan.answers.question import Question
from kvplan.cli import app
from kvplan.engines import llamacpp
from kvplan.engines.llamacpp_draft import LlamaCppDraft
from kvplan.engines.llamacpp_plan import LlamaCppAsk, budget
from kvplan.errors import UnitError

runner = CliRunner()
TARGET = kvplan.load_model("llama-3.1-8b")
DRAFT = kvplan.load_model("llama-3.2-1b")
GPU = kvplan.find_gpu("rtx-4090")
ASK = LlamaCppAsk(model="llama-3.1-8b", n_ctx=8192, n_gpu_layers=33)


def test_the_draft_context_takes_the_targets_cells_and_its_own_cache_types() -> None:
    # Llama 3.2 1B: 16 layers x 8 KV heads x 64 x (K + V) x 2 B = 32,768 B a cell;
    # 8,192 cells = 268,435,456 B. In q8_0 (34 B per 32 values): 16 x 8 x 64 x 2 x 34 / 32
    # = 17,408 B a cell, 142,606,336 B.
    for (k, v), expected in ((("f16", "f16"), 268_435_456), (("q8_0", "q8_0"), 142_606_336)):
        cache = llamacpp.kv_cache(DRAFT, n_ctx=8192, cache_type_k=k, cache_type_v=v)
        assert cache.kv_cache_bytes == expected
        draft = LlamaCppDraft(DRAFT, "llama-3.2-1b", type_k=k, type_v=v)
        with_draft = budget(TARGET, GPU, replace(ASK, draft=draft))
        kv = [b.bytes for b in with_draft.buffers if b.kind == "draft kv" and b.device == "CUDA0"]
        assert kv == [expected]


def test_each_device_holds_the_target_and_the_draft_as_llama_cpp_allocates_them_apart() -> None:
    draft = LlamaCppDraft(DRAFT, "llama-3.2-1b")
    alone = budget(TARGET, GPU, ASK)
    both = budget(TARGET, GPU, replace(ASK, draft=draft))
    # the draft alone, run with the target's settings on its own
    own = budget(DRAFT, GPU, replace(ASK, model="llama-3.2-1b", n_gpu_layers=17))
    for a, b, d in zip(alone.layout.devices, both.layout.devices, own.layout.devices, strict=True):
        assert b.total_bytes == a.total_bytes + d.total_bytes
        assert b.draft_bytes == d.total_bytes
    assert both.command.endswith("-md MODEL.gguf -ngld 17 --fit off")


def test_draft_layers_on_the_host_move_its_weights_and_cache_there() -> None:
    on_gpu = budget(TARGET, GPU, replace(ASK, draft=LlamaCppDraft(DRAFT, "d")))
    on_host = budget(TARGET, GPU, replace(ASK, draft=LlamaCppDraft(DRAFT, "d", n_gpu_layers=0)))
    assert on_host.layout.gpus[0].draft_bytes < on_gpu.layout.gpus[0].draft_bytes
    assert on_host.layout.host.draft_bytes > on_gpu.layout.host.draft_bytes
    assert "-ngld 0" in on_host.command


def test_a_draft_of_another_vocabulary_is_refused() -> None:
    qwen = kvplan.load_model("qwen3-0.6b")  # 151,936 tokens against Llama's 128,256
    with pytest.raises(UnitError, match=r"differs from llama-3\.1-8b"):
        budget(TARGET, GPU, replace(ASK, draft=LlamaCppDraft(qwen, "qwen3-0.6b")))


def test_the_most_requests_account_for_the_draft_in_plan_and_the_library() -> None:
    args = ["plan", "llama-3.1-8b", "--gpu", "rtx-4090", "-e", "llama.cpp", "-c", "32K"]
    plain = json.loads(runner.invoke(app, [*args, "-f", "json"]).stdout)
    result = runner.invoke(app, [*args, "-md", "llama-3.2-1b", "-ctkd", "q8_0", "-ctvd", "q8_0",
                                 "--draft-max", "8", "-f", "json"])  # fmt: skip
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    n = doc["answer"]["max_concurrency"]
    assert 1 <= n < plain["answer"]["max_concurrency"]
    assert doc["settings"]["draft"] == {
        "model": "llama-3.2-1b",
        "n_gpu_layers": None,
        "type_k": "q8_0",
        "type_v": "q8_0",
        "draft_max": 8,
    }
    assert "-md MODEL.gguf -ngld 17 -ctkd q8_0 -ctvd q8_0 --draft-max 8" in doc["command"]
    draft = LlamaCppDraft(DRAFT, "llama-3.2-1b", type_k="q8_0", type_v="q8_0", draft_max=8)
    asked = Question(engine="llama.cpp", max_model_len=32768, llamacpp=LlamaCppAsk(
        model="llama-3.1-8b", draft=draft))  # fmt: skip
    assert answer(TARGET, GPU, asked).verdict.max_concurrency == n
    # n requests fit and n + 1 do not, the draft's context holding as many cells
    for count, fits in ((n, True), (n + 1, False)):
        ask = LlamaCppAsk(n_ctx=count * 32768, n_seq_max=count, n_gpu_layers=33, draft=draft)
        assert budget(TARGET, GPU, ask).fits is fits


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("-e", "llama.cpp", "-ngld", "3"), "-ngld: a setting of the draft model; it needs -md"),
        (("-e", "llama.cpp", "--draft-max", "4"), "--draft-max: a setting of the draft model"),
        (("-e", "vllm", "-md", "llama-3.2-1b"), "-md: a llama.cpp option"),
        (("-e", "llama.cpp", "-md", "qwen3-0.6b"), "llama-server refuses the pair"),
    ],
)
def test_draft_settings_are_refused_in_one_line(args: tuple[str, ...], words: str) -> None:
    result = runner.invoke(app, ["plan", "llama-3.1-8b", "--gpu", "rtx-4090", "-c", "8K", *args])
    assert result.exit_code == 2
    assert words in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
