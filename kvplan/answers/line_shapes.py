"""Lines of one shape, read many at a time: how a length mix of 10^7 requests takes seconds.

A trace written by a program repeats one line shape: ``{"prompt_tokens": 1200,
"output_tokens": 300}``, or ``1200,300`` under a CSV header. ``learn_shape`` takes a line the
general reader has read, finds which of its digit runs are the lengths it counts (changing such
a run by one changes the line's length by one; any other run, such as a digit in a key, stays
literal), and makes a pattern that matches a batch of lines of exactly that shape. Such a batch
is read with two C-level passes (the match, then ``findall`` of its digit runs) instead of one
parse per line. A run whose change leaves the length as it is (a timestamp, an id) may hold
any digits; every other run stays as written. A line of any other shape goes back to the
general reader, so the fast path never reads a line differently: the lines it takes differ
from the learned one only in digits that the general reader reads as a length, or ignores.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from operator import add

from kvplan.units import MAX_DIGITS

#: Lines one match takes at most: a batch's digit runs stay a small list.
BATCH_LINES = 4096
#: A line with more digit runs than this is read by the general reader.
_MAX_RUNS = 16
_RUN = re.compile("[0-9]+")
#: A JSON number without leading zeros; a CSV field of digits (the reader strips zeros).
_JSON_NUMBER = f"(?:0|[1-9][0-9]{{0,{MAX_DIGITS - 1}}})"
_CSV_NUMBER = f"[0-9]{{1,{MAX_DIGITS}}}"


@dataclass(frozen=True, slots=True)
class Shape:
    """One line shape: its batch pattern, its digit runs a line, and which of them count."""

    pattern: re.Pattern[str]
    runs: int
    counted: tuple[int, ...]

    def lengths(self, batch: str) -> list[int]:
        """The length of each line of ``batch`` (text the pattern matched)."""
        found = _RUN.findall(batch)
        columns = [map(int, found[i :: self.runs]) for i in self.counted]
        if len(columns) == 1:
            return list(columns[0])
        total = map(add, columns[0], columns[1])
        for column in columns[2:]:
            total = map(add, total, column)
        return list(total)


def learn_shape(line: str, read: Callable[[str], object], *, json: bool) -> Shape | None:
    """The shape of ``line`` (which ``read`` reads as a length), or None when it has none the
    fast path can trust: no digit run counts, too many runs, or a number written as a float."""
    text = line.rstrip("\r\n")
    total = read(text)
    runs = list(_RUN.finditer(text))
    if type(total) is not int or not runs or len(runs) > _MAX_RUNS:
        return None
    number = _JSON_NUMBER if json else _CSV_NUMBER
    counted, free = [], set()
    for i, run in enumerate(runs):
        bumped = read(f"{text[: run.start()]}{int(run.group()) + 1}{text[run.end() :]}")
        if bumped == total + 1:
            if json and text[run.end() : run.end() + 1] in (".", "e", "E"):
                return None  # 12.0 or 1e3: a float, read otherwise than its digits
            counted.append(i)
        elif bumped == total and re.fullmatch(number, run.group()):
            free.add(i)  # a field not counted (a timestamp, an id): any digits
    if not counted or sum(int(runs[i].group()) for i in counted) != total:
        return None
    pieces, at = [], 0
    for i, run in enumerate(runs):
        pieces.append(re.escape(text[at : run.start()]))
        pieces.append(number if i in counted or i in free else re.escape(run.group()))
        at = run.end()
    pieces.append(re.escape(text[at:]))
    one = "".join(pieces)
    if re.fullmatch(one, text) is None:  # a run the number pattern does not take (007)
        return None
    pattern = re.compile(f"(?:{one}(?:\r?\n|\\Z)){{0,{BATCH_LINES}}}")
    return Shape(pattern, len(runs), tuple(counted))
