"""The pydantic models that check spec files, built on first use from the dataclasses of
``kvplan.model.spec``, which hand themselves in: this module never imports them.

Each field's annotation in ``kvplan.model.spec`` names its type (``Dim``, ``Tokens``, ``Name``...);
``BOUNDS`` gives each name its strict pydantic type and bounds, so the dataclass declares a key
once and the file check, the JSON Schema (``kvplan schema spec``) and docs/spec.md all follow
from it. Imported only when a spec is checked: a command that reads bundled specs alone never
loads pydantic.
"""

from __future__ import annotations

import dataclasses
import sys
from functools import cache
from typing import Annotated, Any, get_type_hints

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictBool,
    StrictInt,
    StrictStr,
    create_model,
    model_validator,
)

from kvplan.errors import SpecError
from kvplan.model.layers import LayerKind
from kvplan.model.limits import (
    MAX_DIM,
    MAX_LAYERS,
    MAX_NAME_CHARS,
    MAX_PARAMETERS,
    MAX_TOKENS,
    MAX_WEIGHT_BYTES,
)
from kvplan.validation import validate

__all__ = ["BOUNDS", "check_spec", "schema_of", "validated_spec"]

#: The strict pydantic type of each field type ``kvplan.model.spec`` names.
BOUNDS: dict[str, Any] = {
    "Layers": Annotated[StrictInt, Field(gt=0, le=MAX_LAYERS)],
    "Dim": Annotated[StrictInt, Field(gt=0, le=MAX_DIM)],
    "Tokens": Annotated[StrictInt, Field(gt=0, le=MAX_TOKENS)],
    "Parameters": Annotated[StrictInt, Field(gt=0, le=MAX_PARAMETERS)],
    "Count": Annotated[StrictInt, Field(ge=0, le=MAX_LAYERS)],
    "WeightBytes": Annotated[StrictInt, Field(ge=0, le=MAX_WEIGHT_BYTES)],
    "Name": Annotated[StrictStr, Field(max_length=MAX_NAME_CHARS)],
    "Text": StrictStr,
    "Flag": StrictBool,
    "LayerKind": LayerKind,
}


class _Checked(BaseModel):
    """What every schema shares: frozen, unknown keys refused, and the dataclass it built."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    _built: Any = PrivateAttr(default=None)

    def built(self) -> Any:
        """The ``kvplan.model.spec`` dataclass these checked values make."""
        return self._built


def _builder(cls: Any) -> Any:
    def build(model: _Checked) -> _Checked:
        # The keys that must agree with each other (layer kinds, GQA, dtypes): ValueErrors
        # that name their field, reported by pydantic as model-level errors with the line.
        model._built = cls.from_checked(model.model_dump())
        return model

    return build


@cache
def schema_of(cls: type) -> type[_Checked]:
    """The pydantic model of a ``kvplan.model.spec`` dataclass (``ModelSpec``,
    ``StoredWeights``): each field's type from ``BOUNDS``, a field that holds another of
    these dataclasses checked by that one's model, and a class with ``from_checked`` built
    by it once its values pass."""
    module = vars(sys.modules[cls.__module__])
    nested = {
        name: schema_of(value)
        for name, value in module.items()
        if dataclasses.is_dataclass(value) and isinstance(value, type) and value is not cls
        and value.__module__ == cls.__module__ and not hasattr(value, "from_checked")
    }
    hints = get_type_hints(cls, module, {**BOUNDS, **nested}, include_extras=True)
    definitions: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        extra = {k: v for k, v in f.metadata.items() if k != "description"}
        default = ... if f.default is dataclasses.MISSING else f.default
        info = Field(default, description=f.metadata["description"], **extra)
        definitions[f.name] = (hints[f.name], info)
    validators: dict[str, Any] = {}
    if hasattr(cls, "from_checked"):
        validators["_build"] = model_validator(mode="after")(_builder(cls))
    model: type[_Checked] = create_model(
        cls.__name__,
        __base__=_Checked,
        __doc__=cls.__doc__,
        __module__=cls.__module__,
        __validators__=validators,
        **definitions,
    )
    return model


def _keys(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls) if f.init)


def validated_spec(cls: type, data: Any, path: str, text: str | None) -> Any:
    """``data`` (a mapping with a ``name``) checked as the spec file ``path`` (its YAML
    ``text`` gives each problem's line) and built as ``cls`` (``ModelSpec``). Raises
    SpecError."""
    checked = validate(schema_of(cls), data, path, text, _keys(cls), "docs/spec.md")
    return checked.built()


def check_spec(spec: Any) -> Any:
    """A ``ModelSpec(...)`` built in code, checked as a file would be and built again (lists
    read as tuples, dtype names canonical). Raises SpecError."""
    values = {name: getattr(spec, name) for name in _keys(type(spec))}
    stored = values["stored_weight_bytes"]
    if dataclasses.is_dataclass(stored) and not isinstance(stored, type):
        values["stored_weight_bytes"] = dataclasses.asdict(stored)
    if not isinstance(values.get("name"), str):
        raise SpecError("<ModelSpec>", ["name: a string is required"])
    return validated_spec(type(spec), values, "<ModelSpec>", None)
