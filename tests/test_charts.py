"""Charts: the plain-text renderer checked cell by cell, and chart files checked byte by byte.

The file tests need matplotlib (the ``plot`` extra) and skip cleanly without it; the text
renderer and the error paths need nothing.
"""

from __future__ import annotations

import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest

from kvplan.errors import SpecError, UnavailableError, UnitError
from kvplan.views.charts import (
    COLORS,
    PLOT_HINT,
    Chart,
    HLine,
    PlotUnavailableError,
    Series,
    render_text,
    save_chart,
    token_label,
)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

# y = x for x in 0..4, on a 41 x 21 plot: x ticks 0, 2, 4 put x at column 10x; y ticks 0..5
# (4 plus 5% headroom, on a step of 1) put y at row 20 - 4y.
DIAGONAL = Chart(
    title="diagonal",
    x_label="x",
    y_label="y",
    series=(Series("y = x", (0, 1, 2, 3, 4), (0, 1, 2, 3, 4)),),
)


def plot_rows(text: str) -> list[str]:
    """The plot area's rows, padded to full width: what follows the ``|`` of the y axis."""
    rows = [line.split("|", 1)[1] for line in text.splitlines() if "|" in line]
    width = max(len(row) for row in rows)
    return [row.ljust(width) for row in rows]


def tick_labels(text: str) -> dict[int, str]:
    """y tick labels by plot row."""
    rows = [line.split("|", 1)[0].strip() for line in text.splitlines() if "|" in line]
    return {r: label for r, label in enumerate(rows) if label}


def x_tick_line(text: str) -> list[str]:
    """The x tick labels, left to right: the line under the ``+---`` axis."""
    lines = text.splitlines()
    axis = next(i for i, line in enumerate(lines) if "+-" in line)
    return lines[axis + 1].split()


# -- render_text ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("x", "row", "col"),
    [
        (0, 20, 0),
        (1, 16, 10),
        (2, 12, 20),
        (3, 8, 30),
        (4, 4, 40),
        (0.5, 18, 5),  # between points: y 0.5 -> row 20 - 2
        (2.5, 10, 25),
    ],
    ids=lambda v: str(v),
)
def test_increasing_series_marks_expected_cells(x: float, row: int, col: int) -> None:
    rows = plot_rows(render_text(DIAGONAL, width=41, height=21))
    assert len(rows) == 21
    assert rows[row][col] == "*", f"x={x}"


def test_increasing_series_rises_left_to_right() -> None:
    rows = plot_rows(render_text(DIAGONAL, width=41, height=21))
    lowest_row_by_col = [max(r for r in range(21) if rows[r][c] == "*") for c in range(41)]
    assert lowest_row_by_col == sorted(lowest_row_by_col, reverse=True)
    assert all(row.strip(" *") == "" for row in rows)  # nothing but the one marker


def test_y_ticks_are_labelled_on_their_rows() -> None:
    text = render_text(DIAGONAL, width=41, height=21)
    assert tick_labels(text) == {0: "5", 4: "4", 8: "3", 12: "2", 16: "1", 20: "0"}
    assert x_tick_line(text) == ["0", "2", "4"]


@pytest.mark.parametrize(
    ("top", "labels"),
    [
        (4, ["0", "1", "2", "3", "4", "5"]),  # 4.2 with headroom: step 1
        (1.4, ["0", "0.5", "1", "1.5"]),  # 1.47: steps 0.1 .. 0.25 give 6+ intervals
        (110, ["0", "25", "50", "75", "100", "125"]),  # 115.5: step 25
        (1200, ["0", "500", "1K", "1.5K"]),  # 1,260: step 500, thousands as K
        (3e6, ["0", "1M", "2M", "3M", "4M"]),  # 3.15M: step 1M
    ],
    ids=lambda v: str(v),
)
def test_y_ticks_are_compact_and_four_to_six(top: float, labels: list[str]) -> None:
    chart = Chart("t", "x", "y", (Series("s", (0, 1), (0, top)),))
    found = tick_labels(render_text(chart, width=40, height=21))
    assert list(reversed(found.values())) == labels
    assert 4 <= len(found) <= 6


def test_hline_is_a_row_of_dashes_under_the_series() -> None:
    # y ticks 0..5 as for DIAGONAL, so the line at 4 is row 20 - 4 * 4 = 4
    chart = Chart(
        "pool",
        "x",
        "y",
        (Series("s", (0, 1), (0, 4)), Series("flat", (0, 1), (1, 1))),
        hlines=(HLine("pool", 4),),
    )
    rows = plot_rows(render_text(chart, width=41, height=21))
    # x ticks 0, 0.5, 1 put x at column 40x; the rising series is at row 20 - 0.4c, which
    # rounds to 4 from column 39 (4.4) on: it ends on the line, drawn over it
    assert rows[4] == "-" * 39 + "**"
    assert rows[16] == "o" * 41  # the flat second series: its own marker
    assert sum(set(row) == {"-"} for row in rows) == 0  # no other line of dashes


def test_legend_lists_markers_and_lines() -> None:
    chart = Chart(
        "legend",
        "x",
        "y",
        tuple(Series(f"s{i}", (0, 1), (i, i)) for i in range(7)),
        hlines=(HLine("H100 KV pool", 61.5), HLine("budget", 1500)),
    )
    tail = render_text(chart).splitlines()[-9:]
    assert tail == [
        "  * s0",
        "  o s1",
        "  + s2",
        "  x s3",
        "  # s4",
        "  @ s5",
        "  * s6",  # a seventh series reuses the first marker
        "  - H100 KV pool (61.5)",
        "  - budget (1.5K)",
    ]


def test_log_x_ticks_are_binary_token_counts() -> None:
    xs = tuple(float(2**e) for e in range(10, 18))  # 1K .. 128K
    chart = Chart("ctx", "context (tokens)", "GiB", (Series("m", xs, xs),), log_x=True)
    text = render_text(chart)
    assert x_tick_line(text) == ["1K", "2K", "4K", "8K", "16K", "32K", "64K", "128K"]
    # on a log2 axis the points are evenly spaced: 1K at column 0, each doubling 71/7 further
    rows = plot_rows(text)
    assert rows[-1][0] == "*"


def test_log_x_thins_ticks_on_a_narrow_axis() -> None:
    chart = Chart("ctx", "tokens", "GiB", (Series("m", (1.0, 2.0**20), (1, 2)),), log_x=True)
    assert x_tick_line(render_text(chart)) == ["1", "16", "256", "4K", "64K", "1M"]
    assert x_tick_line(render_text(chart, width=16, height=5)) == ["1", "1K", "1M"]


@pytest.mark.parametrize(
    ("num_tokens", "label"),
    [
        (1, "1"),
        (512, "512"),
        (1024, "1K"),
        (1536, "1.5K"),
        (4096, "4K"),
        (32768, "32K"),
        (131072, "128K"),
        (2**20, "1M"),
        (2**20 - 1, "1M"),  # rounds to 1024K: the next suffix, not "1024K"
    ],
    ids=lambda v: str(v),
)
def test_token_labels_are_binary(num_tokens: int, label: str) -> None:
    assert token_label(num_tokens) == label


@pytest.mark.parametrize(
    "chart",
    [
        Chart("one point", "x", "y", (Series("p", (5,), (3,)),)),
        Chart("one point, log", "x", "y", (Series("p", (4096,), (3,)),), log_x=True),
        Chart("constant zero", "x", "y", (Series("c", (1, 2, 3), (0, 0, 0)),)),
        Chart("constant", "x", "y", (Series("c", (1, 2, 3), (7, 7, 7)),), log_x=True),
        Chart("negative", "x", "y", (Series("n", (0, 1), (-3, 2)),), (HLine("l", -4),)),
        Chart("vertical", "x", "y", (Series("v", (1, 1), (0, 9)),)),
        Chart("empty", "x", "y", ()),
        Chart("only a line", "x", "y", (), (HLine("pool", 80),)),
    ],
    ids=lambda c: c.title,
)
def test_degenerate_charts_render(chart: Chart) -> None:
    text = render_text(chart, width=30, height=8)
    assert text.splitlines()[0] == chart.title
    assert len(plot_rows(text)) == 8
    if chart.series:
        assert "*" in "".join(plot_rows(text))


def test_series_over_different_x_ranges() -> None:
    chart = Chart(
        "ranges",
        "x",
        "y",
        (Series("early", (0, 10), (1, 1)), Series("late", (20, 40), (2, 2))),
    )
    rows = plot_rows(render_text(chart, width=41, height=11))
    # x ticks 0..40 put x at column x; each flat series stays inside its own columns
    early = {c for row in rows for c, ch in enumerate(row) if ch == "*"}
    late = {c for row in rows for c, ch in enumerate(row) if ch == "o"}
    assert early == set(range(11))
    assert late == set(range(20, 41))


@pytest.mark.parametrize(("width", "height"), [(16, 5), (40, 10), (72, 20), (120, 30)])
def test_output_is_bounded_plain_and_deterministic(width: int, height: int) -> None:
    xs = tuple(float(2**e) for e in range(8, 21))
    chart = Chart(
        "bounded",
        "tokens",
        "GiB",
        (Series("a", xs, tuple(x / 1000 for x in xs)), Series("b", xs[:5], (1, 2, 3, 4, 5))),
        hlines=(HLine("pool", 500),),
        log_x=True,
    )
    text = render_text(chart, width=width, height=height)
    assert text == render_text(chart, width=width, height=height)
    assert text.isascii()
    assert "\x1b" not in text
    assert not text.endswith("\n")
    assert len(plot_rows(text)) == height
    # the widest y label here is "1.25K" (5 characters), then " |" before the plot
    assert max(len(line) for line in text.splitlines()) <= 5 + 2 + width


def test_too_small_a_plot_is_refused() -> None:
    with pytest.raises(UnitError, match="16 x 5"):
        render_text(DIAGONAL, width=15, height=20)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: Series("s", (1, 2), (1,)), "2 xs but 1 ys"),
        (lambda: Series("s", (2, 1), (1, 1)), "ascending"),
        (lambda: Series("s", (1, 2), (1, float("nan"))), "finite"),
        (lambda: HLine("h", float("inf")), "finite"),
        (lambda: Chart("c", "x", "y", (Series("s", (0, 1), (1, 1)),), log_x=True), "xs > 0"),
    ],
    ids=["lengths", "descending", "nan", "inf line", "log of 0"],
)
def test_malformed_charts_are_caller_bugs(make: Callable[[], object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        make()


def test_import_loads_neither_matplotlib_nor_numpy() -> None:
    code = (
        "import sys, kvplan.views.charts; print(sorted({'matplotlib', 'numpy'} & set(sys.modules)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


# -- save_chart -------------------------------------------------------------------------------

CONTEXT = Chart(
    "KV cache by context",
    "context (tokens)",
    "GiB",
    (Series("llama", (1024.0, 8192.0, 131072.0), (0.125, 1.0, 16.0)),),
    hlines=(HLine("H100 KV pool", 12.5),),
    log_x=True,
)


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from the IHDR chunk, which the PNG format puts first."""
    assert data[:8] == PNG_SIGNATURE
    length, kind = struct.unpack(">I4s", data[8:16])
    assert (length, kind) == (13, b"IHDR")
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_png_has_signature_and_size(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    target = tmp_path / "kv.png"
    save_chart(CONTEXT, target)
    assert png_size(target.read_bytes()) == (800, 500)  # 8 x 5 in at 100 dpi
    assert sorted(tmp_path.iterdir()) == [target]  # no temporary file left behind


def test_svg_parses_and_is_reproducible(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    first, second = tmp_path / "a.svg", tmp_path / "b.SVG"
    save_chart(CONTEXT, first)
    save_chart(CONTEXT, str(second))
    root = ET.parse(first).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert root.get("width") == "576pt"  # 8 in x 72 pt
    assert first.read_bytes() == second.read_bytes()  # no date stamped in


def test_existing_file_is_kept_without_force(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    target = tmp_path / "kv.png"
    target.write_bytes(b"keep me")
    with pytest.raises(SpecError) as excinfo:
        save_chart(CONTEXT, target)
    assert excinfo.value.problems == ("exists; pass --force to overwrite it",)
    assert excinfo.value.path == str(target)
    assert target.read_bytes() == b"keep me"

    save_chart(CONTEXT, target, force=True)
    assert target.read_bytes()[:8] == PNG_SIGNATURE
    assert sorted(tmp_path.iterdir()) == [target]


def test_missing_folder_is_a_spec_error(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    target = tmp_path / "no such folder" / "kv.svg"
    with pytest.raises(SpecError, match="cannot write"):
        save_chart(CONTEXT, target)


@pytest.mark.parametrize("name", ["kv.jpg", "kv.pdf", "kv", "kv.png.txt"])
def test_other_suffixes_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(SpecError) as excinfo:
        save_chart(CONTEXT, tmp_path / name)
    assert excinfo.value.problems == ("chart files are .png or .svg",)
    assert list(tmp_path.iterdir()) == []


def test_missing_matplotlib_says_how_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(PlotUnavailableError) as excinfo:
        save_chart(CONTEXT, tmp_path / "kv.png")
    assert str(excinfo.value) == PLOT_HINT
    assert isinstance(excinfo.value, UnavailableError)  # the CLI's exit 3
    assert PLOT_HINT == (
        "charts as files need matplotlib, which kvplan does not install by default: "
        "pip install 'kvplan[plot]'"
    )
    assert list(tmp_path.iterdir()) == []


# -- reference lines that belong to a series, lines that stop on purpose, notes -------------

# Two flat series at 0 and 1 and two pools at 4: y ticks 0..5 (4.2 with headroom), so y sits
# on row 20 - 4y of a 41 x 21 plot; both pools share row 4.
POOLS = Chart(
    "pools",
    "x",
    "GiB",
    (Series("a", (0, 1), (0, 0)), Series("b", (0, 1), (1, 1))),
    hlines=(HLine("pool a", 4, series="a"), HLine("pool b", 4, series="b"), HLine("plain", 2)),
    y_unit="GiB",
    notes=("why: a note",),
)


def test_linked_lines_carry_their_series_marker() -> None:
    text = render_text(POOLS, width=41, height=21)
    rows = plot_rows(text)
    # line 0 puts "*" on columns 0, 4, 8, ...; line 1 "o" on 1, 5, 9, ...; dashes between
    assert rows[4] == ("*o--" * 11)[:41]
    assert rows[12] == "-" * 41  # the unlinked line at 2: plain dashes
    assert rows[16] == "o" * 41
    assert rows[20] == "*" * 41
    assert text.splitlines()[-7:] == [
        "  * a",
        "  o b",
        "  -*- pool a (4 GiB)",
        "  -o- pool b (4 GiB)",
        "  - plain (2 GiB)",
        "",
        "why: a note",
    ]


def test_a_line_linked_to_no_series_is_a_caller_bug() -> None:
    with pytest.raises(ValueError, match="no series 'c'"):
        Chart("c", "x", "y", (Series("a", (0,), (0,)),), hlines=(HLine("pool", 1, series="c"),))


# A line that stops at (2, 2) beside a point at (4, 0): x ticks 0, 2, 4 put x at column 10x;
# y ticks 0..2.5 on a step of 0.5 (2.1 with headroom) put y at row 20 - 8y.
STOPS = Chart(
    "stops",
    "x",
    "y",
    (Series("b", (0, 2), (0, 2), end_label="fits up to 2"), Series("far", (4,), (0,))),
)


def test_end_label_is_written_beside_the_last_point() -> None:
    text = render_text(STOPS, width=41, height=21)
    rows = plot_rows(text)
    assert rows[4][20] == "*"  # the last point: column 20, row 20 - 16
    assert rows[4][21:37] == " <- fits up to 2"
    assert rows[20][40] == "o"
    assert "  * b: fits up to 2" in text.splitlines()


def test_end_label_goes_left_when_the_right_is_full() -> None:
    # y = x to (4, 4) ends on the right edge (column 40, row 4): the label ends left of it
    chart = Chart("edge", "x", "y", (Series("d", (0, 4), (0, 4), end_label="up to 4"),))
    rows = plot_rows(render_text(chart, width=41, height=21))
    assert rows[4].rstrip().endswith("up to 4 ->**")


def test_an_empty_series_is_named_in_the_legend_only() -> None:
    chart = Chart(
        "none",
        "n",
        "tok/s",
        (Series("big", (), (), end_label="none fits"), Series("s", (1.0, 2.0), (1, 2))),
        log_x=True,
    )
    text = render_text(chart, width=30, height=8)
    assert "*" not in "".join(plot_rows(text))
    assert "  * big: none fits" in text.splitlines()


def _dashed_strokes(svg: str) -> set[str]:
    """The stroke colours of the dashed paths of a matplotlib SVG (the reference lines)."""
    styles = [part.split('"', 1)[0] for part in svg.split('style="')[1:]]
    return {s.split("stroke: ", 1)[1].split(";")[0] for s in styles if "stroke-dasharray" in s}


def test_svg_draws_linked_lines_in_their_series_colour(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    target = tmp_path / "pools.svg"
    save_chart(POOLS, target)
    svg = target.read_text(encoding="utf-8")
    # series a and b in the first two colours, the plain line in grey 0.35 (0x59 = 89)
    assert _dashed_strokes(svg) == {COLORS[0], COLORS[1], "#595959"}
    assert "<!-- why: a note -->" in svg  # the notes, under the axes


def test_svg_marks_where_a_line_stops(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    target = tmp_path / "stops.svg"
    save_chart(STOPS, target)
    svg = target.read_text(encoding="utf-8")
    assert "<!-- fits up to 2 -->" in svg  # beside the last point
    assert "<!-- b: fits up to 2 -->" in svg  # in the legend


# -- the charts of ``kvplan chart``: whose pool, and for how many GPUs -------------------------


def test_memory_chart_pool_is_the_engines_and_names_its_gpus() -> None:
    from kvplan.answers.curves import memory_curves
    from kvplan.catalog.lookup import load_model
    from kvplan.engines import vllm
    from kvplan.hardware.lookup import find_gpu
    from kvplan.planner import plan
    from kvplan.views.charts import memory_chart

    spec, gpu = load_model("llama-3.1-8b"), find_gpu("h100")
    # the first context of the x axis is 1,024 tokens; TP 2: the pool of both GPUs
    cfg = vllm.VllmConfig(max_model_len=1024, tensor_parallel_size=2)
    vllm_pool = 2 * vllm.profile(spec, gpu, cfg).available_bytes
    ideal_pool = (
        2 * plan(spec, gpu, tensor_parallel_size=2, max_model_len=1024).kv_cache_memory_bytes
    )
    assert vllm_pool != ideal_pool  # vLLM's profile counts its own overheads
    (curve,) = memory_curves([spec], gpu, [None], 2, "vllm")
    assert curve.pool_bytes == vllm_pool
    (ideal,) = memory_curves([spec], gpu, [None], 2, "ideal")
    assert ideal.pool_bytes == ideal_pool
    chart = memory_chart([curve], gpu, 2, num_dtypes=1, engine="vllm")
    assert [h.label for h in chart.hlines] == ["KV pool on 2 GPUs: llama-3.1-8b"]
    assert "each KV pool is vLLM's available KV cache memory" in chart.notes
    one = memory_chart(memory_curves([spec], gpu, [None], 1, "ideal"), gpu, 1, num_dtypes=1)
    assert [h.label for h in one.hlines] == ["KV pool: llama-3.1-8b"]
    assert not any("vLLM" in note for note in one.notes)


def test_throughput_chart_says_its_rates_are_the_tp_groups() -> None:
    from kvplan.answers.curves import ThroughputCurve
    from kvplan.hardware.lookup import find_gpu
    from kvplan.views.charts import throughput_chart

    gpu = find_gpu("h100")
    curve = ThroughputCurve("m", "bfloat16", "why", 0)
    assert throughput_chart([curve], gpu, 2, 8192, "ideal").y_label == (
        "tokens/s (2 GPUs together)"
    )
    assert throughput_chart([curve], gpu, 1, 8192, "ideal").y_label == "tokens/s"
