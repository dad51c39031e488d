"""A GGUF repository on the Hub, as llama.cpp's ``-hf ORG/NAME-GGUF:QUANT`` takes it: the header
of that quantization's file (each part of a split one), read by range requests, never the
tensors.

The repository's file list names the ``.gguf`` files; the quantization tag picks the one whose
name holds it as a word (``...-Q4_K_M.gguf``, ``Q4_K_M/...-00001-of-00002.gguf``). Each part's
header is read from its first ``FIRST_READ_BYTES``, four times more while it runs past what was
read (a vocabulary of 262,144 tokens is a few MiB), at most ``MAX_HEADER_READ_BYTES``. The
bytes are written to a temporary file of the part's full size (sparse: the tensors are never
fetched), and that file is imported as a local ``.gguf`` is, so every check and the weight
bytes are the same as from a download. Nothing is cached: offline, a GGUF repository is
refused with the reason.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path, PurePosixPath

from kvplan.errors import HubUnavailableError, SpecError
from kvplan.importers.gguf import GGUFImported, import_gguf
from kvplan.importers.gguf_format import read_gguf_header
from kvplan.importers.hub import Site, connect, offline

#: The first bytes asked for of a part; a longer header is asked for four times as much.
FIRST_READ_BYTES = 4 * 2**20
#: The most kvplan reads of one part's header (Gemma 3's, 262,144 tokens, is about 6 MiB).
MAX_HEADER_READ_BYTES = 64 * 2**20
_SPLIT = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$", re.IGNORECASE)
#: The parser's words for a header that goes on past the bytes read.
_SHORT = ("truncated GGUF header", "left in the file can hold")


def gguf_parts(files: set[str], tag: str) -> list[str]:
    """The ``.gguf`` files of quantization ``tag``: one file, or every part of a split one,
    first part first; [] when none holds the tag."""
    word = re.compile(rf"(?:^|[-_./]){re.escape(tag)}(?:[-_./]|$)", re.IGNORECASE)
    found = sorted(f for f in files if f.lower().endswith(".gguf") and word.search(f[:-5]))
    singles = [f for f in found if not _SPLIT.search(f)]
    if singles:
        return singles[:1]
    firsts = [f for f in found if (m := _SPLIT.search(f)) and m[1] == "00001"]
    if not firsts:
        return []
    stem = _SPLIT.sub("", firsts[0])
    return [f for f in found if _SPLIT.sub("", f) == stem]


def import_gguf_from_hub(hub_id: str, tag: str) -> tuple[GGUFImported, str]:
    """The spec of ``hub_id``'s ``.gguf`` file of quantization ``tag``, and the commit read.
    Raises HubUnavailableError (offline, unreachable, gated), HubNotFoundError, SpecError."""
    if offline():
        raise HubUnavailableError(
            f"{hub_id}:{tag}: HF_HUB_OFFLINE is set, and a GGUF repository is read from the Hub"
            " only (its header is not cached)"
        )
    _, site = connect(hub_id)
    commit, files = site.listing()
    parts = gguf_parts(files, tag)
    if not parts:
        tags = sorted({_tag_of(f) for f in files if f.lower().endswith(".gguf")} - {""})
        listed = ", ".join(tags[:12]) or "none"
        raise SpecError(
            f"{hub_id}:{tag}",
            [f"no .gguf file of quantization {tag}; the repository has: {listed}"],
        )
    with tempfile.TemporaryDirectory(prefix="kvplan-gguf-") as folder:
        for part in parts:
            _header_file(site, commit, part, Path(folder) / PurePosixPath(part).name)
        imported = import_gguf(Path(folder) / PurePosixPath(parts[0]).name)
    return imported, commit


def _header_file(site: Site, commit: str, part: str, path: Path) -> None:
    """``part``'s header bytes at ``path``, the file as long as the part (sparse)."""
    asked = FIRST_READ_BYTES
    while True:
        body, size = site.head(commit, part, asked)
        path.write_bytes(body)
        complete = len(body) < asked
        try:
            read_gguf_header(path)  # the header alone: its tensors' data is not there yet
        except SpecError as e:
            short = any(words in str(e) for words in _SHORT)
            if short and not complete and asked < MAX_HEADER_READ_BYTES:
                asked *= 4
                continue
            if short and not complete:
                limit = MAX_HEADER_READ_BYTES // 2**20
                raise SpecError(
                    site.where(part), [f"GGUF header longer than {limit} MiB"]
                ) from None
            if not e.problems[0].startswith("truncated: tensor"):
                raise SpecError(site.where(part), e.problems) from None
        break
    if size is not None and size > len(body):
        with path.open("r+b") as f:
            f.truncate(size)


def _tag_of(filename: str) -> str:
    """The quantization a ``.gguf`` file name ends with (``...-Q4_K_M.gguf`` -> ``Q4_K_M``)."""
    stem = _SPLIT.sub("", PurePosixPath(filename).name)
    stem = stem[:-5] if stem.lower().endswith(".gguf") else stem
    m = re.search(r"[-_.]((?:I?Q\d[A-Z0-9_]*|BF16|F16|F32|FP16))$", stem, re.IGNORECASE)
    return m[1] if m else ""
