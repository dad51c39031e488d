"""The one table helper every view builds its rich tables with.

Every table fits the width it is printed at (an 80-column terminal too) without cutting a
word: when its rows are wider than the line, the first column (the name or key) keeps its
width, the other columns wrap between words, and when even that does not fit, the last
columns are left out and a caption names them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import cache
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from rich.console import (
        Console,
        ConsoleOptions,
        JustifyMethod,
        OverflowMethod,
        RenderableType,
        RenderResult,
    )
    from rich.table import Column as RichColumn
    from rich.table import Table

Justify = Literal["left", "right"]
#: (header, justify) of one column
Column = tuple[str, Justify]


def table(
    columns: Sequence[Column],
    rows: Iterable[Sequence[RenderableType]] = (),
    *,
    simple: bool = True,
    title: str | None = None,
    title_justify: JustifyMethod = "center",
    show_header: bool = True,
    no_wrap: bool = False,
    overflow: OverflowMethod = "ellipsis",
    key_style: str | None = None,
    drop_first: Sequence[str] = (),
) -> Table:
    """A rich table with ``columns`` and ``rows``: a simple rule under the header (``simple``)
    or rich's heavy box, ``key_style`` on the first column (a key-value table). ``no_wrap``
    and ``overflow`` hold while the rows fit the line; a narrower line is fitted as the
    module docstring says, leaving out the columns headed ``drop_first`` first."""
    from rich import box

    out = fitted_table_class()(
        box=box.SIMPLE_HEAD if simple else box.HEAVY_HEAD,
        title=title,
        title_justify=title_justify,
        show_header=show_header,
    )
    out.drop_first = tuple(drop_first)  # type: ignore[attr-defined]
    for index, (header, justify) in enumerate(columns):
        out.add_column(
            header,
            justify=justify,
            no_wrap=no_wrap,
            overflow=overflow,
            style=key_style if index == 0 else None,
        )
    for row in rows:
        out.add_row(*row)
    return out


@cache
def fitted_table_class() -> type[Table]:
    """``FittedTable``: a rich ``Table`` that fits the line it is printed on without cutting
    a word. Made on first use, so that importing a view (for JSON output too) imports no
    part of rich."""
    from rich.table import Table

    class FittedTable(Table):
        drop_first: tuple[str, ...] = ()

        def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
            fitted = fit(self, console, options, self.drop_first)
            yield from Table.__rich_console__(fitted, console, options)

    return FittedTable


@dataclass(frozen=True, slots=True)
class _Widths:
    """What one column needs, in characters of content."""

    word: int  # its longest word: narrower cuts a word
    value: int  # and its longest short cell: narrower wraps a value ("139.80 GiB")
    line: int  # its longest cell or header on one line


def fit(
    table: Table, console: Console, options: ConsoleOptions, drop_first: Sequence[str] = ()
) -> Table:
    """``table`` as it prints at ``options.max_width``: itself when its rows fit the line,
    else a copy whose column widths fit it. The first column (the name or key) keeps its
    width; the others wrap between words, values last. When even that does not fit, columns
    are left out, a caption naming them: those named in ``drop_first``, then the one with
    the longest line (prose, lists, notes), the rightmost of equals; never the first."""
    from rich.table import Table

    if not table.columns:
        return table
    max_width = options.max_width
    need = [_measure(console, options, column) for column in table.columns]
    if sum(n.line for n in need) + _overhead(table, len(need)) <= max_width:
        return table
    headers = [str(column.header) for column in table.columns]
    kept, floors = _columns_kept(need, headers, drop_first, table, max_width)
    room = max_width - _overhead(table, len(kept))
    widths = _grow(floors, [need[i].line for i in kept], room)
    out = Table.__new__(Table)
    out.__dict__.update(table.__dict__)
    out.columns = [
        replace(table.columns[i], width=width, no_wrap=False, overflow="fold", _index=index)
        for index, (i, width) in enumerate(zip(kept, widths, strict=True))
    ]
    left_out = [h for i, h in enumerate(headers) if i not in kept and h.strip()]
    if left_out:
        out.caption = f"not shown at this width: {', '.join(left_out)}"
        out.caption_justify = "left"
    return out


def _columns_kept(
    need: list[_Widths],
    headers: list[str],
    drop_first: Sequence[str],
    table: Table,
    max_width: int,
) -> tuple[list[int], list[int]]:
    """The columns to print and their narrowest widths: every value whole, leaving out
    columns (down to two) until they fit; else every word whole, leaving out columns until
    they fit; else the first column alone, wrapped."""
    order = list(range(len(need)))
    sets = [list(order)]
    while len(order) > 1:
        named = [i for i in order[1:] if headers[i] in drop_first]
        order.remove(named[0] if named else max(order[1:], key=lambda i: (need[i].line, i)))
        sets.append(list(order))
    first = [need[0].line]
    for floor, fewest in (("value", min(2, len(need))), ("word", 1)):
        for kept in sets:
            floors = first + [getattr(need[i], floor) for i in kept[1:]]
            if len(kept) >= fewest and sum(floors) + _overhead(table, len(kept)) <= max_width:
                return kept, floors
    return [0], [need[0].word]  # one name wider than the line: wrapped, never cut


def _overhead(table: Table, num_columns: int) -> int:
    """Characters of a row besides its cells' content: padding, edges and dividers."""
    _, right, _, left = table.padding
    edges = (2 if table.show_edge else 0) + (num_columns - 1) if table.box else 0
    return num_columns * (left + right) + edges


#: a cell at most this wide is a value ("139.80 GiB", "TP 8 x PP 1"): kept on one line
SHORT_CELL = 12


def _measure(console: Console, options: ConsoleOptions, column: RichColumn) -> _Widths:
    """What ``column``'s header and cells need (see ``_Widths``)."""
    from rich.measure import Measurement

    header = Measurement.get(console, options, column.header)
    word, value, body = max(1, header.minimum), 1, 1
    for cell in column.cells:
        measured = Measurement.get(console, options, cell)
        word, body = max(word, measured.minimum), max(body, measured.maximum)
        if measured.maximum <= SHORT_CELL:
            value = max(value, measured.maximum)
    return _Widths(word, max(word, value), max(body, header.maximum))


def _grow(floors: list[int], tops: list[int], room: int) -> list[int]:
    """Widths from ``floors`` towards ``tops`` within ``room``, filled level as water: the
    narrow columns get all they need, the wide ones share the rest equally (a 20-character
    note beside two 80-character lines keeps its one line, the lines get half each)."""
    widths = list(floors)
    if sum(widths) >= room:
        return widths
    low, high = 0, max(tops)
    while low < high:  # the highest level whose widths fit the room
        level = (low + high + 1) // 2
        if sum(min(t, max(f, level)) for f, t in zip(floors, tops, strict=True)) <= room:
            low = level
        else:
            high = level - 1
    widths = [min(t, max(f, low)) for f, t in zip(floors, tops, strict=True)]
    spare = room - sum(widths)
    for index in range(len(widths)):  # what the level leaves, a character each, left first
        if spare and widths[index] < tops[index]:
            widths[index] += 1
            spare -= 1
    return widths
