"""Published serving results against kvplan's decode bound: a bound that a real system beats
is a bug, and the achieved/bound ratios are the ones docs/clusters.md shows."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml

from kvplan.performance import perf

ROOT = Path(__file__).resolve().parent.parent
ROWS: list[dict[str, Any]] = yaml.safe_load(
    (ROOT / "tests" / "data" / "serving_benchmarks.yaml").read_text()
)["rows"]


def _published_output(row: dict[str, Any]) -> Fraction:
    """Output tokens a second per GPU: the published input + output rate times the output
    share, osl / (isl + osl) (1k/1k: a half; 8k/1k: 1,024 / 9,216 = a ninth)."""
    total = Fraction(str(row["published_total_tokens_per_second_per_gpu"]))
    return total * row["output_tokens"] / (row["input_tokens"] + row["output_tokens"])


def _bound(row: dict[str, Any]) -> Fraction:
    result = perf(
        row["model"],
        row["gpu"],
        context_tokens=row["input_tokens"],
        concurrency=row["concurrency"],
        tensor_parallel_size=row["tensor_parallel_size"],
        expert_parallel_size=row["expert_parallel_size"],
    )
    assert result.replica is not None
    return result.replica.tokens_per_second_per_gpu()


@pytest.mark.parametrize("row", ROWS, ids=[r["name"] for r in ROWS])
def test_published_figure_never_beats_the_bound(row: dict[str, Any]) -> None:
    assert _published_output(row) <= _bound(row)


@pytest.mark.parametrize("row", ROWS, ids=[r["name"] for r in ROWS])
def test_ratio_is_the_one_the_docs_show(row: dict[str, Any]) -> None:
    ratio = _published_output(row) / _bound(row)
    assert round(float(ratio), 2) == row["ratio"]
    docs = (ROOT / "docs" / "clusters.md").read_text()
    line = next(x for x in docs.splitlines() if x.startswith(f"| {row['name']} |"))
    assert f"| {row['ratio']:.2f} |" in line


def test_output_share_of_the_published_rates() -> None:
    # 25,319.6 x 1,024 / 2,048 = 12,659.8; 5,856.9 x 1,024 / 9,216 = 650.766...
    assert _published_output(ROWS[0]) == Fraction("12659.8")
    assert _published_output(ROWS[2]) == Fraction("5856.9") / 9


def test_every_row_cites_its_source_and_date() -> None:
    for row in ROWS:
        assert row["source"].count("https://") == 1
        assert str(row["read"]).count("-") == 2
