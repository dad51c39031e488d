"""The one reader and writer of user files: only regular files read, a bounded amount, text
sniffed from its first bytes; no overwrite without --force, no half-written file."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from kvplan.errors import SpecError
from kvplan.files import (
    head_contains,
    is_file,
    is_folder,
    path_exists,
    read_bytes,
    read_head,
    read_text,
    write_atomic,
)


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


def test_dangling_symlink_is_an_existing_file(tmp_path: Path) -> None:
    link = tmp_path / "out.yaml"
    link.symlink_to(tmp_path / "nowhere")
    with pytest.raises(SpecError, match="exists; pass --force"):
        write_atomic(link, "a: 1\n", force=False)
    assert link.is_symlink()
    assert not (tmp_path / "nowhere").exists()  # nothing written through the link
    write_atomic(link, "a: 1\n", force=True)
    assert not link.is_symlink()
    assert link.read_text() == "a: 1\n"


def test_a_link_is_never_taken_for_our_own_report(tmp_path: Path) -> None:
    ours = tmp_path / "real.xml"
    ours.write_text("<kvplan/>")
    link = tmp_path / "report.xml"
    link.symlink_to(ours)
    with pytest.raises(SpecError, match="was not written by kvplan"):
        write_atomic(link, "x", force=False, ours=lambda p: "kvplan" in p.read_text())


def test_fifo_and_device_are_never_replaced(tmp_path: Path) -> None:
    fifo = tmp_path / "report.xml"
    os.mkfifo(fifo)
    asked: list[Path] = []
    for target in (fifo, Path("/dev/null")):
        for force in (False, True):
            with pytest.raises(SpecError, match="is not a regular file"):
                write_atomic(target, "x", force=force, ours=lambda p: bool(asked.append(p)))
    assert asked == []  # never opened to look inside
    assert Path("/dev/null").is_char_device()


@pytest.mark.parametrize(
    "name", ["x" * 300, "a\0b", "", "x/" * 3000], ids=["300", "nul", "empty", "deep"]
)
def test_probes_never_raise(name: str) -> None:
    assert path_exists(name) is False
    assert is_file(name) is False
    assert is_folder(name) is False


def test_read_text_refuses_what_is_not_a_text_file(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"name: x\n\0")
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"a: 1\nb: \xe9\n")
    cases = [
        (fifo, "cannot read: not a regular file (a FIFO, a device or a socket)"),
        (Path("/dev/zero"), "cannot read: not a regular file"),
        (tmp_path, "cannot read: is a folder, not a file"),
        (tmp_path / "missing", "cannot read: No such file or directory"),
        (tmp_path / ("x" * 300), "cannot read: File name too long"),
        (binary, "cannot read: binary content, not UTF-8 text"),
        (latin, "cannot read: not UTF-8 text"),
    ]
    for path, problem in cases:
        with pytest.raises(SpecError) as info:
            read_text(path)
        assert str(info.value).startswith(str(path)), path
        assert problem in str(info.value), path
    with pytest.raises(SpecError) as info:
        read_text(latin)
    assert info.value.lines == (2,)  # the bad byte is on line 2


def test_read_text_caps_what_it_reads(tmp_path: Path) -> None:
    big = tmp_path / "big.log"
    with big.open("wb") as f:
        f.write(b"line one\n" * 1000)  # 9,000 bytes of text, then a 1 GiB hole of NULs
        f.truncate(2**30)
    started = time.perf_counter()
    with pytest.raises(SpecError, match="larger than 64 MiB, the most kvplan reads"):
        read_text(big)
    text = read_text(big, limit_bytes=9000, truncate=True)
    assert text == "line one\n" * 1000
    assert time.perf_counter() - started < 2
    assert read_text(big, limit_bytes=4, truncate=True) == "line"


def test_read_text_replaces_invalid_utf8_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    path.write_bytes(b"ok \xff end")
    assert read_text(path, errors="replace") == "ok \ufffd end"


def test_head_and_slice_reads(tmp_path: Path) -> None:
    path = tmp_path / "x.bin"
    path.write_bytes(bytes(range(16)))
    assert read_head(path, 4) == bytes([0, 1, 2, 3])
    assert read_bytes(path, offset=14, num_bytes=8) == bytes([14, 15])
    with pytest.raises(SpecError, match="not a regular file"):
        read_head("/dev/zero", 4)
    report = tmp_path / "r.xml"
    report.write_text('<?xml version="1.0"?>\n<testsuites name="kvplan check">' + "x" * 10**6)
    assert head_contains(report, '<testsuites name="kvplan check')
    assert not head_contains(tmp_path / "missing", "x")
    assert not head_contains("/dev/zero", "x")
