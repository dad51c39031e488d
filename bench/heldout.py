"""kvplan measured on released config.json files it does not record as fixtures.

Run: ``python bench/heldout.py`` (no arguments; writes nothing). For each config under
bench/heldout/configs/ (one per Hugging Face repo, none of them a bundled spec's hf_id), kvplan
imports it through the library (``kvplan.import_config``) and sizes one token at bfloat16
(``kvplan.bytes_per_token``); bench/heldout/reference.py counts the same bytes from the raw
config alone, from the families' published attention shapes. Each config is then one of:

- agree: the two counts are equal;
- differ: both answered, with different bytes (both are printed);
- refused: kvplan raised SpecError (its one-line reason is printed);
- unknown: kvplan answered but the reference cannot tell for that architecture;
- escape: kvplan raised anything but SpecError, which is a bug.

The table is followed by counts per outcome and per model_type.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import kvplan

HERE = Path(__file__).resolve().parent / "heldout"
OUTCOMES = ("agree", "differ", "refused", "unknown", "escape")


def _load_reference() -> ModuleType:
    # Loaded by path: the folder bench/heldout/ shares its name with this script.
    spec = importlib.util.spec_from_file_location("heldout_reference", HERE / "reference.py")
    if spec is None or spec.loader is None:
        raise SystemExit("bench/heldout/reference.py: cannot be loaded")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Row:
    repo: str
    model_type: str
    outcome: str
    kvplan_bytes: int | None
    reference: int | str
    detail: str


def _repo_id(path: Path) -> str:
    org, _, name = path.stem.partition("--")
    return f"{org}/{name}"


def _kvplan(path: Path) -> tuple[int | None, str, bool]:
    """kvplan's bytes per token (or None), the reason it gave, and whether it escaped."""
    try:
        spec = kvplan.import_config(path).spec
        return kvplan.bytes_per_token(spec, "bfloat16"), "", False
    except kvplan.SpecError as e:
        return None, " ".join(str(e).replace(f"{path}: ", "").split()), False
    except Exception as e:  # anything but SpecError is what this bench looks for
        return None, f"{type(e).__name__}: {' '.join(str(e).split())}", True


def measure(path: Path, ref: ModuleType) -> Row:
    config = json.loads(path.read_text())
    expected = ref.reference(config)
    got, reason, escaped = _kvplan(path)
    mtype = ref.model_type(config)
    repo = _repo_id(path)
    if escaped:
        return Row(repo, mtype, "escape", None, expected, reason)
    if got is None:
        return Row(repo, mtype, "refused", None, expected, reason)
    if isinstance(expected, str):
        return Row(repo, mtype, "unknown", got, expected, expected.removeprefix("unknown: "))
    outcome = "agree" if got == expected else "differ"
    return Row(repo, mtype, outcome, got, expected, "")


def _cell(value: int | str | None) -> str:
    if value is None:
        return "-"
    return f"{value:,}" if isinstance(value, int) else "?"


def print_table(rows: list[Row]) -> None:
    width = max(len(r.repo) for r in rows)
    print(f"{'repo':<{width}}  {'model_type':<20} {'kvplan B/tok':>13} {'reference':>13}  outcome")
    for r in rows:
        line = (
            f"{r.repo:<{width}}  {r.model_type:<20} {_cell(r.kvplan_bytes):>13} "
            f"{_cell(r.reference):>13}  {r.outcome}"
        )
        print(line + (f": {r.detail}" if r.detail else ""))


def print_summary(rows: list[Row], bundled_overlap: list[str]) -> None:
    counts = Counter(r.outcome for r in rows)
    print(f"\n{len(rows)} configs, {len({r.repo for r in rows})} distinct repo ids")
    print("  " + ", ".join(f"{o} {counts[o]}" for o in OUTCOMES))
    per_type: dict[str, Counter[str]] = defaultdict(Counter)
    for r in rows:
        per_type[r.model_type][r.outcome] += 1
    print("\nper model_type (agree/differ/refused/unknown/escape):")
    for mtype in sorted(per_type):
        c = per_type[mtype]
        print(f"  {mtype:<22} " + "/".join(str(c[o]) for o in OUTCOMES))
    for kind in ("differ", "escape"):
        listed = [r for r in rows if r.outcome == kind]
        if listed:
            print(f"\n{kind}:")
            for r in listed:
                print(
                    f"  {r.repo}: kvplan {_cell(r.kvplan_bytes)}, reference "
                    f"{_cell(r.reference)} {r.detail}".rstrip()
                )
    if bundled_overlap:
        print(
            "\nWARNING: these are bundled specs' hf_ids, not held out: "
            + ", ".join(bundled_overlap)
        )


def main() -> int:
    ref = _load_reference()
    paths = sorted((HERE / "configs").glob("*.json"))
    rows = [measure(p, ref) for p in paths]
    bundled = {s.hf_id.lower() for s in kvplan.list_models() if s.hf_id}
    overlap = sorted(r.repo for r in rows if r.repo.lower() in bundled)
    print_table(rows)
    print_summary(rows, overlap)
    return 0


if __name__ == "__main__":
    sys.exit(main())
