"""One question, one answer: every kind of question, asked of every engine profile through every
command that answers it (plan, check, flags, perf, tiers, simulate, the library), gives the
same figure or an explicit refusal naming the setting, and the exit code follows the answer.

The anchors are derived by hand from vLLM's pool for Llama 3.1 8B on one H100 80GB (79.19 GiB
as CUDA reports it), which tests/test_engine_vllm.py checks against the recorded engine:
444,576 tokens in 16-token blocks (27,786 blocks); a 32,768-token request takes 2,048 blocks.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kvplan import load_model
from kvplan.answers.plans import PLAN_ENGINES, answer
from kvplan.answers.question import ENGINE_SETTINGS, FLAG_NAMES, Question
from kvplan.cli import app
from kvplan.errors import UnitError
from kvplan.hardware.lookup import find_gpu
from kvplan.logs.calibrate import load_calibration

runner = CliRunner()
CALIBRATION = Path(__file__).parent / "data" / "calibration-h100-sxm-0.32.yaml"
MODEL = "llama-3.1-8b"
GPU = "h100"
#: engines the budget file takes (llama.cpp plans one machine from its own options)
BUDGET_ENGINES = ("ideal", "vllm", "sglang", "trtllm")


def _plan(*args: str) -> tuple[int, dict[str, Any]]:
    result = runner.invoke(app, ["plan", MODEL, "--gpu", GPU, *args, "--format", "json"])
    assert result.exit_code in (0, 1), result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return result.exit_code, doc


def _library(engine: str, **asked: Any) -> Any:
    return answer(load_model(MODEL), find_gpu(GPU), Question(engine=engine, **asked)).verdict


# --- the anchors: vLLM's figures, derived by hand ------------------------------------------------


@pytest.mark.parametrize(
    ("args", "fits", "figure", "value"),
    [
        # 27,786 blocks // 2,048 a request = 13 requests (13 x 2,048 = 26,624 <= 27,786)
        (("-c", "32K"), True, "max_concurrency", 13),
        # 64 > 13: does not fit on one GPU; the exit code says so
        (("-c", "32K", "-n", "64", "-tp", "1"), False, "max_concurrency", 13),
        # 27,786 blocks // 16 requests = 1,736 blocks = 27,776 tokens each
        (("-n", "16"), True, "max_context_tokens", 27_776),
        # the fewest GPUs for 64: 13 a GPU at TP 1 -> ceil(64 / 13) = 5 replicas = 5 GPUs
        (("-c", "32K", "-n", "64"), True, "num_gpus", 5),
    ],
    ids=["13 of 32K", "64 of 32K on TP 1: no", "16 users: 27,776", "64 of 32K: 5 GPUs"],
)
def test_vllm_answers_what_was_asked(
    args: tuple[str, ...], fits: bool, figure: str, value: int
) -> None:
    code, doc = _plan(*args, "--engine", "vllm")
    assert doc["answer"][figure] == value
    assert doc["fits"] is doc["answer"]["fits"] is fits
    assert code == (0 if fits else 1)


# --- the matrix: every engine, every kind, plan = library ----------------------------------------

_NGRAM = '{"method": "ngram", "num_speculative_tokens": 3}'
QUESTIONS: list[tuple[str, tuple[str, ...], dict[str, Any]]] = [
    ("most requests at 8K", ("-c", "8K"), {"max_model_len": 8192}),
    (
        "fits 8K x 32 on TP 1",
        ("-c", "8K", "-n", "32", "-tp", "1"),
        {"max_model_len": 8192, "concurrency": 32, "tensor_parallel_size": 1},
    ),
    (
        "fits 8K x 500 on TP 1",
        ("-c", "8K", "-n", "500", "-tp", "1"),
        {"max_model_len": 8192, "concurrency": 500, "tensor_parallel_size": 1},
    ),
    (
        "fits 32K x 16 on TP 2",
        ("-c", "32K", "-n", "16", "-tp", "2"),
        {"max_model_len": 32768, "concurrency": 16, "tensor_parallel_size": 2},
    ),
    ("longest for 8", ("-n", "8"), {"concurrency": 8}),
    (
        "fewest GPUs for 32K x 64",
        ("-c", "32K", "-n", "64"),
        {"max_model_len": 32768, "concurrency": 64},
    ),
    (
        "shared prefix, 8K x 32 on TP 1",
        ("-c", "8K", "-n", "32", "-tp", "1", "--shared-prefix", "4096"),
        {
            "max_model_len": 8192,
            "concurrency": 32,
            "tensor_parallel_size": 1,
            "shared_prefix_tokens": 4096,
        },
    ),
    (
        "a length mix",
        ("-c", "32K", "--mean-length", "2K", "--p99-length", "16K"),
        {"max_model_len": 32768, "mean_length": 2048, "p99_length": 16384},
    ),
    ("PP 2, 32K", ("-c", "32K", "-pp", "2"), {"max_model_len": 32768, "pipeline_parallel_size": 2}),
    # a text model: vLLM reads the multimodal flags and they change nothing; others refuse them
    (
        "no images, 8K",
        ("-c", "8K", "--limit-mm-per-prompt", '{"image": 0}'),
        {"max_model_len": 8192, "limit_mm_per_prompt": '{"image": 0}'},
    ),
    (
        "text only, 8K",
        ("-c", "8K", "--language-model-only"),
        {"max_model_len": 8192, "language_model_only": True},
    ),
    # vLLM's speculative decoding: n-gram drafts add no layer to a dense model; others refuse it
    (
        "n-gram drafts, 8K",
        ("-c", "8K", "--speculative-config", _NGRAM),
        {"max_model_len": 8192, "speculative_config": _NGRAM},
    ),
    # SGLang's speculative decoding: the draft pool beside the target's; others refuse it
    (
        "SGLang standalone drafter, 8K",
        (
            "-c",
            "8K",
            "--speculative-algorithm",
            "STANDALONE",
            "--speculative-draft-model-path",
            "llama-3.2-1b",
        ),
        {
            "max_model_len": 8192,
            "speculative_algorithm": "STANDALONE",
            "speculative_draft_model": "llama-3.2-1b",
        },
    ),
    # LoRA slots: vLLM's (4 adapters of rank 16) and SGLang's (rank 8 on attention); refused
    # by the engines that do not read them
    (
        "vLLM LoRA 4 x rank 16, 8K",
        ("-c", "8K", "--enable-lora", "--max-loras", "4", "--max-lora-rank", "16"),
        {"max_model_len": 8192, "enable_lora": True, "max_loras": 4, "max_lora_rank": 16},
    ),
    (
        "SGLang LoRA 8 x rank 8 on attention, 8K",
        (
            "-c",
            "8K",
            "--enable-lora",
            "--max-loras-per-batch",
            "8",
            "--max-lora-rank",
            "8",
            "--lora-target-modules",
            "qkv_proj,o_proj",
        ),
        {
            "max_model_len": 8192,
            "enable_lora": True,
            "max_loras_per_batch": 8,
            "max_lora_rank": 8,
            "lora_target_modules": "qkv_proj,o_proj",
        },
    ),
]
# a site's calibration (kvplan calibrate): vLLM's budget terms fitted on this GPU, line and
# TP; refused by the other engines
QUESTIONS.append(
    (
        "vLLM calibrated on its site, 8K",
        ("-c", "8K", "--calibration", str(CALIBRATION)),
        {"max_model_len": 8192, "calibration": load_calibration(str(CALIBRATION))},
    )
)
_KEYS = ("kind", "fits", "max_model_len", "max_concurrency", "max_context_tokens", "num_gpus")


@pytest.mark.parametrize("engine", PLAN_ENGINES)
@pytest.mark.parametrize(
    ("args", "asked"), [q[1:] for q in QUESTIONS], ids=[q[0] for q in QUESTIONS]
)
def test_every_engine_answers_every_question_alike_in_plan_and_the_library(
    engine: str, args: tuple[str, ...], asked: dict[str, Any]
) -> None:
    try:
        verdict = _library(engine, **asked)
    except UnitError as e:  # refused: by the command line too, in the same words
        refusal = str(e)
    else:
        refusal = ""
    if refusal:
        result = runner.invoke(app, ["plan", MODEL, "--gpu", GPU, *args, "--engine", engine])
        assert result.exit_code == 2
        assert result.stderr == f"kvplan: error: {refusal}\n"
        return
    code, doc = _plan(*args, "--engine", engine)
    for key in _KEYS:
        assert doc["answer"][key] == getattr(verdict, key), key
    assert code == (0 if verdict.fits else 1)
    assert doc["fits"] is verdict.fits
    # the answer is the question asked: a fits question answers the concurrency asked
    if "concurrency" in asked:
        assert doc["answer"]["concurrency"] == asked["concurrency"]
    if verdict.kind == "fits":
        assert verdict.fits is (verdict.max_concurrency >= (verdict.concurrency or 0))
    if verdict.kind == "max_context" and verdict.fits:
        assert 0 < verdict.max_context_tokens <= 131_072  # the trained length caps it


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_a_fits_question_is_the_most_requests_compared_with_the_concurrency(engine: str) -> None:
    most = _library(engine, max_model_len=8192).max_concurrency
    assert _library(engine, max_model_len=8192, concurrency=most, tensor_parallel_size=1).fits
    over = _library(engine, max_model_len=8192, concurrency=most + 1, tensor_parallel_size=1)
    assert not over.fits
    assert over.max_concurrency == most


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
def test_the_longest_context_holds_the_concurrency_and_one_more_block_does_not(
    engine: str,
) -> None:
    v = _library(engine, concurrency=8)
    assert v.max_context_tokens is not None
    assert _library(engine, max_model_len=v.max_context_tokens).max_concurrency >= 8
    block = 32 if engine == "trtllm" else (16 if engine == "vllm" else 1)
    longer = _library(engine, max_model_len=v.max_context_tokens + block)
    assert longer.max_concurrency < 8


# --- settings an engine does not read are refused by name, in plan and the library ---------------

_VALUES = {
    "shared_prefix_tokens": ("--shared-prefix", "4096", 4096),
    "lengths": ("--mean-length", "2K", None),
    "pipeline_parallel_size": ("-pp", "2", 2),
    "gpu_memory_utilization": ("--gpu-memory-utilization", "0.8", None),
    "overhead_bytes": ("--overhead", "2GiB", 2 << 30),
    "block_size": ("--block-size", "32", 32),
    "max_num_seqs": ("--max-num-seqs", "64", 64),
    "page_size": ("--page-size", "16", 16),
    "mem_fraction_static": ("--mem-fraction-static", "0.8", None),
    "limit_mm_per_prompt": ("--limit-mm-per-prompt", '{"image": 0}', '{"image": 0}'),
}


def _cases() -> list[tuple[str, str, tuple[str, str]]]:
    cases = []
    for engine in PLAN_ENGINES:
        for name, (flag, text, _) in _VALUES.items():
            read = name in ENGINE_SETTINGS[engine] or (
                name == "lengths" and "mean_length" in ENGINE_SETTINGS[engine]
            )
            if not read:
                cases.append((engine, name, (flag, text)))
    return cases


@pytest.mark.parametrize(("engine", "name", "option"), _cases(), ids=lambda v: str(v))
def test_a_setting_the_engine_does_not_read_is_refused(
    engine: str, name: str, option: tuple[str, str]
) -> None:
    result = runner.invoke(app, ["plan", MODEL, "--gpu", GPU, "-c", "8K", "-e", engine, *option])
    assert result.exit_code == 2, result.output
    assert f"not read by --engine {engine}" in result.stderr
    assert result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr
    _, _, value = _VALUES[name]
    if value is not None:
        with pytest.raises(ValueError, match=f"{FLAG_NAMES[name]}: not read by --engine"):
            _library(engine, max_model_len=8192, **{name: value})


@pytest.mark.parametrize(
    ("engine", "args", "flag"),
    [
        ("vllm", ("-ngl", "10"), "-ngl"),
        ("sglang", ("-np", "4"), "-np"),
        ("vllm", ("--objective", "cost"), "--objective"),
        ("sglang", ("--system", "hgx-h100"), "--system"),
        ("llama.cpp", ("--enforce-eager",), "--enforce-eager"),
    ],
)
def test_options_of_another_engine_or_of_the_node_search_are_refused(
    engine: str, args: tuple[str, ...], flag: str
) -> None:
    result = runner.invoke(
        app, ["plan", MODEL, "--gpu", GPU, "-c", "8K", "-n", "4", "-e", engine, *args]
    )
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"kvplan: error: {flag}")


# --- past the trained length ---------------------------------------------------------------------


def test_past_the_trained_length_engines_refuse_and_the_planner_warns() -> None:
    # qwen3-8b: max_position_embeddings 40,960; 128K = 131,072 > 40,960
    for engine in ("vllm", "sglang"):
        result = runner.invoke(app, ["plan", "qwen3-8b", "--gpu", GPU, "-c", "128K", "-e", engine])
        assert result.exit_code == 2
        assert "past qwen3-8b's trained length (max_position_embeddings 40,960)" in result.stderr
    _code, doc = _plan("-c", "1M")  # Llama 3.1 8B: 1,048,576 > 131,072
    assert "max_position_embeddings 131,072" in doc["answer"]["warnings"][0]
    flags = runner.invoke(app, ["flags", "qwen3-8b", "--gpu", GPU, "-c", "128K", "-n", "1"])
    assert "--max-model-len=131072" not in flags.stdout
    assert "vLLM refuses --max-model-len 131,072" in flags.stdout


def test_rope_scaling_extends_the_length_as_vllm_derives_it() -> None:
    # YaRN: original 32,768 x factor 4 = 131,072, as Qwen3's model card extends it
    yarn = json.dumps(
        {
            "rope_scaling": {
                "rope_type": "yarn",
                "factor": 4.0,
                "original_max_position_embeddings": 32768,
            }
        }
    )
    result = runner.invoke(
        app,
        [
            "plan",
            "qwen3-8b",
            "--gpu",
            GPU,
            "-c",
            "128K",
            "-e",
            "vllm",
            "--hf-overrides",
            yarn,
            "--format",
            "json",
        ],
    )
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["question"]["max_position_embeddings"] == 131_072
    assert doc["answer"]["warnings"] == []
    bad = runner.invoke(app, ["plan", "qwen3-8b", "--gpu", GPU, "--hf-overrides", '{"x": 1}'])
    assert bad.exit_code == 2
    assert "allowed: max_position_embeddings, rope_scaling" in bad.stderr


# --- check: a budget's deployment gets plan's answer ---------------------------------------------


@pytest.mark.parametrize("engine", BUDGET_ENGINES)
def test_check_gives_plans_figures(engine: str, tmp_path: Path) -> None:
    budget = tmp_path / "budget.yaml"
    budget.write_text(
        "deployments:\n"
        f"  - name: chat\n    model: {MODEL}\n    gpu: {GPU}\n    engine: {engine}\n"
        "    max_model_len: 8K\n"
        "    expect:\n      min_concurrency: 1\n"
        "      min_context_at_concurrency: {concurrency: 8, tokens: 1}\n",
        encoding="utf-8",
    )
    result = runner.invoke(app, ["check", str(budget), "--format", "json"])
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    actual = {a["assertion"]: a["actual"] for a in doc["results"]}
    assert actual["min_concurrency"] == _library(engine, max_model_len=8192).max_concurrency
    longest = _library(engine, concurrency=8).max_context_tokens
    assert actual["min_context_at_concurrency"] == min(longest or 0, 8192)


def test_check_refuses_a_key_its_engine_does_not_read(tmp_path: Path) -> None:
    budget = tmp_path / "budget.yaml"
    budget.write_text(
        f"deployments:\n  - name: chat\n    model: {MODEL}\n    gpu: {GPU}\n    engine: vllm\n"
        "    shared_prefix: 4K\n    expect: {min_concurrency: 1}\n",
        encoding="utf-8",
    )
    result = runner.invoke(app, ["check", str(budget)])
    assert result.exit_code == 2
    assert "--shared-prefix: not read by --engine vllm" in result.stderr


# --- flags and perf: the same figure as plan -----------------------------------------------------


def test_perf_and_plan_give_the_same_most_requests() -> None:
    for engine in ("ideal", "vllm"):
        result = runner.invoke(
            app, ["perf", MODEL, "--gpu", GPU, "-c", "32K", "-e", engine, "--format", "json"]
        )
        assert result.exit_code == 0, result.stderr
        perf = json.loads(result.stdout)
        assert perf["max_concurrency"] == _library(engine, max_model_len=32768).max_concurrency


@pytest.mark.parametrize("engine", ["ideal", "vllm"])
def test_compare_gives_plans_most_requests_for_each_model(engine: str) -> None:
    args = ["compare", MODEL, "qwen3-8b", "--gpu", GPU, "-c", "32K", "-e", engine, "-f", "json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.stderr
    for row in json.loads(result.stdout)["models"]:
        asked = Question(engine=engine, max_model_len=32768)
        expected = answer(load_model(row["model"]), find_gpu(GPU), asked).verdict
        assert row["max_concurrency"] == expected.max_concurrency
    # vLLM: 13 requests of 32K for Llama 3.1 8B (the anchor above)
    if engine == "vllm":
        assert json.loads(result.stdout)["models"][0]["max_concurrency"] == 13


def test_flags_fit_as_plan_answers_the_same_question() -> None:
    # vLLM's flags hold 13 requests of 32K on one H100 (the anchor above) and not 14
    for n, fits in ((13, True), (14, False)):
        result = runner.invoke(
            app, ["flags", MODEL, "--gpu", GPU, "-c", "32K", "-n", str(n), "--format", "json"]
        )
        doc = json.loads(result.stdout)
        vllm = next(e for e in doc["engines"] if e["engine"] == "vllm")
        plan = _library("vllm", max_model_len=32768, concurrency=n, tensor_parallel_size=1)
        assert plan.fits is fits
        # flags sizes --kv-cache-memory for exactly the requests asked, so it holds whenever
        # vLLM's own budget holds them
        if fits:
            assert vllm["fits"]


def test_the_memory_rows_add_up_to_the_gpu_and_free_memory_is_within_them() -> None:
    # the quick start: weights + overhead + pool + held back = 79.19 GiB; free is in the pool
    result = runner.invoke(app, ["plan", MODEL, "--gpu", GPU, "-c", "32K"])
    rows = {}
    for line in result.stdout.splitlines():
        found = re.match(r"^( *)(\S.*?) {2,}([0-9.]+) GiB *$", line)
        if found:
            rows[(len(found[1]), found[2])] = float(found[3])
    added = sum(v for (indent, _), v in rows.items() if indent == 2)
    assert abs(added - 79.19) <= 0.02, rows
    (free,) = [v for (indent, k), v in rows.items() if "free for more work" in k and indent > 2]
    assert free <= rows[(2, "KV cache pool")]
    doc = _plan("-c", "32K")[1]
    total = doc["weights_bytes"] + doc["overhead_bytes"] + doc["kv_cache_memory_bytes"]
    assert total + doc["headroom_bytes"] <= doc["total_memory_bytes"]


@pytest.mark.parametrize("engine", ["sglang", "trtllm", "llama.cpp"])
def test_perf_refuses_an_engine_it_has_no_speed_model_for(engine: str) -> None:
    result = runner.invoke(app, ["perf", MODEL, "--gpu", GPU, "-c", "32K", "-e", engine])
    assert result.exit_code == 2
    assert "not modelled for speed; allowed: ideal, vllm" in result.stderr


# --- calc: -c is one sequence's tokens with every engine -----------------------------------------


def _calc(*args: str) -> dict[str, Any]:
    result = runner.invoke(app, ["calc", MODEL, *args, "--format", "json"])
    assert result.exit_code == 0, result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


@pytest.mark.parametrize("engine", ["ideal", "llama.cpp", "ik_llama.cpp", "transformers"])
def test_calc_sizes_n_sequences_of_c_tokens_with_every_engine(engine: str) -> None:
    # Llama 3.1 8B, 16-bit K and V: 2 x 32 layers x 8 heads x 128 x 2 B = 131,072 B a token;
    # 4 sequences of 32,768 tokens are 131,072 tokens, 17,179,869,184 B. llama.cpp pads cells
    # to 256 and each stream holds 32,768 of them: nothing to round, the same bytes.
    doc = _calc("-c", "32K", "-n", "4", "--engine", engine)
    assert doc["kv_cache_bytes"] == 2 * 32 * 8 * 128 * 2 * 4 * 32768 == 17_179_869_184
    assert (doc["context_tokens"], doc["batch_size"]) == (32768, 4)
    if engine in ("llama.cpp", "ik_llama.cpp"):
        assert doc["n_ctx"] == 131072  # what llama-server's -c is for it


def test_calc_llamacpp_headline_prints_llama_servers_own_flags() -> None:
    result = runner.invoke(app, ["calc", MODEL, "-c", "32K", "-n", "4", "--engine", "llama.cpp"])
    assert "4 sequences of 32,768 tokens (-c 131072 -np 4)" in result.stdout


@pytest.mark.parametrize(
    ("engine", "flags", "named"),
    [
        ("ideal", ["-ub", "1024"], "-ub"),
        ("ideal", ["--swa-full"], "--swa-full"),
        ("ideal", ["-fa", "off"], "-fa"),
        ("ideal", ["--engine-version", "b5000"], "--engine-version"),
        ("ideal", ["--cache-implementation", "static"], "--cache-implementation"),
        ("transformers", ["--swa-full"], "--swa-full"),
        ("transformers", ["-ctk", "q8_0"], "-ctk"),
        ("transformers", ["--explain"], "--explain"),
        ("llama.cpp", ["--cache-implementation", "static"], "--cache-implementation"),
        ("llama.cpp", ["--explain"], "--explain"),
        ("ik_llama.cpp", ["--kv-unified"], "--kv-unified"),
    ],
)
def test_calc_refuses_a_flag_its_engine_does_not_read(
    engine: str, flags: list[str], named: str
) -> None:
    result = runner.invoke(app, ["calc", MODEL, "-c", "8K", "--engine", engine, *flags])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"kvplan: error: {named}: not read by calc --engine {engine}")
    assert result.stderr.count("\n") == 1


# --- vLLM's batch defaults follow the GPU, as EngineArgs.get_batch_defaults sets them -----------


@pytest.mark.parametrize(
    ("gpu", "expected"),
    [
        pytest.param("h100", (1024, 8192), id="h100: 79.19 GiB >= 70 GiB, not an A100"),
        pytest.param("mi300x", (1024, 8192), id="mi300x: 191.98 GiB"),
        pytest.param("a100-80gb", (256, 2048), id="a100-80gb: 79.15 GiB but named A100"),
        pytest.param("l40s", (256, 2048), id="l40s: 44.52 GiB < 70 GiB"),
        pytest.param("rtx4090", (256, 2048), id="rtx4090: 23.99 GiB"),
    ],
)
def test_vllm_batch_defaults_follow_the_gpu(gpu: str, expected: tuple[int, int]) -> None:
    from kvplan.engines.vllm_config import batch_defaults

    assert batch_defaults(find_gpu(gpu)) == expected


def test_the_most_requests_vllm_runs_is_its_max_num_seqs_when_the_pool_holds_more() -> None:
    # Llama 3.2 1B on an L40S, requests of 1,024 tokens (64 blocks of 16): the pool holds
    # more than the 256 sequences vLLM schedules on a GPU under 70 GiB.
    spec, gpu = load_model("llama-3.2-1b"), find_gpu("l40s")
    found = answer(spec, gpu, Question(engine="vllm", max_model_len=1024))
    pool = found.result.result
    assert pool.blocks_per_request == 1024 // 16
    assert pool.num_gpu_blocks // 64 > 256
    assert found.verdict.max_concurrency == 256
    assert "vLLM runs at most --max-num-seqs 256" in found.verdict.limit
    # its peak activation on the V2 model runner: the forward's 2,048 batched tokens x (3 x
    # 8,192 MLP width + 3 x 2,048 hidden) x 2 B, above the dummy sampler's 256 sequences x
    # 128,256 (vocabulary) x 2 B of logits
    stage = pool.stages[0].overhead
    assert stage.activation_bytes == 2048 * (3 * 8192 + 3 * 2048) * 2 == 125_829_120
    assert stage.activation_bytes > 256 * 128256 * 2
    result = runner.invoke(
        app, ["plan", "llama-3.2-1b", "--gpu", "l40s", "-c", "1K", "-e", "vllm", "-f", "json"]
    )
    code, doc = result.exit_code, json.loads(result.stdout)
    assert (code, doc["answer"]["max_concurrency"]) == (0, 256)
    # an explicit --max-num-seqs is vLLM's, whatever the GPU
    given = Question(engine="vllm", max_model_len=1024, max_num_seqs=512)
    assert answer(spec, gpu, given).verdict.max_concurrency == 512


def test_llamacpp_answers_the_most_requests_at_a_context_with_its_largest_np() -> None:
    # Llama 3.1 8B on one H100, requests of 32,768 tokens: -np n, -c n x 32,768, all 33 layers
    # (32 and the output) on the GPU. Each request's cache is 32,768 x 131,072 B = 4 GiB.
    from kvplan.engines import llamacpp_plan

    spec, gpu = load_model(MODEL), find_gpu(GPU)
    found = answer(spec, gpu, Question(engine="llama.cpp", max_model_len=32768))
    n = found.verdict.max_concurrency
    assert found.verdict.kind == "max_concurrency"
    assert n > 1
    plan = found.result
    assert (plan.ask.n_seq_max, plan.n_ctx, plan.n_gpu_layers) == (n, n * 32768, 33)
    assert plan.kv.kv_cache_bytes == n * 32768 * 131072
    # n fit and n + 1 do not, asked as llama.cpp would be run
    for count, fits in ((n, True), (n + 1, False)):
        ask = llamacpp_plan.LlamaCppAsk(n_ctx=count * 32768, n_seq_max=count, n_gpu_layers=33)
        assert llamacpp_plan.budget(spec, gpu, ask).fits is fits
    # the CLI gives the same, and -np N is the question of N requests
    code, doc = _plan("-c", "32K", "-e", "llama.cpp")
    assert (code, doc["answer"]["max_concurrency"]) == (0, n)
    code, doc = _plan("-c", "32K", "-e", "llama.cpp", "-np", str(n + 1))
    assert (code, doc["answer"]["fits"], doc["answer"]["concurrency"]) == (1, False, n + 1)


def test_flags_and_plan_give_llamacpp_one_answer() -> None:
    # the largest -np plan finds for requests of 32K is where flags stops fitting too
    n = _library("llama.cpp", max_model_len=32768).max_concurrency
    for count, fits in ((n, True), (n + 1, False)):
        args = ["flags", MODEL, "--gpu", GPU, "-c", "32K", "-n", str(count), "-e", "llama.cpp"]
        result = runner.invoke(app, [*args, "--format", "json"])
        (engine,) = json.loads(result.stdout)["engines"]
        assert engine["fits"] is fits
        assert result.exit_code == (0 if fits else 1)
        assert _library("llama.cpp", max_model_len=32768, concurrency=count).fits is fits


@pytest.mark.parametrize("engine", PLAN_ENGINES)
def test_a_length_mix_file_is_answered_alike_or_refused(engine: str, tmp_path: Path) -> None:
    # 3 requests of 1,000 + 7,000 and 1 of 30,000 + 2,000 tokens: 8,000 and 32,000 each
    mix = tmp_path / "mix.jsonl"
    rows = [(1000, 7000)] * 3 + [(30000, 2000)]
    mix.write_text("".join(f'{{"prompt_tokens": {p}, "output_tokens": {o}}}\n' for p, o in rows))
    asked = {"max_model_len": 32768, "lengths": [8000, 8000, 8000, 32000]}
    try:
        verdict = _library(engine, **asked)
    except UnitError as e:
        refusal = str(e)
    else:
        refusal = ""
    if refusal:
        result = runner.invoke(
            app, ["plan", MODEL, "--gpu", GPU, "-c", "32K", "--lengths", str(mix), "-e", engine]
        )
        assert result.exit_code == 2
        assert result.stderr == f"kvplan: error: {refusal}\n"
        return
    code, doc = _plan("-c", "32K", "--lengths", str(mix), "--engine", engine)
    for key in _KEYS:
        assert doc["answer"][key] == getattr(verdict, key), key
    assert code == (0 if verdict.fits else 1)


SAMPLE_TRACE = Path(__file__).parent / "data" / "traces" / "mooncake_conversation_400.jsonl"


@pytest.mark.parametrize("tp", ["1", "2"])
@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_tiers_and_simulate_see_plans_gpu_pool(engine: str, tp: str) -> None:
    """The GPU pool asked through plan, tiers and simulate, at the trace's longest request:
    one figure (simulate's vLLM pool less the null block vLLM's block pool keeps); with TP 2
    each rank holds 4 of the 8 KV heads, so a block of 16 tokens is 1 MiB there."""
    from kvplan.cache_sim.trace import read_mooncake

    longest = str(max(r.input_tokens + r.output_tokens for r in read_mooncake(SAMPLE_TRACE)))
    code, planned = _plan("-e", engine, "-c", longest, "-tp", tp)
    assert code == 0
    tiers = runner.invoke(app, ["tiers", "-m", MODEL, "--gpu", GPU, "-e", engine, "-c", longest,
                                "-tp", tp, "-f", "json"])  # fmt: skip
    assert tiers.exit_code == 0, tiers.stderr
    gpu_tier = json.loads(tiers.stdout)["tiers"][0]
    simulated = runner.invoke(app, ["simulate", str(SAMPLE_TRACE), "-m", MODEL, "--gpu", GPU,
                                    "-e", engine, "-tp", tp, "-f", "json"])  # fmt: skip
    assert simulated.exit_code == 0, simulated.stderr
    doc = json.loads(simulated.stdout)
    held_back = 1 if engine == "vllm" else 0
    assert planned["num_blocks"] == gpu_tier["num_units"] == doc["num_blocks"] + held_back
    token_bytes = 2 * 32 * (8 // int(tp)) * 128 * 2  # a token's K and V on one rank
    assert doc["block_bytes"] == token_bytes * doc["block_tokens"]
