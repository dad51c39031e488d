"""Request length mixes: read prompt and output lengths from JSONL or CSV.

Each request is one JSON object per line (JSONL) or one row under a header (CSV), with a
prompt length and an output length under any of these names:
``prompt_tokens``/``output_tokens``, ``prompt_len``/``output_len``,
``input_tokens``/``output_tokens``, ``input_len``/``output_len``, ``prompt``/``output``.
A request's length is prompt + output: what its cache holds at the end.

A length is a whole number of tokens of at most ``MAX_DIGITS`` (30) digits: an integer, a
float with nothing after the point (``512.0``) or a string of digits (CSV). Every bad row is
reported with its line (the first 20, then a count); the file is read as every input is
(``kvplan.files.read_text``: a regular file, at most 64 MiB).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kvplan.errors import SpecError
from kvplan.files import read_text
from kvplan.units import MAX_DIGITS, abbreviate
from kvplan.validation import capped

_PROMPT_KEYS = ("prompt_tokens", "prompt_len", "input_tokens", "input_len", "prompt")
_OUTPUT_KEYS = ("output_tokens", "output_len", "completion_tokens", "output")
_DIGITS = re.compile(r"\s*([0-9]+)\s*")
_LIMIT = 10**MAX_DIGITS


def load_lengths(path: str | Path) -> list[int]:
    """Total tokens (prompt + output) of every request in a JSONL or CSV file.

    Raises SpecError naming the file, with one line per bad row (capped).
    """
    shown = str(path)
    text = read_text(path)
    rows = _csv_rows(text) if Path(path).suffix.lower() == ".csv" else _jsonl_rows(text)
    lengths: list[int] = []
    problems: list[tuple[int | None, str]] = []
    for line, row, unreadable in rows:
        if unreadable is not None:
            problems.append((line, unreadable))
            continue
        total = _length(row)
        if isinstance(total, str):
            problems.append((line, total))
        else:
            lengths.append(total)
    if problems:
        messages, lines = capped(((line, (line, why)) for line, why in problems), _second)
        raise SpecError(shown, messages, lines)
    if not lengths:
        raise SpecError(shown, ["no requests in the file"])
    return lengths


# Each row: (line, the parsed row, None) or (line, None, why it cannot be read).
Rows = Iterator[tuple[int, Any, str | None]]


def _jsonl_rows(text: str) -> Rows:
    for i, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield i, json.loads(line), None
        except json.JSONDecodeError as e:
            yield i, None, f"not JSON: {e.msg}"
        except RecursionError:
            yield i, None, "not JSON: nested too deeply"
        except ValueError:  # an integer of more than 4,300 digits
            yield i, None, f"a number of more than {MAX_DIGITS} digits"


def _csv_rows(text: str) -> Rows:
    reader = csv.DictReader(io.StringIO(text))
    try:
        for row in reader:
            yield reader.line_num, row, None
    except csv.Error as e:
        # csv refuses a field over its size limit (131,072 characters) or a NUL byte
        yield reader.line_num + 1, None, f"not CSV: {e}"  # the line it could not finish


def _second(pair: tuple[int | None, str]) -> str:
    return pair[1]


def _length(row: Any) -> int | str:
    """The request's prompt + output tokens, or the problem with the row."""
    if not isinstance(row, dict):
        return "each request must be an object with prompt and output lengths"
    total = 0
    for keys, required in ((_PROMPT_KEYS, True), (_OUTPUT_KEYS, False)):
        key = next((k for k in keys if k in row), None)
        if key is None:
            if required:
                return f"no prompt length; use one of {', '.join(_PROMPT_KEYS)}"
            continue
        tokens = _tokens(row[key])
        if tokens is None:
            return f"{key}: must be a whole number >= 0, got {abbreviate(row[key])}"
        if tokens >= _LIMIT:
            return f"{key}: has more than {MAX_DIGITS} digits"
        total += tokens
    return total


def _tokens(value: object) -> int | None:
    """A whole number of tokens from a JSON or CSV value, or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float):
        ok = math.isfinite(value) and value.is_integer() and value >= 0
        return min(int(value), _LIMIT) if ok else None
    if isinstance(value, str):
        m = _DIGITS.fullmatch(value)
        if m is None:
            return None
        digits = m.group(1).lstrip("0") or "0"
        return int(digits) if len(digits) <= MAX_DIGITS else _LIMIT
    return None
