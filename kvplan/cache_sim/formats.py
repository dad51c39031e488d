"""Request traces in two more formats, read as a stream into ``TraceRequest``\\ s whose blocks
are ``block_tokens`` tokens: ``block_ids`` holds one id per ``block_tokens`` tokens of the
input (the last one possibly partial), and equal ids mark the same prefix block.

``token_ids`` (JSON lines, one request a line)::

    {"timestamp": 0, "prompt_token_ids": [1, 15043, 29892], "output_length": 128}

``timestamp`` (ms from the start, never going back), the prompt's token ids under
``token_ids`` or ``prompt_token_ids`` (the name vLLM gives them), ``output_length`` (tokens).
A full block is named as vLLM's prefix cache hashes it (vllm/v1/core/kv_cache_utils.py,
``hash_block_tokens``): by its parent block's identity and its own tokens, so two blocks are
the same only when every token up to their end is. A partial last block is never shared: vLLM
hashes only full blocks.

``prefix_groups`` (JSON lines, or CSV with a header row), for a user who knows the traffic's
shape but not its tokens::

    timestamp,group,prefix_length,input_length,output_length
    0,support-bot,1200,1500,200

Requests of one ``group`` share its first ``prefix_length`` tokens (0: none); the rest of
each input is the request's own. The full blocks inside the prefix are the group's (named by
group and place, so block 3 always follows block 2 of the same group); the block that holds the
prefix's end, when partial, and every block after it belong to the request alone. A group's
prefix is one sequence: a request with a shorter ``prefix_length`` than another of its group
shares fewer blocks of it (the same prefix, truncated), one with a longer one shares more, as
an engine would see token sequences cut that way.

``detect_format`` tells the three formats (``mooncake`` too) apart from the first line;
``read_trace`` reads any of them. Ids are dense, 0, 1, 2, ... in first-seen order, and each
problem is one SpecError naming the file, the line and the field. Unknown keys and columns are
ignored, as ``read_mooncake`` ignores them. Memory grows with the distinct full blocks, never
with the requests: a ``token_ids`` block is kept as a 128-bit BLAKE2b digest of its parent's id
and its tokens (two distinct blocks of a trace of 10^9 blocks collide with odds below 10^-20).
"""

from __future__ import annotations

import csv
import hashlib
import json
from array import array
from collections.abc import Hashable, Iterator, Sequence
from pathlib import Path

from kvplan.arguments import as_int, wrong_type
from kvplan.cache_sim.trace import (
    MAX_LINE_BYTES,
    MAX_TRACE_BYTES,
    MOONCAKE_BLOCK_TOKENS,
    TraceRequest,
    read_mooncake,
)
from kvplan.errors import SpecError, UnitError
from kvplan.files import iter_lines

__all__ = [
    "TRACE_FORMATS",
    "detect_format",
    "read_prefix_groups",
    "read_token_ids",
    "read_trace",
]

#: the formats ``read_trace`` reads, as ``detect_format`` names them
TRACE_FORMATS = ("mooncake", "token_ids", "prefix_groups")
#: the most tokens one block may hold (vLLM's block sizes are 1 to 256 tokens)
MAX_BLOCK_TOKENS = 2**20
_TOKEN_KEYS = ("token_ids", "prompt_token_ids")
_GROUP_FIELDS = ("timestamp", "group", "prefix_length", "input_length", "output_length")
_MAX_TOKEN_ID = 2**32 - 1
_MAX_COUNT = 2**53 - 1  # as read_mooncake: every count exact in a JSON reader's double
_ROOT = -1  # the parent of a request's first block
_U32 = next(code for code in "IL" if array(code).itemsize == 4)
_ACCEPTED = (
    "JSON lines with hash_ids (mooncake), token_ids or prompt_token_ids (token_ids), or group"
    f" (prefix_groups), or a CSV header naming {','.join(_GROUP_FIELDS)} (prefix_groups)"
)


def _lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of each non-blank line of ``path``, stripped; UTF-8 or refused."""
    for number, raw in iter_lines(path, max_line_bytes=MAX_LINE_BYTES, max_bytes=MAX_TRACE_BYTES):
        try:
            text = raw.decode("utf-8").strip()
        except UnicodeDecodeError:
            raise SpecError(f"{path}:{number}", ["not UTF-8 text"]) from None
        if number == 1:
            text = text.removeprefix("\ufeff")  # the byte order mark a spreadsheet writes
        if text:
            yield number, text


def _object(text: str, where: str, fmt: str) -> dict[str, object]:
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        raise SpecError(where, [f"not a JSON object (a {fmt} trace has one a line)"])
    return doc


def _whole(value: object, where: str, name: str, minimum: int, maximum: int = _MAX_COUNT) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise SpecError(where, [f"{name}: expected a whole number from {minimum:,} to {maximum:,}"])
    return value


def _after(timestamp_ms: int, last_ms: int, where: str) -> int:
    """``timestamp_ms``, which must not go back before the line above's ``last_ms``."""
    if timestamp_ms < last_ms:
        raise SpecError(
            where, [f"timestamp: {timestamp_ms:,} ms, before the line above's {last_ms:,}"]
        )
    return timestamp_ms


def _block_tokens(block_tokens: object) -> int:
    return as_int(block_tokens, "block_tokens", minimum=1, maximum=MAX_BLOCK_TOKENS)


class _Ids:
    """Dense block ids in first-seen order: one per distinct key, a fresh one for a block
    that is never shared."""

    def __init__(self) -> None:
        self._ids: dict[Hashable, int] = {}
        self.num_ids = 0

    def shared(self, key: Hashable) -> int:
        found = self._ids.get(key)
        if found is None:
            found = self._ids[key] = self.fresh()
        return found

    def fresh(self) -> int:
        self.num_ids += 1
        return self.num_ids - 1


# --- token_ids -------------------------------------------------------------------------------


def _tokens(doc: dict[str, object], where: str) -> list[int]:
    """The prompt's token ids, checked: whole numbers in [0, 2^32), at least one."""
    given = [key for key in _TOKEN_KEYS if key in doc]
    if len(given) != 1:
        problem = "missing" if not given else "both given"
        raise SpecError(where, [f"token_ids: {problem} (give one of token_ids, prompt_token_ids)"])
    key = given[0]
    tokens = doc[key]
    if not isinstance(tokens, list) or not tokens:
        raise SpecError(where, [f"{key}: expected a non-empty list of token ids"])
    # one pass over the common case; the slow search only to name the first bad id
    if not (
        all(type(t) is int for t in tokens) and min(tokens) >= 0 and max(tokens) <= _MAX_TOKEN_ID
    ):
        for index, token in enumerate(tokens):
            _whole(token, where, f"{key}.{index}", 0, _MAX_TOKEN_ID)
    return tokens


def _token_request(
    doc: dict[str, object], where: str, last_ms: int, block_tokens: int, ids: _Ids
) -> TraceRequest:
    for key in ("timestamp", "output_length"):
        if key not in doc:
            raise SpecError(
                where, [f"{key}: missing (timestamp, token_ids or prompt_token_ids, output_length)"]
            )
    timestamp_ms = _after(_whole(doc["timestamp"], where, "timestamp", 0), last_ms, where)
    output_tokens = _whole(doc["output_length"], where, "output_length", 0)
    tokens = _tokens(doc, where)
    data = array(_U32, tokens).tobytes()
    step = 4 * block_tokens
    blocks: list[int] = []
    parent = _ROOT
    for start in range(0, len(tokens) // block_tokens * step, step):
        # hash_block_tokens: (the parent's hash, this block's tokens) -> this block's hash
        digest = hashlib.blake2b(parent.to_bytes(8, "little", signed=True), digest_size=16)
        digest.update(data[start : start + step])
        parent = ids.shared(digest.digest())
        blocks.append(parent)
    if len(tokens) % block_tokens:
        blocks.append(ids.fresh())  # a partial block: never hashed, never shared
    return TraceRequest(timestamp_ms, len(tokens), output_tokens, tuple(blocks))


def read_token_ids(path: str | Path, block_tokens: int) -> Iterator[TraceRequest]:
    """The requests of the ``token_ids`` trace ``path`` (JSON lines with ``timestamp`` in ms,
    the prompt under ``token_ids`` or ``prompt_token_ids``, and ``output_length``), in file
    order, with one block id per ``block_tokens`` tokens of the prompt: full blocks named by
    their whole prefix, as vLLM hashes them, a partial last block a fresh id of its own.
    Raises SpecError naming ``path``, the line and the field; UnitError for a ``block_tokens``
    that is not 1 to 2^20."""
    checked = _block_tokens(block_tokens)
    return _read_token_ids(path, checked)


def _read_token_ids(path: str | Path, block_tokens: int) -> Iterator[TraceRequest]:
    ids = _Ids()
    last_ms = 0
    for number, text in _lines(path):
        where = f"{path}:{number}"
        request = _token_request(
            _object(text, where, "token_ids"), where, last_ms, block_tokens, ids
        )
        last_ms = request.timestamp_ms
        yield request


# --- prefix_groups ---------------------------------------------------------------------------


def _group_request(
    values: Sequence[object], where: str, last_ms: int, block_tokens: int, ids: _Ids
) -> TraceRequest:
    """The request of one prefix_groups row, its values in ``_GROUP_FIELDS`` order."""
    timestamp, group, prefix, length, output = values
    timestamp_ms = _after(_whole(timestamp, where, "timestamp", 0), last_ms, where)
    if not isinstance(group, str) or not group:
        raise SpecError(where, ["group: expected a non-empty string naming the shared prefix"])
    prefix_tokens = _whole(prefix, where, "prefix_length", 0)
    input_tokens = _whole(length, where, "input_length", 1)
    output_tokens = _whole(output, where, "output_length", 0)
    if prefix_tokens > input_tokens:
        raise SpecError(
            where,
            [
                f"prefix_length: {prefix_tokens:,} tokens, more than input_length"
                f" {input_tokens:,}: it must be at most input_length"
            ],
        )
    num_shared = prefix_tokens // block_tokens
    num_blocks = -(-input_tokens // block_tokens)
    # (group, place) names a block of the group's prefix: the same place always follows the
    # same parent, so the name is chained as a token hash would be
    blocks = [ids.shared((group, index)) for index in range(num_shared)]
    blocks.extend(ids.fresh() for _ in range(num_blocks - num_shared))
    return TraceRequest(timestamp_ms, input_tokens, output_tokens, tuple(blocks))


def _json_values(text: str, where: str) -> list[object]:
    doc = _object(text, where, "prefix_groups")
    for key in _GROUP_FIELDS:
        if key not in doc:
            raise SpecError(where, [f"{key}: missing ({', '.join(_GROUP_FIELDS)})"])
    return [doc[key] for key in _GROUP_FIELDS]


def _csv_fields(text: str, where: str) -> list[str]:
    """One CSV record, on one line, its fields stripped."""
    try:
        rows = list(csv.reader([text], strict=True))
    except csv.Error:
        raise SpecError(where, ["not a CSV record on one line (a quote left open?)"]) from None
    return [field.strip() for field in rows[0]] if rows else []


def _csv_columns(text: str, where: str) -> list[int]:
    """Where each of ``_GROUP_FIELDS`` stands in the CSV header ``text``."""
    names = _csv_fields(text, where)
    places: list[int] = []
    for key in _GROUP_FIELDS:
        if names.count(key) != 1:
            problem = "missing" if key not in names else "named twice"
            raise SpecError(
                where, [f"header: {key} {problem} (the columns: {','.join(_GROUP_FIELDS)})"]
            )
        places.append(names.index(key))
    return places


def _csv_values(text: str, where: str, places: list[int], num_columns: int) -> list[object]:
    fields = _csv_fields(text, where)
    if len(fields) != num_columns:
        raise SpecError(
            where, [f"{len(fields)} fields, and the header names {num_columns} columns"]
        )
    values: list[object] = [fields[place] for place in places]
    for index, value in enumerate(values):
        # the counts: ASCII digits only (no sign, no 1e3, no 1,000), at most 16 of them
        if _GROUP_FIELDS[index] != "group" and isinstance(value, str):
            digits = value.isascii() and value.isdigit() and len(value) <= 16
            values[index] = int(value) if digits else None
    return values


def read_prefix_groups(path: str | Path, block_tokens: int) -> Iterator[TraceRequest]:
    """The requests of the ``prefix_groups`` trace ``path`` (JSON lines, or CSV whose first
    line is a header; the fields ``timestamp`` in ms, ``group``, ``prefix_length``,
    ``input_length``, ``output_length``), in file order, with one block id per
    ``block_tokens`` tokens of the input: the full blocks inside the group's prefix shared by
    the group, every other block the request's own (see the module docstring for a group whose
    ``prefix_length`` varies). Raises SpecError naming ``path``, the line and the field;
    UnitError for a ``block_tokens`` that is not 1 to 2^20."""
    checked = _block_tokens(block_tokens)
    return _read_prefix_groups(path, checked)


def _read_prefix_groups(path: str | Path, block_tokens: int) -> Iterator[TraceRequest]:
    ids = _Ids()
    last_ms = 0
    places: list[int] | None = None  # the CSV header's columns; None for JSON lines
    num_columns = 0  # the CSV header's; -1 for JSON lines, told from the first line
    for number, text in _lines(path):
        where = f"{path}:{number}"
        if num_columns == 0 and not text.startswith("{"):
            places = _csv_columns(text, where)
            num_columns = len(_csv_fields(text, where))
            continue
        if places is None:
            num_columns = -1
            values = _json_values(text, where)
        else:
            values = _csv_values(text, where, places, num_columns)
        request = _group_request(values, where, last_ms, block_tokens, ids)
        last_ms = request.timestamp_ms
        yield request


# --- any format ------------------------------------------------------------------------------


def detect_format(path: str | Path) -> str:
    """The format of the trace ``path``, one of ``TRACE_FORMATS``, told from its first
    non-blank line: a JSON object's keys (``hash_ids``: mooncake; ``token_ids`` or
    ``prompt_token_ids``: token_ids; ``group``: prefix_groups) or a CSV header naming
    ``group`` (prefix_groups). Raises SpecError naming the file and the formats accepted."""
    for number, text in _lines(path):
        where = f"{path}:{number}"
        if text.startswith("{"):
            doc = _object(text, where, "JSON lines")
            for key, fmt in (("hash_ids", "mooncake"), *((k, "token_ids") for k in _TOKEN_KEYS)):
                if key in doc:
                    return fmt
            if "group" in doc:
                return "prefix_groups"
        elif "group" in _csv_fields(text, where):
            return "prefix_groups"
        raise SpecError(where, [f"not a trace format kvplan reads; it reads {_ACCEPTED}"])
    raise SpecError(str(path), [f"no request: the file is empty; kvplan reads {_ACCEPTED}"])


def read_trace(path: str | Path, fmt: str, block_tokens: int) -> Iterator[TraceRequest]:
    """The requests of the trace ``path`` in the format ``fmt`` (one of ``TRACE_FORMATS``;
    ``detect_format`` tells it), with one block id per ``block_tokens`` tokens. A Mooncake
    trace's blocks are ``MOONCAKE_BLOCK_TOKENS`` (512) tokens, fixed by the trace: the caller
    must pass that ``block_tokens`` for it, and any other is refused (UnitError) rather than
    read as a different block size. Raises SpecError for the trace, UnitError for ``fmt`` or
    ``block_tokens``."""
    if not isinstance(fmt, str):
        raise wrong_type("fmt", "a str", fmt)
    checked = _block_tokens(block_tokens)
    match fmt:
        case "mooncake":
            if checked != MOONCAKE_BLOCK_TOKENS:
                raise UnitError(
                    f"block_tokens: a Mooncake trace's blocks are {MOONCAKE_BLOCK_TOKENS} tokens,"
                    f" got {checked:,}; pass block_tokens={MOONCAKE_BLOCK_TOKENS}"
                )
            return read_mooncake(path)
        case "token_ids":
            return _read_token_ids(path, checked)
        case "prefix_groups":
            return _read_prefix_groups(path, checked)
    raise UnitError(f"fmt: unknown trace format {fmt[:40]!r}; allowed: {', '.join(TRACE_FORMATS)}")
