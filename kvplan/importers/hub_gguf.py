"""A GGUF repository on the Hub, as llama.cpp's ``-hf ORG/NAME-GGUF:QUANT`` takes it: the header
of that quantization's file (each part of a split one), read by range requests, never the
tensors.

The repository's file list names the ``.gguf`` files; the quantization tag picks the one whose
name holds it as a word (``...-Q4_K_M.gguf``, ``Q4_K_M/...-00001-of-00002.gguf``). Each part's
header is read from its first ``FIRST_READ_BYTES``, four times more while it runs past what was
read (a vocabulary of 262,144 tokens is a few MiB), at most ``MAX_HEADER_READ_BYTES``. The
bytes are written to a temporary file of the part's full size (sparse: the tensors are never
fetched), and that file is imported as a local ``.gguf`` is, so every check and the weight
bytes are the same as from a download.

The header bytes read are kept under kvplan's cache folder (``hub-gguf``, beside the weight
counts of ``kvplan.importers.hub_weights``): each part's bytes by commit, and for the revision and
tag asked for, a small manifest naming the commit, the parts and their sizes. Offline
(HF_HUB_OFFLINE) the manifest and the kept bytes answer as the Hub did; both are read as
untrusted input (a manifest of other fields or types, or bytes past the header limit, are a
cache miss), and the bytes pass through the same GGUF checks as any file.
"""

from __future__ import annotations

import contextlib
import json
import re
import tempfile
from pathlib import Path, PurePosixPath

from kvplan.errors import HubUnavailableError, KvplanError, SpecError
from kvplan.files import read_bytes, read_text, write_atomic
from kvplan.importers.gguf import GGUFImported, import_gguf
from kvplan.importers.gguf_format import read_gguf_header
from kvplan.importers.hub import Site, connect, offline, parse_hub_id
from kvplan.importers.hub_weights import kept_folder

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


def import_gguf_from_hub(hub_id: str, tag: str) -> tuple[GGUFImported, str, bool]:
    """The spec of ``hub_id``'s ``.gguf`` file of quantization ``tag``, the commit read, and
    whether it came from the kept headers (HF_HUB_OFFLINE). Raises HubUnavailableError
    (offline, unreachable, gated), HubNotFoundError, SpecError."""
    if offline():
        kept = _load(hub_id, tag)
        if kept is None:
            raise HubUnavailableError(
                f"{hub_id}:{tag}: HF_HUB_OFFLINE is set, and this GGUF repository's header is"
                " not in the cache (read it once online)"
            )
        return (*kept, True)
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
        spans = []
        for part in parts:
            path = Path(folder) / PurePosixPath(part).name
            spans.append((part, *_header_file(site, commit, part, path)))
        imported = import_gguf(Path(folder) / PurePosixPath(parts[0]).name)
        _keep(hub_id, tag, commit, spans, Path(folder))
    return imported, commit, False


# --- the kept headers ----------------------------------------------------------------------

_COMMIT = re.compile(r"[0-9a-f]{40}")
_MAX_MANIFEST_BYTES = 64 * 2**10
_MAX_PARTS = 64


def _manifest_path(hub_id: str, tag: str) -> Path:
    repo_id, revision = parse_hub_id(hub_id)
    asked = (revision or "main").replace("/", "--")
    return kept_folder("hub-gguf") / repo_id.replace("/", "--") / f"{asked}--{tag.upper()}.json"


def _part_path(hub_id: str, commit: str, part: str) -> Path:
    repo_id, _ = parse_hub_id(hub_id)
    return kept_folder("hub-gguf") / repo_id.replace("/", "--") / commit / part.replace("/", "--")


def _keep(
    hub_id: str, tag: str, commit: str, parts: list[tuple[str, int, int]], read: Path
) -> None:
    """Keep the header bytes read (``(part, size, bytes read)``, the bytes in folder ``read``)
    and the manifest; a cache that cannot be written is skipped (the answer does not depend on
    it)."""
    if not _COMMIT.fullmatch(commit):
        return
    with contextlib.suppress(OSError, KvplanError):
        for part, _, num_read in parts:
            target = _part_path(hub_id, commit, part)
            target.parent.mkdir(parents=True, exist_ok=True)
            head = read_bytes(read / PurePosixPath(part).name, offset=0, num_bytes=num_read)
            write_atomic(target, head, force=True)
        manifest = {"commit": commit, "parts": [[part, size] for part, size, _ in parts]}
        write_atomic(_manifest_path(hub_id, tag), json.dumps(manifest), force=True)


def _load(hub_id: str, tag: str) -> tuple[GGUFImported, str] | None:
    """The spec from the kept header bytes of ``hub_id``'s ``tag`` file, or None (none kept,
    or not what kvplan writes)."""
    try:
        data = json.loads(read_text(_manifest_path(hub_id, tag), limit_bytes=_MAX_MANIFEST_BYTES))
    except (KvplanError, OSError, ValueError, RecursionError):
        return None
    parts = _checked(data)
    if parts is None:
        return None
    commit = data["commit"]
    with tempfile.TemporaryDirectory(prefix="kvplan-gguf-") as folder:
        for part, size in parts:
            kept = _part_path(hub_id, commit, part)
            try:
                head = read_bytes(kept, offset=0, num_bytes=MAX_HEADER_READ_BYTES + 1)
            except (KvplanError, OSError):
                return None
            if len(head) > min(size, MAX_HEADER_READ_BYTES):
                return None
            path = Path(folder) / PurePosixPath(part).name
            path.write_bytes(head)
            with path.open("r+b") as f:
                f.truncate(size)
        return import_gguf(Path(folder) / PurePosixPath(parts[0][0]).name), commit


def _checked(data: object) -> list[tuple[str, int]] | None:
    """The manifest's (part, size) list when it is exactly what ``_keep`` writes."""
    if not isinstance(data, dict) or set(data) != {"commit", "parts"}:
        return None
    commit, parts = data["commit"], data["parts"]
    if not isinstance(commit, str) or not _COMMIT.fullmatch(commit):
        return None
    if not isinstance(parts, list) or not 1 <= len(parts) <= _MAX_PARTS:
        return None
    out = []
    for entry in parts:
        ok = (
            isinstance(entry, list)
            and len(entry) == 2
            and isinstance(entry[0], str)
            and re.fullmatch(r"[A-Za-z0-9._/-]{1,200}\.gguf", entry[0], re.IGNORECASE)
            and ".." not in entry[0]
            and type(entry[1]) is int
            and 0 < entry[1] < 2**50
        )
        if not ok:
            return None
        out.append((entry[0], entry[1]))
    return out


def _header_file(site: Site, commit: str, part: str, path: Path) -> tuple[int, int]:
    """``part``'s header bytes at ``path``, the file as long as the part (sparse); returns
    the part's size and the bytes read."""
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
    return max(size or 0, len(body)), len(body)


def _tag_of(filename: str) -> str:
    """The quantization a ``.gguf`` file name ends with (``...-Q4_K_M.gguf`` -> ``Q4_K_M``)."""
    stem = _SPLIT.sub("", PurePosixPath(filename).name)
    stem = stem[:-5] if stem.lower().endswith(".gguf") else stem
    m = re.search(r"[-_.]((?:I?Q\d[A-Z0-9_]*|BF16|F16|F32|FP16))$", stem, re.IGNORECASE)
    return m[1] if m else ""
