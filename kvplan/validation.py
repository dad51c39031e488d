"""Reading YAML input files and validating them into pydantic models, with errors that name
the file, the line and the field: ``budget.yaml:12: deployments.0.expect.min_concurency:
unknown key; did you mean 'min_concurrency'?``. Shared by specs and budget files."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from kvplan.errors import SpecError, closest

# The C loader when PyYAML has it; both are the *safe* loader (no arbitrary objects).
SafeLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

M = TypeVar("M", bound=BaseModel)


def read_yaml(path: str | Path) -> tuple[Any, str]:
    """The parsed YAML of ``path`` and its text. Raises SpecError (with the line) when the file
    cannot be read or is not YAML."""
    shown = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise SpecError(shown, [f"cannot read: {e.strerror or e}"]) from None
    except UnicodeDecodeError:
        raise SpecError(shown, ["cannot read: not UTF-8 text"]) from None
    try:
        return yaml.load(text, Loader=SafeLoader), text
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        what = getattr(e, "problem", None) or str(e).splitlines()[0]
        line = mark.line + 1 if mark is not None else None
        raise SpecError(shown, [f"malformed YAML: {what}"], [line]) from None


def validate(
    model: type[M], data: Any, path: str, text: str | None, keys: Iterable[str], docs: str
) -> M:
    """``model.model_validate(data)``, its errors one line each with file, line and field.

    ``keys`` are the names an unknown key is matched against for a did-you-mean; ``docs`` is
    where the allowed keys are listed.
    """
    try:
        return model.model_validate(data)
    except ValidationError as e:
        names = tuple(keys)
        found = sorted(
            (
                (line_of(text, _field_loc(err["loc"], err["msg"], names)) if text else None) or 0,
                _describe_error(tuple(err["loc"]), err["type"], err["msg"], names, docs),
            )
            for err in e.errors()
        )
        raise SpecError(path, [p for _, p in found], [line or None for line, _ in found]) from None


def field_names(*models: type[BaseModel]) -> set[str]:
    """Every field name of ``models`` and of the models their fields hold, for hints."""
    names: set[str] = set()
    pending = list(models)
    seen: set[type[BaseModel]] = set()
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        for name, field in current.model_fields.items():
            names.add(name)
            for arg in _types_in(field.annotation):
                if isinstance(arg, type) and issubclass(arg, BaseModel):
                    pending.append(arg)
    return names


def _types_in(annotation: Any) -> list[Any]:
    args = list(getattr(annotation, "__args__", ()) or ())
    found = [annotation]
    while args:
        arg = args.pop()
        found.append(arg)
        args.extend(getattr(arg, "__args__", ()) or ())
    return found


def _describe_error(
    loc: tuple[int | str, ...], kind: str, msg: str, keys: tuple[str, ...], docs: str
) -> str:
    field = ".".join(str(part) for part in loc)
    msg = msg.removeprefix("Value error, ")
    if kind == "extra_forbidden":
        close = closest(str(loc[-1]), keys, limit=1)
        hint = f"; did you mean {close[0]!r}?" if close else f"; allowed keys are listed in {docs}"
        return f"{field}: unknown key{hint}"
    if kind == "missing":
        return f"{field}: required key is missing"
    if not field:
        return msg  # model-level checks already name their fields
    return f"{field}: {msg[0].lower()}{msg[1:]}"


def _field_loc(
    loc: tuple[int | str, ...], msg: str, keys: tuple[str, ...]
) -> tuple[int | str, ...]:
    """Where an error points; model-level checks name their first field before a colon."""
    if loc:
        return loc
    first = msg.removeprefix("Value error, ").split(":", 1)[0].split(",", 1)[0].strip()
    return (first,) if first in keys else ()


def line_of(text: str, loc: tuple[int | str, ...]) -> int | None:
    """The 1-based line of the node at ``loc`` in YAML ``text``, or of its nearest parent."""
    try:
        node = yaml.compose(text, Loader=SafeLoader)
    except yaml.YAMLError:  # pragma: no cover - text already parsed once
        return None
    if node is None:
        return None
    line = node.start_mark.line + 1
    for part in loc:
        nxt: Any = None
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if key.value == str(part):
                    line = key.start_mark.line + 1
                    nxt = value
                    break
        elif (
            isinstance(node, yaml.SequenceNode)
            and isinstance(part, int)
            and 0 <= part < len(node.value)
        ):
            nxt = node.value[part]
            line = nxt.start_mark.line + 1
        if nxt is None:
            break
        node = nxt
    return line
