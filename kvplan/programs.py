"""Running another program (git, nvidia-smi, rocm-smi) on input that may come from a pull
request: an argument list, never a shell; the run bounded in seconds and its output in bytes.

What a program prints is read by two threads, one per stream, each stopping at the byte
limit; a program that prints past it, or runs past the time limit, is killed. The caller
separates what the user typed from the program's options (``git show --end-of-options``,
and a refusal of a leading ``-``): this module never joins arguments into a command line.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO

#: stderr is kept for the first line of an error message, no more
_STDERR_BYTES = 64 * 1024
_CHUNK = 64 * 1024


@dataclass(frozen=True, slots=True)
class Finished:
    """How a program ended: its exit status (None when it was killed), what it printed (at
    most the limit), and whether it ran out of time or printed past the limit."""

    returncode: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool = False
    too_large: bool = False

    def first_line(self) -> str:
        """The first line of its stderr (else stdout), decoded leniently, at most 160
        characters: enough to say why it failed, never a dump of its output."""
        for stream in (self.stderr, self.stdout):
            text = stream.decode("utf-8", errors="replace").strip()
            if text:
                return text.splitlines()[0].strip()[:160]
        return "no output"


def run_bounded(argv: Sequence[str], *, timeout_s: float, limit_bytes: int) -> Finished:
    """Run ``argv`` (a list: no shell) with no stdin, for at most ``timeout_s`` seconds and
    ``limit_bytes`` of stdout. Raises OSError when the program cannot be started."""
    if not argv or any(not isinstance(a, str) or "\0" in a for a in argv):
        raise ValueError("an argument list of strings without NUL bytes is required")
    proc = subprocess.Popen(
        list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    out, err = bytearray(), bytearray()
    streams = (proc.stdout, proc.stderr)  # both pipes, as asked
    readers = [
        threading.Thread(target=_read, args=(streams[0], out, limit_bytes + 1), daemon=True),
        threading.Thread(target=_read, args=(streams[1], err, _STDERR_BYTES), daemon=True),
    ]
    for reader in readers:
        reader.start()
    readers[0].join(timeout_s)
    too_large = len(out) > limit_bytes
    timed_out = readers[0].is_alive() and not too_large
    if timed_out or too_large:
        proc.kill()
    try:
        returncode: int | None = proc.wait(timeout=max(0.1, timeout_s))
    except subprocess.TimeoutExpired:
        proc.kill()
        returncode = None
    for reader in readers:
        reader.join(1.0)
    for stream in streams:
        if stream is not None:
            stream.close()
    if timed_out or too_large:
        returncode = None
    return Finished(returncode, bytes(out[: limit_bytes + 1]), bytes(err), timed_out, too_large)


def _read(stream: IO[bytes] | None, into: bytearray, limit: int) -> None:
    """Copy ``stream`` into ``into`` until it ends or ``limit`` bytes are in."""
    if stream is None:
        return
    try:
        while len(into) < limit:
            chunk = stream.read1(_CHUNK) if hasattr(stream, "read1") else stream.read(_CHUNK)
            if not chunk:
                break
            into += chunk[: limit - len(into)]
    except (OSError, ValueError):  # the pipe closed under us: the program was killed
        pass
