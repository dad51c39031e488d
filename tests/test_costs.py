"""Dated GPU-hour list prices, overrides, and dollars per million tokens."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from kvplan.costs import (
    list_prices,
    load_prices,
    parse_price_overrides,
    price_for,
    usd_per_million_tokens,
)
from kvplan.errors import SpecError, UnitError
from kvplan.hardware import find_gpu


def test_bundled_prices_are_dated_and_sourced() -> None:
    for p in list_prices():
        assert p.as_of[:2] == "20", p
        assert p.source.startswith("https://"), p
        assert p.usd_per_gpu_hour > 0


def test_override_is_exact_and_wins() -> None:
    (given,) = parse_price_overrides(["h100=2.49"])
    assert (given.gpu, given.usd_per_gpu_hour) == ("h100-sxm", Fraction(249, 100))
    assert price_for(find_gpu("h100"), [given]) == given
    assert "not live" not in given.describe()


def test_lowest_list_price_is_the_default() -> None:
    listed = [p for p in list_prices() if p.gpu == "h100-sxm"]
    chosen = price_for(find_gpu("h100"))
    assert chosen is not None
    assert chosen.usd_per_gpu_hour == min(p.usd_per_gpu_hour for p in listed)
    assert "not live" in chosen.describe()
    assert price_for(find_gpu("mi300x")) is None  # no list price: cost goes unanswered


def test_dollars_per_million_tokens() -> None:
    # 8 GPUs x $2.99 = $23.92 an hour; at 1,000 tokens/s an hour makes 3.6 M tokens:
    # 23.92 / 3.6 = 6.6444... = 299/45
    assert Fraction("2.99") * 8 == Fraction("23.92")
    assert usd_per_million_tokens(Fraction("23.92"), Fraction(1000)) == Fraction(299, 45)
    assert usd_per_million_tokens(Fraction(1), Fraction(0)) is None


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("h100", "write GPU=DOLLARS"),
        ("h100=abc", "not a price"),
        ("h100=-1", "above 0"),
        ("h1000=1", "unknown GPU"),
    ],
)
def test_bad_override(text: str, problem: str) -> None:
    with pytest.raises(UnitError, match=problem):
        parse_price_overrides([text])


def test_prices_file(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        "prices:\n  - {gpu: h200, provider: mine, offer: x, usd_per_gpu_hour: '3.10',"
        " as_of: 2025-01-02, source: https://example.com}\n"
    )
    (p,) = load_prices(path)
    assert (p.gpu, p.usd_per_gpu_hour, p.as_of) == ("h200", Fraction(31, 10), "2025-01-02")
    path.write_text("prices:\n  - {gpu: h200, usd_per_gpu_hour: '3'}\n")
    with pytest.raises(SpecError):
        load_prices(path)
