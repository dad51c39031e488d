"""Rewrite the output under every ``$ kvplan ...`` example in README.md and docs/*.md with what
kvplan prints now, so that tests/test_docs.py::test_documented_output_is_real holds again after
a deliberate change of output. Read the diff before committing it: a changed figure is a
changed answer.

    python scripts/regenerate_docs.py [FILE.md ...]

Blocks holding several commands, elided listings (``...``) and examples naming files the
repository does not hold are left as they are; the script says which.
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

from typer.testing import CliRunner

from kvplan.cli import app

ROOT = Path(__file__).resolve().parent.parent
_BLOCK = re.compile(r"(```[a-z]*\n)(.*?)(```)", re.S)


def _run(command: str) -> tuple[str, int]:
    result = CliRunner().invoke(app, shlex.split(command)[1:])
    text = result.stdout + result.stderr
    return "\n".join(line.rstrip() for line in text.splitlines()).strip("\n") + "\n", int(
        result.exit_code
    )


def _session(body: str) -> str | None:
    """A block of ``$ kvplan ...`` commands, each followed by what it prints now (``$ echo $?``
    by the exit code of the command before it); None when a part cannot be redone."""
    parts = re.split(r"(?m)^(?=\$ )", body)
    out, code = [], 0
    for part in filter(None, parts):
        first, _, rest = part.partition("\n")
        if first.startswith("$ kvplan ") and "..." not in rest:
            text, code = _run(first[2:])
            out.append(f"{first}\n{text}")
        elif first == "$ echo $?":
            out.append(f"{first}\n{code}\n")
        else:
            return None
    return "".join(out)


def regenerate(path: Path) -> list[str]:
    """Rewrite ``path``'s examples in place; the examples left alone, with why."""
    skipped: list[str] = []

    def one(match: re.Match[str]) -> str:
        opening, body, closing = match.groups()
        first = body.partition("\n")[0]
        if not first.startswith("$ kvplan ") or "--help" in first:
            return match.group(0)
        files = [a for a in shlex.split(first) if a.endswith((".yaml", ".yml", ".json"))]
        if any(not (ROOT / f).is_file() for f in files):
            skipped.append(f"{path.name}: {first}: names a file of the reader's")
            return match.group(0)
        redone = _session(body)
        if redone is None:
            skipped.append(f"{path.name}: {first}: an elided listing or another command")
            return match.group(0)
        return f"{opening}{redone}{closing}"

    text = path.read_text(encoding="utf-8")
    path.write_text(_BLOCK.sub(one, text), encoding="utf-8")
    return skipped


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for path in paths:
        for line in regenerate(path):
            print(f"left as is: {line}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
