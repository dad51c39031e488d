"""Checks for the arguments of kvplan's public functions: one rule for every entry point.

The library takes what the command line takes: a model as a ``ModelSpec`` or a name (catalog
name, Hugging Face id, alias or path), a GPU as a ``GPU`` or a catalog name, token counts as
integers or strings (``32768``, ``32k``, ``32K``), sizes as integers of bytes or strings
(``80GiB``, ``80GB``). Integers are integers: ``True`` and ``32768.0`` are refused, so a slip
never turns into a silently different figure.

Two kinds of refusal, both ``KvplanError``\\ s: a value of the wrong type raises
``ArgumentTypeError`` (a ``TypeError``: ``batch_size: expected an integer, got float 1.5``), a
value of the right type that cannot be used raises ``UnitError`` (``batch_size: must be at least
1, got 0``), or ``ModelNotFoundError`` / ``UnknownGPUError`` for names. Every message starts
with the parameter's name.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any, TypeVar

from kvplan.errors import ArgumentTypeError, UnitError
from kvplan.units import MAX_DIGITS, abbreviate, parse_bytes, parse_tokens

T = TypeVar("T")

#: Parallel sizes beyond this are refused outright (no deployment has more GPUs in one model
#: replica; it also bounds every per-rank loop).
MAX_PARALLEL = 4096
#: The largest integer any parameter takes: 30 digits, as ``parse_tokens`` and ``parse_bytes``
#: read them. Far beyond any machine, and small enough that no figure derived from it
#: overflows a float when it is shown.
MAX_INT = 10**MAX_DIGITS - 1


def _kind(value: object) -> str:
    return type(value).__name__


def wrong_type(name: str, expected: str, value: object) -> ArgumentTypeError:
    """The refusal of ``value`` for the parameter ``name``, which takes ``expected``."""
    return ArgumentTypeError(f"{name}: expected {expected}, got {_kind(value)}")


def _bound(value: int, name: str, minimum: int, maximum: int | None) -> int:
    if value < minimum:
        raise UnitError(f"{name}: must be at least {minimum:,}, got {abbreviate(value)}")
    if maximum is not None and value > maximum:
        shown = f"{MAX_DIGITS} digits" if maximum == MAX_INT else f"{maximum:,}"
        raise UnitError(f"{name}: must be at most {shown}, got {abbreviate(value)}")
    return value


def as_int(value: object, name: str, *, minimum: int = 0, maximum: int = MAX_INT) -> int:
    """An integer in ``[minimum, maximum]``; bool, float and every other type refused."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgumentTypeError(
            f"{name}: expected an integer, got {_kind(value)} {abbreviate(value)}"
        )
    return _bound(value, name, minimum, maximum)


def as_optional_int(
    value: object, name: str, *, minimum: int = 0, maximum: int = MAX_INT
) -> int | None:
    """``as_int``, or None when not given."""
    return None if value is None else as_int(value, name, minimum=minimum, maximum=maximum)


def check_ints(
    *, minimum: int = 0, maximum: int = MAX_INT, optional: bool = False, **values: object
) -> None:
    """Each of ``values``, keyed by its parameter's name, an int in ``[minimum, maximum]``
    (or None, with ``optional``): one line for the many counts of an engine's flags."""
    for name, value in values.items():
        if not (optional and value is None):
            as_int(value, name, minimum=minimum, maximum=maximum)


def as_str(value: object, name: str, what: str = "a str") -> str:
    """``value`` when it is a str."""
    if not isinstance(value, str):
        raise wrong_type(name, what, value)
    return value


def as_optional_str(value: object, name: str, what: str = "a str or None") -> str | None:
    """``value`` when it is a str or None."""
    return None if value is None else as_str(value, name, what)


def check_strs(*, optional: bool = False, **values: object) -> None:
    """Each of ``values``, keyed by its parameter's name, a str (or None, with ``optional``)."""
    for name, value in values.items():
        if not (optional and value is None):
            as_str(value, name, "a str or None" if optional else "a str")


def as_flag(value: object, name: str) -> bool:
    """``value`` when it is a bool (``1`` is no flag)."""
    if not isinstance(value, bool):
        raise wrong_type(name, "a bool", value)
    return value


def check_names(**values: object) -> None:
    """Each of ``values``, keyed by its parameter's name, a tuple of strs (aliases)."""
    for name, value in values.items():
        if not isinstance(value, tuple) or not all(isinstance(v, str) for v in value):
            raise wrong_type(name, "a tuple of strs", value)


def check_flags(**values: object) -> None:
    """Each of ``values``, keyed by its parameter's name, a bool."""
    for name, value in values.items():
        as_flag(value, name)


def check_types(kinds: tuple[type, ...], what: str, **values: object) -> None:
    """Each of ``values``, keyed by its parameter's name, None or one of ``kinds`` (a bool is
    no int): the type alone, for a function that only asks whether a setting is given."""
    for name, value in values.items():
        if value is None:
            continue
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise wrong_type(name, what, value)


def as_instance(value: object, kind: type[T], name: str, what: str) -> T:
    """``value`` when it is a ``kind`` (``what`` names it in the refusal)."""
    if not isinstance(value, kind):
        raise wrong_type(name, what, value)
    return value


def as_path(value: object, name: str) -> str | Path:
    """A path: a str or an ``os.PathLike`` of str. An int is refused (``os`` would read it as an
    open file descriptor), as are bytes and every other type; a NUL byte, which no file name
    holds, is a UnitError."""
    path: str | Path | None = None
    if isinstance(value, str | Path):
        path = value
    elif isinstance(value, os.PathLike):
        text = os.fspath(value)
        path = text if isinstance(text, str) else None
    if path is None:
        raise wrong_type(name, "a path (a str or a pathlib.Path)", value)
    if "\0" in str(path):
        raise UnitError(f"{name}: a path holds no NUL byte, got {abbreviate(str(path))}")
    return path


def as_values(value: object, name: str, what: str) -> Sequence[Any]:
    """Any sequence of values (a list, a tuple, a range), but not text or bytes: ``"8192"``
    and ``b"h100"`` are sequences of characters and bytes, never of counts."""
    if isinstance(value, str | bytes | bytearray | memoryview) or not isinstance(value, Sequence):
        raise wrong_type(name, what, value)
    return value


def as_sequence(value: object, name: str, what: str) -> Sequence[object]:
    """A list or tuple (a str is one value, not a sequence of characters)."""
    if not isinstance(value, list | tuple):
        raise wrong_type(name, what, value)
    return value


def as_real(value: object, name: str, *, low: float, high: float) -> float:
    """A finite number in ``(low, high]``, for an engine that computes in floats as the engine
    does (SGLang's ``--mem-fraction-static``). An int is taken as its float."""
    if isinstance(value, bool) or not isinstance(value, int | float | Fraction):
        raise wrong_type(name, "a number", value)
    if isinstance(value, int) and not low < value <= high:
        raise UnitError(f"{name}: must be in ({low}, {high}], got {abbreviate(value)}")
    number = float(value)
    if not (math.isfinite(number) and low < number <= high):
        raise UnitError(f"{name}: must be in ({low}, {high}], got {abbreviate(value)}")
    return number


def _as_parsed(value: object, name: str, parse: Callable[[str], int], minimum: int) -> int:
    if isinstance(value, str):
        try:
            value = parse(value)
        except UnitError as e:
            raise UnitError(f"{name}: {e}") from None
    elif isinstance(value, bool) or not isinstance(value, int):
        raise ArgumentTypeError(
            f"{name}: expected an integer or a string, got {_kind(value)} {abbreviate(value)}"
        )
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
        raise ArgumentTypeError(f"{name}: expected a number, got bool {value!r}")
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
        raise wrong_type(name, "a number", value)
    if not low < result <= high:
        shown = abbreviate(value) if not isinstance(value, Fraction) else _fraction_text(value)
        raise UnitError(f"{name}: must be in ({low}, {high}], got {shown}")
    return result


def _fraction_text(value: Fraction) -> str:
    if max(value.numerator.bit_length(), value.denominator.bit_length()) > 64:
        return f"about {float(value):.3g}" if abs(value) < 2**1000 else "a huge Fraction"
    return str(value)


def _is_plain_decimal(text: str) -> bool:
    """``0.9``, ``1``, ``.5``: digits with at most one point, no sign, exponent, nan or inf."""
    digits = text.replace(".", "", 1)
    return bool(digits) and digits.isascii() and digits.isdigit()
