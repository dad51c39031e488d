"""Reading YAML input files and validating them into pydantic models, with errors that name
the file, the line and the field: ``budget.yaml:12: deployments.0.expect.min_concurency:
unknown key; did you mean 'min_concurrency'?``. Shared by specs and budget files.

A file is read once (``kvplan.files.read_text``: regular files only, size capped), composed into
a YAML node tree once, and every error's line comes from that one tree. Aliases may not expand
a file by more than ``MAX_ALIAS_VALUES`` values, identical problems are reported once, and at
most ``MAX_PROBLEMS`` are listed, then ``... and N more problems``.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import yaml

from kvplan.errors import SpecError, closest
from kvplan.files import read_text

# The C loader when PyYAML has it; both are the *safe* loader (no arbitrary objects).
SafeLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

if TYPE_CHECKING:  # pydantic is imported where a file is checked, not to read YAML
    from pydantic import BaseModel

M = TypeVar("M", bound="BaseModel")

#: Problems listed per file; the rest are counted in one closing line.
MAX_PROBLEMS = 5
#: The largest YAML file kvplan reads (a spec is a few KiB, a budget of 4,096 deployments
#: about 500 KiB): composing YAML costs a few microseconds a node, so this bounds a file to
#: seconds, whatever it holds.
YAML_LIMIT_BYTES = 2 * 2**20
#: Values that aliases (``*name``) may add to a file once expanded. A budget file that shares
#: settings with an anchor adds a few dozen; a "billion laughs" file adds billions.
MAX_ALIAS_VALUES = 100_000
#: Characters of an integer scalar; Python refuses to read more than 4,300 digits anyway.
_MAX_INT_CHARS = 1000
_INT_TAG = "tag:yaml.org,2002:int"
_LONG_DIGITS = re.compile(f"[0-9_]{{{_MAX_INT_CHARS + 1}}}")


def read_yaml(path: str | Path) -> tuple[Any, str]:
    """The parsed YAML of ``path`` and its text. Raises SpecError (with the line) when the file
    cannot be read or is not YAML."""
    text = read_text(path, limit_bytes=YAML_LIMIT_BYTES)
    return parse_yaml(text, str(path)), text


def parse_yaml(text: str, path: str) -> Any:
    """The data of the YAML document ``text`` (from ``path``, for messages).

    Raises SpecError for a text over ``YAML_LIMIT_BYTES``, malformed YAML (with its line), more
    than one document, aliases that
    expand past ``MAX_ALIAS_VALUES`` values or refer to themselves, an integer of more than
    1,000 digits, or nesting too deep to read.
    """
    if len(text) > YAML_LIMIT_BYTES:  # characters: at least as many bytes
        limit = YAML_LIMIT_BYTES // 2**20
        raise SpecError(path, [f"cannot read: larger than {limit} MiB, the most kvplan reads"])
    loader = SafeLoader(text)
    node: yaml.Node | None = None
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if "*" in text:  # an alias is written *name
            _check_aliases(node, path)
        if _LONG_DIGITS.search(text):
            _check_ints(node, path)
        _check_duplicate_keys(node, path)
        return loader.construct_document(node)
    except SpecError:
        raise
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        what = getattr(e, "problem", None) or str(e).splitlines()[0]
        line = mark.line + 1 if mark is not None else None
        raise SpecError(path, [f"malformed YAML: {what}"], [line]) from None
    except RecursionError:
        raise SpecError(path, ["malformed YAML: nested too deeply"]) from None
    except (ValueError, OverflowError) as e:  # e.g. a date such as 2024-13-45
        raise SpecError(path, [f"malformed YAML: {str(e)[:200]}"]) from None
    finally:
        loader.dispose()
        if node is not None:
            _remember(text, node)


def _check_aliases(root: yaml.Node, path: str) -> None:
    """Refuse aliases that refer to themselves or expand past MAX_ALIAS_VALUES values.

    The composed tree shares an aliased node, so it is walked once, counting each node's
    expanded size from its children's (memoised): linear in the file, whatever it expands to.
    """
    expanded: dict[int, int] = {}
    visiting: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            visiting.discard(key)
            expanded[key] = 1 + sum(expanded[id(c)] for c in _children(node))
            continue
        if key in expanded:
            continue
        if key in visiting:
            raise SpecError(
                path, ["malformed YAML: an alias refers to itself"], [node.start_mark.line + 1]
            )
        visiting.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in visiting:
                raise SpecError(
                    path,
                    ["malformed YAML: an alias refers to itself"],
                    [child.start_mark.line + 1],
                )
            if id(child) not in expanded:
                stack.append((child, False))
    if expanded[id(root)] - len(expanded) > MAX_ALIAS_VALUES:
        raise SpecError(
            path,
            [
                f"malformed YAML: aliases expand the file by more than {MAX_ALIAS_VALUES:,}"
                " values; write the values out"
            ],
        )


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _check_duplicate_keys(root: yaml.Node, path: str) -> None:
    """Refuse a mapping that names a key twice, with the second one's line: PyYAML keeps the
    last silently, so a reviewer reading the first would see a number kvplan never used."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:  # an alias shares its node: each is walked once
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            keys: set[str] = set()
            for key, _ in node.value:
                if not isinstance(key, yaml.ScalarNode) or key.value == "<<":
                    continue
                if key.value in keys:  # named only when it could be a key's name
                    what = key.value if _KEY_NAME.fullmatch(key.value) else "a key"
                    raise SpecError(
                        path,
                        [f"{what}: given twice in one mapping; keep one"],
                        [key.start_mark.line + 1],
                    )
                keys.add(key.value)
        stack.extend(_children(node))


def _check_ints(root: yaml.Node, path: str) -> None:
    """Refuse integer scalars too long to read, with their line (Python raises ValueError past
    4,300 digits; no field of kvplan is anywhere near this long)."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            if node.tag == _INT_TAG and len(node.value) > _MAX_INT_CHARS:
                raise SpecError(
                    path,
                    [f"an integer of {len(node.value):,} characters; at most {_MAX_INT_CHARS:,}"],
                    [node.start_mark.line + 1],
                )
        else:
            stack.extend(_children(node))


# --- lines of errors ---------------------------------------------------------------------------


class _Lines:
    """Lines of the nodes of one composed YAML document, looked up by a pydantic ``loc``."""

    def __init__(self, root: yaml.Node | None) -> None:
        self.root = root
        self._keys: dict[int, dict[str, tuple[yaml.Node, yaml.Node]]] = {}

    def _mapping(self, node: yaml.MappingNode) -> dict[str, tuple[yaml.Node, yaml.Node]]:
        found = self._keys.get(id(node))
        if found is None:
            found = {}
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode):
                    found.setdefault(str(key.value), (key, value))
            self._keys[id(node)] = found
        return found

    def line(self, loc: tuple[int | str, ...]) -> int | None:
        """The 1-based line of the node at ``loc``, or of its nearest parent."""
        node = self.root
        if node is None:
            return None
        line: int = node.start_mark.line + 1
        for part in loc:
            nxt: yaml.Node | None = None
            if isinstance(node, yaml.MappingNode):
                pair = self._mapping(node).get(str(part))
                if pair is not None:
                    line = pair[0].start_mark.line + 1
                    nxt = pair[1]
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


# The trees of the last files read, so validating a file just read never composes it again.
# Keyed by the text itself (its hash is computed once per string).
_TREES: OrderedDict[str, _Lines] = OrderedDict()
_KEPT_TREES = 2


def _remember(text: str, node: yaml.Node) -> None:
    _TREES[text] = _Lines(node)
    _TREES.move_to_end(text)
    while len(_TREES) > _KEPT_TREES:
        _TREES.popitem(last=False)


def _lines_of(text: str) -> _Lines:
    found = _TREES.get(text)
    if found is not None:
        return found
    loader = SafeLoader(text)
    try:
        node = loader.get_single_node()
    except (yaml.YAMLError, RecursionError, ValueError):
        node = None
    finally:
        loader.dispose()
    lines = _Lines(node)
    if node is not None:
        _remember(text, node)
    return lines


def line_of(text: str, loc: tuple[int | str, ...]) -> int | None:
    """The 1-based line of the node at ``loc`` in YAML ``text``, or of its nearest parent.
    For many lookups in one file, ``line_locator`` composes it once."""
    return _lines_of(text).line(loc)


def line_locator(text: str) -> Callable[[tuple[int | str, ...]], int | None]:
    """``line_of`` for one YAML ``text``, composed once for any number of lookups."""
    return _lines_of(text).line


# --- validation --------------------------------------------------------------------------------


def validate(
    model: type[M], data: Any, path: str, text: str | None, keys: Iterable[str], docs: str
) -> M:
    """``model.model_validate(data)``, its errors one line each with file, line and field.

    ``keys`` are the names an unknown key is matched against for a did-you-mean; ``docs`` is
    where the allowed keys are listed. Identical problems are listed once, and at most
    ``MAX_PROBLEMS`` of them.
    """
    from pydantic import ValidationError

    names = tuple(keys)
    check_kind(data, path, names, docs)
    try:
        return model.model_validate(data)
    except ValidationError as e:
        errors = e.errors(include_url=False, include_input=False, include_context=False)
    except RecursionError:
        raise SpecError(path, ["nested too deeply"]) from None
    lines = _lines_of(text) if text else None
    located = [
        (
            (lines.line(_field_loc(tuple(err["loc"]), err["msg"], names)) if lines else None),
            (tuple(err["loc"]), err["type"], err["msg"]),
        )
        for err in errors
    ]
    located.sort(key=lambda item: item[0] or 0)  # stable: pydantic's order within a line
    problems, where = capped(
        located, lambda raw: _describe_error(raw[0], raw[1], raw[2], names, docs)
    )
    raise SpecError(path, problems, where) from None


def check_kind(data: Any, path: str, keys: Iterable[str], docs: str) -> None:
    """Raise SpecError when ``data`` is a mapping none of whose keys is one of ``keys``: not the
    kind of file asked for (a secret file, named by mistake or by an untrusted input), so
    nothing of it is shown, not even its keys."""
    known = set(keys)
    if isinstance(data, dict) and data and known and not data.keys() & known:
        kind = _KINDS.get(docs, "file of this kind")
        n = len(data)
        which = "its only key is not" if n == 1 else f"none of its {n:,} keys is"
        raise SpecError(
            path,
            [
                f"not a {kind}: {which} one a {kind} takes (allowed keys are listed in"
                f" {docs}); its content is not shown"
            ],
        )


#: What each docs page lists the keys of, for the refusal above.
_KINDS = {"docs/spec.md": "spec", "docs/ci.md": "budget file", "docs/hardware.md": "catalog file"}


def capped(
    items: Iterable[tuple[int | None, Hashable]],
    describe: Callable[[Any], str] = str,
    limit: int = MAX_PROBLEMS,
) -> tuple[list[str], list[int | None]]:
    """Problems and their lines for a SpecError: an identical problem on the same line once
    (aliases repeat a node's problems), at most ``limit``, then ``... and N more problems``.

    ``items`` are ``(line, raw)`` in the order to report; ``describe(raw)`` makes the problem's
    text, and is only called for the problems listed (did-you-mean hints cost time).
    """
    problems: list[str] = []
    where: list[int | None] = []
    seen_raw: set[Hashable] = set()
    seen: set[tuple[int | None, str]] = set()
    more = 0
    for line, raw in items:
        if raw in seen_raw:
            continue
        seen_raw.add(raw)
        if len(problems) >= limit:
            more += 1
            continue
        problem = describe(raw)
        if (line, problem) not in seen:
            seen.add((line, problem))
            problems.append(problem)
            where.append(line)
    if more:
        problems.append(f"... and {more:,} more problem{'s' if more > 1 else ''}")
        where.append(None)
    return problems, where


def field_names(*models: type[BaseModel]) -> set[str]:
    """Every field name of ``models`` and of the models their fields hold, for hints."""
    from pydantic import BaseModel

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


_SHOWN_KEY_CHARS = 60
#: An unknown key is echoed only when it could be a key's name: letters, digits, ``_``, ``-``
#: and ``.``, at most _SHOWN_KEY_CHARS, starting with a letter or ``_``.
_KEY_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,59}")
_MAX_MESSAGE_CHARS = 500


def _describe_error(
    loc: tuple[int | str, ...], kind: str, msg: str, keys: tuple[str, ...], docs: str
) -> str:
    field = ".".join(str(part) for part in loc)
    if len(field) > _SHOWN_KEY_CHARS * 2:
        field = field[: _SHOWN_KEY_CHARS * 2 - 3] + "..."
    msg = msg.removeprefix("Value error, ")
    if len(msg) > _MAX_MESSAGE_CHARS:  # messages name values; a value may be any length
        msg = msg[: _MAX_MESSAGE_CHARS - 3] + "..."
    if kind == "extra_forbidden":
        unknown = str(loc[-1])
        if not _KEY_NAME.fullmatch(unknown):
            # not a name a key could have: where it is (the line), never what it says
            parent = ".".join(str(part) for part in loc[:-1])
            where = f"{parent}: " if parent else ""
            return f"{where}an unknown key that is no key name (allowed keys are listed in {docs})"
        close = closest(unknown, keys, limit=1)
        hint = f"; did you mean {close[0]!r}?" if close else f"; allowed keys are listed in {docs}"
        return f"{field}: unknown key{hint}"
    if kind == "missing":
        return f"{field}: required key is missing"
    if not field:
        return msg  # model-level checks already name their fields
    return f"{field}: {msg[0].lower()}{msg[1:]}" if msg else f"{field}: invalid"


def _field_loc(
    loc: tuple[int | str, ...], msg: str, keys: tuple[str, ...]
) -> tuple[int | str, ...]:
    """Where an error points; model-level checks name their first field before a colon."""
    if loc:
        return loc
    first = msg.removeprefix("Value error, ").split(":", 1)[0].split(",", 1)[0].strip()
    return (first,) if first in keys else ()
