"""Field types of budget files: token counts (8192, 8k) and byte sizes (80GiB, 80GB) as
exact integers, each refused at load time with the file, line and field."""

from __future__ import annotations

from typing import Annotated

from pydantic import BeforeValidator, WithJsonSchema

from kvplan.errors import KvplanError
from kvplan.units import parse_bytes, parse_tokens

__all__ = ["ByteSize", "TokenCount"]


def _tokens(value: object) -> int:
    try:
        return parse_tokens(value if isinstance(value, int | str) else str(value))
    except KvplanError as e:
        raise ValueError(str(e)) from None


def _bytes(value: object) -> int:
    try:
        return parse_bytes(value if isinstance(value, int | str) else str(value))
    except KvplanError as e:
        raise ValueError(str(e)) from None


TokenCount = Annotated[
    int,
    BeforeValidator(_tokens),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "integer", "minimum": 0},
                {"type": "string", "pattern": "^ *[0-9.]+ *[kKmM]? *$"},
            ]
        }
    ),
]
ByteSize = Annotated[
    int,
    BeforeValidator(_bytes),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "integer", "minimum": 0},
                {"type": "string", "pattern": "^ *[0-9.]+ *([KMGT]i?B|B)? *$"},
            ]
        }
    ),
]
