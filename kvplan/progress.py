"""A progress line on stderr for work that takes longer than a second.

``with progress("building the model"):`` prints ``kvplan: building the model ...`` only if the
work is still running after ``delay_s`` seconds, then ``done in 2.4 s`` when it ends, so quick
runs stay silent. Nothing is printed when stderr is not a terminal (CI logs, pipes) or when the
command line asked for ``--quiet``.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

_quiet = False


def set_quiet(quiet: bool) -> None:
    """``--quiet``: no progress lines for the rest of this process."""
    global _quiet
    _quiet = quiet


def enabled(stream: TextIO | None = None) -> bool:
    """Whether progress lines go to ``stream`` (default stderr): a terminal, not quiet."""
    stream = stream if stream is not None else sys.stderr
    isatty = getattr(stream, "isatty", None)
    return not _quiet and isatty is not None and bool(isatty())


@contextmanager
def progress(message: str, *, delay_s: float = 1.0, stream: TextIO | None = None) -> Iterator[None]:
    """Say ``message`` on stderr if the block runs longer than ``delay_s`` seconds."""
    out = stream if stream is not None else sys.stderr
    if not enabled(out):
        yield
        return
    shown = threading.Event()
    start = time.monotonic()

    def show() -> None:
        out.write(f"kvplan: {message} ...\n")
        out.flush()
        shown.set()

    timer = threading.Timer(delay_s, show)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        if shown.is_set():
            out.write(f"kvplan: {message}: done in {time.monotonic() - start:.1f} s\n")
            out.flush()
