"""Length mixes (``plan --lengths``): JSONL and CSV read into totals; every bad row named with
its line, the list capped; nothing a file holds escapes as anything but a SpecError."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kvplan.answers.workload import load_lengths
from kvplan.errors import SpecError


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_jsonl_and_csv_totals(tmp_path: Path) -> None:
    jsonl = write(
        tmp_path,
        "m.jsonl",
        '{"prompt_tokens": 100, "output_tokens": 28}\n\n{"prompt": 5}\n{"input_len": 7.0,'
        ' "output_len": 1}\n',
    )
    assert load_lengths(jsonl) == [128, 5, 8]  # 100 + 28; 5 (no output); 7 + 1
    csv = write(tmp_path, "m.csv", "prompt_len,output_len\n10, 2\n0,0\n")
    assert load_lengths(csv) == [12, 0]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"prompt_tokens": -1}\n', ":1: prompt_tokens: must be a whole number >= 0, got -1"),
        ('{"prompt_tokens": 1.5}\n', ":1: prompt_tokens: must be a whole number >= 0, got 1.5"),
        ('{"prompt_tokens": true}\n', ":1: prompt_tokens: must be a whole number >= 0, got True"),
        ('{"prompt_tokens": NaN}\n', ":1: prompt_tokens: must be a whole number >= 0, got nan"),
        ('{"prompt_tokens": Infinity}\n', "got inf"),
        ('{"prompt_tokens": "12a"}\n', "got '12a'"),
        ('{"prompt_tokens": [1]}\n', "got a list"),
        ('{"prompt_tokens": ' + "9" * 31 + "}\n", ":1: prompt_tokens: has more than 30 digits"),
        ('{"prompt_tokens": ' + "9" * 5000 + "}\n", ":1: a number of more than 30 digits"),
        ('{"prompt_tokens": 1e400}\n', "got inf"),
        ("[" * 100_000 + "\n", ":1: not JSON: nested too deeply"),
        ("{\n", ":1: not JSON: Expecting property name"),
        ("[1, 2]\n", ":1: each request must be an object"),
        ('{"output_tokens": 1}\n', ":1: no prompt length; use one of prompt_tokens"),
        ("\n\n", "no requests in the file"),
        ("", "no requests in the file"),
    ],
    ids=[
        "negative",
        "fraction",
        "bool",
        "nan",
        "inf",
        "text",
        "list",
        "31-digits",
        "5000-digits",
        "float-overflow",
        "deep",
        "malformed",
        "not-object",
        "no-prompt",
        "blank",
        "empty",
    ],
)
def test_bad_jsonl_is_one_line(tmp_path: Path, text: str, problem: str) -> None:
    path = write(tmp_path, "m.jsonl", text)
    with pytest.raises(SpecError) as info:
        load_lengths(path)
    assert len(info.value.problems) == 1
    assert problem in str(info.value)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("prompt,output\n" + "9" * 200_000 + ",1\n", ":2: not CSV: field larger than field limit"),
        ("prompt,output\n1\n", ":2: output: must be a whole number >= 0, got None"),
        ("prompt,output\n-3,1\n", "got '-3'"),
        ("prompt,output\n" + "9" * 40 + ",1\n", ":2: prompt: has more than 30 digits"),
        ("a,b\n1,2\n", ":2: no prompt length"),
        ("prompt\n", "no requests in the file"),
    ],
    ids=["field-limit", "short-row", "negative", "40-digits", "no-prompt", "header-only"],
)
def test_bad_csv_is_one_line(tmp_path: Path, text: str, problem: str) -> None:
    path = write(tmp_path, "m.csv", text)
    with pytest.raises(SpecError) as info:
        load_lengths(path)
    assert len(info.value.problems) == 1
    assert problem in str(info.value)


def test_every_bad_row_named_and_capped(tmp_path: Path) -> None:
    path = write(tmp_path, "m.jsonl", '{"prompt": -1}\n' * 500 + '{"prompt": 1}\n')
    with pytest.raises(SpecError) as info:
        load_lengths(path)
    # identical problems on different lines are listed per line: 20, then the other 480
    assert info.value.lines[:3] == (1, 2, 3)
    assert len(info.value.problems) == 21
    assert info.value.problems[-1] == "... and 480 more problems"


def test_not_regular_files(tmp_path: Path) -> None:
    fifo = tmp_path / "m.jsonl"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero"), tmp_path):
        with pytest.raises(SpecError, match="cannot read: "):
            load_lengths(path)
