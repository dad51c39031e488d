"""Request length mixes: read prompt and output lengths from JSONL or CSV.

Each request is one JSON object per line (JSONL) or one row under a header (CSV), with a
prompt length and an output length under any of these names:
``prompt_tokens``/``output_tokens``, ``prompt_len``/``output_len``,
``input_tokens``/``output_tokens``, ``input_len``/``output_len``, ``prompt``/``output``.
A request's length is prompt + output: what its cache holds at the end.

A length is a whole number of tokens of at most ``MAX_DIGITS`` (30) digits: an integer, a
float with nothing after the point (``512.0``) or a string of digits (CSV). Each distinct bad
row is reported at its first line (the first ``MAX_PROBLEMS``, then a count); the file is read
as every input is (``kvplan.files.read_text``: a regular file, at most 64 MiB), and each
distinct line is parsed once, so 10^7 requests take a few seconds.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

from kvplan.answers.line_shapes import Shape, learn_shape
from kvplan.arguments import as_path
from kvplan.errors import SpecError
from kvplan.files import read_text
from kvplan.units import MAX_DIGITS, abbreviate
from kvplan.validation import MAX_PROBLEMS

_PROMPT_KEYS = ("prompt_tokens", "prompt_len", "input_tokens", "input_len", "prompt")
_OUTPUT_KEYS = ("output_tokens", "output_len", "completion_tokens", "output")
_DIGITS = re.compile(r"\s*([0-9]+)\s*")
_LIMIT = 10**MAX_DIGITS


def load_lengths(path: str | Path) -> list[int]:
    """Total tokens (prompt + output) of every request in a JSONL or CSV file, in file order.

    Linear in the file, and lines of one shape are read a batch at a time (10^7 requests take
    seconds). Raises SpecError naming the file, with one line per bad row (capped).
    """
    lengths: list[int] = []
    _read(path, lengths.extend)
    return lengths


def count_lengths(path: str | Path) -> Counter[int]:
    """``load_lengths`` as a histogram: total tokens -> requests of that length. What
    ``plan`` reads of a mix, without a list of every request."""
    counts: Counter[int] = Counter()
    _read(path, counts.update)
    return counts


# What one record (a line, or a CSV row) holds: its length, None (a blank line), or the problem.
Parsed = int | str | None
Sink = Callable[[list[int]], object]


class _Problems:
    """The first problems (line, why) of distinct bad records, then a count of bad rows."""

    def __init__(self) -> None:
        self.listed: dict[Hashable, tuple[int, str]] = {}
        self.more = 0

    def add(self, line: int, record: Hashable, why: str) -> None:
        if record in self.listed:
            return
        if len(self.listed) < MAX_PROBLEMS:
            self.listed[record] = (line, why)
        else:
            self.more += 1

    def raise_any(self, shown: str) -> None:
        if not self.listed:
            return
        messages = [why for _, why in self.listed.values()]
        if self.more:
            messages.append(f"... and {self.more:,} more problem{'s' if self.more > 1 else ''}")
        raise SpecError(shown, messages, [line for line, _ in self.listed.values()])


def _read(path: str | Path, sink: Sink) -> None:
    path = as_path(path, "path")
    shown = str(path)
    text = read_text(path)
    problems = _Problems()
    if Path(path).suffix.lower() != ".csv":
        found = _read_lines(text, 0, 1, _jsonl_length, True, sink, problems)
    elif '"' in text:  # a quoted field may hold a line break: the csv module reads the file
        found = _read_quoted(text, sink, problems)
    else:
        first = text.find("\n") + 1 or len(text)
        header = tuple(next(csv.reader([text[:first].rstrip("\r\n")]), []))
        read = functools.partial(_csv_line, header)
        found = _read_lines(text, first, 2, read, False, sink, problems)
    problems.raise_any(shown)
    if not found:
        raise SpecError(shown, ["no requests in the file"])


#: Shapes learned per file: a file whose every line has a new shape is read line by line.
_MAX_SHAPES = 64


def _read_lines(
    text: str,
    pos: int,
    line: int,
    read: Callable[[str], Parsed],
    json_lines: bool,
    sink: Sink,
    problems: _Problems,
) -> int:
    """Requests from ``pos`` on (``line`` its number): a batch of lines at a time while they
    keep the learned shape, one line by ``read`` otherwise. Returns how many were read."""
    shape: Shape | None = None
    learned = found = 0
    size = len(text)
    while pos < size:
        if shape is not None:
            batch = shape.pattern.match(text, pos)
            if batch is not None and batch.end() > pos:
                lengths = shape.lengths(batch.group())
                sink(lengths)
                found += len(lengths)
                line += len(lengths)
                pos = batch.end()
                continue
        end = text.find("\n", pos) + 1 or size
        record = text[pos:end]
        value = read(record)
        if type(value) is int:
            sink([value])
            found += 1
            if learned < _MAX_SHAPES:
                learned += 1
                shape = learn_shape(record, read, json=json_lines) or shape
        elif isinstance(value, str):
            problems.add(line, record, value)
        pos, line = end, line + 1
    return found


def _read_quoted(text: str, sink: Sink, problems: _Problems) -> int:
    """A CSV file with quotes, row by row through the csv module (a repeated row once)."""
    reader = csv.reader(io.StringIO(text, newline=""))
    seen: dict[tuple[str, ...], Parsed] = {}
    found = 0
    try:
        header = tuple(next(reader, []))
        for fields in reader:
            if not fields:
                continue
            row = tuple(fields)
            value = seen.get(row, _UNSEEN)
            if value is _UNSEEN:
                value = _length(_named(header, row))
                if len(seen) < _MAX_SEEN:
                    seen[row] = value
            if type(value) is int:
                sink([value])
                found += 1
            elif isinstance(value, str):
                problems.add(reader.line_num, row, value)
    except csv.Error as e:
        problems.add(reader.line_num + 1, None, f"not CSV: {e}")  # the line it could not finish
    return found


_UNSEEN: Any = object()
#: Distinct rows remembered: enough for a trace's repeats, bounded for one without any.
_MAX_SEEN = 2**16


def _jsonl_length(line: str) -> Parsed:
    if not line.strip():
        return None
    try:
        row = json.loads(line)
    except json.JSONDecodeError as e:
        return f"not JSON: {e.msg}"
    except RecursionError:
        return "not JSON: nested too deeply"
    except ValueError:  # an integer of more than 4,300 digits
        return f"a number of more than {MAX_DIGITS} digits"
    return _length(row)


def _csv_line(header: tuple[str, ...], line: str) -> Parsed:
    text = line.rstrip("\r\n")
    if not text:
        return None
    try:
        fields = next(csv.reader([text]))
    except csv.Error as e:  # a field over the size limit (131,072 characters), a NUL byte
        return f"not CSV: {e}"
    return _length(_named(header, fields))


def _named(header: tuple[str, ...], fields: list[str] | tuple[str, ...]) -> dict[str | None, Any]:
    """A row as ``csv.DictReader`` makes it: missing fields None, extra ones under None."""
    row: dict[str | None, Any] = dict(zip(header, fields, strict=False))
    for name in header[len(fields) :]:
        row.setdefault(name, None)
    if len(fields) > len(header):
        row[None] = list(fields[len(header) :])
    return row


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
