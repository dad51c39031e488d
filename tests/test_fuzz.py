"""Hostile input: whatever a file or an option holds, kvplan answers with an exit code and at most
a capped list of one-line errors; never a traceback, a hang or unbounded memory.

Property-based fuzzing (hypothesis, derandomized so every run tries the same cases) of specs,
config.json files, safetensors headers, GGUF files, budget files, engine logs, length mixes and
command-line options, then explicit regression tests for every case of the hostile-input report.
Each case asserts, through the command line: the exit code, stderr one ``kvplan: error:`` line
per problem (at most 20 and one ``... and N more``), no traceback, and a bounded time.
``KVPLAN_FUZZ_EXAMPLES`` scales the number of cases (default 1: under 20 s here), and
``KVPLAN_FUZZ_RANDOM=1`` draws new cases on every run instead of the same ones.
"""

from __future__ import annotations

import json
import os
import re
import struct
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner, Result

from kvplan.answers.workload import load_lengths
from kvplan.cli import app
from kvplan.errors import SpecError, UnitError
from kvplan.model.layers import LAYER_KINDS
from kvplan.model.limits import MAX_LAYERS
from kvplan.model.spec import SPEC_KEYS as SPEC_FIELDS
from kvplan.model.spec import load_spec
from kvplan.units import format_bytes, format_count, format_tokens, parse_bytes, parse_tokens
from kvplan.validation import MAX_PROBLEMS

runner = CliRunner()
HERE = Path(__file__).parent
LOGS = HERE / "data" / "logs"
HF = HERE / "fixtures" / "hf"

SCALE = float(os.environ.get("KVPLAN_FUZZ_EXAMPLES", "1"))
RANDOM = os.environ.get("KVPLAN_FUZZ_RANDOM") == "1"


def fuzz(examples: int) -> Callable[[Any], Any]:
    """Hypothesis settings of one fuzz test: reproducible, no deadline per example (the check
    below bounds each case's time instead), no example database written."""
    return settings(
        max_examples=max(1, int(examples * SCALE)),
        deadline=None,
        derandomize=not RANDOM,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


#: Seconds one command may take on hostile input (real cases take well under one).
CASE_SECONDS = 10
#: stderr lines of one failure: MAX_PROBLEMS problems and one "... and N more problems".
MAX_LINES = MAX_PROBLEMS + 1

HUGE = "<an integer over 10**300>"
# Cases that still fail in code outside the input readers, each with the file at fault. The
# fuzz skips them (some would exhaust memory); empty this list as they are fixed, and they run
# like every other case. An entry matches when the command matches and each option has the
# given value (HUGE: any integer of more than 300 digits).
KNOWN_FAILING: list[tuple[str, dict[str, str], str]] = []


def _value(args: Sequence[str], option: str) -> str | None:
    """The value of ``option`` in ``args``: the last one, as the command line takes it."""
    found = None
    for i, arg in enumerate(args[:-1]):
        if arg == option:
            found = args[i + 1]
    return found


def known_failure(args: Sequence[str]) -> str | None:
    """The reason ``args`` is a known failure (KNOWN_FAILING), or None."""
    for command, options, why in KNOWN_FAILING:
        if args[0] != command:
            continue
        matched = True
        for option, want in options.items():
            if option.startswith("<"):
                matched = matched and want in args  # placeholders name literal arguments
                continue
            got = _value(args, option)
            if want == HUGE:
                matched = matched and got is not None and got.isdigit() and len(got) > 300
            else:
                matched = matched and got == want
        if matched:
            return why
    return None


def invoke(args: Sequence[str], codes: Sequence[int] = (0, 1, 2, 3)) -> Result:
    """Run the command line; assert the contract every input must meet (module docstring)."""
    started = time.perf_counter()
    result = runner.invoke(app, list(args))
    elapsed = time.perf_counter() - started
    shown = [a if len(a) < 60 else a[:57] + "..." for a in args]
    error = result.exception
    if error is not None and not isinstance(error, SystemExit):
        raise AssertionError(f"{shown}: uncaught {type(error).__name__}: {error}") from error
    assert result.exit_code in codes, (shown, result.exit_code, result.stderr[-2000:])
    assert "Traceback" not in result.stdout + result.stderr, shown
    assert elapsed < CASE_SECONDS, (shown, f"{elapsed:.1f} s")
    lines = result.stderr.splitlines()
    if result.stderr.startswith("Usage:"):  # typer's own usage error: 2, and a few lines
        assert result.exit_code == 2, shown
        assert len(lines) <= 8, (shown, result.stderr)
        assert "Error" in result.stderr, (shown, result.stderr)
    elif result.exit_code in (2, 3):
        assert 1 <= len(lines) <= MAX_LINES, (shown, len(lines), lines[:3])
        assert all(line.startswith("kvplan: error: ") for line in lines), (shown, lines[:3])
        assert all(len(line) < 2000 for line in lines), shown
    return result


def check(args: Sequence[str], codes: Sequence[int] = (0, 1, 2, 3)) -> Result | None:
    """``invoke`` unless ``args`` is a known failure (then not even run)."""
    if known_failure(args) is not None:
        return None
    return invoke(args, codes)


def library_problems(load: Callable[[], object]) -> tuple[str, ...]:
    """The problems of the SpecError ``load()`` raises (none when it succeeds); any other
    exception fails the test."""
    try:
        load()
    except SpecError as e:
        return e.problems
    return ()


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


# --- values ------------------------------------------------------------------------------------

SPECIAL_VALUES: list[Any] = [
    0,
    -1,
    1,
    2,
    3,
    7,
    MAX_LAYERS,
    MAX_LAYERS + 1,
    2**24 + 1,
    2**63,
    10**400,
    True,
    False,
    None,
    1.5,
    32.0,
    float("nan"),
    float("inf"),
    float("-inf"),
    "",
    "x",
    "32K",
    "bfloat16",
    "9" * 400,
    [],
    {},
    ["bfloat16"],
    ["full_attention"] * 3,
    {"a": 1},
    "full_attention",
    [[[1]]],
]
values = st.one_of(
    st.sampled_from(SPECIAL_VALUES),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.lists(st.sampled_from([*LAYER_KINDS, "bogus", 1, None]), max_size=8),
)

# Text spliced into a file: YAML syntax, aliases, tags, NUL, a BOM, very long numbers.
SPLICES = [
    "*a",
    "&a ",
    "[",
    "]",
    "{",
    "}",
    ": ",
    "- ",
    "\t",
    "\x00",
    "\ufeff",
    "!!python/object/apply:os.system ['true']",
    "<<: *a\n",
    "9" * 5000,
    "\n---\n",
    "%YAML 1.1\n",
    "'",
    '"',
    "2024-13-45",
    "!!binary ZZZ",
    "0x" + "f" * 2000,
    "\\",
    "é",
    "\x85",
    "[" * 2000,
    "- " * 1200,
]


def splice(text: str, edits: list[tuple[int, str]]) -> str:
    for position, piece in edits:
        at = position % (len(text) + 1)
        text = text[:at] + piece + text[at:]
    return text


edits = st.lists(st.tuples(st.integers(min_value=0), st.sampled_from(SPLICES)), max_size=3)


def alias_bomb(depth: int, width: int, key: str) -> str:
    """A file whose aliases expand to ``width ** depth`` values under ``key``."""
    lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    for i in range(1, depth):
        lines.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]")
    lines.append(f"{key}: *l{depth - 1}")
    return "\n".join(lines) + "\n"


# --- specs -------------------------------------------------------------------------------------

SPEC = {
    "name": "fz",
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "torch_dtype": "bfloat16",
    "max_position_embeddings": 4096,
}
SPEC_KEYS = [*SPEC_FIELDS, "num_kv_heads", "bogus"]


@fuzz(120)
@given(
    changes=st.dictionaries(st.sampled_from(SPEC_KEYS), values, max_size=4),
    dropped=st.sets(st.sampled_from(list(SPEC))),
    text_edits=edits,
    bomb=st.one_of(st.none(), st.tuples(st.integers(1, 8), st.integers(1, 12))),
    command=st.sampled_from(["show", "calc"]),
)
def test_fuzz_spec(
    work: Path,
    changes: dict[str, Any],
    dropped: set[str],
    text_edits: list[tuple[int, str]],
    bomb: tuple[int, int] | None,
    command: str,
) -> None:
    data = {k: v for k, v in {**SPEC, **changes}.items() if k not in dropped}
    text = splice(yaml.safe_dump(data), text_edits)
    if bomb is not None:
        text += alias_bomb(*bomb, "aliases")
    path = work / "spec.yaml"
    path.write_text(text, encoding="utf-8")
    assert len(library_problems(lambda: load_spec(path))) <= MAX_LINES
    args = ["show", str(path)] if command == "show" else ["calc", str(path), "-c", "4K"]
    invoke(args, (0, 2))


# --- config.json and model folders ---------------------------------------------------------------

CONFIGS = [
    "llama-3.1-8b",
    "gemma-3-12b",
    "jamba-v0.1",
    "qwen3-next-80b-a3b",
    "dbrx",
    "falcon-7b",
    "llama-4-scout",
    "nemotron-h-8b",
    "minimax-text-01",
    "gpt-oss-20b",
    "deepseek-v3",
    "chatglm" if (HF / "chatglm").exists() else "glm-4-9b",
]
CONFIG_KEYS = [
    "model_type",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "hidden_size",
    "head_dim",
    "torch_dtype",
    "dtype",
    "layer_types",
    "sliding_window",
    "sliding_window_pattern",
    "use_sliding_window",
    "max_window_layers",
    "attn_config",
    "attn_layer_period",
    "attn_layer_offset",
    "full_attention_interval",
    "no_rope_layers",
    "no_rope_layer_interval",
    "hybrid_override_pattern",
    "attn_type_list",
    "quantization_config",
    "text_config",
    "multi_query",
    "new_decoder_architecture",
    "kv_lora_rank",
    "max_position_embeddings",
    "tie_word_embeddings",
]
config_values = st.one_of(
    values,
    st.sampled_from([{"kv_n_heads": "x"}, {"quant_method": "gptq", "bits": 0}, {"bits": "x"}]),
)


@fuzz(100)
@given(
    base=st.sampled_from(CONFIGS),
    changes=st.dictionaries(st.sampled_from(CONFIG_KEYS), config_values, max_size=3),
    nested=st.booleans(),
    index_metadata=st.one_of(st.none(), values),
)
def test_fuzz_config_json(
    work: Path,
    base: str,
    changes: dict[str, Any],
    nested: bool,
    index_metadata: Any,
) -> None:
    config = json.loads((HF / base / "config.json").read_text(encoding="utf-8"))
    target = (
        config["text_config"] if nested and isinstance(config.get("text_config"), dict) else config
    )
    target.update(changes)
    folder = work / "model"
    folder.mkdir(exist_ok=True)
    for old in folder.iterdir():
        old.unlink()
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    if index_metadata is not None:
        index = {"metadata": index_metadata, "weight_map": {}}
        (folder / "model.safetensors.index.json").write_text(json.dumps(index), encoding="utf-8")
    invoke(["import", str(folder)], (0, 2))


# --- safetensors headers -------------------------------------------------------------------------

tensor_entries = st.dictionaries(
    st.sampled_from(["w", "w.qweight", "e_blocks", "w.scales", "__metadata__", "x" * 300]),
    st.one_of(
        st.fixed_dictionaries(
            {
                "dtype": st.one_of(
                    st.sampled_from(["BF16", "F32", "I32", "U8", "F8_E4M3", "", "bf16"]), values
                ),
                "shape": st.one_of(st.lists(values, max_size=3), values),
                "data_offsets": st.just([0, 0]),
            }
        ),
        values,
    ),
    max_size=4,
)


@fuzz(80)
@given(
    header=tensor_entries,
    length=st.sampled_from(["exact", "short", "long", 0, 2**64 - 1, 2**27]),
    quant=st.one_of(st.none(), config_values),
    tail=st.binary(max_size=16),
)
def test_fuzz_safetensors_header(
    work: Path, header: dict[str, Any], length: Any, quant: Any, tail: bytes
) -> None:
    folder = work / "weights"
    folder.mkdir(exist_ok=True)
    config = json.loads((HF / "llama-3.1-8b" / "config.json").read_text(encoding="utf-8"))
    if quant is not None:
        config["quantization_config"] = quant
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    body = json.dumps(header).encode()
    size = {"exact": len(body), "short": max(0, len(body) - 3), "long": len(body) + 9}.get(
        str(length), length
    )
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", size) + body + tail)
    invoke(["import", str(folder)], (0, 2))


# --- GGUF files (no GGUF reader: a one-line refusal) ---------------------------------------------


@fuzz(15)
@given(
    version=st.integers(min_value=0, max_value=2**32 - 1),
    body=st.binary(max_size=64),
    text=st.booleans(),
)
def test_fuzz_gguf_header(work: Path, version: int, body: bytes, text: bool) -> None:
    path = work / "x.gguf"
    head = b"GGUF" + struct.pack("<I", version)
    path.write_bytes((b"GGUF text header\n" + body.hex().encode()) if text else head + body)
    invoke(["calc", str(path), "-c", "4K"], (2,))


# --- budget files ------------------------------------------------------------------------------

DEPLOYMENT = {
    "name": "d",
    "model": "llama-3.1-8b",
    "gpu": "h100",
    "max_model_len": "8K",
    "expect": {"min_concurrency": 1},
}
DEPLOYMENT_KEYS = [
    "name",
    "model",
    "gpu",
    "gpu_memory",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "engine",
    "engine_version",
    "gpu_memory_utilization",
    "max_model_len",
    "kv_cache_dtype",
    "block_size",
    "max_num_seqs",
    "kv_cache_memory",
    "overhead",
    "shared_prefix",
    "bogus",
]
EXPECT_KEYS = [
    "min_concurrency",
    "min_context_at_concurrency",
    "max_kv_bytes_per_token",
    "min_free_memory",
    "min_kv_cache_tokens",
    "fits",
    "min_concurency",
]
JUNIT = ["none", "new", "ours", "theirs", "dangling", "fifo", "folder"]


@fuzz(60)
@given(
    changes=st.dictionaries(st.sampled_from(DEPLOYMENT_KEYS), values, max_size=3),
    expect=st.dictionaries(st.sampled_from(EXPECT_KEYS), values, max_size=2),
    engine=st.sampled_from(["ideal", "vllm"]),
    copies=st.integers(min_value=0, max_value=3),
    text_edits=edits,
    junit=st.sampled_from(JUNIT),
)
def test_fuzz_budget(
    work: Path,
    changes: dict[str, Any],
    expect: dict[str, Any],
    engine: str,
    copies: int,
    text_edits: list[tuple[int, str]],
    junit: str,
) -> None:
    deployment = {**DEPLOYMENT, "engine": engine, **changes}
    if isinstance(deployment.get("expect"), dict):
        deployment["expect"] = {**deployment["expect"], **expect}
    text = splice(yaml.safe_dump({"deployments": [deployment] * copies}), text_edits)
    path = work / "budget.yaml"
    path.write_text(text, encoding="utf-8")
    args = ["check", str(path)]
    report = work / f"report-{junit}.xml"
    if junit != "none":
        if os.path.lexists(report) and junit != "ours":
            if report.is_dir() and not report.is_symlink():
                report.rmdir()
            else:
                report.unlink()
        if junit == "ours":
            report.write_text('<testsuites name="kvplan check">', encoding="utf-8")
        elif junit == "theirs":
            report.write_text("<mine/>", encoding="utf-8")
        elif junit == "dangling":
            report.symlink_to(work / "nowhere")
        elif junit == "fifo":
            os.mkfifo(report)
        elif junit == "folder":
            report.mkdir()
        args += ["--junit-xml", str(report)]
    invoke(args, (0, 1, 2))


# --- engine logs -------------------------------------------------------------------------------

LOG_MODELS = {
    "vllm-0.19-llama-3.1-8b-tp1.log": "llama-3.1-8b",
    "vllm-0.19-gemma-3-12b.log": "gemma-3-12b",
    "llamacpp-b5781-llama-3.1-8b.log": "llama-3.1-8b",
    "llamacpp-b8164-gpt-oss-20b.log": "gpt-oss-20b",
    "sglang-qwen3-235b-fp8-tp4.log": "qwen3-235b-a22b",
    "ikllamacpp-deepseek-r1.log": "deepseek-r1",
}
NUMBER = re.compile(r"\d+(?:\.\d+)?")
NUMBERS = ["0", "9" * 400, "1.2.3", "", "00", "4097", "1" + "0" * 20, "0.0", "99999.99"]


@fuzz(80)
@given(
    log=st.sampled_from(sorted(LOG_MODELS)),
    replacements=st.lists(
        st.tuples(st.integers(min_value=0), st.sampled_from(NUMBERS)), min_size=1, max_size=4
    ),
    cut=st.one_of(st.none(), st.integers(min_value=0)),
)
def test_fuzz_log(
    work: Path, log: str, replacements: list[tuple[int, str]], cut: int | None
) -> None:
    text = (LOGS / log).read_text(encoding="utf-8")
    numbers = list(NUMBER.finditer(text))
    for which, new in replacements:
        m = numbers[which % len(numbers)]
        text = text[: m.start()] + new + text[m.end() :]
        numbers = list(NUMBER.finditer(text))
    lines = text.splitlines(keepends=True)
    if cut is not None:
        del lines[cut % len(lines)]
    path = work / "engine.log"
    path.write_text("".join(lines), encoding="utf-8")
    # the model is given: the log's own name is not what is fuzzed here
    invoke(["reconcile", str(path), "-m", LOG_MODELS[log]], (0, 1, 2))


# --- length mixes ------------------------------------------------------------------------------

LENGTH_KEYS = ["prompt_tokens", "output_tokens", "prompt", "input_len", "bogus"]


@fuzz(80)
@given(
    rows=st.lists(
        st.one_of(st.dictionaries(st.sampled_from(LENGTH_KEYS), values, max_size=3), values),
        max_size=30,
    ),
    csv_file=st.booleans(),
    garbage=st.sampled_from(["", "{", "[" * 5000, "9" * 5000, "x" * 200_000, "\x00"]),
)
def test_fuzz_lengths(work: Path, rows: list[Any], csv_file: bool, garbage: str) -> None:
    if csv_file:
        path = work / "mix.csv"
        cells = [
            [str(row.get(k, "")) for k in LENGTH_KEYS] if isinstance(row, dict) else [str(row)]
            for row in rows
        ]
        lines = [",".join(LENGTH_KEYS), *(",".join(c) for c in cells), garbage]
    else:
        path = work / "mix.jsonl"
        lines = [json.dumps(row) for row in rows] + [garbage]
    path.write_text("\n".join(lines), encoding="utf-8")
    assert len(library_problems(lambda: load_lengths(path))) <= MAX_LINES
    invoke(["plan", "llama-3.1-8b", "-g", "h100", "--lengths", str(path)], (0, 2))


# --- command-line options --------------------------------------------------------------------

OPTION_VALUES = [
    "0",
    "-1",
    "1",
    "3",
    "1000",
    "1.5",
    "nan",
    "inf",
    "1e999",
    "9" * 400,
    "9e99999999",
    "",
    "abc",
    "32K",
    "0.0",
    "8",
    "1e-9",
    "x" * 300,
    "fp8",
    "q4_0",
    "bfloat16",
]
COMMANDS: dict[str, tuple[list[str], list[str]]] = {
    "calc": (
        ["calc", "llama-3.1-8b", "-c", "4K"],
        ["-c", "-b", "--kv-dtype", "--k-dtype", "--v-dtype", "-e", "--engine-version", "-ub"],
    ),
    "plan": (
        ["plan", "llama-3.1-8b", "-g", "h100", "-c", "8K"],
        [
            "-g",
            "--gpu-memory",
            "-tp",
            "-pp",
            "-c",
            "-n",
            "--gpu-memory-utilization",
            "--kv-cache-dtype",
            "--dtype",
            "-q",
            "--overhead",
            "--kv-cache-memory",
            "--block-size",
            "--shared-prefix",
            "--mean-length",
            "--p99-length",
            "--max-num-batched-tokens",
            "--max-num-seqs",
            "-e",
            "--mem-fraction-static",
            "--max-total-tokens",
            "--page-size",
        ],
    ),
    "flags": (
        ["flags", "llama-3.1-8b", "-g", "h100", "--max-model-len", "8K", "-n", "4"],
        ["--max-model-len", "-n", "-tp", "--kv-cache-dtype", "-q", "-e"],
    ),
    "compare": (
        ["compare", "llama-3.1-8b", "qwen3-8b", "-c", "4K"],
        ["-c", "-g", "-tp", "--kv-cache-dtype", "-e"],
    ),
}
ENGINES = ["ideal", "vllm", "sglang", "llama.cpp", "trtllm", "tgi", "transformers"]


@fuzz(250)
@given(
    command=st.sampled_from(sorted(COMMANDS)),
    engine=st.sampled_from(ENGINES),
    picks=st.lists(
        st.tuples(
            st.integers(min_value=0),
            st.one_of(st.sampled_from(OPTION_VALUES), st.text(max_size=8)),
        ),
        min_size=1,
        max_size=3,
    ),
)
def test_fuzz_options(command: str, engine: str, picks: list[tuple[int, str]]) -> None:
    base, options = COMMANDS[command]
    args = list(base)
    if command != "compare" or engine in ("ideal", "vllm"):
        args += ["-e", engine]
    for which, value in picks:
        args += [options[which % len(options)], value]
    check(args)


@fuzz(20)
@given(
    junit=st.text(alphabet="abc./-_ ", min_size=1, max_size=12),
    output=st.sampled_from(["table", "json", "yaml", ""]),
    force=st.booleans(),
)
def test_fuzz_check_options(work: Path, junit: str, output: str, force: bool) -> None:
    budget = work / "ok.yaml"
    budget.write_text(yaml.safe_dump({"deployments": [DEPLOYMENT]}), encoding="utf-8")
    args = ["check", str(budget), "-f", output, "--junit-xml", str(work / "j" / junit)]
    invoke([*args, "--force"] if force else args, (0, 1, 2))


# --- regression tests: each case of the hostile-input report ---------------------------------

GOOD_SPEC = (
    "name: t\nnum_hidden_layers: 2\nnum_attention_heads: 4\nnum_key_value_heads: 2\n"
    "head_dim: 8\ntorch_dtype: bfloat16\n"
)


def one_error(args: Sequence[str], *expected: str) -> str:
    """Exit 2 with one stderr line holding every ``expected`` fragment; returns the line."""
    result = invoke(args, (2,))
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines[:5]
    for fragment in expected:
        assert fragment in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        ("num_hidden_layers: 1000000000", "num_hidden_layers: input should be less than or equal"),
        ("num_hidden_layers: " + "9" * 400, "num_hidden_layers: input should be less than"),
        ("num_hidden_layers: " + "9" * 5000, "an integer of 5,000 characters"),
        ("num_hidden_layers: true", "num_hidden_layers: input should be a valid integer"),
        ("num_key_value_heads: 8", "num_key_value_heads: 8 is more than num_attention_heads 4"),
        ("num_key_value_heads: 3", "num_key_value_heads: 3 does not divide num_attention_heads 4"),
        ("torch_dtype: [bfloat16]", "torch_dtype: input should be a valid string"),
        ("layer_types: full_attention", "layer_types: input should be a valid tuple"),
        ("head_dim: " + "[" * 999 + "]" * 999, "head_dim: input should be a valid integer"),
        ("head_dim: " + "[" * 5000, "malformed YAML"),
        ("head_dim: &a [*a]", "an alias refers to itself"),
        ("name: 2024-13-45", "malformed YAML: month must be in 1..12"),
    ],
    ids=[
        "1e9-layers",
        "400-digits",
        "5000-digits",
        "bool-layers",
        "kv-above-heads",
        "kv-not-dividing",
        "dtype-list",
        "layer-types-string",
        "deep-nesting",
        "deeper-nesting",
        "recursive-alias",
        "bad-date",
    ],
)
def test_spec_values_refused_in_one_line(tmp_path: Path, edit: str, expected: str) -> None:
    key = edit.split(":", 1)[0]
    lines = [line for line in GOOD_SPEC.splitlines() if not line.startswith(f"{key}:")]
    path = tmp_path / "s.yaml"
    path.write_text("\n".join([*lines, edit]) + "\n", encoding="utf-8")
    one_error(["calc", str(path), "-c", "4K"], str(path), expected)


def test_2000_unknown_keys_fast_and_capped(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(GOOD_SPEC + "".join(f"k{i}: 1\n" for i in range(2000)), encoding="utf-8")
    started = time.perf_counter()
    result = invoke(["calc", str(path), "-c", "4K"], (2,))
    assert time.perf_counter() - started < 2
    lines = result.stderr.splitlines()
    # 5 problems listed, the first on line 7 (after the 6 lines of GOOD_SPEC), then a count
    assert len(lines) == MAX_LINES
    assert lines[0] == (
        f"kvplan: error: {path}:7: k0: unknown key; allowed keys are listed in docs/spec.md"
    )
    assert lines[-1] == f"kvplan: error: {path}: ... and 1,995 more problems"  # 2000 - 5


def test_4000_bad_layer_types_fast_and_capped(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    body = GOOD_SPEC.replace("num_hidden_layers: 2", "num_hidden_layers: 4000")
    path.write_text(body + "layer_types:\n" + "- bogus\n" * 4000, encoding="utf-8")
    started = time.perf_counter()
    result = invoke(["show", str(path)], (2,))
    assert time.perf_counter() - started < 2
    lines = result.stderr.splitlines()
    assert len(lines) == MAX_LINES
    assert lines[0].startswith(f"kvplan: error: {path}:8: layer_types.0: input should be")
    assert lines[-1] == f"kvplan: error: {path}: ... and 3,995 more problems"  # 4000 - 5


def test_alias_bomb_budget_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "b.yaml"
    path.write_text(alias_bomb(9, 9, "deployments"), encoding="utf-8")  # 9**9 values
    one_error(["check", str(path)], "aliases expand the file by more than 100,000 values")


def test_aliased_errors_are_capped(tmp_path: Path) -> None:
    # 500 aliases of one deployment with 9 unknown keys: 500 x (9 unknown + 3 missing) = 6,000
    # problems from a file of about 3 KB; 5 are listed and the rest counted
    keys = ", ".join(f"k{i}: 0" for i in range(9))
    text = f"deployments:\n- &a {{{keys}}}\n" + "- *a\n" * 499
    path = tmp_path / "b.yaml"
    path.write_text(text, encoding="utf-8")
    result = invoke(["check", str(path)], (2,))
    lines = result.stderr.splitlines()
    assert len(lines) == MAX_LINES
    assert lines[-1] == f"kvplan: error: {path}: ... and 5,995 more problems"  # 6000 - 5


def test_budget_expect_bool_refused(tmp_path: Path) -> None:
    path = tmp_path / "b.yaml"
    bad = {**DEPLOYMENT, "expect": {"min_concurrency": True}}
    path.write_text(yaml.safe_dump({"deployments": [bad]}), encoding="utf-8")
    one_error(["check", str(path)], "deployments.0.expect.min_concurrency: input should be")


def test_huge_ints_in_json_and_yaml(tmp_path: Path) -> None:
    big = "9" * 5000
    config = tmp_path / "config.json"
    config.write_text('{"model_type": "llama", "num_hidden_layers": ' + big + "}")
    one_error(["import", str(config)], "an integer of more than 4,300 digits")
    mix = tmp_path / "mix.jsonl"
    mix.write_text('{"prompt_tokens": ' + big + "}\n")
    one_error(["plan", "llama-3.1-8b", "-g", "h100", "--lengths", str(mix)], ":1: a number of")


def test_deep_json_nesting(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text("[" * 100_000 + "]" * 100_000)
    one_error(["import", str(config)], "nested too deeply")


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"model_type": "dbrx", "attn_config": "x"}, "attn_config: must be an object"),
        ({"model_type": "jamba", "attn_layer_period": 0}, "attn_layer_period: must be an integer"),
        (
            {"model_type": "qwen3_next", "full_attention_interval": 0},
            "full_attention_interval: must be an integer",
        ),
        ({"torch_dtype": ["bfloat16"]}, "torch_dtype: must be a dtype name, got a list"),
        ({"layer_types": "full_attention"}, "layer_types: must be a list"),
        ({"num_hidden_layers": 10**9}, "num_hidden_layers: must be an integer from 1 to 10,000"),
        ({"num_hidden_layers": True}, "num_hidden_layers: must be an integer"),
        ({"quantization_config": "fp8"}, "quantization_config: must be an object"),
        ({"model_type": ["llama"]}, "model_type: a list is not an architecture"),
        (
            {"model_type": "gemma3_text", "sliding_window_pattern": 10**9},
            "sliding_window_pattern: must be an integer from 1 to 32",
        ),
    ],
    ids=[
        "attn-config-string",
        "period-0",
        "interval-0",
        "dtype-list",
        "layer-types-string",
        "1e9-layers",
        "bool-layers",
        "quant-string",
        "type-list",
        "pattern-1e9",
    ],
)
def test_malformed_config_values(tmp_path: Path, changes: dict[str, Any], expected: str) -> None:
    config = json.loads((HF / "llama-3.1-8b" / "config.json").read_text(encoding="utf-8"))
    config.update(changes)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    one_error(["import", str(path)], f"{path}: ", expected)


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "m"
    folder.mkdir()
    config = (HF / "llama-3.1-8b" / "config.json").read_text(encoding="utf-8")
    (folder / "config.json").write_text(config, encoding="utf-8")
    return folder


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ({"w": {"dtype": "BF16", "shape": ["x", 2]}}, "w: shape 'x' is not a size"),
        ({"w": {"dtype": "BF16", "shape": [-1, 2]}}, "w: shape -1 is not a size"),
        ({"w": {"dtype": ["BF16"], "shape": [2]}}, "w: dtype a list is not a safetensors dtype"),
        ({"w": {"dtype": "BF16", "shape": 7}}, "w: shape must be a list"),
        ({"w": [1, 2]}, "w: must be an object with dtype and shape"),
    ],
    ids=["string-dim", "negative-dim", "list-dtype", "scalar-shape", "entry-list"],
)
def test_malformed_safetensors_headers(
    tmp_path: Path, header: dict[str, Any], expected: str
) -> None:
    folder = _folder(tmp_path)
    body = json.dumps(header).encode()
    shard = folder / "model.safetensors"
    shard.write_bytes(struct.pack("<Q", len(body)) + body)
    one_error(["import", str(folder)], f"{shard}: not a safetensors file: {expected}")


def test_index_metadata_list(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    index = folder / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": [1], "weight_map": {}}))
    one_error(["import", str(folder)], f"{index}: metadata: must be an object, got a list")


def test_gptq_bits_zero(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    config = json.loads((folder / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "gptq", "bits": 0}
    (folder / "config.json").write_text(json.dumps(config))
    body = json.dumps({"w.qweight": {"dtype": "I32", "shape": [2, 2], "data_offsets": [0, 16]}})
    body = body.encode()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(body)) + body)
    one_error(["import", str(folder)], "quantization_config.bits: must be an integer from 1")


# Not regular files, for every input: refused at once, never read.
NOT_REGULAR = "not a regular file (a FIFO, a device or a socket)"


def _inputs(path: str) -> list[list[str]]:
    return [
        ["calc", path, "-c", "4K"],
        ["check", path],
        ["plan", "llama-3.1-8b", "-g", "h100", "--lengths", path],
        ["import", path],
        ["diff", path, "llama-3.1-8b"],
        ["reconcile", path],
    ]


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
@pytest.mark.parametrize(
    "command", range(6), ids=["spec", "budget", "lengths", "import", "diff", "log"]
)
def test_devices_refused(device: str, command: int) -> None:
    if not os.path.exists(device):
        pytest.skip(f"no {device} here")
    args = _inputs(device)[command]
    why = known_failure(["reconcile", "<not a regular file>"] if args[0] == "reconcile" else args)
    if why is not None:
        pytest.skip(f"known failure: {why}")
    one_error(args, f"{device}: cannot read: {NOT_REGULAR}")


@pytest.mark.parametrize(
    "command", range(6), ids=["spec", "budget", "lengths", "import", "diff", "log"]
)
def test_fifo_refused(tmp_path: Path, command: int) -> None:
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    args = _inputs(str(fifo))[command]
    why = known_failure(["reconcile", "<not a regular file>"] if args[0] == "reconcile" else args)
    if why is not None:
        pytest.skip(f"known failure: {why}")
    one_error(args, f"{fifo}: cannot read: {NOT_REGULAR}")


def test_fifo_shard_in_model_folder(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    os.mkfifo(folder / "model.safetensors")
    one_error(["import", str(folder)], "model.safetensors: cannot read: " + NOT_REGULAR)


def test_fifo_and_device_as_junit_target(tmp_path: Path) -> None:
    budget = tmp_path / "b.yaml"
    budget.write_text(yaml.safe_dump({"deployments": [DEPLOYMENT]}), encoding="utf-8")
    fifo = tmp_path / "report.xml"
    os.mkfifo(fifo)
    for target in (str(fifo), "/dev/null"):
        for force in ([], ["--force"]):
            one_error(
                ["check", str(budget), "--junit-xml", target, *force],
                f"{target}: exists and is {NOT_REGULAR}",
            )
    assert Path("/dev/null").is_char_device()


def test_binary_file_refused_from_its_first_bytes(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    with path.open("wb") as f:  # 200 MiB, sparse: refused without reading it
        f.write(b"\0" * 16)
        f.truncate(200 * 2**20)
    started = time.perf_counter()
    one_error(["calc", str(path), "-c", "4K"], "binary content, not UTF-8 text")
    text = tmp_path / "long.yaml"
    with text.open("wb") as f:
        f.write(b"name: x\n")
        f.truncate(100 * 2**20)  # NUL bytes past the first 8 KiB: refused by its size
    with text.open("r+b") as f:
        f.write(b"a" * 8192)
    one_error(["calc", str(text), "-c", "4K"], "larger than 2 MiB")  # a YAML file's limit
    assert time.perf_counter() - started < 2


def test_long_model_name(tmp_path: Path) -> None:
    args = ["calc", "x" * 300, "-c", "4K"]
    why = known_failure([*args[:1], "<name of 300 characters>"])
    if why is not None:
        pytest.skip(f"known failure: {why}")
    invoke(args, (2,))


def test_long_spec_file_name(tmp_path: Path) -> None:
    one_error(["calc", str(tmp_path / ("x" * 300 + ".yaml")), "-c", "4K"], "File name too long")


@pytest.mark.parametrize(
    "args",
    [
        ["calc", "llama-3.1-8b", "-c", "9" * 400],
        ["plan", "llama-3.1-8b", "-g", "h100", "-c", "8K", "--kv-cache-memory", "9" * 400],
        [
            "plan",
            "llama-3.1-8b",
            "-g",
            "h100",
            "-c",
            "8K",
            "--gpu-memory-utilization",
            "9e99999999",
        ],
        ["flags", "llama-3.1-8b", "-g", "h100", "--max-model-len", "0", "-n", "1"],
        ["plan", "llama-3.1-8b", "-g", "h100", "-c", "8K", "-e", "vllm", "-tp", "3"],
        ["plan", "llama-3.1-8b", "-g", "h100", "-c", "8K", "-tp", "1000"],
        ["plan", "llama-3.1-8b", "-g", "h100", "-c", "8K", "-tp", "0"],
    ],
    ids=[
        "400-digit-c",
        "400-digit-pool",
        "utilization-exponent",
        "max-model-len-0",
        "tp-3",
        "tp-1000",
        "tp-0",
    ],
)
def test_options_refused_in_one_line(args: list[str]) -> None:
    why = known_failure(args)
    if why is not None:
        pytest.skip(f"known failure: {why}")
    invoke(args, (2,))  # one kvplan line, or typer's usage error for an out-of-range option


def test_dangling_symlink_needs_force(tmp_path: Path) -> None:
    out = tmp_path / "spec.yaml"
    out.symlink_to(tmp_path / "nowhere")
    args = ["import", str(HF / "llama-3.1-8b"), "-o", str(out)]
    one_error(args, f"{out}: exists; pass --force to overwrite it")
    assert out.is_symlink()
    invoke([*args, "--force"], (0,))
    assert not out.is_symlink()
    assert out.read_text(encoding="utf-8").startswith("# Imported from ")


# --- the library: the same bounds ----------------------------------------------------------------


@pytest.mark.parametrize(
    "value", [True, 1.5, float("nan"), float("inf"), -1, 10**30, "1e5", "9" * 31, "x" * 100, None]
)
def test_library_parsers_refuse(value: Any) -> None:
    with pytest.raises(UnitError):
        parse_tokens(value)
    with pytest.raises(UnitError):
        parse_bytes(value)


@fuzz(200)
@given(st.integers())
def test_formatters_take_any_int(n: int) -> None:
    for text in (format_bytes(n), format_tokens(n), format_count(n, "token")):
        assert isinstance(text, str)
        assert len(text) < 5000


def test_formatters_past_the_str_digit_limit() -> None:
    # Python refuses to write an int of more than 4,300 digits; past 13,000 bits (3,914 digits)
    # kvplan shows a power of ten instead
    assert format_tokens(10**5000) == "1.00e+5000"
    assert format_bytes(-(10**400)).endswith(" TiB")
    assert format_bytes(10**400).startswith("90949470177292823791")  # 10**400 / 2**40
