"""The token_ids and prefix_groups trace formats, read as a stream with block ids of
``block_tokens`` tokens, checked line by line, and told apart (kvplan.cache_sim.formats)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import pytest

from kvplan.cache_sim.formats import (
    TRACE_FORMATS,
    detect_format,
    read_prefix_groups,
    read_token_ids,
    read_trace,
)
from kvplan.cache_sim.trace import MAX_LINE_BYTES, TraceRequest, read_mooncake
from kvplan.errors import ArgumentTypeError, SpecError, UnitError

TRACES = Path(__file__).parent / "data" / "traces"
TOKEN_SAMPLE = TRACES / "token_ids_sample.jsonl"
GROUP_CSV = TRACES / "prefix_groups_sample.csv"
GROUP_JSONL = TRACES / "prefix_groups_sample.jsonl"
MOONCAKE = TRACES / "mooncake_conversation_400.jsonl"


def _jsonl(tmp_path: Path, rows: Iterable[object], name: str = "trace.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _csv(tmp_path: Path, lines: Iterable[str]) -> Path:
    path = tmp_path / "trace.csv"
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def _prompt(t: object, tokens: object, out: int = 1, key: str = "token_ids") -> dict[str, object]:
    return {"timestamp": t, key: tokens, "output_length": out}


def _ids(path: Path, block_tokens: int) -> list[tuple[int, ...]]:
    return [r.block_ids for r in read_token_ids(path, block_tokens)]


def _direct_hits(requests: Iterable[TraceRequest], block_tokens: int) -> tuple[int, int]:
    """(input tokens, hit tokens) an unbounded cache finds, counted directly: a request hits
    the run of its first full blocks that an earlier request's full blocks hold, at most
    (input - 1) // block_tokens of them, so one input token is left to compute."""
    seen: set[int] = set()
    total = hits = 0
    for request in requests:
        total += request.input_tokens
        full = request.block_ids[: request.input_tokens // block_tokens]
        run = 0
        for block in full[: (request.input_tokens - 1) // block_tokens]:
            if block not in seen:
                break
            run += 1
        hits += run * block_tokens
        seen.update(full)
    return total, hits


# --- token_ids: blocks named by their whole prefix -------------------------------------------


def test_sharing_the_first_9_tokens_shares_exactly_2_blocks(tmp_path: Path) -> None:
    # block_tokens 4: tokens 1-4 and 5-8 are equal blocks; block 2 is (9, 100, 101, 102)
    # against (9, 200, 201, 202), so it differs: ids 0 1 2, then 0 1 3
    common = list(range(1, 10))
    path = _jsonl(
        tmp_path, [_prompt(0, [*common, 100, 101, 102]), _prompt(1, [*common, 200, 201, 202])]
    )
    assert _ids(path, 4) == [(0, 1, 2), (0, 1, 3)]


def test_a_changed_token_in_block_0_makes_every_later_block_distinct(tmp_path: Path) -> None:
    # blocks 1 and 2 hold the same tokens (5-12), but follow another block 0: chained, new ids
    tokens = list(range(1, 13))
    changed = [1, 2, 99, *tokens[3:]]
    path = _jsonl(tmp_path, [_prompt(0, tokens), _prompt(1, changed), _prompt(2, tokens)])
    assert _ids(path, 4) == [(0, 1, 2), (3, 4, 5), (0, 1, 2)]


def test_partial_blocks_are_never_equal(tmp_path: Path) -> None:
    # 6 tokens: one full block (shared), then a partial block of 2, a fresh id each time;
    # 8 tokens: two full blocks, both shared
    six, eight = list(range(1, 7)), list(range(1, 9))
    path = _jsonl(
        tmp_path, [_prompt(0, six), _prompt(1, six), _prompt(2, eight), _prompt(3, eight)]
    )
    assert _ids(path, 4) == [(0, 1), (0, 2), (0, 3), (0, 3)]
    # a prompt shorter than a block is one partial block: never shared
    short = _jsonl(tmp_path, [_prompt(0, [7, 8]), _prompt(1, [7, 8])], "short.jsonl")
    assert _ids(short, 4) == [(0,), (1,)]


def test_both_key_names_and_the_request_fields(tmp_path: Path) -> None:
    path = _jsonl(
        tmp_path,
        [_prompt(5, [1, 2, 3, 4, 5], 7), _prompt(5, [1, 2, 3, 4], 0, key="prompt_token_ids")],
    )
    assert list(read_token_ids(path, 4)) == [
        TraceRequest(5, 5, 7, (0, 1)),
        TraceRequest(5, 4, 0, (0,)),
    ]


def test_block_tokens_1_names_every_token_by_its_prefix(tmp_path: Path) -> None:
    path = _jsonl(tmp_path, [_prompt(0, [5, 5, 5]), _prompt(1, [5, 5, 6]), _prompt(2, [5])])
    assert _ids(path, 1) == [(0, 1, 2), (0, 1, 3), (0,)]


def test_the_token_ids_sample_against_a_direct_count() -> None:
    """block_tokens 16; a 40-token system prompt is 2 full blocks and 8 tokens of block 2:
    1. 50 tokens (system + a): nothing seen                                        0
    2. 70 tokens (system + b): blocks 0 1; block 2 mixes system and b             32
    3. 70 tokens (system + a + turn 2): blocks 0 1 2 of request 1; block 3 new     48
    4. 30 tokens, another system prompt                                            0
    5. request 2 again: its 4 full blocks, (70 - 1) // 16 = 4 may hit             64
    6. the system prompt's 4th token changed: block 0 differs, so every block     0
    """
    requests = list(read_token_ids(TOKEN_SAMPLE, 16))
    assert [r.input_tokens for r in requests] == [50, 70, 70, 30, 70, 50]
    assert [r.timestamp_ms for r in requests] == [0, 120, 250, 400, 410, 500]
    assert _direct_hits(requests, 16) == (340, 0 + 32 + 48 + 0 + 64 + 0)
    assert requests[4].block_ids == (*requests[1].block_ids[:4], requests[4].block_ids[4])
    every = sorted({block for r in requests for block in r.block_ids})
    assert every == list(range(len(every)))  # dense, first-seen order


# --- prefix_groups ---------------------------------------------------------------------------


def _groups(rows: list[tuple[int, str, int, int, int]]) -> list[dict[str, object]]:
    keys = ("timestamp", "group", "prefix_length", "input_length", "output_length")
    return [dict(zip(keys, row, strict=True)) for row in rows]


GROUP_ROWS = [(0, "g", 9, 12, 1), (1, "g", 9, 11, 1), (2, "h", 4, 4, 1), (3, "g", 5, 10, 1),
              (4, "g", 0, 3, 1), (5, "h", 8, 9, 1)]  # fmt: skip


def test_prefix_groups_by_hand(tmp_path: Path) -> None:
    # block_tokens 4: g's 9-token prefix is 2 full blocks (0 1), the block holding token 9 is
    # the request's; h's first block is its whole 4-token input; a shorter prefix (5) shares
    # one block; 0 shares none; a longer one (8) shares one more block of h's prefix
    path = _jsonl(tmp_path, _groups(GROUP_ROWS))
    got = [r.block_ids for r in read_prefix_groups(path, 4)]
    assert got == [(0, 1, 2), (0, 1, 3), (4,), (0, 5, 6), (7,), (4, 8, 9)]


def test_prefix_groups_match_the_equivalent_token_ids_trace(tmp_path: Path) -> None:
    # each group's prefix is one token sequence; the rest of each input is the request's own
    prefixes = {"g": list(range(100, 120)), "h": list(range(200, 220))}
    own = iter(range(10_000, 20_000))
    prompts = [
        _prompt(t, prefixes[group][:prefix] + [next(own) for _ in range(length - prefix)], out)
        for t, group, prefix, length, out in GROUP_ROWS
    ]
    tokens = _jsonl(tmp_path, prompts, "tokens.jsonl")
    groups = _jsonl(tmp_path, _groups(GROUP_ROWS), "groups.jsonl")
    for block_tokens in (1, 2, 3, 4, 5, 16):
        assert list(read_prefix_groups(groups, block_tokens)) == list(
            read_token_ids(tokens, block_tokens)
        ), block_tokens


def test_the_prefix_groups_samples_against_a_direct_count() -> None:
    """block_tokens 16: support's 40-token prefix is 2 full blocks, coder's 64 are 4:
    1. support, 50 tokens: nothing seen                                           0
    2. support, 70: blocks 0 1                                                   32
    3. coder, 100: the first of its group                                         0
    4. support, 45: blocks 0 1, (45 - 1) // 16 = 2 may hit                       32
    5. coder, 64, all prefix: 4 blocks seen, (64 - 1) // 16 = 3 may hit          48
    6. coder, prefix 20: 1 block                                                 16
    7. solo, no prefix                                                            0
    """
    from_csv = list(read_prefix_groups(GROUP_CSV, 16))
    assert from_csv == list(read_prefix_groups(GROUP_JSONL, 16))
    assert [r.output_tokens for r in from_csv] == [120, 80, 300, 60, 10, 50, 20]
    assert _direct_hits(from_csv, 16) == (449, 32 + 32 + 48 + 16)


def test_csv_columns_in_any_order_with_extra_columns_and_spaces(tmp_path: Path) -> None:
    path = _csv(
        tmp_path,
        ["\ufeffgroup, note ,output_length,input_length,prefix_length,timestamp",
         "a, x ,3,8,4,0", "", "a,\"y, z\",3,9,8,2"],
    )  # fmt: skip
    assert list(read_prefix_groups(path, 4)) == [
        TraceRequest(0, 8, 3, (0, 1)),
        TraceRequest(2, 9, 3, (0, 2, 3)),
    ]


# --- each problem: one line naming the file, the line and the field --------------------------

TOKEN_ERRORS = [
    ([_prompt(0, [1, -1])], 1, "token_ids.1: expected a whole number from 0 to 4,294,967,295"),
    ([_prompt(0, [2**32])], 1, "token_ids.0: expected a whole number from 0 to 4,294,967,295"),
    ([_prompt(0, [1, 1.5])], 1, "token_ids.1: expected a whole number"),
    ([_prompt(0, [True])], 1, "token_ids.0: expected a whole number"),
    ([_prompt(0, ["7"], key="prompt_token_ids")], 1, "prompt_token_ids.0: expected a whole"),
    ([_prompt(0, [])], 1, "token_ids: expected a non-empty list of token ids"),
    ([_prompt(0, "1 2 3")], 1, "token_ids: expected a non-empty list"),
    ([{"timestamp": 0, "output_length": 1}], 1, "token_ids: missing (give one of token_ids"),
    ([{**_prompt(0, [1]), "prompt_token_ids": [1]}], 1, "token_ids: both given"),
    ([_prompt(5, [1]), _prompt(4, [1])], 2, "timestamp: 4 ms, before the line above's 5"),
    ([_prompt(-1, [1])], 1, "timestamp: expected a whole number from 0"),
    ([_prompt(0, [1]), _prompt(1.5, [1])], 2, "timestamp: expected a whole number"),
    ([_prompt(0, [1], -1)], 1, "output_length: expected a whole number from 0"),
    ([{"timestamp": 0, "token_ids": [1]}], 1, "output_length: missing"),
    ([{"token_ids": [1], "output_length": 1}], 1, "timestamp: missing"),
    ([_prompt(0, [1]), [1, 2]], 2, "not a JSON object (a token_ids trace has one a line)"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("rows", "line", "words"), TOKEN_ERRORS, ids=[w for _, _, w in TOKEN_ERRORS]
)
def test_a_bad_token_ids_line(tmp_path: Path, rows: list[object], line: int, words: str) -> None:
    path = _jsonl(tmp_path, rows)
    with pytest.raises(SpecError) as info:
        list(read_token_ids(path, 4))
    text = str(info.value)
    assert text.startswith(f"{path}:{line}: ")
    assert words in text
    assert len(text.splitlines()) == 1


HEADER = "timestamp,group,prefix_length,input_length,output_length"
GROUP_ERRORS = [
    ([HEADER, "0,g,10,8,1"], 2, "prefix_length: 10 tokens, more than input_length 8"),
    ([HEADER, "0,,0,8,1"], 2, "group: expected a non-empty string"),
    ([HEADER, "0,g,0,0,1"], 2, "input_length: expected a whole number from 1"),
    ([HEADER, "1e3,g,0,8,1"], 2, "timestamp: expected a whole number from 0"),
    ([HEADER, "0,g,0,8,-1"], 2, "output_length: expected a whole number from 0"),
    ([HEADER, "0,g,1_000,8,1"], 2, "prefix_length: expected a whole number"),
    ([HEADER, "0,g,0,8,1", "0,g,0"], 3, "3 fields, and the header names 5 columns"),
    ([HEADER, "5,g,0,8,1", "4,g,0,8,1"], 3, "timestamp: 4 ms, before the line above's 5"),
    ([HEADER, '0,"g,0,8,1'], 2, "not a CSV record on one line"),
    (["timestamp,group,input_length,output_length"], 1, "header: prefix_length missing"),
    ([HEADER + ",group"], 1, "header: group named twice"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("lines", "line", "words"), GROUP_ERRORS, ids=[w for _, _, w in GROUP_ERRORS]
)
def test_a_bad_prefix_groups_csv_line(
    tmp_path: Path, lines: list[str], line: int, words: str
) -> None:
    path = _csv(tmp_path, lines)
    with pytest.raises(SpecError) as info:
        list(read_prefix_groups(path, 4))
    text = str(info.value)
    assert text.startswith(f"{path}:{line}: ")
    assert words in text
    assert len(text.splitlines()) == 1


def _group(**changes: object) -> dict[str, object]:
    row: dict[str, object] = {"timestamp": 0, "group": "g", "prefix_length": 0}
    return {**row, "input_length": 8, "output_length": 1, **changes}


GROUP_JSON_ERRORS = [
    ([_group(group=5)], 1, "group: expected a non-empty string"),
    ([_group(prefix_length=9)], 1, "prefix_length: 9 tokens, more than input_length 8"),
    ([_group(), _group(input_length="8")], 2, "input_length: expected a whole number from 1"),
    ([_group(output_length=None)], 1, "output_length: expected a whole number from 0"),
    ([{"timestamp": 0, "group": "g", "input_length": 8, "output_length": 1}], 1,
     "prefix_length: missing"),
    ([_group(timestamp=3), _group(timestamp=2)], 2, "timestamp: 2 ms, before the line above's 3"),
    ([_group(), "g"], 2, "not a JSON object (a prefix_groups trace has one a line)"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("rows", "line", "words"), GROUP_JSON_ERRORS, ids=[w for _, _, w in GROUP_JSON_ERRORS]
)
def test_a_bad_prefix_groups_json_line(
    tmp_path: Path, rows: list[object], line: int, words: str
) -> None:
    path = _jsonl(tmp_path, rows)
    with pytest.raises(SpecError) as info:
        list(read_prefix_groups(path, 4))
    text = str(info.value)
    assert text.startswith(f"{path}:{line}: ")
    assert words in text
    assert len(text.splitlines()) == 1


def test_a_huge_line_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    path = tmp_path / "huge.jsonl"
    filler = b"1, " * (MAX_LINE_BYTES // 3 + 1)
    path.write_bytes(b'{"timestamp": 0, "output_length": 1, "token_ids": [' + filler + b"1]}\n")
    for read in (read_token_ids, read_prefix_groups):
        with pytest.raises(SpecError, match="a line longer than 16 MiB") as info:
            list(read(path, 16))
        assert str(info.value).startswith(f"{path}:1: ")
    with pytest.raises(SpecError, match="a line longer than 16 MiB"):
        detect_format(path)


def test_text_that_is_not_utf8_and_a_folder_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "latin1.csv"
    path.write_bytes(HEADER.encode() + b"\n0,caf\xe9,0,8,1\n")
    with pytest.raises(SpecError, match=r":2: not UTF-8 text"):
        list(read_prefix_groups(path, 4))
    with pytest.raises(SpecError, match="folder"):
        list(read_token_ids(tmp_path, 4))


@pytest.mark.parametrize(
    ("value", "error"),
    [(0, UnitError), (2**20 + 1, UnitError), (True, ArgumentTypeError), (16.0, ArgumentTypeError)],
    ids=["0", "2^20 + 1", "bool", "float"],
)
def test_block_tokens_is_checked_at_the_call(value: object, error: type[Exception]) -> None:
    # refused when called, before anything is read
    for read in (read_token_ids, read_prefix_groups):
        with pytest.raises(error, match="block_tokens"):
            read(TOKEN_SAMPLE, value)  # type: ignore[arg-type]
    with pytest.raises(error, match="block_tokens"):
        read_trace(TOKEN_SAMPLE, "token_ids", value)  # type: ignore[arg-type]


# --- telling the formats apart ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "fmt"),
    [(MOONCAKE, "mooncake"), (TOKEN_SAMPLE, "token_ids"), (GROUP_CSV, "prefix_groups"),
     (GROUP_JSONL, "prefix_groups")],
    ids=["mooncake", "token_ids", "prefix_groups csv", "prefix_groups jsonl"],
)  # fmt: skip
def test_detect_format_on_the_samples(path: Path, fmt: str) -> None:
    assert detect_format(path) == fmt
    assert fmt in TRACE_FORMATS


def test_detect_format_from_the_first_non_blank_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('\n  \n{"prompt_token_ids": [1], "timestamp": 0, "output_length": 1}\n')
    assert detect_format(path) == "token_ids"


@pytest.mark.parametrize(
    ("text", "where"),
    [('{"prompt": "hello"}\n', ":1: not a trace format"),
     ("timestamp,input_length,output_length\n", ":1: not a trace format"),
     ("\n{not json\n", ":2: not a JSON object"),
     ("", ": no request: the file is empty")],
    ids=["unknown keys", "csv without group", "not json", "empty"],
)  # fmt: skip
def test_detect_format_refuses_naming_the_formats(tmp_path: Path, text: str, where: str) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as info:
        detect_format(path)
    message = str(info.value)
    assert message.startswith(f"{path}{where}")
    assert len(message.splitlines()) == 1
    if "JSON object" not in message:
        assert "hash_ids (mooncake)" in message
        assert "token_ids" in message
        assert "prefix_groups" in message
    assert "hello" not in message  # the content of a file not understood is never echoed


def test_read_trace_dispatches() -> None:
    assert list(read_trace(TOKEN_SAMPLE, "token_ids", 16)) == list(read_token_ids(TOKEN_SAMPLE, 16))
    assert list(read_trace(GROUP_CSV, "prefix_groups", 16)) == list(
        read_prefix_groups(GROUP_CSV, 16)
    )
    first = next(iter(read_trace(MOONCAKE, detect_format(MOONCAKE), 512)))
    assert first == next(iter(read_mooncake(MOONCAKE)))


def test_read_trace_refuses_a_mooncake_block_size_and_an_unknown_format() -> None:
    with pytest.raises(UnitError, match="pass block_tokens=512"):
        read_trace(MOONCAKE, "mooncake", 16)
    with pytest.raises(UnitError, match="allowed: mooncake, token_ids, prefix_groups"):
        read_trace(MOONCAKE, "sharegpt", 16)
    with pytest.raises(ArgumentTypeError, match="fmt"):
        read_trace(MOONCAKE, None, 16)  # type: ignore[arg-type]
