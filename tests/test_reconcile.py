"""kvplan reconcile on real start-up logs (tests/data/logs): every rule reproduces, and a
rule that does not is flagged."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.errors import KvplanError, SpecError
from kvplan.files import TEXT_LIMIT_BYTES
from kvplan.logs.reconcile import detect_engine, read_log, reconcile

FIXTURES = Path(__file__).parent / "fixtures" / "hf"

LOGS = Path(__file__).parent / "data" / "logs"


def read(name: str) -> str:
    return (LOGS / name).read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("log", "engine", "model", "given"),
    [
        ("vllm-0.19-llama-3.1-8b-tp1.log", "vllm", "llama-3.1-8b", None),
        ("vllm-0.19-gemma-3-12b.log", "vllm", "gemma-3-12b", None),
        ("llamacpp-b5781-llama-3.1-8b.log", "llama.cpp", "llama-3.1-8b", "llama-3.1-8b"),
        ("llamacpp-b8164-gpt-oss-20b.log", "llama.cpp", "gpt-oss-20b", None),
        ("llamacpp-pad32-llama-3.1-8b.log", "llama.cpp", "llama-3.1-8b", "llama-3.1-8b"),
        ("llamacpp-b5274-qwen3-235b.log", "llama.cpp", "qwen3-235b-a22b", None),
        ("ikllamacpp-deepseek-r1.log", "ik_llama.cpp", "deepseek-r1", "deepseek-r1"),
        ("sglang-qwen3-235b-fp8-tp4.log", "sglang", "qwen3-235b-a22b", "qwen3-235b-a22b"),
    ],
)
def test_every_rule_reproduces(log: str, engine: str, model: str, given: str | None) -> None:
    text = read(log)
    assert detect_engine(text) == engine
    result = reconcile(text, model=given)
    assert result.model == model
    rules = [row for row in result.rows if row.reproduced is not None]
    assert rules, "a log with printed figures yields at least one rule"
    assert result.reproduced, [r for r in rules if not r.reproduced]
    assert result.status == "reproduced"
    assert {row.status for row in rules} == {"reproduced"}
    # the only printed figures left unchecked are llama.cpp's per-device KV buffers
    unread = [row for row in result.rows if row.status == "not read"]
    assert all(row.component == "KV buffer" and row.not_read for row in unread), unread


def test_vllm_rows_recover_settings_and_figures() -> None:
    result = reconcile(read("vllm-0.19-llama-3.1-8b-tp1.log"))
    assert result.engine_version == "0.19.0"
    assert result.settings["gpu_memory_utilization"] == "0.95"
    assert result.settings["max_model_len"] == 8192
    rows = {row.component: row for row in result.rows}
    assert rows["num_gpu_blocks (from the printed memory)"].printed == "29,751"
    assert rows["GPU KV cache size (tokens)"].kvplan == "476,016"
    assert rows["maximum concurrency"].kvplan == "58.11x"
    assert rows["weights"].kvplan == "14.99 GiB"  # printed 14.99 GiB


def test_pipeline_parallel_log_flags_the_blocks_rule() -> None:
    # one PP worker prints its memory; the minimum over stages sets the blocks
    result = reconcile(read("vllm-0.19-llama-3.1-8b-pp2.log"))
    assert not result.reproduced
    failed = [row.component for row in result.rows if row.reproduced is False]
    assert failed == ["num_gpu_blocks (from the printed memory)"]
    assert any("pipeline parallelism" in note for note in result.notes)


def test_unknown_model_asks_for_model() -> None:
    # a name no rule reads, and shapes (32 layers, 131,072 positions, 128 KiB a token) that
    # fit both Llama 3.1 8B and Phi-4-mini
    text = read("llamacpp-b5781-llama-3.1-8b.log").replace(
        "Meta Llama 3.1 8B Instruct", "Frobnicator 9B"
    )
    with pytest.raises(SpecError, match="pass --model"):
        reconcile(text)


def test_not_a_log() -> None:
    with pytest.raises(KvplanError, match="cannot tell which engine"):
        reconcile("hello\n")


def test_cli_reconcile_json_and_exit_codes(tmp_path: Path) -> None:
    runner = CliRunner()
    ok = runner.invoke(app, ["reconcile", str(LOGS / "vllm-0.19-gemma-3-12b.log"), "-f", "json"])
    assert ok.exit_code == 0, ok.stderr
    doc = json.loads(ok.stdout)
    assert doc["schema_version"] == 1
    assert doc["reproduced"] is True
    assert doc["status"] == "reproduced"
    assert doc["checked_nothing"] is None
    assert (doc["num_checked"], doc["num_differ"], doc["num_not_read"]) == (3, 0, 0)
    # the kept keys of every row, and the added ones
    for row in doc["rows"]:
        assert set(row) >= {"component", "printed", "kvplan", "residual", "reproduced"}
        assert row["status"] in ("reproduced", "estimate")
        assert (row["reason"], row["difference"]) == (None, None)
    flagged = runner.invoke(app, ["reconcile", str(LOGS / "vllm-0.19-llama-3.1-8b-pp2.log")])
    assert flagged.exit_code == 1
    assert "differs" in flagged.stdout
    # the printing worker holds 16 of the 32 layers: a block is 16 x 65,536 B = 1 MiB, so
    # 66.54 GiB allows 66.535 x 1,024 = 68,131.8 -> 68,131 to 66.545 x 1,024 = 68,142.1 ->
    # 68,142 blocks; printed 67,207 is 924 below 68,131: -924 / 68,131 = -1.36%
    assert "outside: -924 blocks (-1.36%)" in flagged.stdout
    assert "1 printed figure differs (3 printed figures checked)" in flagged.stdout
    missing = runner.invoke(app, ["reconcile", str(tmp_path / "nope.log")])
    assert missing.exit_code == 2
    assert "cannot read" in missing.stderr


# --- hostile logs ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("log", "old", "new", "problem"),
    [
        (
            "vllm-0.19-llama-3.1-8b-tp1.log",
            "(78.68/79.19 GiB)",
            "(78.68/1.2.3 GiB)",
            "total GPU memory '1.2.3' in the log: not a figure in GiB",
        ),
        (
            "vllm-0.19-llama-3.1-8b-tp1.log",
            "Available KV cache memory: 58.11 GiB",
            "Available KV cache memory: " + "9" * 400 + " GiB",
            "available KV cache memory '99999",
        ),
        (
            "vllm-0.19-llama-3.1-8b-tp1.log",
            "tensor_parallel_size=1,",
            "tensor_parallel_size=0,",
            "tensor_parallel_size '0' in the log: expected an integer 1 to 4,096",
        ),
        (
            "vllm-0.19-llama-3.1-8b-tp1.log",
            "max_seq_len=8192",
            "max_seq_len=" + "9" * 5000,
            "max_model_len '99999",
        ),
        (
            "vllm-0.19-llama-3.1-8b-tp1.log",
            "GPU KV cache size: 476,016 tokens",
            "GPU KV cache size: ,,, tokens",
            "GPU KV cache size ',,,' in the log",
        ),
        (
            "vllm-0.19-llama-3.1-8b-tp1.log",
            "per request: 58.11x",
            "per request: 5.8.11x",
            "maximum concurrency '5.8.11' in the log: not a figure",
        ),
        (
            "sglang-qwen3-235b-fp8-tp4.log",
            "--tp 4",
            "--tp 99999",
            "--tp '99999' in the log: expected an integer 1 to 4,096",
        ),
        (
            "llamacpp-b5781-llama-3.1-8b.log",
            "n_ctx         = 16384",
            "n_ctx         = 0",
            "n_ctx '0' in the log: expected an integer 1 to",
        ),
    ],
    ids=[
        "total-1.2.3",
        "available-400-digits",
        "tp-0",
        "len-5000-digits",
        "tokens-commas",
        "concurrency-two-points",
        "sglang-tp",
        "n-ctx-0",
    ],
)
def test_hostile_numbers_are_one_line(log: str, old: str, new: str, problem: str) -> None:
    text = read(log)
    assert old in text
    text = text.replace(old, new, 1)
    model = (
        "llama-3.1-8b" if "llamacpp" in log else ("qwen3-235b-a22b" if "sglang" in log else None)
    )
    with pytest.raises(SpecError) as info:
        reconcile(text, model=model, path="x.log")
    assert str(info.value).startswith("x.log: ")
    assert problem in str(info.value)
    assert len(info.value.problems) == 1


def test_read_log_refuses_what_is_not_a_log(tmp_path: Path) -> None:
    fifo = tmp_path / "engine.log"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero"), tmp_path):
        with pytest.raises(SpecError, match="cannot read: "):
            read_log(str(path))


def test_read_log_reads_the_start_of_a_long_log(tmp_path: Path) -> None:
    path = tmp_path / "long.log"
    start = read("vllm-0.19-llama-3.1-8b-tp1.log").encode() + b"\xff invalid UTF-8\n"
    filler = b"(EngineCore) INFO a line of a long-running server\n"  # 50 bytes
    with path.open("wb") as f:
        f.write(start + filler * (TEXT_LIMIT_BYTES // len(filler) + 1))  # 64 MiB + a line
    text = read_log(str(path))
    # the first 64 MiB only, each byte one character, the invalid byte replaced by U+FFFD
    assert len(text) == TEXT_LIMIT_BYTES
    assert "\ufffd invalid UTF-8" in text
    assert reconcile(text).settings["max_model_len"] == 8192


def test_long_model_name_in_a_log_is_one_short_line() -> None:
    text = read("vllm-0.19-llama-3.1-8b-tp1.log")
    text = text.replace("meta-llama/Llama-3.1-8B-Instruct", "x" * 300)
    with pytest.raises(SpecError) as info:
        reconcile(text, path="x.log")
    assert str(info.value).startswith("x.log: model 'xxx")
    assert "not in the catalog" in str(info.value)
    assert len(str(info.value)) < 200


def test_vllm_032_oracle_log_reproduces_with_prefix_caching() -> None:
    text = read("vllm-0.32-qwen3-next-80b-a3b.log")
    assert detect_engine(text) == "vllm"
    result = reconcile(text, model="qwen3-next-80b-a3b")
    assert result.engine_version == "0.32.0"
    assert result.settings["enable_prefix_caching"] is True
    assert result.settings["async_scheduling"] is False  # the CPU build turns it off
    # 1 GiB / (12 layers x 1,310,720 B pages) = 68 blocks; with prefix caching the gated delta
    # net state is aligned: 3 state groups x 2 blocks + cdiv(8,192, 640) = 13 -> 19 a request;
    # 68 / 19 = 3.58x and 68 x 8,192 // 19 = 29,318 tokens, as the engine printed
    rules = {row.component: row for row in result.rows if row.reproduced is not None}
    assert rules["GPU KV cache size (tokens)"].printed == "29,318"
    assert rules["maximum concurrency"].printed == "3.58x"
    assert result.reproduced
    # the same log read as if prefix caching were off: 3 x 1 + 13 = 16 a request, 4.25x
    off = text.replace("enable_prefix_caching=True", "enable_prefix_caching=False").replace(
        "'enable_prefix_caching': True", "'enable_prefix_caching': False"
    )
    assert not reconcile(off, model="qwen3-next-80b-a3b").reproduced


def test_vllm_032_one_line_figures_from_the_api_server_version() -> None:
    # vLLM 0.32.0's own figures for Gemma 2 9B with a 4 GiB pool (tests/data/vllm_oracle_0.32.0
    # .json): 195 blocks, 64 + 65 a request, printed int(195 / 129 x 8,192) = 12,383 tokens
    lines = [
        "INFO vLLM API server version 0.32.0",
        "INFO non-default args: {'max_model_len': 8192, 'block_size': 128,"
        " 'kv_cache_memory_bytes': 4294967296, 'max_num_batched_tokens': 8192}",
        "INFO GPU KV cache size: 12,383 tokens, Maximum concurrency for 8,192 tokens per"
        " request: 1.51x",
    ]
    text = "\n".join(lines) + "\n"
    assert detect_engine(text) == "vllm"
    assert detect_engine(lines[2].replace("GPU", "CPU")) == "vllm"
    result = reconcile(text, model="gemma-2-9b")
    assert result.engine_version == "0.32.0"
    assert result.reproduced
    # 0.19 printed 195 // 2 groups x 128 = 12,416 tokens: the same lines do not fit its rule
    older = reconcile(text.replace("0.32.0", "0.19.1"), model="gemma-2-9b")
    assert not older.reproduced


# Every log that names its model, or prints its shapes and model file, reconciles without
# --model. (The vLLM 0.32 log names a placeholder config and is read with --model above.)
WITHOUT_MODEL = [
    ("ikllamacpp-deepseek-r1.log", "deepseek-r1"),
    ("llamacpp-b5274-qwen3-235b.log", "qwen3-235b-a22b"),
    ("llamacpp-b5781-llama-3.1-8b.log", "llama-3.1-8b"),  # general.name "Meta Llama 3.1 8B ..."
    ("llamacpp-b8164-gpt-oss-20b.log", "gpt-oss-20b"),
    ("llamacpp-pad32-llama-3.1-8b.log", "llama-3.1-8b"),
    ("sglang-qwen3-235b-fp8-tp4.log", "qwen3-235b-a22b"),  # "Qwen3-235B-A22B-FP8"
    ("vllm-0.19-gemma-3-12b.log", "gemma-3-12b"),
    ("vllm-0.19-llama-3.1-8b-pp2.log", "llama-3.1-8b"),
    ("vllm-0.19-llama-3.1-8b-tp1.log", "llama-3.1-8b"),
    ("vllm-0.32-qwen3-next-80b-a3b.log", "qwen3-next-80b-a3b"),
    ("vllm-0.32-qwen3-next-80b-a3b-mtp.log", "qwen3-next-80b-a3b"),
]


@pytest.mark.parametrize(("log", "model"), WITHOUT_MODEL)
def test_reconcile_without_model(log: str, model: str) -> None:
    result = reconcile(read(log), path=log)
    assert result.model == model


#: logs of a model no bundled spec holds, read with --model (and why)
NEEDS_MODEL = {"vllm-0.32-falcon-h1-7b-ngram.log": "Falcon-H1-7B shrunk to 4 layers"}


def test_every_log_is_listed_for_reconcile_without_model() -> None:
    listed = {log for log, _ in WITHOUT_MODEL}
    assert {p.name for p in LOGS.glob("*.log")} <= listed | set(NEEDS_MODEL)


def test_model_identified_from_printed_shapes() -> None:
    from kvplan.logs.models import identify_model, printed_shapes

    text = read("llamacpp-pad32-llama-3.1-8b.log")
    # 512.00 MiB for 4,096 f16 tokens = 131,072 B a token = 2 x 32 layers x 8 x 128 x 2 B with
    # 131,072 trained positions: Llama 3.1 8B, Phi-3.5-MoE and Phi-4-mini all fit; the file name
    # Meta-Llama-3.1-8B-Instruct-Q4_K_M settles it.
    shapes = printed_shapes(text)
    assert shapes.figures == {"n_layer": 32, "n_ctx_train": 131072}
    spec = identify_model(text, "log")
    assert spec.name == "llama-3.1-8b"
    assert "printed shapes" in spec.provenance[-1]
    # without the file name, the shapes alone fit eight models (five of them fine-tunes of
    # Llama 3.1 8B): one line naming them all
    alone = text.replace("Meta-Llama-3.1-8B-Instruct-Q4_K_M", "model")
    fit = (
        r"deepseek-r1-distill-llama-8b, dolphin3\.0-llama3\.1-8b, hermes-3-llama-3\.1-8b,"
        r" llama-3\.1-8b, llama-3\.1-8b-stheno-v3\.4, phi-3\.5-moe"
    )
    with pytest.raises(SpecError, match=rf"{fit}, phi-4-mini, tulu-3-8b: pass --model"):
        identify_model(alone, "log")


def test_mla_log_identified_from_cache_size_and_folder() -> None:
    from kvplan.logs.models import identify_model

    # c^KV q8_0 2333.25 MiB at 65,536 tokens: 61 layers x (512 + 64) x 34 / 32 B x 65,536 =
    # 2,446,589,952 B, which DeepSeek V3, R1 and Kimi K2 share; the DeepSeek-R1-GGUF folder
    # picks R1.
    spec = identify_model(read("ikllamacpp-deepseek-r1.log"), "log")
    assert spec.name == "deepseek-r1"
    assert 61 * 576 * 34 * 65_536 // 32 == 2_446_589_952


# --- each printed figure: reproduced, differs (by how much), not read; checked nothing ----------


def info_032_log() -> str:
    """The Llama 3.1 8B H100 run as vLLM 0.32 logs it at INFO level: no DEBUG line (so no
    'Free memory on device' and no num_gpu_blocks), and the size and the concurrency on one
    line, as 0.32 prints them. Under 0.32's rules its figures agree with its pool (below)."""
    lines = [
        line.replace("(v0.19.0)", "(v0.32.0)")
        for line in read("vllm-0.19-llama-3.1-8b-tp1.log").splitlines()
        if " DEBUG " not in line
    ]
    text = "\n".join(lines) + "\n"
    return text.replace(
        "GPU KV cache size: 476,016 tokens\n", "GPU KV cache size: 476,016 tokens, "
    ).replace("(EngineCore pid=242) INFO 04-22 00:04:20 [v1/core/kv_cache_utils.py:1324] ", "")


def test_info_level_032_log_is_checked_from_its_printed_pool() -> None:
    text = info_032_log()
    assert ("num_gpu_blocks" in text, "Free memory" in text) == (False, False)
    assert "476,016 tokens, Maximum concurrency for 8,192 tokens per request: 58.11x" in text
    result = reconcile(text)
    assert result.engine_version == "0.32.0"
    # 58.11 GiB printed to two decimals: 58.105 to 58.115 GiB. A block holds 16 tokens of 32
    # layers x 8 heads x 128 x 2 (K, V) x 2 B = 2 MiB, so 58.105 x 512 = 29,749.76 -> 29,749 to
    # 58.115 x 512 = 29,754.88 -> 29,754 blocks. A request of 8,192 tokens needs 512 blocks:
    # tokens = blocks x 8,192 // 512 = 16 x blocks, 475,984 to 476,064; 476,016 = 16 x 29,751,
    # and 29,751 / 512 = 58.107 -> 58.11x
    rows = {row.component: row for row in result.rows}
    assert rows["GPU KV cache size (tokens)"].status == "reproduced"
    assert rows["GPU KV cache size (tokens)"].kvplan == "476,016"
    assert rows["maximum concurrency"].status == "reproduced"
    assert (result.status, result.num_checked) == ("reproduced", 2)
    assert any("pass --gpu NAME" in note for note in result.notes)  # no end-to-end estimate
    assert "num_gpu_blocks (end to end)" not in rows
    # with the GPU named, the estimates come back; the end-to-end row sets kvplan's blocks
    # beside the 29,751 the printed figures pin
    with_gpu = {row.component: row for row in reconcile(text, gpu="h100").rows}
    assert with_gpu["num_gpu_blocks (end to end)"].printed == "29,751"
    assert with_gpu["weights"].status == "estimate"


def _invoke(tmp_path: Path, text: str, *args: str) -> tuple[int, str, str]:
    path = tmp_path / "engine.log"
    path.write_text(text, encoding="utf-8")
    out = CliRunner().invoke(app, ["reconcile", str(path), *args])
    return out.exit_code, out.stdout, out.stderr


@pytest.mark.parametrize(
    ("old", "new", "component", "shown", "amount", "percent"),
    [
        # nearest the pool prints: 29,754 x 16 = 476,064; 480,000 - 476,064 = 3,936 tokens,
        # 3,936 / 476,064 = 0.8268%
        (
            "476,016 tokens",
            "480,000 tokens",
            "GPU KV cache size (tokens)",
            "+3,936 tokens (+0.83%)",
            3936,
            0.8268,
        ),
        # the printed tokens pin 29,751 blocks: 29,751 / 512 = 58.11x; 60.00 - 58.11 = 1.89x,
        # 1.89 / 58.11 = 3.25245%
        ("58.11x", "60.00x", "maximum concurrency", "+1.89x (+3.25%)", 1.89, 3.2525),
        # 58.10x alone fits the pool (29,749 / 512 = 58.104), not with 476,016 tokens (29,751
        # blocks, 58.11x): -0.01 / 58.11 = -0.0172%
        ("58.11x", "58.10x", "maximum concurrency", "-0.01x (-0.02%)", -0.01, -0.0172),
    ],
    ids=["tokens-480000", "concurrency-60.00", "concurrency-58.10-not-with-the-tokens"],
)
def test_edited_032_figure_differs(
    tmp_path: Path,
    old: str,
    new: str,
    component: str,
    shown: str,
    amount: float,
    percent: float,
) -> None:
    text = info_032_log()
    assert old in text
    code, stdout, _ = _invoke(tmp_path, text.replace(old, new), "-f", "json")
    assert code == 1
    doc = json.loads(stdout)
    assert (doc["status"], doc["reproduced"]) == ("differs", False)
    assert (doc["num_checked"], doc["num_differ"]) == (2, 1)
    row = next(r for r in doc["rows"] if r["component"] == component)
    assert (row["status"], row["reproduced"], row["residual"]) == ("differs", False, shown)
    unit = "tokens" if "tokens" in component else "x"
    assert row["difference"] == {"amount": amount, "unit": unit, "percent": percent}
    code, stdout, _ = _invoke(tmp_path, text.replace(old, new))
    assert code == 1
    assert shown in stdout
    assert "1 printed figure differs (2 printed figures checked)" in stdout


def test_edited_kept_032_log_differs(tmp_path: Path) -> None:
    # the CPU build's pool, given as 1 GiB: 68 blocks, 19 a request; 68 x 8,192 // 19 =
    # 557,056 // 19 = 29,318 tokens; printed 30,000: +682 tokens, 682 / 29,318 = +2.33%
    text = read("vllm-0.32-qwen3-next-80b-a3b.log").replace("29,318 tokens", "30,000 tokens")
    code, stdout, _ = _invoke(tmp_path, text, "-m", "qwen3-next-80b-a3b")
    assert code == 1
    assert "+682 tokens (+2.33%)" in stdout


def test_llamacpp_and_sglang_edited_lines_differ_by_their_figure(tmp_path: Path) -> None:
    # 2049.00 - 2048.00 = +1.00 MiB, 1 / 2,048 = +0.05%
    text = read("llamacpp-b5781-llama-3.1-8b.log").replace("size = 2048.00", "size = 2049.00")
    code, stdout, _ = _invoke(tmp_path, text, "-m", "llama-3.1-8b")
    assert code == 1
    assert "+1.00 MiB (+0.05%)" in stdout
    # 8.50 - 8.23 = +0.27 GB, 0.27 / 8.23 = +3.28%
    text = read("sglang-qwen3-235b-fp8-tp4.log").replace("K size: 8.23", "K size: 8.50")
    code, stdout, _ = _invoke(tmp_path, text, "-m", "qwen3-235b-a22b")
    assert code == 1
    assert "+0.27 GB (+3.28%)" in stdout


def test_log_with_no_figure_checks_nothing(tmp_path: Path) -> None:
    # the engine's configuration and nothing after it: a start-up cut before the cache
    text = "".join(read("vllm-0.19-llama-3.1-8b-tp1.log").splitlines(keepends=True)[:2])
    result = reconcile(text, gpu="h100")
    assert (result.status, result.num_checked, result.reproduced) == ("checked nothing", 0, False)
    assert result.checked_nothing.startswith("the log prints none of the figures")
    code, stdout, stderr = _invoke(tmp_path, text, "-g", "h100")
    assert code == 2
    assert "checked nothing: the log prints none of the figures" in stdout
    assert stderr.startswith("kvplan: error: checked nothing: the log prints none of the")
    code, stdout, _ = _invoke(tmp_path, text, "-f", "json")
    assert code == 2
    doc = json.loads(stdout)
    assert (doc["status"], doc["num_checked"]) == ("checked nothing", 0)
    assert doc["checked_nothing"].startswith("the log prints none")


def test_figures_without_a_pool_are_not_read(tmp_path: Path) -> None:
    # vLLM 0.32's figure line with nothing to derive the blocks from: no available memory,
    # no kv_cache_memory_bytes, no num_gpu_blocks
    text = (
        "INFO vLLM API server version 0.32.0\n"
        "INFO non-default args: {'max_model_len': 8192}\n"
        "INFO GPU KV cache size: 12,383 tokens, Maximum concurrency for 8,192 tokens per"
        " request: 1.51x\n"
    )
    result = reconcile(text, model="gemma-2-9b")
    assert [(row.component, row.status) for row in result.rows] == [
        ("GPU KV cache size (tokens)", "not read"),
        ("maximum concurrency", "not read"),
    ]
    assert all("prints no pool" in row.not_read for row in result.rows)
    assert result.status == "checked nothing"
    code, stdout, stderr = _invoke(tmp_path, text, "-m", "gemma-2-9b", "-f", "json")
    assert code == 2
    doc = json.loads(stdout)
    assert [r["status"] for r in doc["rows"]] == ["not read", "not read"]
    assert "prints no pool" in doc["rows"][0]["reason"]
    assert stderr.startswith("kvplan: error: checked nothing: 2 printed figures not read")


def test_pipeline_log_without_blocks_reads_no_tokens() -> None:
    # with pipeline parallelism the first worker prints its memory, the minimum over stages
    # sets the blocks: without the DEBUG num_gpu_blocks line the tokens cannot be checked
    text = read("vllm-0.19-llama-3.1-8b-pp2.log")
    text = "".join(line for line in text.splitlines(keepends=True) if "num_gpu_blocks" not in line)
    rows = {row.component: row for row in reconcile(text).rows}
    assert rows["GPU KV cache size (tokens)"].status == "not read"
    assert "pipeline parallelism" in rows["GPU KV cache size (tokens)"].not_read
    assert rows["maximum concurrency"].status == "not read"


def test_recognised_lines_not_read_beside_checked_ones() -> None:
    # llama.cpp's per-device KV buffer: not checked (the size line is), the log still passes
    result = reconcile(read("llamacpp-b5781-llama-3.1-8b.log"), model="llama-3.1-8b")
    buffer = next(row for row in result.rows if row.component == "KV buffer")
    assert buffer.status == "not read"
    assert "size line" in buffer.not_read
    assert buffer.printed == "Vulkan0 KV buffer size =  2048.00 MiB"
    assert (result.status, result.num_not_read) == ("reproduced", 1)
    # an SGLang pool line in a form kvplan does not read, beside one it does
    text = read("sglang-qwen3-235b-fp8-tp4.log") + "KV Cache is allocated. #pages: 12\n"
    result = reconcile(text, model="qwen3-235b-a22b")
    assert [row.status for row in result.rows] == ["reproduced", "not read"]
    assert "kvplan reads '#tokens: N" in result.rows[1].not_read
    # a second engine's differing figure (data parallel): the first is checked
    text = info_032_log() + "INFO GPU KV cache size: 100 tokens\n"
    rows = [row for row in reconcile(text).rows if row.component == "GPU KV cache size (tokens)"]
    assert [row.status for row in rows] == ["reproduced", "not read"]
    assert "further engine" in rows[1].not_read


def test_vllm_032_log_with_mtp_is_read_as_it_ran() -> None:
    """The real engine (vLLM 0.32.0's CPU build, scripts/vllm_oracle.py) with MTP and 3
    speculative tokens: the engine config line's SpeculativeConfig is taken as
    --speculative-config, and the host's float32 SSM state (vLLM warns 'Reset SSM cache type to
    float32') as --mamba-ssm-cache-dtype. 35 blocks of 1,152 tokens; a request holds
    cdiv(8,192, 1,152) = 8 attention blocks (12 layers and the MTP layer in one group) and
    2 + 3 state blocks in each of 3 gated-delta-net groups: 8 + 15 = 23; 35 / 23 = 1.52x and
    int(35 x 8,192 / 23) = 12,466 tokens, as printed."""
    text = read("vllm-0.32-qwen3-next-80b-a3b-mtp.log")
    result = reconcile(text)
    assert result.settings["speculative"] == "mtp, 3 tokens"
    assert result.settings["mamba_ssm_cache_dtype"] == "float32"
    rules = {row.component: row for row in result.rows if row.reproduced is not None}
    assert rules["GPU KV cache size (tokens)"].printed == "12,466"
    assert rules["maximum concurrency"].printed == "1.52x"
    assert result.reproduced
    assert 35 * 8192 // 23 == 12_466
    # without its speculative config the same log is not what ran
    plain = re.sub(
        r"speculative_config=SpeculativeConfig\([^)]*\)", "speculative_config=None", text
    )
    assert not reconcile(plain).reproduced


def test_vllm_032_log_with_ngram_drafts_is_read_as_it_ran(tmp_path: Path) -> None:
    """Falcon-H1 (4 layers, as the oracle shrinks it), n-gram drafts of 3 tokens: 81 blocks;
    a request holds cdiv(8,192, 3,200) = 3 attention blocks and 3 + 3 Mamba2 state blocks
    (align mode with its checkpoint, and k more): 9; 81 / 9 = 9.00x, 9 x 8,192 = 73,728."""
    config = json.loads((FIXTURES / "falcon-h1-7b" / "config.json").read_text(encoding="utf-8"))
    config.get("text_config", config)["num_hidden_layers"] = 4
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    result = reconcile(read("vllm-0.32-falcon-h1-7b-ngram.log"), model=str(path))
    assert result.settings["speculative"] == "ngram, 3 tokens"
    rules = {row.component: row for row in result.rows if row.reproduced is not None}
    assert rules["GPU KV cache size (tokens)"].printed == "73,728"
    assert rules["maximum concurrency"].printed == "9.00x"
    assert result.reproduced


def test_a_speculative_method_kvplan_does_not_model_is_said() -> None:
    text = read("vllm-0.32-qwen3-next-80b-a3b-mtp.log").replace("method='mtp'", "method='dflash'")
    result = reconcile(text)
    assert "speculative" not in result.settings
    (note,) = [n for n in result.notes if "speculative decoding" in n]
    assert "dflash, 3 tokens" in note
    assert "without its drafter" in note
    assert not result.reproduced
