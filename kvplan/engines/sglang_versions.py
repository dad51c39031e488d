"""SGLang's release lines for the automatic ``--mem-fraction-static``, and the line for what a
user types.

Each line was read from that release's ``python/sglang/srt/server_args.py`` (the published
wheels); the pool rules themselves (cell size, ``rest``, page rounding) are the same in every
line read (``model_runner.py``'s ``profile_max_num_token``), so only the fraction varies.

- ``0.4.6`` (read: v0.4.6.post5; taken for v0.4.0-v0.4.6.x): a table by ``tp x pp`` on GPUs
  of at most 81,920 MiB: 0.88 (1), 0.87 (2+), 0.85 (4+), 0.81 (8+), 0.79 (16+); 0.88 on larger
  GPUs, then over 96 GiB raised to ``min(f + 48 GiB x (1 - f) / gpu, (gpu - 18 GiB) / gpu)``.
  Not rounded.
- ``0.4.7`` (read: v0.4.7): the same table; over 180,000 MiB 0.79; over 96 GiB the raise
  keeps 20 GiB, not 18, with a speculative algorithm.
- ``0.5.2`` (read: v0.4.8, v0.4.9, v0.4.10.post2, v0.5.0rc0, v0.5.1, v0.5.2; taken for
  v0.4.8-v0.5.2.x): ``round((gpu - reserved) / gpu, 3)`` in MiB, ``reserved`` by memory tier:
  under 35 GiB ``(2.8 + tp x pp / 10) GiB``; under 90 GiB ``(9.5 + tp x pp / 2) GiB``; under
  160 GiB ``(12 + tp x pp / 2) GiB``; else 32 GiB; + 2 GiB with a speculative algorithm
  (6 GiB for STANDALONE, v0.5.2's), + 4 GiB with DP attention.
- ``0.5.9`` (read: v0.5.3, v0.5.5, v0.5.9; taken for v0.5.3-v0.5.9.x), the default: the
  chunked-prefill and CUDA-graph reserve of
  ``kvplan.engines.sglang_memory.mem_fraction_static_auto``. v0.5.9 adds ``8 MiB x`` the
  piecewise-graph sizes only when piecewise CUDA graphs are enabled (off by default).

Read and not modelled: from v0.5.10 piecewise CUDA graphs are on by default (``8 MiB x`` their
token sizes, 1.5 GiB with an MLA backend) and EAGLE-style drafts reserve 4 GiB; v0.5.14 and
v0.5.15 reserve nothing for drafts (DeepEP 2 GiB instead); v0.5.23 moves the rule to
``arg_groups/memory_hook.py`` with a post-capture sizing mode. Those releases take the 0.5.9
line with a note saying so.

The pool (``profile_max_num_token``: ``rest`` from pre- and post-load free memory, ``// cell
size``, page rounding) reads the same in v0.4.6.post5, v0.4.10.post2, v0.5.9 and v0.5.15.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kvplan.errors import UnknownEngineError

__all__ = ["DEFAULT_LINE", "LINES", "SglangVersion", "resolve_sglang_version"]

#: Line name, first release, last release it is taken for.
_SPANS = (
    ("0.4.6", (0, 4, 0), (0, 4, 6)),
    ("0.4.7", (0, 4, 7), (0, 4, 7)),
    ("0.5.2", (0, 4, 8), (0, 5, 2)),
    ("0.5.9", (0, 5, 3), (0, 5, 9)),
)
LINES = tuple(name for name, _, _ in _SPANS)
DEFAULT_LINE = "0.5.9"


@dataclass(frozen=True, slots=True)
class SglangVersion:
    """The line used for the version asked for, and a note when the two differ."""

    asked: str
    line: str
    note: str


def resolve_sglang_version(version: str | None) -> SglangVersion:
    """The line for ``0.4.6.post5``, ``v0.5.3``, ``0.5.4rc1`` or None (the default line).

    A pre-release or ``.postN`` takes its release's line (a pre-release with a note); a
    release outside every line the nearest, with a note; other text raises
    UnknownEngineError.
    """
    if version is None:
        return SglangVersion(DEFAULT_LINE, DEFAULT_LINE, "")
    shown = version.strip()[:40]
    match = re.fullmatch(
        r"v?(\d{1,4})\.(\d{1,4})(?:\.(\d{1,4}))?(?:\.post\d+)?((?:rc|a|b)\d+)?(\.dev\d+)?"
        r"(?:\+[a-z0-9.]+)?",
        version.strip().lower(),
    )
    if match is None:
        raise UnknownEngineError(
            f"SGLang version {shown!r}: write it as SGLang prints it, e.g. 0.4.6.post5 or"
            f" 0.5.3; modelled lines: {', '.join(LINES)}"
        )
    release = (int(match.group(1)), int(match.group(2)), int(match.group(3) or 0))
    text = ".".join(str(part) for part in release)
    for line, first, last in _SPANS:
        if first <= release <= last:
            pre = match.group(4) or match.group(5)
            note = (
                f"SGLang {shown} is a pre-release of {text}; using the {line} line" if pre else ""
            )
            return SglangVersion(version, line, note)
    if release < _SPANS[0][1]:
        line, where = LINES[0], "older than"
    else:
        line, where = LINES[-1], "newer than"
    return SglangVersion(
        version,
        line,
        f"SGLang {text} is {where} the modelled lines; using the {line} line, the nearest"
        + (
            " (from 0.5.10 SGLang also reserves for piecewise CUDA graphs, and its draft"
            " reserve changes: not modelled; give mem_fraction_static for exact figures)"
            if where == "newer than"
            else ""
        ),
    )
