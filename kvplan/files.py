"""Writing files the user may own: never over an existing file without ``force``, and never a
half-written file (a temporary file in the same folder, then a rename).

Shared by ``kvplan import -o``, ``kvplan check --junit-xml`` and ``kvplan chart -o``.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from kvplan.errors import SpecError

EXISTS = "exists; pass --force to overwrite it"


def refuse_existing(
    path: str | Path, *, force: bool, ours: Callable[[Path], bool] | None = None
) -> None:
    """SpecError when ``path`` exists and may not be replaced: without ``force``, only a file
    ``ours`` recognises (kvplan's own earlier report) is replaced."""
    target = Path(path)
    if target.is_dir():
        raise SpecError(str(path), ["is a folder; give a file name"])
    if target.exists() and not force and not (ours is not None and ours(target)):
        problem = "exists and was not written by kvplan; pass --force" if ours else EXISTS
        raise SpecError(str(path), [problem])


def write_atomic(
    path: str | Path,
    content: str | bytes | Callable[[BinaryIO], None],
    *,
    force: bool,
    ours: Callable[[Path], bool] | None = None,
) -> None:
    """Write ``content`` (text as UTF-8, bytes, or a function writing to a binary file) to
    ``path``. Raises SpecError naming the file when it may not be replaced or cannot be written.
    """
    refuse_existing(path, force=force, ours=ours)
    target = Path(path)
    # Not tempfile: its files are private (0600); the usual umask should decide the mode.
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.kvplan-tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        try:
            with os.fdopen(fd, "wb") as out:
                if callable(content):
                    content(out)
                else:
                    out.write(content.encode("utf-8") if isinstance(content, str) else content)
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
    except OSError as e:
        raise SpecError(str(path), [f"cannot write: {e.strerror or e}"]) from None
