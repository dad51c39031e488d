"""The one table helper every view builds its rich tables with."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from rich.console import JustifyMethod, OverflowMethod, RenderableType
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
) -> Table:
    """A rich table with ``columns`` and ``rows``: a simple rule under the header (``simple``)
    or rich's heavy box, ``key_style`` on the first column (a key-value table)."""
    from rich import box
    from rich.table import Table

    out = Table(
        box=box.SIMPLE_HEAD if simple else box.HEAVY_HEAD,
        title=title,
        title_justify=title_justify,
        show_header=show_header,
    )
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
