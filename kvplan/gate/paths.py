"""What a budget file may name on disk: spec files and traces inside its own folder, never a
path elsewhere (docs/ci.md, "What a budget may name"), so a budget from a pull request cannot
make kvplan read other files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kvplan.errors import UnitError
from kvplan.files import path_exists
from kvplan.units import abbreviate

#: What a budget's ``model:`` names as a file (a spec, a config.json, a GGUF)
_PATH_SUFFIXES = (".yaml", ".yml", ".json", ".gguf")


def inside(deployment: str, key: str, name: str, base: Path, what: str) -> Path:
    """``name`` resolved inside the budget's folder ``base``. An absolute path, or one that
    leaves the folder (``..``, a symbolic link out of it), raises UnitError naming the
    deployment, the key and ``what`` a budget may name there."""
    candidate = base / name
    try:
        resolved = candidate.resolve()
    except (OSError, RuntimeError):  # a loop of links
        resolved = Path("/")
    if Path(name).is_absolute() or not resolved.is_relative_to(base.resolve()):
        raise UnitError(f"deployment {deployment!r}: {key} {abbreviate(name)}: {what}")
    return resolved


def budget_model(deployment: str, name: str, base: Path) -> Any:
    """A deployment's model: a catalog name (read as a name, never as a path), or a spec file
    inside the budget's folder ``base``."""
    from kvplan.catalog.lookup import load_model

    looks_like_path = name.endswith(_PATH_SUFFIXES) or name.startswith((".", "/", "~"))
    if not (looks_like_path or path_exists(base / name)):
        return load_model(name, paths=False)
    what = (
        "a budget names catalog models, or spec files inside its own folder; copy the spec"
        " beside the budget"
    )
    return load_model(inside(deployment, "model", name, base, what))
