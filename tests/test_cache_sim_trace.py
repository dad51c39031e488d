"""Mooncake request traces read as a stream, checked line by line, and the prefix reuse an
unbounded cache would find (kvplan.cache_sim.trace)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.cache_sim.trace import prefix_reuse, read_mooncake
from kvplan.errors import SpecError

SAMPLE = Path(__file__).parent / "data" / "traces" / "mooncake_conversation_400.jsonl"


def _write(tmp_path: Path, rows: list[dict[str, object]]) -> Path:
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _row(t: int, n: int, ids: list[int], out: int = 10) -> dict[str, object]:
    return {"timestamp": t, "input_length": n, "output_length": out, "hash_ids": ids}


def test_hits_by_hand(tmp_path: Path) -> None:
    # whole 512-token blocks only, and a hit leaves one input token to compute:
    # request 1: 1,100 tokens, full blocks 0 1 (block 2 holds 76 tokens): nothing seen
    # request 2: 1,200 tokens, full blocks 0 1: both computed by request 1, 1,024 tokens
    # request 3: 300 tokens: no full block, no hit
    # request 4: 1,100 tokens, full blocks 0 1: 1,024 tokens
    rows = [_row(0, 1100, [0, 1, 2]), _row(5, 1200, [0, 1, 3]), _row(5, 300, [0]),
            _row(9, 1100, [0, 1, 2])]  # fmt: skip
    reuse = prefix_reuse(read_mooncake(_write(tmp_path, rows)))
    assert (reuse.num_requests, reuse.input_tokens) == (4, 3700)
    assert reuse.hit_tokens == 1024 + 1024 == 2048
    assert reuse.distinct_blocks == 2
    # a request of exactly 1,024 tokens may hit (1,024 - 1) // 512 = 1 block of its 2
    again = [_row(0, 1024, [0, 1]), _row(1, 1024, [0, 1])]
    assert prefix_reuse(read_mooncake(_write(tmp_path, again))).hit_tokens == 512


def test_the_public_sample_against_a_direct_count() -> None:
    """The first 400 requests of Mooncake's conversation trace, counted here from the line on
    which each id first stands as a whole block: a request hits the run of its first whole
    blocks (at most (input - 1) // 512) that an earlier line holds."""
    lines = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()]
    first: dict[int, int] = {}
    for number, row in enumerate(lines):
        for block in row["hash_ids"][: row["input_length"] // 512]:
            first.setdefault(block, number)
    hits = 0
    for number, row in enumerate(lines):
        run = 0
        for block in row["hash_ids"][: (row["input_length"] - 1) // 512]:
            if first.get(block, number) >= number:
                break
            run += 1
        hits += 512 * run
    reuse = prefix_reuse(read_mooncake(SAMPLE))
    assert reuse.num_requests == len(lines) == 400
    assert reuse.input_tokens == sum(row["input_length"] for row in lines) == 5_710_530
    assert reuse.hit_tokens == hits == 780_800
    assert reuse.distinct_blocks == len(first) == 9_424


@pytest.mark.parametrize(
    ("rows", "words"),
    [
        ([_row(5, 600, [0, 1]), _row(4, 600, [0, 2])], "timestamp: 4 ms, before the line above"),
        ([_row(0, 600, [0])], "hash_ids: 1 ids for input_length 600, which is 2 blocks"),
        ([_row(0, 1024, [0, 1]), _row(1, 1024, [2, 1])], "block 1 follows block 2 here and"),
        ([_row(0, 1024, [0, 1]), _row(1, 512, [1])], "do not form prefixes"),
        ([{"timestamp": 0, "input_length": 10, "hash_ids": [0]}], "output_length: missing"),
        ([_row(0, 0, [])], "input_length: expected a whole number of at least 1"),
    ],
    ids=["time goes back", "ids and length", "another parent", "a first block later", "missing",
         "empty input"],
)  # fmt: skip
def test_a_bad_trace_is_one_line_naming_the_line(
    tmp_path: Path, rows: list[dict[str, object]], words: str
) -> None:
    path = _write(tmp_path, rows)
    with pytest.raises(SpecError) as info:
        list(read_mooncake(path))
    text = str(info.value)
    assert words in text
    assert f"{path}:" in text
    assert len(text.splitlines()) == 1


def test_not_json_and_a_folder_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text("{not json\n", encoding="utf-8")
    with pytest.raises(SpecError, match="not a JSON object"):
        list(read_mooncake(path))
    with pytest.raises(SpecError, match="folder"):
        list(read_mooncake(tmp_path))
