"""Reading and writing the files a user names, safely.

Reading (specs, budget files, logs, length mixes, config.json, safetensors headers): only a
regular file is opened, so a FIFO, ``/dev/zero`` or a folder is refused at once instead of
hanging or filling memory; at most ``TEXT_LIMIT_BYTES`` are read; binary content is refused
from its first bytes (a NUL byte), and text must be UTF-8. Every refusal is one SpecError line
naming the file.

Writing (``kvplan import -o``, ``kvplan check --junit-xml``, ``kvplan chart -o``): never over
an existing file (a dangling symbolic link included) without ``force``, and never a
half-written file (a temporary file in the same folder, then a rename).
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from kvplan.errors import ArgumentTypeError, SpecError

EXISTS = "exists; pass --force to overwrite it"

#: The most bytes read from a text input (a spec, a budget file, a log, a length mix, a
#: config.json): far more than any real one, small enough to hold in memory.
TEXT_LIMIT_BYTES = 64 * 2**20
#: Bytes looked at to tell text from binary content.
_SNIFF_BYTES = 8192
_NOT_REGULAR = "not a regular file (a FIFO, a device or a socket); give a file"
_NOT_REGULAR_WRITE = "not a regular file (a FIFO, a device or a socket)"


def _is_path(path: object) -> bool:
    """A str or a path object: never an int, which ``os`` would read as an open descriptor."""
    return isinstance(path, str | os.PathLike) and isinstance(os.fspath(path), str)


def path_exists(path: str | Path) -> bool:
    """Whether ``path`` names anything (a dangling link counts); never raises, so a name too
    long for the file system, or one with a NUL byte, is simply absent."""
    if not _is_path(path):
        return False
    try:
        return os.path.lexists(path)
    except (OSError, ValueError):
        return False


def is_file(path: str | Path) -> bool:
    """Whether ``path`` is a regular file (following links); never raises."""
    if not _is_path(path):
        return False
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def is_folder(path: str | Path) -> bool:
    """Whether ``path`` is a folder (following links); never raises."""
    if not _is_path(path):
        return False
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def _cannot(path: str | Path, e: OSError | ValueError) -> SpecError:
    detail = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
    return SpecError(str(path), [f"cannot read: {detail}"])


def _open_regular(path: str | Path) -> int:
    """A read-only descriptor of ``path``, which must be a regular file. Raises SpecError, or
    ArgumentTypeError (a TypeError) for a ``path`` that is no str or path object."""
    if not _is_path(path):
        shown_type = type(path).__name__
        raise ArgumentTypeError(
            f"path: expected a path (a str or a pathlib.Path), got {shown_type}"
        )
    shown = str(path)
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError) as e:
        raise _cannot(path, e) from None
    if stat.S_ISDIR(mode):
        raise SpecError(shown, ["cannot read: is a folder, not a file"])
    if not stat.S_ISREG(mode):
        raise SpecError(shown, [f"cannot read: {_NOT_REGULAR}"])
    # O_NONBLOCK: should the path become a FIFO between stat and open, open still returns.
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_NOCTTY", 0))
    except (OSError, ValueError) as e:
        raise _cannot(path, e) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SpecError(shown, [f"cannot read: {_NOT_REGULAR}"])
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_head(path: str | Path, num_bytes: int) -> bytes:
    """The first ``num_bytes`` bytes of the regular file ``path`` (fewer when it is shorter).
    Raises SpecError naming the file when it is not a regular file or cannot be read."""
    fd = _open_regular(path)
    try:
        with os.fdopen(fd, "rb") as f:
            return f.read(num_bytes)
    except OSError as e:
        raise _cannot(path, e) from None


def iter_lines(
    path: str | Path, *, max_line_bytes: int, max_bytes: int
) -> Iterator[tuple[int, bytes]]:
    """``(line number, bytes)`` of each line of the regular file ``path``, read as a stream
    (one line in memory at a time). Raises SpecError naming the file for one larger than
    ``max_bytes``, and naming the line for a line longer than ``max_line_bytes``."""
    shown = str(path)
    fd = _open_regular(path)
    try:
        with os.fdopen(fd, "rb") as f:
            if os.fstat(f.fileno()).st_size > max_bytes:
                limit = max_bytes // 2**20
                raise SpecError(shown, [f"cannot read: larger than {limit:,} MiB, the most read"])
            number = 0
            while line := f.readline(max_line_bytes + 1):
                number += 1
                if len(line) > max_line_bytes:
                    raise SpecError(
                        f"{shown}:{number}",
                        [f"a line longer than {max_line_bytes // 2**20} MiB, the most read"],
                    )
                yield number, line
    except OSError as e:
        raise _cannot(path, e) from None


def read_bytes(path: str | Path, *, offset: int, num_bytes: int) -> bytes:
    """``num_bytes`` bytes of the regular file ``path`` from ``offset`` (fewer at its end)."""
    fd = _open_regular(path)
    try:
        with os.fdopen(fd, "rb") as f:
            f.seek(offset)
            return f.read(num_bytes)
    except OSError as e:
        raise _cannot(path, e) from None


def read_text(
    path: str | Path,
    *,
    limit_bytes: int = TEXT_LIMIT_BYTES,
    truncate: bool = False,
    errors: str = "strict",
) -> str:
    """The UTF-8 text of the regular file ``path``.

    A file over ``limit_bytes`` is refused, or with ``truncate`` read up to that many bytes
    (a long log, whose start-up lines come first). ``errors="replace"`` reads invalid UTF-8
    as U+FFFD instead of refusing it. A NUL byte in the first 8 KiB means binary content: refused
    without reading further. Raises SpecError naming the file.
    """
    shown = str(path)
    fd = _open_regular(path)
    try:
        with os.fdopen(fd, "rb") as f:
            head = f.read(_SNIFF_BYTES)
            if b"\0" in head:
                raise SpecError(shown, ["cannot read: binary content, not UTF-8 text"])
            size = os.fstat(f.fileno()).st_size
            if size > limit_bytes and not truncate:
                raise SpecError(
                    shown,
                    [f"cannot read: larger than {limit_bytes // 2**20} MiB, the most kvplan reads"],
                )
            raw = head + f.read(max(0, limit_bytes - len(head)) + (0 if truncate else 1))
    except OSError as e:
        raise _cannot(path, e) from None
    if len(raw) > limit_bytes:
        if not truncate:  # grew while being read
            raise SpecError(
                shown,
                [f"cannot read: larger than {limit_bytes // 2**20} MiB, the most kvplan reads"],
            )
        raw = raw[:limit_bytes]
    try:
        return raw.decode("utf-8", errors=errors)
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise SpecError(shown, ["cannot read: not UTF-8 text"], [line]) from None


def refuse_existing(
    path: str | Path, *, force: bool, ours: Callable[[Path], bool] | None = None
) -> None:
    """SpecError when ``path`` exists and may not be replaced: without ``force``, only a file
    ``ours`` recognises (kvplan's own earlier report) is replaced. A symbolic link counts as
    existing even when it points nowhere, and ``ours`` is asked about regular files only. A
    FIFO, a device or a socket is never replaced, even with ``force``."""
    target = Path(path)
    if is_folder(target):
        raise SpecError(str(path), ["is a folder; give a file name"])
    if not path_exists(target):
        return
    try:
        mode: int | None = os.stat(target).st_mode
    except (OSError, ValueError):
        mode = None  # a dangling link
    if mode is not None and not stat.S_ISREG(mode):
        raise SpecError(str(path), [f"exists and is {_NOT_REGULAR_WRITE}; give a file name"])
    if force:
        return
    if ours is not None and mode is not None and not os.path.islink(target) and _ours(ours, target):
        return
    problem = "exists and was not written by kvplan; pass --force" if ours else EXISTS
    raise SpecError(str(path), [problem])


def _ours(ours: Callable[[Path], bool], target: Path) -> bool:
    try:
        return ours(target)
    except (OSError, SpecError, UnicodeDecodeError):
        return False


def head_contains(path: str | Path, marker: str, num_bytes: int = 400) -> bool:
    """Whether the first ``num_bytes`` bytes of the regular file ``path`` hold ``marker``
    (a report kvplan wrote, recognised by its first line); never raises."""
    try:
        head = read_head(path, num_bytes)
    except SpecError:
        return False
    return marker in head.decode("utf-8", errors="replace")


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
    except (OSError, ValueError) as e:
        detail = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise SpecError(str(path), [f"cannot write: {detail}"]) from None


def bundled_dir(name: str) -> Path:
    """A data folder shipped with kvplan (``model_specs``, ``gpu_specs``): inside the installed
    package, or the source checkout's beside the package."""
    package = Path(__file__).parent
    packaged = package / name
    return packaged if packaged.is_dir() else package.parent / name
