from __future__ import annotations

import pytest

from kvplan.errors import UnitError
from kvplan.units import (
    GiB,
    KiB,
    cdiv,
    format_bytes,
    format_count,
    format_tokens,
    parse_bytes,
    parse_tokens,
    resolve_dtype,
)


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("32768", 32768),
        ("32k", 32_000),
        ("32K", 32_768),
        ("128K", 131_072),
        ("1m", 1_000_000),
        ("1M", 1_048_576),
        ("0", 0),
        (" 8K ", 8192),
        ("1.5k", 1500),
        (4096, 4096),
    ],
    ids=lambda v: str(v),
)
def test_parse_tokens(text: str | int, tokens: int) -> None:
    assert parse_tokens(text) == tokens


@pytest.mark.parametrize("text", ["32G", "abc", "-5", "1.5", "0.0001k", "", "32 KiB"])
def test_parse_tokens_refuses(text: str) -> None:
    with pytest.raises(UnitError):
        parse_tokens(text)


@pytest.mark.parametrize(
    ("text", "num_bytes"),
    [
        ("80GiB", 80 * 2**30),
        ("80GB", 80 * 10**9),
        ("512MiB", 512 * 2**20),
        ("1.5GiB", 1_610_612_736),
        ("24 GiB", 24 * 2**30),
        ("1TB", 10**12),
        ("1KiB", 1024),
        ("1KB", 1000),
        ("4096", 4096),
        ("4096B", 4096),
    ],
    ids=str,
)
def test_parse_bytes_binary_and_decimal_are_literal(text: str, num_bytes: int) -> None:
    assert parse_bytes(text) == num_bytes


@pytest.mark.parametrize(
    ("text", "hint"), [("80G", "80GiB"), ("80gib", "80GiB"), ("3 parsecs", "units")]
)
def test_parse_bytes_refuses_ambiguous_with_hint(text: str, hint: str) -> None:
    with pytest.raises(UnitError, match=hint):
        parse_bytes(text)


@pytest.mark.parametrize(
    ("num_bytes", "shown"),
    [
        (0, "0 B"),
        (512, "512 B"),
        (1023, "1023 B"),
        (1024, "1.00 KiB"),
        (1536, "1.50 KiB"),
        (16 * GiB, "16.00 GiB"),
        (79_190_000_000, "73.75 GiB"),
        (2**40, "1.00 TiB"),
    ],
)
def test_format_bytes_is_binary_and_labelled(num_bytes: int, shown: str) -> None:
    assert format_bytes(num_bytes) == shown


def test_format_tokens() -> None:
    assert format_tokens(131072) == "131,072"


@pytest.mark.parametrize(
    ("name", "num_values", "row_bytes"),
    [
        # ggml/src/ggml-common.h block sizes, per 32 values
        ("q8_0", 32, 34),
        ("q4_0", 32, 18),
        ("q4_1", 32, 20),
        ("q5_0", 32, 22),
        ("q5_1", 32, 24),
        ("iq4_nl", 32, 18),
        # one Llama 3 8B K row: 8 heads x 128 = 1024 values = 32 blocks
        ("q8_0", 1024, 32 * 34),
        ("q4_0", 1024, 32 * 18),
        # NVFP4: 16 values = 8 B of e2m1 + 1 B e4m3 scale
        ("nvfp4", 16, 9),
        ("nvfp4", 1024, 64 * 9),
        ("mxfp4", 32, 17),
        ("bf16", 1024, 2048),
        ("fp8", 1024, 1024),
        ("float32", 3, 12),
        # a partial block still takes a whole block
        ("q8_0", 33, 68),
    ],
)
def test_dtype_row_bytes_count_scales_exactly(name: str, num_values: int, row_bytes: int) -> None:
    assert resolve_dtype(name).row_bytes(num_values) == row_bytes


@pytest.mark.parametrize(
    ("alias", "name"),
    [("fp8", "fp8_e4m3"), ("FP16", "float16"), ("bf16", "bfloat16"), ("f32", "float32")],
)
def test_dtype_aliases(alias: str, name: str) -> None:
    assert resolve_dtype(alias).name == name


def test_unknown_dtype_lists_allowed() -> None:
    with pytest.raises(UnitError, match=r"allowed: .*q8_0.*nvfp4"):
        resolve_dtype("fp9")


def test_bits_per_value_display() -> None:
    assert resolve_dtype("q8_0").bits_per_value == "8.5"
    assert resolve_dtype("nvfp4").bits_per_value == "4.5"


def test_cdiv() -> None:
    assert (cdiv(0, 16), cdiv(1, 16), cdiv(16, 16), cdiv(17, 16)) == (0, 1, 1, 2)
    assert KiB == 1024


# --- bounds: any input refused in one line, any int shown ------------------------------------


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (True, "expected an integer or a string, got bool"),
        (1.5, "expected an integer or a string, got float"),
        (float("nan"), "got float"),
        (-1, "must not be negative"),
        (10**30, "has more than 30 digits"),  # 31 digits
        ("9" * 31, "has more than 30 digits"),
        ("9" * 65, "longer than 64 characters"),
        ("1e5", "cannot read"),
        ("nan", "cannot read"),
        (None, "got NoneType"),
    ],
    ids=str,
)
def test_parsers_refuse_beyond_bounds(value: object, problem: str) -> None:
    for parse in (parse_tokens, parse_bytes):
        with pytest.raises(UnitError, match=problem):
            parse(value)  # type: ignore[arg-type]


def test_thirty_digits_are_read_exactly() -> None:
    assert parse_tokens("9" * 30) == 10**30 - 1
    assert parse_bytes("9" * 30 + "B") == 10**30 - 1


def test_error_echoes_are_cut() -> None:
    with pytest.raises(UnitError) as info:
        parse_tokens("x" * 64)
    assert len(str(info.value)) < 150


@pytest.mark.parametrize(
    ("num_bytes", "shown"),
    [
        # hundredths rounded half to even, as the float formatting did: 1152 B = 1.125 KiB
        (1152, "1.12 KiB"),
        (1664, "1.62 KiB"),  # 1.625 KiB
        (1023 * KiB + 1023, "1024.00 KiB"),  # 1023.999 KiB rounds up, unit kept
        (-1536, "-1.50 KiB"),
        # 10**400 B = 10**400 / 2**40 TiB, beyond any float: integer arithmetic
        (10**400, str(10**400 // 2**40) + "." + f"{(10**400 * 100 // 2**40) % 100:02d} TiB"),
    ],
    ids=["1152", "1664", "1023.999KiB", "negative", "10**400"],
)
def test_format_bytes_exact_for_any_int(num_bytes: int, shown: str) -> None:
    assert format_bytes(num_bytes) == shown


def test_format_bytes_matches_float_formatting_where_floats_are_exact() -> None:
    # below 2**53 x scale a float quotient is exact, so the old float path is the reference
    for n in (1024, 1536, 123_456_789, 79_190_000_000, 2**52 + 12_345, 2**60 + 7):
        unit, scale = next(
            (u, s)
            for u, s in (("TiB", 2**40), ("GiB", GiB), ("MiB", 2**20), ("KiB", KiB))
            if n >= s
        )
        assert format_bytes(n) == f"{n / scale:.2f} {unit}"


def test_formatters_past_python_int_text_limit() -> None:
    # Python writes at most 4,300 digits of an int; kvplan shows a power of ten beyond 13,000
    # bits: 10**5000 -> 1.00e+5000
    assert format_tokens(10**5000) == "1.00e+5000"
    assert format_count(-(10**5000), "token") == "-1.00e+5000 tokens"
    assert format_tokens(10**400) == f"{10**400:,}"


def test_resolve_dtype_refuses_non_strings() -> None:
    with pytest.raises(UnitError, match="a dtype is a name"):
        resolve_dtype(["bf16"])  # type: ignore[arg-type]
