"""Rewrite the generated parts of the docs after a change of output: run from the repo root.

- docs/spec.md: the key table, from the ModelSpec model (``python -m kvplan.model.spec_doc``);
- every ``$ kvplan ...`` example in README.md and docs/*.md that needs no local file: its
  output block is replaced by what the command prints now (an elided block, ending in
  ``...``, keeps its length).

tests/test_docs.py fails until this has been run and the result reviewed and committed.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.model.spec_doc import main as regenerate_spec_doc

ROOT = Path(__file__).resolve().parent.parent


def _rerun(block: str) -> str:
    first, _, rest = block.partition("\n")
    if not first.startswith("$ kvplan ") or "--help" in first:
        return block
    rest, prompt, after = rest.partition("\n$ ")  # a later command keeps its own lines
    tail = prompt.lstrip("\n") + after if prompt else ""
    files = [a for a in shlex.split(first[2:]) if a.endswith((".yaml", ".yml", ".json"))]
    if any(not (ROOT / f).is_file() for f in files):
        return block
    result = CliRunner().invoke(app, shlex.split(first[2:])[1:])
    lines = [line.rstrip() for line in (result.stdout + result.stderr).strip().splitlines()]
    shown = [line for line in rest.splitlines() if line.strip()]
    if "..." in shown:
        # keep as many non-blank lines as were shown (the test compares non-blank lines)
        keep, count = 0, 0
        while keep < len(lines) and count < shown.index("..."):
            count += bool(lines[keep].strip())
            keep += 1
        lines = [*lines[:keep], "..."]
    return first + "\n" + "\n".join(lines) + "\n" + tail


def main() -> None:
    os.chdir(ROOT)
    regenerate_spec_doc()
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        new = re.sub(
            r"(```[a-z]*\n)(.*?)(```)",
            lambda m: m.group(1) + _rerun(m.group(2)) + m.group(3),
            text,
            flags=re.S,
        )
        if new != text:
            path.write_text(new, encoding="utf-8")
            print(f"rewrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
