"""Dated GPU-hour list prices, overrides, and dollars per million tokens."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest

from kvplan.errors import SpecError, UnitError
from kvplan.hardware.costs import (
    list_prices,
    load_prices,
    parse_price_overrides,
    price_for,
    usd_per_million_tokens,
)
from kvplan.hardware.lookup import find_gpu


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
    assert price_for(find_gpu("rtx-a6000")) is None  # no list price: cost goes unanswered


# The commonly rented accelerators each have a dated list price, and the cheapest is the one
# planned: MI300X at TensorWave $1.50 below Vultr $1.85 (both as quoted on 2026-05-18).
PRICED = {
    "h100-sxm": Fraction("3.78"),  # Lambda 1x H100 SXM, below Modal 3.9492 and AWS 98.32/8
    "h100-pcie": Fraction("2.86"),
    "h200": Fraction("4.54"),
    "b200": Fraction("6.03"),
    "mi300x": Fraction("1.50"),
    "a100-80gb": Fraction("2.4984"),  # Modal, billed per second: 2.4984 / 3,600 = $0.000694 a s
    "a100-40gb": Fraction("1.48"),
    "a10": Fraction("0.86"),
    "a10g": Fraction("1.006"),  # g5.xlarge holds one A10G: $1.006 / 1
    "l40s": Fraction("1.9512"),
    "l4": Fraction("0.7992"),
    "t4": Fraction("0.5904"),
}


@pytest.mark.parametrize(("gpu", "usd"), PRICED.items(), ids=list(PRICED))
def test_commonly_rented_gpus_have_a_dated_list_price(gpu: str, usd: Fraction) -> None:
    chosen = price_for(find_gpu(gpu))
    assert chosen is not None
    assert chosen.usd_per_gpu_hour == usd
    assert "2026-01-01" <= chosen.as_of <= "2026-12-01"
    assert chosen.source.startswith("https://")
    assert chosen.provider
    assert chosen.offer


def test_every_bundled_price_names_a_catalog_gpu_and_its_quote() -> None:
    for p in list_prices():
        assert find_gpu(p.gpu).name == p.gpu
        assert "as quoted" in p.offer or "as verified" in p.offer or "dated" in p.offer, p


def test_modal_a100_price_is_a_whole_per_second_rate() -> None:
    # billed per second: $2.4984 an hour is $0.000694 a second, exactly
    assert Fraction("0.000694") * 3600 == Fraction("2.4984")


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


def test_the_hardware_page_lists_the_bundled_lowest_prices() -> None:
    import re

    text = (Path(__file__).parents[1] / "docs" / "hardware.md").read_text(encoding="utf-8")
    rows = re.findall(
        r"^\| `([a-z0-9-]+)` \| \$([\d.]+) \| [^|]+ \| (\d{4}-\d\d-\d\d) \|$", text, re.M
    )
    assert {gpu for gpu, _, _ in rows} == {p.gpu for p in list_prices()}
    for gpu, usd, as_of in rows:
        chosen = price_for(find_gpu(gpu))
        assert chosen is not None
        assert (chosen.usd_per_gpu_hour, chosen.as_of) == (Fraction(usd), as_of), gpu
