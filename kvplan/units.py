"""Byte constants, cache dtypes, token and size parsing, display formatting.

Everything here is exact integer arithmetic. A dtype is described by its storage block:
``block_values`` values take ``block_bytes`` bytes, scales included, so llama.cpp's
``q8_0`` (32 int8 values plus one fp16 scale = 34 bytes) and NVFP4 (16 4-bit values plus one
fp8 scale = 9 bytes) stay exact instead of becoming 1.0625 or 0.5625 bytes a value.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

from kvplan.errors import ArgumentTypeError, UnitError

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30
TiB = 1 << 40
KB = 10**3
MB = 10**6
GB = 10**9
TB = 10**12

_BINARY_UNITS = {"KiB": KiB, "MiB": MiB, "GiB": GiB, "TiB": TiB}
_DECIMAL_UNITS = {"KB": KB, "MB": MB, "GB": GB, "TB": TB}


def cdiv(a: int, b: int) -> int:
    """Ceiling division of non-negative integers: ``cdiv(17, 16) == 2``."""
    return -(-a // b)


@dataclass(frozen=True, slots=True)
class DType:
    """A storage format: ``block_values`` values occupy ``block_bytes`` bytes."""

    name: str
    block_values: int
    block_bytes: int

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise ArgumentTypeError(f"name: expected a str, got {type(self.name).__name__}")
        for field, value in (
            ("block_values", self.block_values),
            ("block_bytes", self.block_bytes),
        ):
            if isinstance(value, bool) or not isinstance(value, int):
                raise ArgumentTypeError(f"{field}: expected an integer, got {type(value).__name__}")
            if not 1 <= value <= 1 << 20:
                raise UnitError(f"{field}: must be 1 to 1,048,576, got {abbreviate(value)}")

    def row_bytes(self, num_values: int) -> int:
        """Bytes of one row of ``num_values`` values (whole blocks, scales counted)."""
        if self.block_values == 1:
            return num_values * self.block_bytes
        return cdiv(num_values, self.block_values) * self.block_bytes

    @property
    def bits_per_value(self) -> str:
        """Exact bits per value for display, e.g. ``8.5`` for q8_0."""
        bits = Decimal(self.block_bytes * 8) / Decimal(self.block_values)
        return f"{bits.normalize():f}"


# Canonical cache and weight dtypes. Block sizes of the ggml formats are from
# ggml/src/ggml-common.h: q8_0 = fp16 scale + 32 int8 = 34 B; q4_0 = fp16 scale + 16 B = 18 B;
# q4_1 = fp16 scale and min + 16 B = 20 B; q5_0 = 2 + 4 + 16 = 22 B; q5_1 = 2 + 2 + 4 + 16 = 24 B;
# iq4_nl = 2 + 16 = 18 B. NVFP4: 16 e2m1 values (8 B) + one e4m3 scale. MXFP4: 32 values + one e8m0.
DTYPES: dict[str, DType] = {
    d.name: d
    for d in (
        DType("float32", 1, 4),
        DType("float16", 1, 2),
        DType("bfloat16", 1, 2),
        DType("fp8_e4m3", 1, 1),
        DType("fp8_e5m2", 1, 1),
        DType("int8", 1, 1),
        DType("q8_0", 32, 34),
        DType("q4_0", 32, 18),
        DType("q4_1", 32, 20),
        DType("q5_0", 32, 22),
        DType("q5_1", 32, 24),
        DType("iq4_nl", 32, 18),
        DType("nvfp4", 16, 9),
        DType("mxfp4", 32, 17),
        DType("int4", 2, 1),
    )
}

DTYPE_ALIASES: dict[str, str] = {
    "fp32": "float32",
    "f32": "float32",
    "float": "float32",
    "fp16": "float16",
    "f16": "float16",
    "half": "float16",
    "bf16": "bfloat16",
    "fp8": "fp8_e4m3",
    "e4m3": "fp8_e4m3",
    "float8_e4m3fn": "fp8_e4m3",
    "e5m2": "fp8_e5m2",
    "float8_e5m2": "fp8_e5m2",
}

#: dtypes a model's weights and activations (``torch_dtype``) may have.
FLOAT_DTYPES = ("float32", "float16", "bfloat16")


def fraction_of(num_bytes: int, fraction: Fraction) -> int:
    """``floor(num_bytes x fraction)``, exact: 0.9 of 85,029,027,840 B is 76,526,125,056 B."""
    return num_bytes * fraction.numerator // fraction.denominator


def kv_dtype_name(k_dtype: DType, v_dtype: DType) -> str:
    """A cache's dtype in one name: ``bfloat16``, or ``k/v`` when K and V differ (``q8_0/q4_0``)."""
    return k_dtype.name if k_dtype == v_dtype else f"{k_dtype.name}/{v_dtype.name}"


def dtype_names() -> str:
    """The accepted dtype names, for error messages."""
    return ", ".join([*DTYPES, *DTYPE_ALIASES])


_LOOKUP: dict[str, DType] = {
    **DTYPES,
    **{alias: DTYPES[name] for alias, name in DTYPE_ALIASES.items()},
}


def resolve_dtype(name: str) -> DType:
    """The DType called ``name`` (canonical or alias, case-insensitive)."""
    if not isinstance(name, str):
        raise ArgumentTypeError(
            f"name: a dtype is a name such as 'bfloat16', not {abbreviate(name)}"
        )
    found = _LOOKUP.get(name) or _LOOKUP.get(name.strip().lower())
    if found is None:
        raise UnitError(f"unknown dtype {abbreviate(name)}; allowed: {dtype_names()}")
    return found


#: Digits a token count or a size may have (10^30 tokens or bytes is far beyond any machine);
#: longer numbers are refused before any conversion, so no input can make a number that no
#: formatter or float can hold.
MAX_DIGITS = 30
#: Characters of a token count or size string read at all (spaces and a unit included).
_MAX_TEXT_CHARS = 64
#: Characters of a user's text echoed in an error message.
_SHOWN_CHARS = 40


def abbreviate(value: object) -> str:
    """A user's value for an error message, cut to a readable length: a string or a number as
    written (``'32G'``, ``1.5``), anything else by its type (``a list``)."""
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int):
        text = _int_text(value)
    elif isinstance(value, (str, float)):
        text = repr(value)
    else:
        return f"a {type(value).__name__}"
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."


def _number_text(text: object, what: str) -> str:
    """``text`` when it is a string short enough to read; UnitError otherwise."""
    if not isinstance(text, str):
        raise ArgumentTypeError(
            f"{what}: expected an integer or a string, got {type(text).__name__}"
        )
    if len(text) > _MAX_TEXT_CHARS:
        raise UnitError(
            f"cannot read {what} {abbreviate(text)}: longer than {_MAX_TEXT_CHARS} characters"
        )
    return text


def _check_digits(number: str, text: str, what: str) -> None:
    if len(number.replace(".", "")) > MAX_DIGITS:
        raise UnitError(f"{what} {abbreviate(text)} has more than {MAX_DIGITS} digits")


def _scaled(number: str, scale: int) -> tuple[int, bool]:
    """``number`` (digits, maybe a point and more digits) times ``scale``, floored, and whether
    that is exact. Integer arithmetic: Decimal's 28-digit context would round 30 digits."""
    whole, _, fraction = number.partition(".")
    numerator = int(whole + fraction) * scale
    denominator = 10 ** len(fraction)
    return numerator // denominator, numerator % denominator == 0


def _check_int(value: int, what: str) -> int:
    if value < 0:
        raise UnitError(f"{what} {abbreviate(value)} must not be negative")
    if value >= 10**MAX_DIGITS:
        raise UnitError(f"{what} {abbreviate(value)} has more than {MAX_DIGITS} digits")
    return value


_TOKENS_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmM]?)\s*$")
_TOKEN_SUFFIX = {"": 1, "k": 1000, "m": 1000**2, "K": 1024, "M": 1024**2}


def parse_tokens(text: str | int) -> int:
    """A token count: ``32768``, ``32k`` (= 32,000, decimal) or ``32K`` (= 32,768, binary).

    This is vLLM's documented reading of ``--max-model-len``: lower-case suffixes are
    powers of 1000, upper-case powers of 1024. At most ``MAX_DIGITS`` digits; a bool, a float
    or any other type is refused (ArgumentTypeError, a TypeError), a negative int
    (UnitError).
    """
    if isinstance(text, int) and not isinstance(text, bool):
        return _check_int(text, "token count")
    text = _number_text(text, "token count")
    m = _TOKENS_RE.match(text)
    if not m:
        raise UnitError(
            f"cannot read token count {abbreviate(text)}; use an integer or a k/K/m/M suffix "
            "(32k = 32,000, 32K = 32,768)"
        )
    _check_digits(m.group(1), text, "token count")
    value, exact = _scaled(m.group(1), _TOKEN_SUFFIX[m.group(2)])
    if not exact:
        raise UnitError(f"token count {abbreviate(text)} is not a whole number of tokens")
    return _check_int(value, "token count")


_BYTES_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")


def parse_bytes(text: str | int) -> int:
    """A memory size: ``80GiB`` = 80 x 2^30, ``80GB`` = 80 x 10^9, a bare number is bytes.

    ``80G`` is refused: it is ambiguous, and GPU vendors and engines disagree on it.
    Fractions are allowed where the result is exact to the byte floor (``1.5GiB``). At most
    ``MAX_DIGITS`` digits; a bool, a float or any other type is refused (ArgumentTypeError, a
    TypeError).
    """
    if isinstance(text, int) and not isinstance(text, bool):
        return _check_int(text, "memory size")
    text = _number_text(text, "memory size")
    m = _BYTES_RE.match(text)
    if not m:
        raise UnitError(f"cannot read memory size {abbreviate(text)}; write e.g. 80GiB or 80GB")
    number, unit = m.group(1), m.group(2)
    _check_digits(number, text, "memory size")
    if unit in ("", "B"):
        if "." in number:  # bytes come whole: 1.5 is no byte count, 1.5GiB is
            raise UnitError(
                f"cannot read memory size {abbreviate(text)}: bytes are whole; did you mean"
                f" {number}GiB or {number}GB?"
            )
        scale = 1
    elif unit in _BINARY_UNITS:
        scale = _BINARY_UNITS[unit]
    elif unit in _DECIMAL_UNITS:
        scale = _DECIMAL_UNITS[unit]
    else:
        lowered = {u.lower(): u for u in (*_BINARY_UNITS, *_DECIMAL_UNITS)}
        if unit.upper() in ("K", "M", "G", "T"):
            hint = f"write {number}{unit.upper()}iB (binary) or {number}{unit.upper()}B (decimal)"
        elif unit.lower() in lowered:
            hint = f"did you mean {number}{lowered[unit.lower()]}?"
        else:
            hint = "units: B, KiB, MiB, GiB, TiB (binary) or KB, MB, GB, TB (decimal)"
        raise UnitError(f"ambiguous or unknown memory unit in {abbreviate(text)}: {hint}")
    return _check_int(_scaled(number, scale)[0], "memory size")


def parse_rate(text: str) -> int:
    """A bandwidth in bytes per second: ``64GB/s`` = 64 x 10^9, ``25GiB/s`` = 25 x 2^30 (the
    units of ``parse_bytes``, then ``/s``). Raises UnitError for anything else."""
    if not isinstance(text, str) or not text.strip().endswith("/s"):
        raise UnitError(f"cannot read bandwidth {abbreviate(text)}; write e.g. 64GB/s")
    return parse_bytes(text.strip()[:-2])


# An int longer than sys.int_info.default_max_str_digits (4,300) cannot even be turned into
# decimal text; past this many bits (about 3,900 digits) it is shown as 1.23e+5000 instead.
_MAX_EXACT_BITS = 13_000


def _int_text(n: int, *, separators: bool = False) -> str:
    """``n`` in decimal (``131,072`` with separators); any int, however long, is shown."""
    if n.bit_length() <= _MAX_EXACT_BITS:
        return f"{n:,}" if separators else str(n)
    # Leading bits as a float, and the rest as a power of two: no conversion of n itself.
    magnitude = abs(n)
    shift = magnitude.bit_length() - 53
    log10 = math.log10(magnitude >> shift) + shift * math.log10(2)
    exponent = math.floor(log10)
    mantissa = 10 ** (log10 - exponent)
    return f"{'-' if n < 0 else ''}{mantissa:.2f}e+{exponent}"


def format_bytes(num_bytes: int) -> str:
    """Binary units, labelled: ``512 B``, ``1.50 KiB``, ``16.00 GiB``.

    Integer arithmetic (hundredths rounded half to even), so any int is shown, however large.
    Anything but an int (a float, a bool) raises ArgumentTypeError.
    """
    if isinstance(num_bytes, bool) or not isinstance(num_bytes, int):
        raise ArgumentTypeError(
            f"num_bytes: expected an integer of bytes, got {type(num_bytes).__name__}"
        )
    magnitude = abs(num_bytes)
    if magnitude < KiB:
        return f"{num_bytes} B"
    sign = "-" if num_bytes < 0 else ""
    for unit, scale in (("TiB", TiB), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if magnitude >= scale:
            hundredths, rest = divmod(magnitude * 100, scale)
            if 2 * rest > scale or (2 * rest == scale and hundredths % 2):
                hundredths += 1
            whole, cents = divmod(hundredths, 100)
            if whole.bit_length() > _MAX_EXACT_BITS:
                return f"{sign}{_int_text(whole)} {unit}"
            return f"{sign}{whole}.{cents:02d} {unit}"
    raise AssertionError("unreachable")  # pragma: no cover


def format_count(n: int, noun: str) -> str:
    """``1 layer``, ``32 layers``, ``131,072 tokens``."""
    return f"{_int_text(n, separators=True)} {noun}{'' if n == 1 else 's'}"


def format_tokens(num_tokens: int) -> str:
    """A token count with thousands separators: ``32,768``."""
    return _int_text(num_tokens, separators=True)
