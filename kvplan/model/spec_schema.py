"""The pydantic models that check spec files, built from ``kvplan.model.spec``'s dataclasses on
first use.

Each field's annotation in ``kvplan.model.spec`` names its type (``Dim``, ``Tokens``, ``Name``...);
``BOUNDS`` gives each name its strict pydantic type and bounds, so the dataclass declares a key
once and the file check, the JSON Schema (``kvplan schema spec``) and docs/spec.md all follow
from it. Imported only when a spec is checked: a command that reads bundled specs alone never
loads pydantic.
"""

from __future__ import annotations

import dataclasses
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
from kvplan.model import spec as spec_module
from kvplan.model.layers import LayerKind
from kvplan.model.spec import (
    MAX_DIM,
    MAX_LAYERS,
    MAX_NAME_CHARS,
    MAX_PARAMETERS,
    MAX_TOKENS,
    MAX_WEIGHT_BYTES,
    SPEC_KEYS,
    ModelSpec,
    StoredWeights,
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


def _build_spec(model: _Checked) -> _Checked:
    # The keys that must agree with each other (layer kinds, GQA, dtypes): ValueErrors that
    # name their field, reported by pydantic as model-level errors with the file's line.
    model._built = ModelSpec.from_checked(model.model_dump())
    return model


@cache
def schema_of(cls: type) -> type[_Checked]:
    """The pydantic model of a ``kvplan.model.spec`` dataclass (``ModelSpec``,
    ``StoredWeights``)."""
    namespace = BOUNDS
    if cls is ModelSpec:
        namespace = {**BOUNDS, "StoredWeights": schema_of(StoredWeights)}
    hints = get_type_hints(cls, vars(spec_module), namespace, include_extras=True)
    definitions: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        extra = {k: v for k, v in f.metadata.items() if k != "description"}
        default = ... if f.default is dataclasses.MISSING else f.default
        info = Field(default, description=f.metadata["description"], **extra)
        definitions[f.name] = (hints[f.name], info)
    validators: dict[str, Any] = {}
    if cls is ModelSpec:
        validators["_build"] = model_validator(mode="after")(_build_spec)
    model: type[_Checked] = create_model(
        cls.__name__,
        __base__=_Checked,
        __doc__=cls.__doc__,
        __module__=cls.__module__,
        __validators__=validators,
        **definitions,
    )
    return model


def validated_spec(data: Any, path: str, text: str | None) -> ModelSpec:
    """``data`` (a mapping with a ``name``) checked as the spec file ``path`` (its YAML
    ``text`` gives each problem's line) and built. Raises SpecError."""
    checked = validate(schema_of(ModelSpec), data, path, text, SPEC_KEYS, "docs/spec.md")
    spec: ModelSpec = checked.built()
    return spec


def check_spec(spec: ModelSpec) -> ModelSpec:
    """A ``ModelSpec(...)`` built in code, checked as a file would be and built again (lists
    read as tuples, dtype names canonical). Raises SpecError."""
    values = {name: getattr(spec, name) for name in SPEC_KEYS}
    stored = values["stored_weight_bytes"]
    if isinstance(stored, StoredWeights):
        values["stored_weight_bytes"] = dataclasses.asdict(stored)
    if not isinstance(values.get("name"), str):
        raise SpecError("<ModelSpec>", ["name: a string is required"])
    return validated_spec(values, "<ModelSpec>", None)
