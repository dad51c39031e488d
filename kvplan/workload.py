"""Request length mixes: read prompt and output lengths from JSONL or CSV.

Each request is one JSON object per line (JSONL) or one row under a header (CSV), with a
prompt length and an output length under any of these names:
``prompt_tokens``/``output_tokens``, ``prompt_len``/``output_len``,
``input_tokens``/``output_tokens``, ``input_len``/``output_len``, ``prompt``/``output``.
A request's length is prompt + output: what its cache holds at the end.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from kvplan.errors import SpecError

_PROMPT_KEYS = ("prompt_tokens", "prompt_len", "input_tokens", "input_len", "prompt")
_OUTPUT_KEYS = ("output_tokens", "output_len", "completion_tokens", "output")


def load_lengths(path: str | Path) -> list[int]:
    """Total tokens (prompt + output) of every request in a JSONL or CSV file."""
    shown = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise SpecError(shown, [f"cannot read: {getattr(e, 'strerror', None) or e}"]) from None
    rows: list[tuple[int, Any]]
    if Path(path).suffix.lower() == ".csv":
        reader = csv.DictReader(io.StringIO(text))
        rows = [(i + 2, row) for i, row in enumerate(reader)]
    else:
        rows = []
        for i, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                rows.append((i, json.loads(line)))
            except json.JSONDecodeError as e:
                raise SpecError(shown, [f"not JSON: {e.msg}"], [i]) from None
    lengths = [_length(shown, line, row) for line, row in rows]
    if not lengths:
        raise SpecError(shown, ["no requests in the file"])
    return lengths


def _length(path: str, line: int, row: Any) -> int:
    if not isinstance(row, dict):
        raise SpecError(
            path, ["each request must be an object with prompt and output lengths"], [line]
        )
    total = 0
    for keys, required in ((_PROMPT_KEYS, True), (_OUTPUT_KEYS, False)):
        key = next((k for k in keys if k in row), None)
        if key is None:
            if required:
                raise SpecError(
                    path, [f"no prompt length; use one of {', '.join(_PROMPT_KEYS)}"], [line]
                )
            continue
        value = row[key]
        try:
            tokens = int(value)
        except (TypeError, ValueError):
            tokens = -1
        if tokens < 0 or (isinstance(value, float) and not value.is_integer()):
            raise SpecError(path, [f"{key}: must be a whole number >= 0, got {value!r}"], [line])
        total += tokens
    return total
