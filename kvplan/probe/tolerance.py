"""An allowed difference between a measurement and an estimate: bytes, or a percent of the
estimate (``kvplan probe --tolerance 4KiB`` or ``--tolerance 1%``)."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction


@dataclass(frozen=True, slots=True)
class Tolerance:
    """``num_bytes``, or with ``percent`` set that share of the estimate (exact, rounded down):
    1% of 1,000,050 B allows 10,000 B."""

    num_bytes: int = 0
    percent: Fraction | None = None

    def allowed_bytes(self, estimate_bytes: int) -> int:
        """The largest difference allowed from an estimate of ``estimate_bytes``."""
        if self.percent is None:
            return self.num_bytes
        return estimate_bytes * self.percent.numerator // (100 * self.percent.denominator)

    def holds(self, difference_bytes: int, estimate_bytes: int) -> bool:
        """Whether a difference of ``difference_bytes`` (either sign) is allowed."""
        return abs(difference_bytes) <= self.allowed_bytes(estimate_bytes)


def parse_tolerance(text: str, name: str = "tolerance") -> Tolerance:
    """``4KiB`` (bytes, as ``parse_bytes`` reads them) or ``1%`` (a percent in (-1, 100]).
    Errors are UnitErrors naming ``name``."""
    from kvplan.arguments import as_fraction
    from kvplan.errors import UnitError
    from kvplan.units import parse_bytes

    text = text.strip()
    if text.endswith("%"):
        return Tolerance(percent=as_fraction(text[:-1], name, low=Fraction(-1), high=Fraction(100)))
    try:
        return Tolerance(num_bytes=parse_bytes(text))
    except UnitError as e:
        raise UnitError(f"{name}: {e}") from None
