"""Byte constants, cache dtypes, token and size parsing, display formatting.

Everything here is exact integer arithmetic. A dtype is described by its storage block:
``block_values`` values take ``block_bytes`` bytes, scales included, so llama.cpp's
``q8_0`` (32 int8 values plus one fp16 scale = 34 bytes) and NVFP4 (16 4-bit values plus one
fp8 scale = 9 bytes) stay exact instead of becoming 1.0625 or 0.5625 bytes a value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from kvplan.errors import UnitError

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


def dtype_names() -> str:
    """The accepted dtype names, for error messages."""
    return ", ".join([*DTYPES, *DTYPE_ALIASES])


_LOOKUP: dict[str, DType] = {
    **DTYPES,
    **{alias: DTYPES[name] for alias, name in DTYPE_ALIASES.items()},
}


def resolve_dtype(name: str) -> DType:
    """The DType called ``name`` (canonical or alias, case-insensitive)."""
    found = _LOOKUP.get(name) or _LOOKUP.get(name.strip().lower())
    if found is None:
        raise UnitError(f"unknown dtype {name!r}; allowed: {dtype_names()}")
    return found


_TOKENS_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmM]?)\s*$")
_TOKEN_SUFFIX = {"": 1, "k": 1000, "m": 1000**2, "K": 1024, "M": 1024**2}


def parse_tokens(text: str | int) -> int:
    """A token count: ``32768``, ``32k`` (= 32,000, decimal) or ``32K`` (= 32,768, binary).

    This is vLLM's documented reading of ``--max-model-len``: lower-case suffixes are
    powers of 1000, upper-case powers of 1024.
    """
    if isinstance(text, int):
        value = text
    else:
        m = _TOKENS_RE.match(text)
        if not m:
            raise UnitError(
                f"cannot read token count {text!r}; use an integer or a k/K/m/M suffix "
                "(32k = 32,000, 32K = 32,768)"
            )
        exact = Decimal(m.group(1)) * _TOKEN_SUFFIX[m.group(2)]
        if exact != exact.to_integral_value():
            raise UnitError(f"token count {text!r} is not a whole number of tokens")
        value = int(exact)
    if value < 0:
        raise UnitError(f"token count {text!r} must not be negative")
    return value


_BYTES_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")


def parse_bytes(text: str | int) -> int:
    """A memory size: ``80GiB`` = 80 x 2^30, ``80GB`` = 80 x 10^9, a bare number is bytes.

    ``80G`` is refused: it is ambiguous, and GPU vendors and engines disagree on it.
    Fractions are allowed where the result is exact to the byte floor (``1.5GiB``).
    """
    if isinstance(text, int):
        if text < 0:
            raise UnitError(f"memory size {text} must not be negative")
        return text
    m = _BYTES_RE.match(text)
    if not m:
        raise UnitError(f"cannot read memory size {text!r}; write e.g. 80GiB or 80GB")
    number, unit = m.group(1), m.group(2)
    if unit in ("", "B"):
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
        raise UnitError(f"ambiguous or unknown memory unit in {text!r}: {hint}")
    try:
        return int(Decimal(number) * scale)
    except InvalidOperation:  # pragma: no cover - the regex admits only decimals
        raise UnitError(f"cannot read memory size {text!r}") from None


def format_bytes(num_bytes: int) -> str:
    """Binary units, labelled: ``512 B``, ``1.50 KiB``, ``16.00 GiB``."""
    if abs(num_bytes) < KiB:
        return f"{num_bytes} B"
    for unit, scale in (("TiB", TiB), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if abs(num_bytes) >= scale:
            return f"{num_bytes / scale:.2f} {unit}"
    raise AssertionError("unreachable")  # pragma: no cover


def format_count(n: int, noun: str) -> str:
    """``1 layer``, ``32 layers``, ``131,072 tokens``."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def format_tokens(num_tokens: int) -> str:
    """A token count with thousands separators: ``32,768``."""
    return f"{num_tokens:,}"
