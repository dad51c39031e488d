"""Untrusted input, by size: each input kvplan reads has a documented limit (docs/spec.md,
"Limits"), and below it the work is linear, so no file within the limits takes long.

Each test builds an input at or just past its limit and checks the one-line refusal, or the
answer, against numbers derived here. The time each takes is measured in bench/inputs.py, not
asserted: these tests show the limits hold and the answers stay exact.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.answers.workload import count_lengths
from kvplan.cli import app
from kvplan.errors import SpecError
from kvplan.gate.budget import MAX_DEPLOYMENTS
from kvplan.importers.gguf_format import MAX_STRING_ITEMS, read_gguf_header
from kvplan.validation import MAX_PROBLEMS, YAML_LIMIT_BYTES, parse_yaml

runner = CliRunner()


def _one_error(args: list[str], expected: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    assert expected in lines[0]
    assert "Traceback" not in result.stderr


# --- YAML: a size limit bounds the nodes to compose --------------------------------------------


def test_a_yaml_file_past_its_limit_is_refused_before_it_is_composed(tmp_path: Path) -> None:
    path = tmp_path / "flow.yaml"
    path.write_text("[" + "a," * (YAML_LIMIT_BYTES // 2) + "]")  # one node every 2 bytes
    _one_error(["calc", str(path), "-c", "4K"], "larger than 2 MiB, the most kvplan reads")
    with pytest.raises(SpecError, match="larger than 2 MiB"):
        parse_yaml("#" * (YAML_LIMIT_BYTES + 1), "text")  # the text, whatever its source


def test_a_spec_at_the_limit_with_many_unknown_keys_lists_a_few(tmp_path: Path) -> None:
    keys = "".join(f"k{i}: 1\n" for i in range(150_000))  # about 1.5 MiB
    path = tmp_path / "s.yaml"
    spec = (
        "name: x\nnum_hidden_layers: 2\nnum_attention_heads: 2\nhead_dim: 64\ntorch_dtype: bf16\n"
    )
    path.write_text(spec + keys)
    assert path.stat().st_size < YAML_LIMIT_BYTES
    result = runner.invoke(app, ["show", str(path)])
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert len(lines) == MAX_PROBLEMS + 1
    assert lines[-1].endswith(f"... and {150_000 - MAX_PROBLEMS:,} more problems")


# --- budgets: a deployment count ---------------------------------------------------------------


def _budget(n: int) -> str:
    return "deployments:\n" + "".join(
        f"- {{name: d{i}, model: llama-3.1-8b, gpu: h100, expect: {{fits: true}}}}\n"
        for i in range(n)
    )


def test_a_budget_past_its_deployment_limit_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "b.yaml"
    path.write_text(_budget(MAX_DEPLOYMENTS + 1))
    _one_error(["check", str(path)], f"deployments: 4,097 of them; at most {MAX_DEPLOYMENTS:,}")
    other = tmp_path / "c.yaml"
    other.write_text(_budget(2))
    _one_error(["diff", str(other), str(path)], "at most 4,096 a file")


# --- length mixes: linear, and exact -----------------------------------------------------------


def test_a_mix_of_a_million_requests_is_counted_exactly(tmp_path: Path) -> None:
    # request i: prompt 1000 + i % 4000, output i % 250; 10^6 rows
    n = 1_000_000
    path = tmp_path / "mix.csv"
    with path.open("w") as f:
        f.write("prompt_tokens,output_tokens\n")
        f.writelines(f"{1000 + i % 4000},{i % 250}\n" for i in range(n))
    counts = count_lengths(path)
    assert sum(counts.values()) == n
    # sum of prompts: 250 cycles of 4000 -> 250 x (4000 x 1000 + 3999 x 4000 / 2); outputs:
    # 4000 cycles of 250 -> 4000 x 249 x 250 / 2
    expected = 250 * (4000 * 1000 + 3999 * 4000 // 2) + 4000 * (249 * 250 // 2)
    assert sum(t * c for t, c in counts.items()) == expected
    result = runner.invoke(
        app,
        ["plan", "llama-3.1-8b", "--gpu", "H100-80GB", "--lengths", str(path), "--format", "json"],
    )
    assert result.exit_code == 0, result.output
    assert '"num_requests": 1000000' in result.stdout
    assert f'"mean_tokens": {expected // n}' in result.stdout


def test_a_million_distinct_bad_rows_list_a_few(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    with path.open("w") as f:
        f.writelines(f'{{"prompt_tokens": -{i}}}\n' for i in range(1, 300_001))
    with pytest.raises(SpecError) as info:
        count_lengths(path)
    assert info.value.lines[:MAX_PROBLEMS] == tuple(range(1, MAX_PROBLEMS + 1))
    assert info.value.problems[-1] == f"... and {300_000 - MAX_PROBLEMS:,} more problems"


# --- GGUF: a string array is walked, so it has its own limit -----------------------------------


def _gguf(path: Path, n: int) -> Path:
    with path.open("wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, 0, 2))
        for key, kind, value in (
            (b"general.architecture", 8, struct.pack("<Q", 5) + b"llama"),
            (b"tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, n)),
        ):
            f.write(struct.pack("<Q", len(key)) + key + struct.pack("<I", kind) + value)
        f.truncate(f.tell() + 8 * n)  # n empty strings, sparse
    return path


def test_a_vocabulary_past_the_string_limit_is_refused_by_its_count(tmp_path: Path) -> None:
    path = _gguf(tmp_path / "big.gguf", 2**24)
    with pytest.raises(SpecError, match="16,777,216 is more than the 2,097,152 kvplan reads"):
        read_gguf_header(path)


def test_a_vocabulary_at_the_limit_is_walked_to_its_end(tmp_path: Path) -> None:
    header = read_gguf_header(_gguf(tmp_path / "v.gguf", MAX_STRING_ITEMS))
    tokens = header.metadata["tokenizer.ggml.tokens"]
    assert (tokens.item_type, tokens.count) == ("string", MAX_STRING_ITEMS)
    # the header ends after the 8-byte length of each empty string: the file's last byte, so
    # the data starts at the file's size rounded up to the alignment of 32
    size = (tmp_path / "v.gguf").stat().st_size
    assert header.data_offset == -(-size // 32) * 32


def test_a_string_past_the_end_is_one_error(tmp_path: Path) -> None:
    path = _gguf(tmp_path / "t.gguf", 3)
    with path.open("r+b") as f:  # the last string claims 2^40 bytes
        f.seek(-8, 2)
        f.write(struct.pack("<Q", 2**40))
    with pytest.raises(SpecError, match=r"an item of 'tokenizer\.ggml\.tokens' runs past the end"):
        read_gguf_header(path)
