"""The Hugging Face Hub: ``config.json``, the safetensors index and headers, never the weights.

``--hub ORG/NAME[@REVISION]`` makes its few HTTP requests itself (``hub_http``), so that each
has a wall-clock deadline and each body a cap, and none is retried:

1. the file list and commit of the revision (``/api/models/ORG/NAME/revision/REV``);
2. ``config.json``, and ``model.safetensors.index.json`` when listed, at that commit, stored
   in the Hugging Face cache as huggingface_hub stores them, so HF_HUB_OFFLINE finds them;
3. each safetensors file's header: its first 100,000 bytes by a range request, then the rest
   of a longer header, at most ``_MAX_WORKERS`` files at a time.

The headers are then checked and counted by ``safetensors.weights_from_headers``, the function
a local folder's headers go through. huggingface_hub supplies the rest: ``HF_ENDPOINT``, the
token (``HF_TOKEN``, else its ``get_token``), the cache folder (``HF_HOME``, ``HF_HUB_CACHE``)
and offline mode (``HF_HUB_OFFLINE``: from the cache alone, no request).

Limits (the table in docs/importers.md#the-hub): each request ``TIMEOUT_S`` seconds in all,
``HF_HUB_ETAG_TIMEOUT`` (the file list) and ``HF_HUB_DOWNLOAD_TIMEOUT`` (files and headers)
may set a whole number of seconds from 1 to ``MAX_TIMEOUT_S``, anything else is refused
(huggingface_hub itself reads them as integers and fails at its import on anything else); all
requests together ``TOTAL_S``; the file list ``LISTING_LIMIT_BYTES``; config.json and the
index ``FILE_LIMIT_BYTES``, the local reader's limit; one header ``HEADER_LIMIT_BYTES``, the
safetensors cap the local reader applies, all headers together ``HEADERS_LIMIT_BYTES``; at most
``MAX_SHARDS`` files named by the index.

Errors, one line each. Exit 3 (HubUnavailableError): huggingface_hub missing, the Hub
unreachable, too slow or refusing (gated, HTTP 401, 403, 5xx), its file list malformed or too
large, the cache not writable. Exit 2: an id that is malformed or a timeout setting out of
range (UnitError), a repository or revision the Hub does not have (HubNotFoundError, any 404
on the file list), a file that is not in it (any 404 on a file) or that kvplan refuses to read
(too large, too many shards, a malformed header: SpecError, as from a folder).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import secrets
import struct
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from kvplan.errors import HubNotFoundError, HubUnavailableError, SpecError, UnitError
from kvplan.files import TEXT_LIMIT_BYTES, write_atomic
from kvplan.importers import hub_weights, safetensors
from kvplan.importers.hub_http import Answer, BodyTooLarge, RequestFailed, get
from kvplan.importers.reading import CONFIG_NAME, read_json
from kvplan.importers.safetensors import INDEX_NAME, WeightCount, weights_from_headers
from kvplan.units import abbreviate

if TYPE_CHECKING:
    from kvplan.importers.config import Imported

HUB_HINT = (
    "--hub needs huggingface_hub, which kvplan does not install by default:"
    " pip install 'kvplan[hub]'"
)
GATED = "gated model: accept its licence on the Hub and set HF_TOKEN"

#: Seconds of wall clock one request may take, redirects included: a few, never a backoff.
TIMEOUT_S = 5
#: The most seconds HF_HUB_ETAG_TIMEOUT or HF_HUB_DOWNLOAD_TIMEOUT may ask for.
MAX_TIMEOUT_S = 60
#: Seconds all the requests of one ``--hub`` may take together.
TOTAL_S = 120
#: The file list of one revision: DeepSeek-V3's (170 files) is about 10 KB.
LISTING_LIMIT_BYTES = 8 * 2**20
#: config.json and the index, as from a folder (``kvplan.files.TEXT_LIMIT_BYTES``, 64 MiB).
FILE_LIMIT_BYTES = TEXT_LIMIT_BYTES
#: One safetensors header, as the local reader allows (the format's own cap is 100 MB).
HEADER_LIMIT_BYTES = safetensors.HEADER_LIMIT_BYTES
#: All the headers of one checkpoint together: DeepSeek-V3's 163 hold about 10 MB.
HEADERS_LIMIT_BYTES = 100 * 2**20
#: A LoRA adapter's own file: it names the base model whose cache it is served with.
ADAPTER_NAME = "adapter_config.json"
#: Files an index may name (DeepSeek-V3 has 163); more is refused before any is read.
MAX_SHARDS = 1024
#: Headers read at once.
_MAX_WORKERS = 8
#: The first range request of a header: most headers fit, a longer one takes a second request.
_FIRST_READ_BYTES = 100_000
_SINGLE_FILE = "model.safetensors"
_DEFAULT_ENDPOINT = "https://huggingface.co"
_TIMEOUT_VARIABLES = ("HF_HUB_ETAG_TIMEOUT", "HF_HUB_DOWNLOAD_TIMEOUT")
#: The Hub's own rule for a repository id: two names of letters, digits, ``-``, ``_``, ``.``.
_REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
#: A branch, a tag, ``refs/pr/N`` or a commit sha.
_REVISION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,254}")
_SHARD = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,254}\.safetensors")
_COMMIT = re.compile(r"[0-9a-f]{40}")
_SECONDS = re.compile(r"\s*[0-9]{1,9}\s*")
_TOKEN = re.compile(r"[\x21-\x7e]{1,4096}")
_TRUE = ("1", "ON", "YES", "TRUE")


@dataclass(frozen=True, slots=True)
class HubCheckpoint:
    """A checkpoint on the Hub, as far as kvplan reads it.

    ``folder`` is the cache snapshot holding config.json (and the index); ``weights`` the count
    from the safetensors headers on the Hub, None offline or when the repo has no safetensors.
    """

    repo_id: str
    revision: str
    folder: Path
    weights: WeightCount | None
    from_cache: bool
    #: For a LoRA adapter (adapter_config.json, no config.json): the base model it names.
    adapter_base: str | None = None


def parse_hub_id(text: str) -> tuple[str, str | None]:
    """``ORG/NAME`` or ``ORG/NAME@REVISION`` -> (repo id, revision or None). UnitError else."""
    repo, at, revision = text.strip().partition("@")
    ok = _REPO_ID.fullmatch(repo) is not None and ".." not in repo and "--" not in repo
    if not ok or (at and (not _REVISION.fullmatch(revision) or ".." in revision)):
        shown = text if len(text) <= 80 else text[:77] + "..."
        raise UnitError(f"--hub: expected ORG/NAME or ORG/NAME@REVISION, got {shown!r}")
    return repo, revision or None


def import_from_hub(hub_id: str, name: str | None = None) -> Imported:
    """The spec of ``ORG/NAME[@REVISION]`` on the Hub, as ``kvplan import`` makes it from a
    folder, with the parameter count from the safetensors headers on the Hub."""
    from kvplan.importers.config import import_config

    checkpoint = fetch_from_hub(hub_id)
    return import_config(
        checkpoint.folder, name, hf_id=checkpoint.repo_id, weights=checkpoint.weights
    )


def download_from_hub(repo_id: str, revision: str | None = None) -> Path:
    """The cache folder holding ``config.json`` (and the index) of ``repo_id`` at
    ``revision``; see ``fetch_from_hub``."""
    return fetch_from_hub(repo_id if revision is None else f"{repo_id}@{revision}").folder


def fetch_from_hub(hub_id: str) -> HubCheckpoint:
    """``config.json`` and the index into the Hugging Face cache, and the safetensors headers
    counted; never the weights. With HF_HUB_OFFLINE, or when the Hub cannot be reached, from
    the cache alone. Raises HubUnavailableError, HubNotFoundError, SpecError or UnitError."""
    hub, site = connect(hub_id)
    repo_id, revision = site.repo_id, site.revision
    if hub.constants.is_offline_mode() or offline():
        return _from_cache(hub, hub_id, repo_id, revision, "HF_HUB_OFFLINE is set")
    try:
        commit, files = site.listing()
    except RequestFailed as e:
        why = f"cannot reach {site.endpoint} ({e.reason})"
        return _from_cache(hub, hub_id, repo_id, revision, why)
    cache = _Cache(hub_id, Path(hub.constants.HF_HUB_CACHE), repo_id, revision, commit)
    if CONFIG_NAME not in files and ADAPTER_NAME in files:
        adapter = cache.store(ADAPTER_NAME, site.file(commit, ADAPTER_NAME))
        base = adapter_base(adapter, site.where(ADAPTER_NAME))
        return HubCheckpoint(repo_id, revision, adapter.parent, None, False, base)
    config_path = cache.store(CONFIG_NAME, site.file(commit, CONFIG_NAME))
    shards = []
    if INDEX_NAME in files:
        index = cache.store(INDEX_NAME, site.file(commit, INDEX_NAME))
        shards = _shards(index, site.where(INDEX_NAME))
    if not shards and _SINGLE_FILE in files:
        shards = [_SINGLE_FILE]
    weights = None
    if shards:
        headers = _read_headers(site, commit, shards)
        try:
            weights = weights_from_headers(headers, read_json(config_path), " on the Hub")
        except SpecError as e:
            raise SpecError(e.path or f"{repo_id}@{revision}", e.problems) from None
        hub_weights.save(repo_id, commit, weights)
    return HubCheckpoint(repo_id, revision, config_path.parent, weights, from_cache=False)


def connect(hub_id: str) -> tuple[ModuleType, Site]:
    """The client module and the bounded requests of ``hub_id``, its settings checked first:
    huggingface_hub fails at its import on a timeout that is no integer, or an endpoint
    urlsplit refuses."""
    repo_id, asked = parse_hub_id(hub_id)
    list_timeout_s, file_timeout_s = (_timeout_s(name) for name in _TIMEOUT_VARIABLES)
    endpoint = _endpoint()
    hub = _client(hub_id)
    site = Site(
        hub_id,
        repo_id,
        asked or "main",
        endpoint or str(hub.constants.ENDPOINT).rstrip("/") or _DEFAULT_ENDPOINT,
        _request_headers(hub, hub_id),
        list_timeout_s=list_timeout_s,
        file_timeout_s=file_timeout_s,
        deadline=time.monotonic() + TOTAL_S,
    )
    return hub, site


def _client(hub_id: str) -> ModuleType:
    try:
        import huggingface_hub
        import huggingface_hub.constants
    except ImportError:
        raise HubUnavailableError(HUB_HINT) from None
    except Exception as e:  # its constants read the environment at import
        raise HubUnavailableError(
            f"--hub {hub_id}: huggingface_hub cannot start here ({_short(e)})"
        ) from None
    return huggingface_hub


def _timeout_s(name: str) -> float:
    """The seconds the environment variable ``name`` sets, else ``TIMEOUT_S``; UnitError for
    anything but a whole number from 1 to MAX_TIMEOUT_S (``1e9``, ``inf``, ``nan``, ``2.5``)."""
    text = os.environ.get(name)
    if text is None:
        return float(TIMEOUT_S)
    if not _SECONDS.fullmatch(text) or not 1 <= int(text) <= MAX_TIMEOUT_S:
        raise UnitError(
            f"{name}: must be a whole number of seconds from 1 to {MAX_TIMEOUT_S},"
            f" got {abbreviate(text)}"
        )
    return float(int(text))


def _endpoint() -> str | None:
    """HF_ENDPOINT checked to be an http(s) address; None when unset (the client's default)."""
    text = os.environ.get("HF_ENDPOINT", "").strip().rstrip("/")
    if not text:
        return None
    try:
        parts = urlsplit(text)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port != 0
        ok = ok and not parts.query and not parts.fragment
    except ValueError:  # a port that is no number, a broken IPv6 address
        ok = False
    if not ok:
        shown = abbreviate(text)
        raise UnitError(f"HF_ENDPOINT: expected an http:// or https:// address, got {shown}")
    return text


def _request_headers(hub: ModuleType, hub_id: str) -> dict[str, str]:
    """User-Agent, and Authorization with the token: HF_TOKEN, else the client's own lookup
    (the file ``hf auth login`` writes); none with HF_HUB_DISABLE_IMPLICIT_TOKEN."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        ours = version("kvplan")
    except PackageNotFoundError:
        ours = "unknown"
    agent = f"kvplan/{ours}; hf_hub/{hub.__version__}; python/{platform.python_version()}"
    headers = {"User-Agent": agent}
    if getattr(hub.constants, "HF_HUB_DISABLE_IMPLICIT_TOKEN", False):
        return headers
    token = os.environ.get("HF_TOKEN", "").strip()
    if not token:
        try:
            token = str(hub.get_token() or "").strip()
        except Exception as e:  # its OIDC exchange, when asked for, raises on failure
            raise HubUnavailableError(
                f"--hub {hub_id}: cannot read the Hugging Face token ({type(e).__name__})"
            ) from None
    if token and not _TOKEN.fullmatch(token):
        raise UnitError("HF_TOKEN: the token must be printable ASCII without spaces")
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


@dataclass(frozen=True, slots=True)
class Site:
    """The Hub for one ``--hub``: where it is, what each request sends, how long each may take
    and when all of them must be done (a ``time.monotonic()`` value)."""

    hub_id: str
    repo_id: str
    revision: str
    endpoint: str
    headers: dict[str, str]
    list_timeout_s: float
    file_timeout_s: float
    deadline: float
    #: Each file's size, as range answers state it.
    sizes: dict[str, int] = field(default_factory=dict)

    def where(self, filename: str) -> str:
        """A file of the checkpoint as errors name it: ``acme/x@main/config.json``."""
        return f"{self.repo_id}@{self.revision}/{filename}"

    def listing(self) -> tuple[str, set[str]]:
        """(commit sha, file names) of the revision. RequestFailed when no answer came."""
        revision = quote(self.revision, safe="")
        url = f"{self.endpoint}/api/models/{self.repo_id}/revision/{revision}"
        try:
            answer = get(
                f"{url}?expand=sha&expand=siblings",
                self.headers,
                timeout_s=self.list_timeout_s,
                deadline=self.deadline,
                limit_bytes=LISTING_LIMIT_BYTES,
            )
        except BodyTooLarge:
            raise HubUnavailableError(
                f"--hub {self.hub_id}: the Hub's file list is larger than"
                f" {LISTING_LIMIT_BYTES // 2**20} MiB, the most kvplan reads"
            ) from None
        if not 200 <= answer.status < 300:
            raise self._refused(answer, None)
        return _listed(answer.body, self.hub_id)

    def file(self, commit: str, filename: str) -> bytes:
        """The whole of a small file (config.json, the index) at ``commit``."""
        try:
            return self._get(commit, filename, FILE_LIMIT_BYTES).body
        except BodyTooLarge:
            limit_mib = FILE_LIMIT_BYTES // 2**20
            problem = f"cannot read: larger than {limit_mib} MiB, the most kvplan reads"
            raise SpecError(self.where(filename), [problem]) from None

    def header(self, commit: str, shard: str, budget: _Budget) -> Any:
        """The JSON header of a safetensors file (None when it is no JSON, for check_header
        to refuse); SpecError for a length the format or the budget refuses."""
        where = self.where(shard)
        head = self._range(commit, shard, 0, _FIRST_READ_BYTES - 1)
        if len(head) < 8:
            raise SpecError(where, ["not a safetensors file: shorter than 8 bytes"])
        (length,) = struct.unpack("<Q", head[:8])
        if length > HEADER_LIMIT_BYTES:
            raise SpecError(where, [f"not a safetensors file: header of {length:,} B"])
        budget.take(length)
        raw = head[8 : 8 + length]
        if len(raw) < length and len(head) == _FIRST_READ_BYTES:  # a longer header
            raw += self._range(commit, shard, _FIRST_READ_BYTES, 8 + length - 1)
        if len(raw) < length:  # the file ends inside its header
            return None
        return safetensors.parse_header(raw)

    def head(self, commit: str, filename: str, num_bytes: int) -> tuple[bytes, int | None]:
        """A file's first ``num_bytes`` (or all of a shorter one), and its size when the
        answer says it (``Content-Range: bytes 0-N/SIZE``)."""
        return self._range(commit, filename, 0, num_bytes - 1), self.sizes.get(filename)

    def _range(self, commit: str, filename: str, start: int, end: int) -> bytes:
        """Bytes ``start`` to ``end`` of a file; a server that ignores the range sends the
        file from its start, read only as far as ``end``."""
        answer = self._get(
            commit, filename, end + 1, extra={"Range": f"bytes={start}-{end}"}, truncate=True
        )
        if answer.status != 206:
            return answer.body[start : end + 1]
        span = answer.headers.get("content-range", "").removeprefix("bytes ")
        size = span.rpartition("/")[2]
        if size.isascii() and size.isdigit() and len(size) < 20:
            self.sizes[filename] = int(size)
        first = span.partition("-")[0]
        if first.strip() != str(start):
            raise HubUnavailableError(
                f"--hub {self.hub_id}: the Hub answered a range request for {filename}"
                " with other bytes"
            )
        return answer.body[: end - start + 1]

    def _get(
        self,
        commit: str,
        filename: str,
        limit_bytes: int,
        extra: dict[str, str] | None = None,
        truncate: bool = False,
    ) -> Answer:
        """A file's answer (2xx); anything else raised as the error it means."""
        if time.monotonic() >= self.deadline:
            raise HubUnavailableError(
                f"--hub {self.hub_id}: the Hub took more than {TOTAL_S} s in all"
            )
        url = f"{self.endpoint}/{self.repo_id}/resolve/{commit}/{quote(filename)}"
        try:
            answer = get(
                url,
                {**self.headers, **(extra or {})},
                timeout_s=self.file_timeout_s,
                deadline=self.deadline,
                limit_bytes=limit_bytes,
                truncate=truncate,
            )
        except RequestFailed as e:
            raise HubUnavailableError(
                f"--hub {self.hub_id}: cannot read {filename} from the Hub ({e.reason})"
            ) from None
        if not 200 <= answer.status < 300:
            raise self._refused(answer, filename)
        return answer

    def _refused(self, answer: Answer, filename: str | None) -> Exception:
        """What an answer other than 2xx means, for the file list (``filename`` None) or a
        file: who must act (the user's id, token or network)."""
        code, status, hub_id = answer.headers.get("x-error-code", ""), answer.status, self.hub_id
        if code == "GatedRepo":
            return HubUnavailableError(f"--hub {hub_id}: {GATED}")
        if code == "RevisionNotFound":
            return HubNotFoundError(
                hub_id,
                f"--hub {hub_id}: {self.repo_id} has no revision {self.revision!r}"
                " (a branch, tag or commit)",
            )
        if code == "RepoNotFound" or (status == 404 and filename is None):
            at = "" if self.revision == "main" else f" at revision {self.revision!r}"
            return HubNotFoundError(
                hub_id,
                f"--hub {hub_id}: no model {self.repo_id}{at} on the Hub"
                " (a private one needs HF_TOKEN)",
            )
        if filename is not None and (code == "EntryNotFound" or status == 404):
            where = f"{self.repo_id}@{self.revision}"
            return SpecError(where, [f"{filename}: not in this repository"])
        if filename is not None and status == 416:  # a range past the end of the file
            problem = "not a safetensors file: shorter than its header"
            return SpecError(self.where(filename), [problem])
        if status == 401:
            return HubUnavailableError(f"--hub {hub_id}: the Hub refused HF_TOKEN (HTTP 401)")
        if status == 403:
            return HubUnavailableError(f"--hub {hub_id}: access denied (HTTP 403); {GATED}")
        later = "; try again later" if status >= 500 or status == 429 else ""
        return HubUnavailableError(f"--hub {hub_id}: the Hub answered HTTP {status}{later}")


def _listed(body: bytes, hub_id: str) -> tuple[str, set[str]]:
    """(commit, file names) from the file list's JSON; HubUnavailableError when malformed."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        data = None
    info = data if isinstance(data, dict) else {}
    sha, siblings = info.get("sha"), info.get("siblings")
    if not isinstance(sha, str) or not _COMMIT.fullmatch(sha) or not isinstance(siblings, list):
        raise HubUnavailableError(
            f"--hub {hub_id}: the Hub's file list is malformed (no commit sha and files)"
        )
    names = (s.get("rfilename") for s in siblings if isinstance(s, dict))
    return sha, {n for n in names if isinstance(n, str)}


class _Budget:
    """Header bytes left for the whole checkpoint, shared by the threads reading headers."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.left_bytes = HEADERS_LIMIT_BYTES
        self._lock = threading.Lock()

    def take(self, num_bytes: int) -> None:
        with self._lock:
            if num_bytes > self.left_bytes:
                raise SpecError(
                    self.where,
                    [
                        f"safetensors headers: more than {HEADERS_LIMIT_BYTES // 2**20} MiB"
                        " in all, the most kvplan reads"
                    ],
                )
            self.left_bytes -= num_bytes


def _read_headers(site: Site, commit: str, shards: list[str]) -> dict[str, Any]:
    """Each shard's header (file on the Hub -> header), ``_MAX_WORKERS`` at a time; the first
    error (in shard order) cancels the reads not yet started."""
    budget = _Budget(f"{site.repo_id}@{site.revision}")
    with ThreadPoolExecutor(max_workers=min(_MAX_WORKERS, len(shards))) as pool:
        futures = [pool.submit(site.header, commit, shard, budget) for shard in shards]
        try:
            read = [future.result() for future in futures]
        except BaseException:
            for future in futures:
                future.cancel()
            raise
    return {site.where(shard): h for shard, h in zip(shards, read, strict=True)}


def _shards(index: Path, where: str) -> list[str]:
    """The safetensors files an index names, sorted; SpecError for a malformed weight_map or
    more than MAX_SHARDS files."""
    data = read_json(index)
    weight_map = data.get("weight_map")
    if not isinstance(weight_map, dict) or not all(
        isinstance(f, str) and _SHARD.fullmatch(f) and ".." not in f for f in weight_map.values()
    ):
        raise SpecError(where, ["weight_map: must map tensor names to .safetensors files"])
    shards = sorted(set(weight_map.values()))
    if len(shards) > MAX_SHARDS:
        raise SpecError(
            where,
            [f"weight_map: names {len(shards):,} files, more than the {MAX_SHARDS:,} kvplan reads"],
        )
    return shards


@dataclass(frozen=True, slots=True)
class _Cache:
    """The Hugging Face cache's folder of one repository, written as huggingface_hub writes it:
    ``blobs/<sha256>``, ``snapshots/<commit>/<file>`` a relative link to the blob (a copy where
    links cannot be made) and ``refs/<revision>`` holding the commit."""

    hub_id: str
    root: Path
    repo_id: str
    revision: str
    commit: str

    def store(self, filename: str, body: bytes) -> Path:
        """The snapshot path of ``filename`` after writing ``body`` there."""
        folder = self.root / ("models--" + self.repo_id.replace("/", "--"))
        blob = folder / "blobs" / hashlib.sha256(body).hexdigest()  # named by its content
        snapshot = folder / "snapshots" / self.commit / filename
        try:
            blob.parent.mkdir(parents=True, exist_ok=True)
            snapshot.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(blob, body, force=True)
            _link(snapshot, blob, body)
            if self.revision != self.commit:
                ref = folder / "refs" / self.revision
                ref.parent.mkdir(parents=True, exist_ok=True)
                write_atomic(ref, self.commit, force=True)
        except (OSError, SpecError) as e:
            detail = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            raise HubUnavailableError(
                f"--hub {self.hub_id}: cannot write the Hugging Face cache ({detail})"
            ) from None
        return snapshot


def _link(snapshot: Path, blob: Path, body: bytes) -> None:
    """``snapshot`` as a relative link to ``blob``, replaced at once; a copy without links."""
    tmp = snapshot.with_name(f".{snapshot.name}.{secrets.token_hex(4)}.kvplan-tmp")
    try:
        os.symlink(os.path.relpath(blob, snapshot.parent), tmp)
    except OSError:  # no symbolic links here (Windows without the privilege)
        write_atomic(snapshot, body, force=True)
        return
    try:
        os.replace(tmp, snapshot)
    finally:
        if os.path.lexists(tmp):
            tmp.unlink()


def _from_cache(
    hub: ModuleType, hub_id: str, repo_id: str, revision: str, why: str
) -> HubCheckpoint:
    """The checkpoint as the Hugging Face cache holds it: config.json, and the index when it
    was downloaded too (its total_size counts an unquantized checkpoint)."""
    found = _cached(hub, repo_id, CONFIG_NAME, revision)
    if not isinstance(found, str):
        adapter = _cached(hub, repo_id, ADAPTER_NAME, revision)
        if isinstance(adapter, str):
            base = adapter_base(Path(adapter), f"{repo_id}@{revision}/{ADAPTER_NAME}")
            return HubCheckpoint(repo_id, revision, Path(adapter).parent, None, True, base)
        raise HubUnavailableError(f"--hub {hub_id}: {why}, and it is not in the Hugging Face cache")
    folder = Path(found).parent
    return HubCheckpoint(repo_id, revision, folder, hub_weights.load(repo_id, folder.name), True)


def _cached(hub: ModuleType, repo_id: str, filename: str, revision: str) -> object:
    try:
        return hub.try_to_load_from_cache(repo_id, filename, revision=revision)
    except Exception:  # a revision the cache's layout cannot hold
        return None


def adapter_base(path: Path, where: str) -> str:
    """The base model a LoRA adapter's ``adapter_config.json`` names: a Hub id or a catalog
    name, never a path (the file is the repository's, not the user's); SpecError else."""
    base = read_json(path).get("base_model_name_or_path")
    name_like = isinstance(base, str) and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._:@/-]{0,200}", base)
    if not name_like or ".." in str(base) or str(base).count("/") > 1:
        shown = abbreviate(base)
        raise SpecError(
            where, [f"base_model_name_or_path: a Hub id or a catalog model's name, got {shown}"]
        )
    return str(base)


def offline() -> bool:
    """Whether HF_HUB_OFFLINE asks for the cache alone."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in _TRUE


def _short(e: Exception) -> str:
    text = " ".join(f"{type(e).__name__}: {e}".split())
    return text if len(text) <= 120 else text[:117] + "..."
