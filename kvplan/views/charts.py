"""``kvplan chart``: line charts of results (memory against context length, say), as plain
text or as files, and the two charts the command draws from ``kvplan.answers.curves``.

``render_text`` needs nothing beyond the standard library and writes plain characters, no
ANSI codes, so its output reads the same in a CI log, a pipe and a rich console.
``save_chart`` writes ``.png`` or ``.svg`` through matplotlib, an optional extra imported only
inside it: ``import kvplan.charts`` never loads matplotlib or numpy.

Charts are display, so floats are fine here: callers convert their exact integers (bytes to
GiB, say) when they build a ``Series``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from kvplan.errors import SpecError, UnavailableError, UnitError
from kvplan.files import refuse_existing, write_atomic

if TYPE_CHECKING:
    from kvplan.answers.curves import MemoryCurve, ThroughputCurve
    from kvplan.hardware.gpus import GPU

PLOT_HINT = (
    "charts as files need matplotlib, which kvplan does not install by default:"
    " pip install 'kvplan[plot]'"
)

#: one marker per series, in order; a seventh series reuses the first.
MARKERS = ("*", "o", "+", "x", "#", "@")
#: in files: one colour and one marker per series, in order (matplotlib's tab10 without its
#: grey, which unlinked reference lines use)
COLORS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#bcbd22",
    "#17becf",
)
FILE_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">")
_LINE_GREY = "0.35"
_DASH_PERIOD = 4  # a linked line in text: its series' marker every 4th column, dashes between

_SUFFIXES = (".png", ".svg")
_FIG_SIZE_IN = (8.0, 5.0)
_DPI = 100  # with _FIG_SIZE_IN: a 800 x 500 pixel PNG
_MAX_Y_INTERVALS = 5  # 4-6 labelled y ticks
_HEADROOM = 0.05  # of the y span, above the highest value
_LOG_STRIDES = (1, 2, 4, 5, 10)  # exponents of two between labelled x ticks on a log axis


class PlotUnavailableError(UnavailableError):
    """Charts as files need matplotlib, which is not installed here."""


@dataclass(frozen=True, slots=True)
class Series:
    """One line: ``ys[i]`` at ``xs[i]``, the ``xs`` ascending.

    ``end_label`` marks where the line stops on purpose (``fits up to 25``): it is written
    beside the last point and in the legend.
    """

    label: str
    xs: tuple[float, ...]
    ys: tuple[float, ...]
    end_label: str = ""

    def __post_init__(self) -> None:
        # A malformed series is a bug in the caller, not a user mistake: plain ValueError.
        if len(self.xs) != len(self.ys):
            raise ValueError(f"series {self.label!r}: {len(self.xs)} xs but {len(self.ys)} ys")
        if not all(math.isfinite(v) for v in (*self.xs, *self.ys)):
            raise ValueError(f"series {self.label!r}: values must be finite")
        if any(b < a for a, b in itertools.pairwise(self.xs)):
            raise ValueError(f"series {self.label!r}: xs must be ascending")


@dataclass(frozen=True, slots=True)
class HLine:
    """A horizontal reference line, such as the KV pool of one GPU in GiB.

    ``series`` names the label of the series it belongs to: the line takes that series'
    marker (text) or colour (files); None draws it plain.
    """

    label: str
    y: float
    series: str | None = None

    def __post_init__(self) -> None:
        if not math.isfinite(self.y):
            raise ValueError(f"line {self.label!r}: y must be finite")


@dataclass(frozen=True, slots=True)
class Chart:
    """Everything both renderers need; ``log_x`` gives a log2 x axis for context lengths.

    ``y_unit`` follows a reference line's value in the legend (``61.5 GiB``); ``notes`` are
    lines printed under the chart (why each dtype, where each line stops).
    """

    title: str
    x_label: str
    y_label: str
    series: tuple[Series, ...]
    hlines: tuple[HLine, ...] = ()
    log_x: bool = False
    y_unit: str = ""
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.log_x and any(x <= 0 for s in self.series for x in s.xs):
            raise ValueError(f"chart {self.title!r}: a log x axis needs xs > 0")
        labels = {s.label for s in self.series}
        for line in self.hlines:
            if line.series is not None and line.series not in labels:
                raise ValueError(f"line {line.label!r}: no series {line.series!r}")

    def series_index(self, label: str | None) -> int | None:
        """The index of the series called ``label`` (its marker and colour), or None."""
        return next((i for i, s in enumerate(self.series) if s.label == label), None)

    def line_legend(self, line: HLine) -> str:
        """A reference line's label and value, with the unit: ``KV pool: x (51.2 GiB)``."""
        unit = f" {self.y_unit}" if self.y_unit else ""
        return f"{line.label} ({_compact(line.y)}{unit})"

    def series_legend(self, series: Series) -> str:
        return f"{series.label}: {series.end_label}" if series.end_label else series.label


# -- number labels ---------------------------------------------------------------------------


def _short(v: float) -> str:
    """At most three significant digits, no exponent for ordinary sizes: 1.5, 12, 120, 0.25."""
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 100:
        text = f"{v:.0f}"
    elif a >= 10:
        text = f"{v:.1f}"
    elif a >= 1:
        text = f"{v:.2f}"
    else:
        return f"{v:.3g}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _compact(v: float, base: int = 1000) -> str:
    """A compact label: ``1.2K`` for 1,200 (or 1,229 with ``base=1024``), ``1M``, ``12``.

    The suffix is chosen after rounding, so 999,999 reads ``1M``, not ``1000K``.
    """
    for power, suffix in enumerate(("", "K", "M", "G")):
        text = _short(v / base**power)
        if abs(v) < base ** (power + 1) and abs(float(text)) < base:
            return text + suffix
    return _short(v / base**4) + "T"


def token_label(num_tokens: float) -> str:
    """A token count as on a context-length axis, binary like vLLM's ``32K``: 4096 -> ``4K``."""
    return _compact(num_tokens, base=1024)


# -- axes ------------------------------------------------------------------------------------


def _nice_ticks(lo: float, hi: float, max_intervals: int) -> list[float]:
    """Evenly spaced ticks on a 1, 2, 2.5, 5 x 10^k step, enclosing ``[lo, hi]``.

    The smallest such step with at most ``max_intervals`` intervals wins: 0..4.2 in 5 gives
    0, 1, 2, 3, 4, 5.
    """
    if hi <= lo:
        hi = lo + 1
    exp = math.floor(math.log10((hi - lo) / max_intervals))
    for e in range(exp, exp + 3):
        for m in (1.0, 2.0, 2.5, 5.0):
            step = m * 10.0**e
            first = math.floor(lo / step + 1e-9)
            last = math.ceil(hi / step - 1e-9)
            if last - first <= max_intervals:
                return [i * step for i in range(first, last + 1)]
    raise AssertionError("unreachable")  # pragma: no cover - 2 x 10^(exp+1) always fits


def _y_ticks(chart: Chart) -> list[float]:
    """From 0 (or the lowest value) to the highest value or line plus a little headroom."""
    values = [y for s in chart.series for y in s.ys] + [h.y for h in chart.hlines]
    lo = min([0.0, *values])
    hi = max([0.0, *values])
    if hi == lo:
        hi = lo + 1
    return _nice_ticks(lo, hi + (hi - lo) * _HEADROOM, _MAX_Y_INTERVALS)


def _x_axis(chart: Chart, max_ticks: int) -> tuple[float, float, list[float]]:
    """The x range and its ticks: ``(lo, hi, ticks)``.

    A linear axis ends on its outer ticks. A log axis runs from the power of two at or below
    the lowest x to the one at or above the highest, with a tick on every ``stride``-th
    exponent (a multiple of it): 1K, 4K, 16K, 64K for 1K..128K in 4 ticks.
    """
    xs = [x for s in chart.series for x in s.xs]
    if not chart.log_x:
        lo, hi = (min(xs), max(xs)) if xs else (0.0, 1.0)
        if hi == lo:
            lo, hi = lo - 1, hi + 1
        ticks = _nice_ticks(lo, hi, max(1, max_ticks - 1))
        return ticks[0], ticks[-1], ticks
    lo_exp = math.floor(math.log2(min(xs))) if xs else 0
    hi_exp = math.ceil(math.log2(max(xs))) if xs else 1
    if hi_exp == lo_exp:
        lo_exp, hi_exp = lo_exp - 1, hi_exp + 1
    # the smallest stride that fits; 5 and 10 land on 1K and 1M (2^10, 2^20)
    stride = next(
        s
        for s in (*_LOG_STRIDES, *range(20, hi_exp - lo_exp + 20, 10))
        if hi_exp // s - -(-lo_exp // s) + 1 <= max_ticks
    )
    first = -(-lo_exp // stride) * stride
    ticks = [2.0**e for e in range(first, hi_exp + 1, stride)]
    return 2.0**lo_exp, 2.0**hi_exp, ticks


def _x_label(chart: Chart, x: float) -> str:
    return token_label(x) if chart.log_x else _compact(x)


# -- text ------------------------------------------------------------------------------------


def _round(v: float) -> int:
    """Half up, not to even, so a point halfway between two cells always lands the same way."""
    return math.floor(v + 0.5)


@dataclass(frozen=True, slots=True)
class _Frame:
    """Where a value lands on a ``width`` x ``height`` plot: its column and its row."""

    log_x: bool
    width: int
    height: int
    x_lo: float  # the axis ends, log2 on a log axis
    x_hi: float
    y_bot: float
    y_top: float

    def tx(self, x: float) -> float:
        return math.log2(x) if self.log_x else x

    def col_of(self, x: float) -> float:
        return (self.tx(x) - self.x_lo) / (self.x_hi - self.x_lo) * (self.width - 1)

    def row_of(self, y: float) -> int:
        return _round((self.y_top - y) / (self.y_top - self.y_bot) * (self.height - 1))


def render_text(chart: Chart, width: int = 72, height: int = 20) -> str:
    """The chart as plain text: ``width`` x ``height`` characters of plot, with axes and legend.

    Lines are drawn by interpolating between consecutive points column by column (and filling
    steep rises vertically); later series are drawn over earlier ones, and every series over
    the ``-`` reference lines. No trailing newline.
    """
    if width < 16 or height < 5:
        raise UnitError(f"a text chart needs at least 16 x 5 characters, not {width} x {height}")

    x_min, x_max, x_ticks = _x_axis(chart, max(3, width // 9))
    y_ticks = _y_ticks(chart)
    log2 = math.log2 if chart.log_x else float
    frame = _Frame(chart.log_x, width, height, log2(x_min), log2(x_max), y_ticks[0], y_ticks[-1])
    grid = [[" "] * width for _ in range(height)]
    _draw_hlines(grid, chart, frame)
    for index, series in enumerate(chart.series):
        _draw_series(grid, series, MARKERS[index % len(MARKERS)], frame)
    for series in chart.series:
        if series.end_label and series.xs:
            col, row = _round(frame.col_of(series.xs[-1])), frame.row_of(series.ys[-1])
            _annotate(grid, col, row, series.end_label)

    labels = {frame.row_of(v): _compact(v) for v in y_ticks}
    pad = max(len(text) for text in labels.values())
    lines = [chart.title]
    if chart.y_label:
        lines.append(chart.y_label)
    for r, cells in enumerate(grid):
        lines.append(f"{labels.get(r, ''):>{pad}} |{''.join(cells)}")
    lines.extend(_x_axis_lines(chart, frame, x_ticks, pad))
    lines.extend(_legend(chart))
    if chart.notes:
        lines.append("")
        lines.extend(chart.notes)
    return "\n".join(line.rstrip() for line in lines)


def _draw_hlines(grid: list[list[str]], chart: Chart, frame: _Frame) -> None:
    for number, line in enumerate(chart.hlines):
        cells = grid[frame.row_of(line.y)]
        index = chart.series_index(line.series)
        cells[:] = ["-" if cell == " " else cell for cell in cells]
        if index is not None:
            # two lines on one row interleave their markers: "*o--*o--"
            for col in range(number % _DASH_PERIOD, frame.width, _DASH_PERIOD):
                cells[col] = MARKERS[index % len(MARKERS)]


def _draw_series(grid: list[list[str]], series: Series, marker: str, frame: _Frame) -> None:
    row_of = frame.row_of
    points = [(frame.col_of(x), y) for x, y in zip(series.xs, series.ys, strict=True)]
    for c, y in points[:1]:
        grid[row_of(y)][_round(c)] = marker
    for (c0, y0), (c1, y1) in itertools.pairwise(points):
        first, last = _round(c0), _round(c1)
        prev_row = row_of(y0)
        for c in range(first, last + 1):
            if last == first:
                y = y1
            else:  # interpolate at the cell's own column, clamped inside the segment
                t = min(max((c - c0) / (c1 - c0), 0.0), 1.0) if c1 > c0 else 1.0
                y = y0 + (y1 - y0) * t
            row = row_of(y)
            # a steep rise fills the cells between the last row and this one
            step = 1 if row >= prev_row else -1
            for r in range(prev_row + step if row != prev_row else row, row + step, step):
                grid[r][c] = marker
            prev_row = row


def _x_axis_lines(chart: Chart, frame: _Frame, x_ticks: list[float], pad: int) -> list[str]:
    width = frame.width
    axis = ["-"] * width
    tick_text = [" "] * width
    free_from = 0  # first column a next label may use: one blank between labels
    for x in x_ticks:
        c = _round(frame.col_of(x))
        axis[c] = "+"
        text = _x_label(chart, x)
        start = min(max(c - len(text) // 2, 0), width - len(text))
        if start >= free_from:
            tick_text[start : start + len(text)] = list(text)
            free_from = start + len(text) + 1
    lines = [f"{'':>{pad}} +{''.join(axis)}", f"{'':>{pad}}  {''.join(tick_text)}"]
    if chart.x_label:
        lines.append(f"{'':>{pad}}  {chart.x_label:^{width}}")
    return lines


def _legend(chart: Chart) -> list[str]:
    """A blank line and one line per series and reference line; nothing without either."""
    legend = [
        f"  {MARKERS[i % len(MARKERS)]} {chart.series_legend(s)}"
        for i, s in enumerate(chart.series)
    ]
    for h in chart.hlines:
        index = chart.series_index(h.series)
        sample = "-" if index is None else f"-{MARKERS[index % len(MARKERS)]}-"
        legend.append(f"  {sample} {chart.line_legend(h)}")
    return ["", *legend] if legend else []


def _annotate(grid: list[list[str]], col: int, row: int, text: str) -> None:
    """Write ``<- text`` beside the cell at ``(row, col)`` where it lands on blank cells only:
    right of it, then on the row above or below; else ``text ->`` left of it, on its row, above
    or below; else nowhere (the legend says it too)."""
    width, height = len(grid[0]), len(grid)
    right, left = f"<- {text}", f"{text} ->"
    for r, start, label in (
        (row, col + 2, right),
        (row - 1, col + 1, right),
        (row + 1, col + 1, right),
        (row, col - 1 - len(left), left),
        (row - 1, col - len(left), left),
        (row + 1, col - len(left), left),
    ):
        end = start + len(label)
        fits = 0 <= r < height and start >= 0 and end <= width
        if fits and all(cell == " " for cell in grid[r][start:end]):
            grid[r][start:end] = list(label)
            return


# -- files -----------------------------------------------------------------------------------


def save_chart(chart: Chart, path: str | Path, *, force: bool = False) -> None:
    """Write the chart as ``.png`` or ``.svg``, atomically: a half-written file never shows.

    Raises ``SpecError`` for another suffix, an existing file without ``force`` or a path that
    cannot be written, and ``PlotUnavailableError`` without matplotlib.
    """
    target = Path(path)
    suffix = target.suffix.lower()
    if suffix not in _SUFFIXES:
        raise SpecError(str(path), ["chart files are .png or .svg"])
    svg = suffix == ".svg"
    refuse_existing(target, force=force)  # before matplotlib: the answer needs no plotting
    try:
        # A bare Figure, not pyplot: no GUI backend is chosen, no global state is touched (a
        # notebook's backend stays as it was) and nothing is left open to close; savefig picks
        # the Agg or SVG canvas from the format. Plain ``import a.b`` also loads ``a``, so a
        # None in sys.modules["matplotlib"] blocks it even with the submodules already loaded.
        import matplotlib.figure  # type: ignore[import-not-found, unused-ignore]
        import matplotlib.ticker  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        raise PlotUnavailableError(PLOT_HINT) from None
    fig = matplotlib.figure.Figure(figsize=_FIG_SIZE_IN, dpi=_DPI, layout="constrained")
    _draw_axes(fig.add_subplot(), chart, matplotlib.ticker)

    def draw(out: BinaryIO) -> None:
        # an SVG without a date and with fixed ids: the same chart writes the same file
        with matplotlib.rc_context({"svg.hashsalt": "kvplan"}):
            fig.savefig(out, format=suffix[1:], metadata={"Date": None} if svg else None)

    write_atomic(target, draw, force=True)  # refused above when it may not be replaced


def _draw_axes(ax: Any, chart: Chart, ticker: Any) -> None:
    """Draw ``chart`` on matplotlib axes: lines, stop marks, reference lines, ticks, notes."""
    _plot_series(ax, chart)
    # dashes of 3 pt, with gaps that let every line show between the others: lines at one
    # height (two pools of a similar size) interleave their colours instead of hiding
    gap = 3.0 * max(len(chart.hlines) - 1, 1)
    for number, line in enumerate(chart.hlines):
        index = chart.series_index(line.series)
        ax.axhline(
            line.y,
            linestyle=((3.0 * number) % (3.0 + gap), (3.0, gap)),
            linewidth=1.2,
            color=_LINE_GREY if index is None else COLORS[index % len(COLORS)],
            label=chart.line_legend(line),
        )
    y_ticks = _y_ticks(chart)
    ax.set_ylim(y_ticks[0], y_ticks[-1])
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _pos: _compact(v)))
    x_min, x_max, x_ticks = _x_axis(chart, 9)
    if chart.log_x:
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(ticker.FixedLocator(x_ticks))
        ax.xaxis.set_minor_locator(ticker.NullLocator())
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _pos: _x_label(chart, v)))
    ax.set_xlim(x_min, x_max)
    ax.set_title(chart.title, fontsize=10)
    ax.set_xlabel(chart.x_label)
    ax.set_ylabel(chart.y_label)
    ax.grid(visible=True, alpha=0.3)
    if chart.series or chart.hlines:
        ax.legend(fontsize=8)
    if chart.notes:
        # under the axes, inside the figure's layout: constrained layout makes room for it
        ax.annotate(
            "\n".join(chart.notes),
            (0, 0),
            xycoords="axes fraction",
            xytext=(0, -32),
            textcoords="offset points",
            va="top",
            fontsize=7,
            annotation_clip=False,
        )


def _plot_series(ax: Any, chart: Chart) -> None:
    """Each series in its colour and marker, with a bar and its reason where it stops."""
    for i, series in enumerate(chart.series):
        color = COLORS[i % len(COLORS)]
        ax.plot(
            series.xs,
            series.ys,
            marker=FILE_MARKERS[i % len(FILE_MARKERS)],
            markersize=4,
            color=color,
            label=chart.series_legend(series),
        )
        if series.end_label and series.xs:
            # where the line stops on purpose: a bar across its last point, and the reason
            ax.plot(series.xs[-1:], series.ys[-1:], marker="|", markersize=14, color=color)
            ax.annotate(
                series.end_label,
                (series.xs[-1], series.ys[-1]),
                xytext=(6, -3),
                textcoords="offset points",
                fontsize=8,
                color=color,
            )


# -- the charts of ``kvplan chart`` ------------------------------------------------------------

_GIB = 2**30


def _label(curve: MemoryCurve | ThroughputCurve) -> str:
    """A curve's label: ``gemma-2-9b, KV bfloat16``."""
    return f"{curve.model}, KV {curve.kv_dtype}"


def _dtype_notes(curves: Sequence[MemoryCurve | ThroughputCurve]) -> list[str]:
    """Why each cache dtype: one line when every curve shares the dtype and the reason."""
    reasons = {(c.kv_dtype, c.dtype_reason) for c in curves}
    if len(reasons) == 1:
        ((kv, why),) = reasons
        return [f"KV cache {kv} for every curve: {why}"]
    return ["why each cache dtype:", *(f"  {_label(c)}: {c.dtype_reason}" for c in curves)]


def _who_sizes(engine: str) -> str:
    return "vLLM's block pool" if engine == "vllm" else "kvplan's planner"


def memory_chart(
    curves: Sequence[MemoryCurve],
    gpu: GPU,
    tensor_parallel_size: int,
    num_dtypes: int,
    engine: str = "ideal",
) -> Chart:
    """KV of one sequence against context (GiB), each model's KV pool a line in its marker;
    with ``num_dtypes`` > 1 a pool is named by its curve, else by its model. With more than
    one GPU the pool is that of all of them, and its label says so."""
    series, lines = [], []
    where = f" on {tensor_parallel_size} GPUs" if tensor_parallel_size > 1 else ""
    for c in curves:
        label = _label(c)
        ys = tuple(y / _GIB for y in c.kv_cache_bytes)
        series.append(Series(label, tuple(map(float, c.context_tokens)), ys))
        if c.pool_bytes is not None:
            pool_of = c.model if num_dtypes == 1 else label
            lines.append(HLine(f"KV pool{where}: {pool_of}", c.pool_bytes / _GIB, series=label))
    # the planner's pool is the default and goes unsaid; vLLM's is named
    pools = (
        ("each KV pool is vLLM's available KV cache memory",) if lines and engine == "vllm" else ()
    )
    return Chart(
        title=f"KV cache of one sequence against context on {gpu.display_name}"
        f" x{tensor_parallel_size} (GiB)",
        x_label="context tokens",
        y_label="GiB",
        series=tuple(series),
        hlines=tuple(lines),
        log_x=True,
        y_unit="GiB",
        notes=(*pools, *_dtype_notes(curves)),
    )


def throughput_chart(
    curves: Sequence[ThroughputCurve],
    gpu: GPU,
    tensor_parallel_size: int,
    context_tokens: int,
    engine: str,
) -> Chart:
    """Decode tokens/s against concurrency, each curve stopping at the most that fit."""
    from kvplan.units import format_count

    who = _who_sizes(engine)
    series, stops = [], []
    for c in curves:
        label = _label(c)
        if not c.max_concurrency:
            end = f"none fits at {context_tokens:,} tokens"
            series.append(Series(label, (), (), end_label=end))
            stops.append(f"  {label}: not one sequence of {context_tokens:,} tokens fits")
            continue
        xs = tuple(float(b) for b in c.batch_sizes)
        ys = tuple(float(t) for t in c.tokens_per_second)
        series.append(Series(label, xs, ys, end_label=f"fits up to {c.max_concurrency:,}"))
        most = format_count(c.max_concurrency, "sequence")
        stops.append(f"  {label}: stops at {most}, the most that fit")
    return Chart(
        title=f"decode tokens/s against concurrency at {context_tokens:,} tokens on"
        f" {gpu.display_name} x{tensor_parallel_size} (estimate)",
        x_label="concurrent sequences",
        y_label="tokens/s"
        + (f" ({tensor_parallel_size} GPUs together)" if tensor_parallel_size > 1 else ""),
        series=tuple(series),
        log_x=True,
        notes=(
            f"each curve stops where its KV pool is full ({who}):",
            *stops,
            *_dtype_notes(curves),
        ),
    )
