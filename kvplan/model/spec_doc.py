"""Generate the key table of docs/spec.md from the ModelSpec model, so the docs cannot drift.

``python -m kvplan.model.spec_doc`` rewrites the block between the markers in docs/spec.md;
tests/test_docs.py fails when the committed block differs from what this generates.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from kvplan.model.layers import LAYER_KINDS
from kvplan.model.spec import ModelSpec
from kvplan.units import DTYPE_ALIASES, DTYPES, FLOAT_DTYPES

BEGIN = "<!-- BEGIN GENERATED: python -m kvplan.model.spec_doc -->"
END = "<!-- END GENERATED -->"


def _type_of(schema: dict[str, Any]) -> str:
    """A JSON-schema property as words: ``integer > 0``, ``list of kind``, ``string``."""
    options = [o for o in schema.get("anyOf", [schema]) if o.get("type") != "null"]
    words = []
    for o in options:
        if o.get("type") == "array":
            item = o.get("items", {})
            words.append("list of " + ("kind" if "enum" in item else item.get("type", "value")))
        elif "exclusiveMinimum" in o:
            words.append(f"{o['type']} > {o['exclusiveMinimum']}")
        elif "minimum" in o:
            words.append(f"{o['type']} >= {o['minimum']}")
        else:
            words.append(o.get("type", "value"))
    return " or ".join(words)


def spec_keys_markdown() -> str:
    """The table of spec keys: name, type, required or default, meaning."""
    from kvplan.model.spec_schema import schema_of

    schema = schema_of(ModelSpec)
    properties = schema.model_json_schema()["properties"]
    rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for name, field in schema.model_fields.items():
        default = "required" if field.is_required() else f"`{field.default!r}`"
        default = default.replace("`None`", "none").replace("`()`", "empty")
        rows.append(
            f"| `{name}` | {_type_of(properties[name])} | {default} | {field.description or ''} |"
        )
    rows += [
        "",
        "Layer kinds (`layer_types`, `layer_types_pattern`): "
        + ", ".join(f"`{k}`" for k in LAYER_KINDS)
        + ".",
        "",
        "Model dtypes (`torch_dtype`): " + ", ".join(f"`{d}`" for d in FLOAT_DTYPES) + ".",
        "",
        "Cache, state and weight dtypes, with their storage block: "
        + ", ".join(
            f"`{d.name}` ({d.block_bytes} B per {d.block_values} value"
            f"{'s' if d.block_values > 1 else ''})"
            for d in DTYPES.values()
        )
        + "; aliases: "
        + ", ".join(f"`{a}` = `{n}`" for a, n in DTYPE_ALIASES.items())
        + ".",
    ]
    return "\n".join(rows)


def render_spec_doc(text: str) -> str:
    """``text`` (docs/spec.md) with its generated block replaced by the current one."""
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{spec_keys_markdown()}\n{END}{tail}"


def main() -> int:
    path = Path(__file__).resolve().parents[2] / "docs" / "spec.md"
    path.write_text(render_spec_doc(path.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"wrote {path.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
