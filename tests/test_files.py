"""The one writer of user-visible files: no overwrite without --force, no half-written file."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.errors import SpecError
from kvplan.files import write_atomic


def test_new_file_then_refusal_then_force(tmp_path: Path) -> None:
    target = tmp_path / "out.yaml"
    write_atomic(target, "a: 1\n", force=False)
    assert target.read_text() == "a: 1\n"
    with pytest.raises(SpecError) as err:
        write_atomic(target, "a: 2\n", force=False)
    assert str(err.value) == f"{target}: exists; pass --force to overwrite it"
    assert target.read_text() == "a: 1\n"
    write_atomic(target, b"a: 3\n", force=True)
    assert target.read_bytes() == b"a: 3\n"
    assert sorted(tmp_path.iterdir()) == [target]  # no temporary file left


def test_own_files_are_replaced_others_are_not(tmp_path: Path) -> None:
    ours = tmp_path / "report.xml"
    ours.write_text("<kvplan/>")
    write_atomic(ours, "<kvplan run='2'/>", force=False, ours=lambda p: "kvplan" in p.read_text())
    assert ours.read_text() == "<kvplan run='2'/>"
    theirs = tmp_path / "theirs.xml"
    theirs.write_text("<other/>")
    with pytest.raises(SpecError, match="was not written by kvplan; pass --force"):
        write_atomic(theirs, "x", force=False, ours=lambda p: "kvplan" in p.read_text())
    assert theirs.read_text() == "<other/>"


def test_a_folder_or_an_unwritable_place(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="is a folder; give a file name"):
        write_atomic(tmp_path, "x", force=True)
    with pytest.raises(SpecError, match="cannot write"):
        write_atomic(tmp_path / "missing" / "x.yaml", "x", force=False)


def test_a_failing_writer_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "chart.png"

    def fail(out: object) -> None:
        raise OSError(28, "No space left on device")

    with pytest.raises(SpecError, match="cannot write: No space left on device"):
        write_atomic(target, fail, force=False)
    assert list(tmp_path.iterdir()) == []
