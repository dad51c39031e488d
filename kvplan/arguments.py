"""Checks for the arguments of kvplan's public functions: one rule for every entry point.

The library takes what the command line takes: a model as a ``ModelSpec`` or a name (catalog
name, Hugging Face id, alias or path), a GPU as a ``GPU`` or a catalog name, token counts as
integers or strings (``32768``, ``32k``, ``32K``), sizes as integers of bytes or strings
(``80GiB``, ``80GB``). Integers are integers: ``True`` and ``32768.0`` are refused, so a slip
never turns into a silently different figure. Every refusal is a ``UnitError`` (or
``ModelNotFoundError`` / ``UnknownGPUError`` for names), all documented ``KvplanError``\\ s.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import TYPE_CHECKING

from kvplan.errors import UnitError
from kvplan.units import abbreviate, parse_bytes, parse_tokens

if TYPE_CHECKING:
    pass

#: Parallel sizes beyond this are refused outright (no deployment has more GPUs in one model
#: replica; it also bounds every per-rank loop).
MAX_PARALLEL = 4096


def _kind(value: object) -> str:
    return type(value).__name__




def as_int(value: object, name: str, *, minimum: int = 0, maximum: int | None = None) -> int:
    """An integer in ``[minimum, maximum]``; bool, float and every other type refused."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise UnitError(f"{name}: expected an integer, got {_kind(value)} {abbreviate(value)}")
    if value < minimum:
        raise UnitError(f"{name}: must be at least {minimum:,}, got {abbreviate(value)}")
    if maximum is not None and value > maximum:
        raise UnitError(f"{name}: must be at most {maximum:,}, got {abbreviate(value)}")
    return value


def _as_parsed(value: object, name: str, parse: Callable[[str], int], minimum: int) -> int:
    if isinstance(value, str):
        try:
            value = parse(value)
        except UnitError as e:
            raise UnitError(f"{name}: {e}") from None
    return as_int(value, name, minimum=minimum)


def as_tokens(value: object, name: str, *, minimum: int = 0) -> int:
    """A token count: an int, or a string such as ``32768``, ``32k`` (32,000), ``32K``."""
    return _as_parsed(value, name, parse_tokens, minimum)


def as_bytes(value: object, name: str, *, minimum: int = 0) -> int:
    """A size in bytes: an int, or a string such as ``80GiB`` or ``80GB``."""
    return _as_parsed(value, name, parse_bytes, minimum)


def as_parallel(value: object, name: str) -> int:
    """A tensor or pipeline parallel size: 1 to MAX_PARALLEL."""
    return as_int(value, name, minimum=1, maximum=MAX_PARALLEL)


_MAX_FRACTION_CHARS = 32


def as_fraction(
    value: object, name: str, *, low: Fraction = Fraction(0), high: Fraction = Fraction(1)
) -> Fraction:
    """A fraction in ``(low, high]`` from a Fraction, an int, a float as written (0.9 is 9/10,
    not the nearest double) or a decimal string. Exponents and long strings are refused
    before any conversion, so ``9e99999999`` costs nothing."""
    if isinstance(value, bool):
        raise UnitError(f"{name}: expected a number, got bool {value!r}")
    text: str
    if isinstance(value, Fraction):
        result = value
    elif isinstance(value, int):
        result = Fraction(value)
    elif isinstance(value, (float, str)):
        text = repr(value) if isinstance(value, float) else value.strip()
        if len(text) > _MAX_FRACTION_CHARS or not _is_plain_decimal(text):
            raise UnitError(
                f"{name}: expected a decimal number such as 0.9, got {str(value)[:40]!r}"
            )
        result = Fraction(text)
    else:
        raise UnitError(f"{name}: expected a number, got {_kind(value)}")
    if not low < result <= high:
        shown = str(result) if isinstance(value, Fraction) else abbreviate(value)
        raise UnitError(f"{name}: must be in ({low}, {high}], got {shown}")
    return result


def _is_plain_decimal(text: str) -> bool:
    """``0.9``, ``1``, ``.5``: digits with at most one point, no sign, exponent, nan or inf."""
    digits = text.replace(".", "", 1)
    return bool(digits) and digits.isascii() and digits.isdigit()
