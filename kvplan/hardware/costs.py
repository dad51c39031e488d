"""What a deployment costs: dated list prices per GPU-hour, and dollars per million tokens.

The bundled table (``gpu_specs/prices/*.yaml``) holds on-demand list prices of a few public
clouds, each with the date it was read and its source URL. They are never live prices: every
answer that uses one names its provider and date. ``--price h100=2.49`` or a prices file in the
same format replaces them.

Prices are exact decimals (``Fraction`` of the text), so 8 GPUs at $2.99 cost $23.92 an hour,
not 23.919999...; dollars per million output tokens = hourly price / (tokens per second x
3,600) x 10^6.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import cache
from pathlib import Path
from typing import Any

from kvplan.errors import UnitError
from kvplan.hardware.gpus import GPU, catalog_gpu, gpu_specs_dir

_DOCS = "docs/hardware.md"


@dataclass(frozen=True, slots=True)
class Price:
    """One GPU-hour price: who lists it, when it was read, where."""

    gpu: str  # catalog name
    usd_per_gpu_hour: Fraction
    provider: str
    offer: str
    as_of: str  # ISO date the price was read, or "given"
    source: str

    def describe(self) -> str:
        """``$2.99/GPU-h (Lambda, 2025-07-01 list price)``."""
        if self.as_of == "given":
            return f"${float(self.usd_per_gpu_hour):.2f}/GPU-h ({self.source})"
        return (
            f"${float(self.usd_per_gpu_hour):.2f}/GPU-h ({self.provider} {self.as_of} list"
            " price, not live)"
        )


def prices_dir() -> Path:
    return gpu_specs_dir() / "prices"


def list_prices() -> tuple[Price, ...]:
    """The bundled price table, in file order."""
    return _bundled()


@cache
def _bundled() -> tuple[Price, ...]:
    return tuple(p for path in sorted(prices_dir().glob("*.yaml")) for p in load_prices(path))


def load_prices(path: str | Path) -> tuple[Price, ...]:
    """The prices of one file (the bundled format). Raises SpecError naming file, line, field."""
    from kvplan.validation import read_yaml, validate

    data, text = read_yaml(path)
    model, keys = _file_model()
    checked: Any = validate(model, data, str(path), text, keys, _DOCS)
    return tuple(
        Price(
            gpu=_gpu_name(e.gpu, f"{path}: prices.{i}.gpu"),
            usd_per_gpu_hour=_dollars(e.usd_per_gpu_hour, f"{path}: prices.{i}"),
            provider=e.provider,
            offer=e.offer,
            as_of=str(e.as_of),
            source=e.source,
        )
        for i, e in enumerate(checked.prices)
    )


def parse_price_overrides(texts: Iterable[str]) -> tuple[Price, ...]:
    """``["h100=2.49", "mi300x=1.99"]`` -> prices given on the command line. Raises UnitError
    for text that is not ``GPU=DOLLARS`` or names no catalog GPU."""
    prices = []
    for text in texts:
        for part in text.split(","):
            gpu, sep, value = part.partition("=")
            if not sep or not gpu.strip():
                raise UnitError(f"--price {part!r}: write GPU=DOLLARS per GPU-hour, e.g. h100=2.49")
            prices.append(
                Price(
                    gpu=_gpu_name(gpu.strip(), "--price"),
                    usd_per_gpu_hour=_dollars(value.strip(), f"--price {part!r}"),
                    provider="given",
                    offer="given",
                    as_of="given",
                    source="given on the command line",
                )
            )
    return tuple(prices)


def price_for(gpu: GPU, given: Sequence[Price] = ()) -> Price | None:
    """The price of ``gpu``: the last one ``given`` for it, else the lowest bundled list
    price, else None (cost then goes unanswered)."""
    mine = [p for p in given if p.gpu == gpu.name]
    if mine:
        return mine[-1]
    listed = [p for p in list_prices() if p.gpu == gpu.name]
    return min(listed, key=lambda p: p.usd_per_gpu_hour) if listed else None


def usd_per_million_tokens(usd_per_hour: Fraction, tokens_per_s: Fraction) -> Fraction | None:
    """Dollars per 10^6 tokens produced at ``tokens_per_s`` for ``usd_per_hour``."""
    if tokens_per_s <= 0:
        return None
    return usd_per_hour * 1_000_000 / (tokens_per_s * 3600)


def _gpu_name(name: str, where: str) -> str:
    from kvplan.hardware.gpus import UnknownGPUError

    try:
        return catalog_gpu(name).name
    except UnknownGPUError as e:
        raise UnitError(f"{where}: {e}") from None


def _dollars(text: str, where: str) -> Fraction:
    try:
        value = Fraction(text)
    except (ValueError, ZeroDivisionError):
        raise UnitError(f"{where}: {text!r} is not a price in dollars (e.g. 2.49)") from None
    if value <= 0:
        raise UnitError(f"{where}: a price must be above 0, got {text!r}")
    return value


@cache
def _file_model() -> tuple[Any, frozenset[str]]:
    from datetime import date

    from pydantic import BaseModel, ConfigDict, StrictStr

    from kvplan.hardware.fields import Text as text
    from kvplan.validation import field_names

    class Entry(BaseModel):
        model_config = ConfigDict(frozen=True, extra="forbid")

        gpu: text
        provider: text
        offer: text
        usd_per_gpu_hour: StrictStr
        as_of: date
        source: text

    class File(BaseModel):
        model_config = ConfigDict(frozen=True, extra="forbid")

        prices: tuple[Entry, ...]

    return File, frozenset(field_names(File))
