"""The dtype keys of a spec, checked and made canonical (``bf16`` -> ``bfloat16``): a
ValueError naming the key, which the spec's schema reports with the file and line."""

from __future__ import annotations

from kvplan.errors import UnitError
from kvplan.units import FLOAT_DTYPES, abbreviate, resolve_dtype


def model_dtype(value: str) -> str:
    """``torch_dtype``'s canonical name: one of ``FLOAT_DTYPES``."""
    try:
        name = resolve_dtype(value).name
    except UnitError:
        name = ""
    if name not in FLOAT_DTYPES:
        raise ValueError(
            f"torch_dtype: unknown model dtype {abbreviate(value)}; allowed:"
            f" {', '.join(FLOAT_DTYPES)} (or fp32, fp16, bf16)"
        )
    return name


def canonical_dtype(value: str, key: str) -> str:
    """Any dtype's canonical name, for the key ``key`` (``state_dtype``, ``weight_dtype``)."""
    try:
        return resolve_dtype(value).name
    except UnitError as e:
        raise ValueError(f"{key}: {e}") from None
