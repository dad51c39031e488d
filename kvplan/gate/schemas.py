"""JSON Schema documents of the spec and budget formats, from their pydantic models."""

from __future__ import annotations

from typing import Any


def json_schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of ``spec`` or ``budget`` files (draft 2020-12). UnitError for another
    kind, ArgumentTypeError (a TypeError) for a ``kind`` that is no str."""
    from kvplan.arguments import as_str

    kind = as_str(kind, "kind", "a str: spec or budget")
    if kind == "spec":
        from kvplan.model.spec import ModelSpec
        from kvplan.model.spec_schema import schema_of

        schema = schema_of(ModelSpec).model_json_schema()
        title = "kvplan model spec"
    elif kind == "budget":
        from kvplan.gate.budget import Budget

        schema = Budget.model_json_schema()
        title = "kvplan budget file"
    else:
        from kvplan.errors import UnitError

        raise UnitError(f"unknown schema {kind!r}; allowed: spec, budget")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"kvplan-{kind}.schema.json",
        "schema_version": 1,  # of this document, like every kvplan JSON output (an annotation)
        **schema,
        "title": title,
    }
