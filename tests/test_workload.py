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
    rows = "".join(f'{{"prompt": -{i}}}\n' for i in range(1, 501))
    path = write(tmp_path, "m.jsonl", '{"prompt": -1}\n' * 3 + rows + '{"prompt": 1}\n')
    with pytest.raises(SpecError) as info:
        load_lengths(path)
    # a row repeated is one problem, at its first line; 5 distinct rows listed, then a count
    assert info.value.lines[:3] == (1, 5, 6)
    assert len(info.value.problems) == 6
    assert info.value.problems[-1] == "... and 495 more problems"


def test_not_regular_files(tmp_path: Path) -> None:
    fifo = tmp_path / "m.jsonl"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero"), tmp_path):
        with pytest.raises(SpecError, match="cannot read: "):
            load_lengths(path)


# --- lines of one shape, read a batch at a time, read exactly as one at a time --------------

_PROMPTS = ("prompt_tokens", "prompt_len", "input_tokens", "input_len", "prompt")
_OUTPUTS = ("output_tokens", "output_len", "completion_tokens", "output")


def _reference_total(row: dict[str, object]) -> int | None:
    """The documented rule, written out apart from kvplan: the first prompt key and the first
    output key present, each a whole number >= 0 below 10^30 (an int, a float with nothing
    after the point, or a string of digits); None where kvplan must refuse the row."""
    total = 0
    for keys, required in ((_PROMPTS, True), (_OUTPUTS, False)):
        key = next((k for k in keys if k in row), None)
        if key is None:
            if required:
                return None
            continue
        value = row[key]
        if isinstance(value, bool):
            return None
        if isinstance(value, float) and value.is_integer() and value >= 0:
            value = int(value)
        if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
            value = int(value.strip())
        if not isinstance(value, int) or not 0 <= value < 10**30:
            return None
        total += value
    return total


def _reference(path: Path) -> list[int | None]:
    """Each request's total, one line at a time with the json and csv modules."""
    import csv
    import json

    text = path.read_text()
    if path.suffix == ".csv":
        return [_reference_total(dict(row)) for row in csv.DictReader(text.splitlines())]
    out: list[int | None] = []
    for line in text.split("\n"):
        if line.strip():
            try:
                row = json.loads(line)
            except ValueError:
                out.append(None)
                continue
            out.append(_reference_total(row) if isinstance(row, dict) else None)
    return out


def _mixed_lines(seed: int, json_lines: bool) -> str:
    """Runs of lines of one shape, broken by lines of other shapes that look alike: floats,
    leading zeros, digits in keys, numbers past 30 digits, strings of digits, other keys."""
    import random

    rng = random.Random(seed)
    if json_lines:
        shapes = [
            '{{"prompt_tokens": {a}, "output_tokens": {b}}}',
            '{{"id": "r{a}", "t": {b}, "prompt_len": {a}, "output_len": {b}}}',
            '{{"prompt_tokens": {a}.0, "output_tokens": {b}}}',
            '{{"prompt_tokens": {a}e1, "output_tokens": {b}}}',
            '{{"prompt_tokens": 0{a}, "output_tokens": {b}}}',
            '{{"prompt_tokens": "{a}", "output_tokens": {b}}}',
            '{{"prompt1": {a}, "prompt": {b}}}',
            '{{"prompt_tokens": {a}{a}{a}{a}{a}{a}{a}{a}, "output": {b}}}',
            '{{"output_tokens": {a}}}',
            '{{"prompt_tokens":{a},"output_tokens":{b}}}',
        ]
    else:
        shapes = ["{a},{b},{a}{b}", "{a},{b}", "{a}.0,{b},1", " {a} ,{b},2", "0{a},{b},3",
                  "{a}{a}{a}{a}{a}{a}{a}{a},{b},4", "{a},-{b},5", "{a},{b},{b},{b}"]  # fmt: skip
    lines = []
    for _ in range(400):
        shape = shapes[0] if rng.random() < 0.7 else rng.choice(shapes)
        for _ in range(rng.randint(1, 20)):
            a, b = rng.randint(0, 10 ** rng.randint(1, 6)), rng.randint(0, 999)
            lines.append(shape.format(a=a, b=b))
    header = "" if json_lines else "prompt_tokens,output_tokens,request\n"
    return header + "\n".join(lines) + ("\n" if seed % 2 else "")


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_a_batch_of_one_shape_reads_as_line_by_line(tmp_path: Path, seed: int, suffix: str) -> None:
    path = write(tmp_path, f"m{suffix}", _mixed_lines(seed, suffix == ".jsonl"))
    expected = _reference(path)
    if None in expected:
        with pytest.raises(SpecError) as info:
            load_lengths(path)
        first_bad = expected.index(None) + (2 if suffix == ".csv" else 1)
        assert info.value.lines[0] == first_bad
        # the same file without its bad lines reads as the reference does
        lines = path.read_text().split("\n")
        start = 1 if suffix == ".csv" else 0
        good = lines[:start] + [
            line for line, total in zip(lines[start:], expected, strict=False) if total is not None
        ]
        path = write(tmp_path, f"good{suffix}", "\n".join(good) + "\n")
        expected = [t for t in expected if t is not None]
    assert load_lengths(path) == expected


def test_a_count_is_the_list_counted(tmp_path: Path) -> None:
    from collections import Counter

    from kvplan.answers.workload import count_lengths

    path = write(
        tmp_path, "m.csv", "prompt,output\n" + "".join(f"{i % 7},{i % 3}\n" for i in range(999))
    )
    assert count_lengths(path) == Counter(load_lengths(path))
    assert count_lengths(path)[0] == 48  # i % 7 == 0 and i % 3 == 0: i % 21 == 0, 0..987
