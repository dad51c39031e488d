"""Request traces in the Mooncake format, read as a stream, and what an unbounded prefix cache
would reuse of them.

The format (kvcache-ai/Mooncake, FAST25-release/README.md): one JSON object a line with
``timestamp`` (arrival, milliseconds from the start), ``input_length`` and ``output_length``
(tokens) and ``hash_ids``, one id for each 512-token block of the input (the last one partial),
remapped so that equal ids mark the same prefix block. A trace is checked as it is read, each
problem one SpecError naming the file, the line and the field: timestamps that go back,
``hash_ids`` that do not have ``cdiv(input_length, 512)`` entries, and ids that do not form
prefixes (an id that follows another id than it followed before, or starts one request and
follows another block in the next). Memory grows with the distinct blocks, not the requests:
``read_mooncake`` yields one request at a time and keeps each block's parent only.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from kvplan.errors import SpecError
from kvplan.files import iter_lines

__all__ = [
    "MOONCAKE_BLOCK_TOKENS",
    "PrefixReuse",
    "TraceRequest",
    "full_blocks",
    "prefix_reuse",
    "read_mooncake",
    "reusable_blocks",
]

#: the tokens of one ``hash_ids`` block in the Mooncake traces
MOONCAKE_BLOCK_TOKENS = 512
#: the largest trace line read (a request of 2^20 blocks is 0.5 G tokens)
MAX_LINE_BYTES = 16 * 2**20
#: the largest trace read
MAX_TRACE_BYTES = 4 * 2**30
_ROOT = -1  # the parent of a request's first block


@dataclass(frozen=True, slots=True)
class TraceRequest:
    """One request: arrival (ms), input and output tokens, and its input's block ids."""

    timestamp_ms: int
    input_tokens: int
    output_tokens: int
    block_ids: tuple[int, ...]


def _int(value: object, where: str, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value < 2**53:
        raise SpecError(where, [f"{name}: expected a whole number of at least {minimum:,}"])
    return value


def _request(text: str, where: str) -> TraceRequest:
    try:
        doc = json.loads(text)
    except ValueError:
        raise SpecError(where, ["not a JSON object (a Mooncake trace has one a line)"]) from None
    if not isinstance(doc, dict):
        raise SpecError(where, ["not a JSON object (a Mooncake trace has one a line)"])
    for key in ("timestamp", "input_length", "output_length", "hash_ids"):
        if key not in doc:
            raise SpecError(
                where, [f"{key}: missing (timestamp, input_length, output_length, hash_ids)"]
            )
    ids = doc["hash_ids"]
    if not isinstance(ids, list):
        raise SpecError(where, ["hash_ids: expected a list of whole numbers"])
    request = TraceRequest(
        _int(doc["timestamp"], where, "timestamp", 0),
        _int(doc["input_length"], where, "input_length", 1),
        _int(doc["output_length"], where, "output_length", 0),
        tuple(_int(i, where, "hash_ids", 0) for i in ids),
    )
    blocks = -(-request.input_tokens // MOONCAKE_BLOCK_TOKENS)
    if len(request.block_ids) != blocks:
        raise SpecError(
            where,
            [
                f"hash_ids: {len(request.block_ids):,} ids for input_length"
                f" {request.input_tokens:,}, which is {blocks:,} blocks of"
                f" {MOONCAKE_BLOCK_TOKENS} tokens"
            ],
        )
    return request


def read_mooncake(path: str | Path) -> Iterator[TraceRequest]:
    """The requests of the Mooncake trace ``path``, in file order, each checked (see the
    module docstring); raises SpecError naming ``path``, the line and the field."""
    shown = str(path)
    # block id -> (the id before it, _ROOT for a request's first; the line it first stood on)
    parent: dict[int, tuple[int, int]] = {}
    last = 0
    for number, raw in iter_lines(path, max_line_bytes=MAX_LINE_BYTES, max_bytes=MAX_TRACE_BYTES):
        where = f"{shown}:{number}"
        text = raw.decode("utf-8", errors="replace").strip()
        if not text:
            continue
        request = _request(text, where)
        if request.timestamp_ms < last:
            raise SpecError(
                where, [f"timestamp: {request.timestamp_ms:,} ms, before the line above's {last:,}"]
            )
        last = request.timestamp_ms
        before = _ROOT
        for block in request.block_ids:
            known, line = parent.setdefault(block, (before, number))
            if known != before:
                raise SpecError(
                    where,
                    [
                        f"hash_ids: block {block} follows {_name(before)} here and"
                        f" {_name(known)} on line {line}: the ids do not form"
                        " prefixes"
                    ],
                )
            before = block
        yield request


def _name(block: int) -> str:
    return "nothing (it starts a request)" if block == _ROOT else f"block {block}"


@dataclass(frozen=True, slots=True)
class PrefixReuse:
    """What an unbounded prefix cache reuses of a trace: requests, input tokens, the input
    tokens found cached, and the distinct blocks the trace computes."""

    num_requests: int
    input_tokens: int
    hit_tokens: int
    distinct_blocks: int

    @property
    def hit_ratio(self) -> float:
        return self.hit_tokens / self.input_tokens if self.input_tokens else 0.0


def full_blocks(request: TraceRequest, block_tokens: int, per: int) -> list[tuple[int, int]]:
    """Each trace block of ``request`` that holds full blocks of ``block_tokens`` tokens
    (``per`` to a trace block), with how many: the request's cacheable prefix, trace block by
    trace block."""
    full = request.input_tokens // block_tokens
    return [
        (b, min(per, full - i * per)) for i, b in enumerate(request.block_ids[: -(-full // per)])
    ]


def reusable_blocks(request: TraceRequest, block_tokens: int) -> int:
    """How many of ``request``'s first blocks a cache hit may cover: its full blocks of
    ``block_tokens`` tokens that leave at least one input token to compute (vLLM's
    ``get_computed_blocks`` caps a hit at ``num_tokens - 1``)."""
    return (request.input_tokens - 1) // block_tokens


def prefix_reuse(
    requests: Iterable[TraceRequest],
    block_tokens: int = MOONCAKE_BLOCK_TOKENS,
    trace_block_tokens: int = MOONCAKE_BLOCK_TOKENS,
) -> PrefixReuse:
    """Count, request by request, the longest run of first blocks of ``block_tokens`` tokens
    an earlier request computed (``reusable_blocks`` at most): with no eviction each is a
    hit. A block is named by the trace block that holds it and its place there, so
    ``block_tokens`` must divide the trace's ``trace_block_tokens``."""
    per = trace_block_tokens // block_tokens
    seen: dict[int, int] = {}  # trace block -> its first blocks computed so far
    count = total = hits = 0
    for request in requests:
        count += 1
        total += request.input_tokens
        named = full_blocks(request, block_tokens, per)
        left = reusable_blocks(request, block_tokens)
        for block, blocks in named:
            have = min(seen.get(block, 0), blocks, left)
            hits += have * block_tokens
            left -= have
            if have < blocks:
                break
        for block, blocks in named:
            if seen.get(block, 0) < blocks:
                seen[block] = blocks
    return PrefixReuse(count, total, hits, sum(seen.values()))
