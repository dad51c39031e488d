"""The Hugging Face Hub: ``config.json``, the safetensors index and headers, never the weights.

``--hub ORG/NAME[@REVISION]`` asks the Hub for the repository's file list, downloads
``config.json`` (and ``model.safetensors.index.json`` when there is one) into the Hugging Face
cache, and reads each safetensors file's header with HTTP range requests through
``huggingface_hub`` itself (its reader asks for the first 100 KB, then the rest of a longer
header). The parameter count then comes from the same function as for a local folder.

The client's settings are honoured: ``HF_ENDPOINT``, ``HF_TOKEN``, ``HF_HOME`` (the cache) and
``HF_HUB_OFFLINE`` (answer from the cache, or fail at once). Each request waits at most
``_TIMEOUT_S`` seconds (``HF_HUB_ETAG_TIMEOUT`` / ``HF_HUB_DOWNLOAD_TIMEOUT`` override it), and
the first request is the cheap file listing, which the client never retries, so an unreachable
Hub is one line within seconds rather than the client's backoff of about 25 s.

Errors, one line each: huggingface_hub missing or the Hub unreachable or refusing (gated, HTTP
403, 5xx) is a HubUnavailableError (exit 3); an id that is malformed (UnitError), a repository
or revision the Hub does not have (HubNotFoundError) or a repository without config.json
(SpecError) is bad input (exit 2).
"""

from __future__ import annotations

import contextlib
import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from kvplan.errors import (
    HubNotFoundError,
    HubUnavailableError,
    KvplanError,
    SpecError,
    UnitError,
)
from kvplan.importers.reading import CONFIG_NAME, read_json
from kvplan.importers.safetensors import (
    INDEX_NAME,
    WeightCount,
    weights_from_headers,
)

if TYPE_CHECKING:
    from kvplan.importers.config import Imported

HUB_HINT = (
    "--hub needs huggingface_hub, which kvplan does not install by default:"
    " pip install 'kvplan[hub]'"
)
GATED = "gated model: accept its licence on the Hub and set HF_TOKEN"

#: Seconds one request may wait for the Hub: a few, never the client's backoff.
_TIMEOUT_S = 5.0
#: Shard headers read at once (DeepSeek-V3 has 163 shards).
_MAX_WORKERS = 8
_SINGLE_FILE = "model.safetensors"
#: The Hub's own rule for a repository id: two names of letters, digits, ``-``, ``_``, ``.``.
_REPO_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
#: A branch, a tag, ``refs/pr/N`` or a commit sha.
_REVISION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,254}")
_SHARD = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]{0,254}\.safetensors")
_NETWORK_MODULES = ("httpx", "httpx2", "requests", "urllib3", "ssl", "socket")
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
    hub = _client()
    repo_id, asked = parse_hub_id(hub_id)
    revision = asked or "main"
    endpoint = os.environ.get("HF_ENDPOINT", "").strip().rstrip("/") or None
    if hub.constants.is_offline_mode() or _is_true(os.environ.get("HF_HUB_OFFLINE")):
        return _from_cache(hub, hub_id, repo_id, revision, "HF_HUB_OFFLINE is set")
    api = hub.HfApi(endpoint=endpoint)
    try:
        info = api.model_info(repo_id, revision=revision, timeout=_timeout_s("ETAG"))
    except Exception as e:
        if not _is_network(hub, e):
            raise _explain(hub, e, hub_id, repo_id, revision) from None
        where = endpoint or hub.constants.ENDPOINT
        why = f"cannot reach {where} ({_reason(e)})"
        return _from_cache(hub, hub_id, repo_id, revision, why)
    files = {s.rfilename for s in info.siblings or ()}

    def download(filename: str) -> Path:
        return Path(
            hub.hf_hub_download(
                repo_id,
                filename,
                revision=revision,
                endpoint=endpoint,
                etag_timeout=_timeout_s("ETAG"),
            )
        )

    try:
        config_path = download(CONFIG_NAME)
        shards = _shards(download(INDEX_NAME)) if INDEX_NAME in files else []
        if not shards and _SINGLE_FILE in files:
            shards = [_SINGLE_FILE]
        headers = _read_headers(api, repo_id, revision, shards)
    except Exception as e:
        raise _explain(hub, e, hub_id, repo_id, revision) from None
    weights = None
    if headers:
        config = read_json(config_path)
        try:
            weights = weights_from_headers(headers, config, " on the Hub")
        except SpecError as e:
            raise SpecError(e.path or f"{repo_id}@{revision}", e.problems) from None
    return HubCheckpoint(repo_id, revision, config_path.parent, weights, from_cache=False)


def _client() -> ModuleType:
    try:
        import huggingface_hub
        import huggingface_hub.constants
        import huggingface_hub.errors
    except ImportError:
        raise HubUnavailableError(HUB_HINT) from None
    return huggingface_hub


def _from_cache(
    hub: ModuleType, hub_id: str, repo_id: str, revision: str, why: str
) -> HubCheckpoint:
    """The checkpoint as the Hugging Face cache holds it: config.json, and the index when it
    was downloaded too (its total_size counts an unquantized checkpoint)."""
    try:
        config_path = hub.hf_hub_download(
            repo_id, CONFIG_NAME, revision=revision, local_files_only=True
        )
    except Exception:
        raise HubUnavailableError(
            f"--hub {hub_id}: {why}, and it is not in the Hugging Face cache"
        ) from None
    # The index, when cached: its total_size counts an unquantized checkpoint.
    with contextlib.suppress(Exception):
        hub.hf_hub_download(repo_id, INDEX_NAME, revision=revision, local_files_only=True)
    return HubCheckpoint(repo_id, revision, Path(config_path).parent, None, from_cache=True)


def _shards(index: Path) -> list[str]:
    """The safetensors files an index names, sorted; SpecError for a malformed weight_map."""
    data = read_json(index)
    weight_map = data.get("weight_map")
    if not isinstance(weight_map, dict) or not all(
        isinstance(f, str) and _SHARD.fullmatch(f) and ".." not in f for f in weight_map.values()
    ):
        raise SpecError(str(index), ["weight_map: must map tensor names to .safetensors files"])
    return sorted(set(weight_map.values()))


def _read_headers(api: Any, repo_id: str, revision: str, shards: list[str]) -> dict[str, Any]:
    """Each shard's header (file name on the Hub -> header dict), read by range requests."""

    def header(shard: str) -> dict[str, Any]:
        found = api.parse_safetensors_file_metadata(
            repo_id, shard, revision=revision, timeout=_timeout_s("DOWNLOAD")
        )
        return {
            name: {"dtype": info.dtype, "shape": list(info.shape)}
            for name, info in found.tensors.items()
        }

    with ThreadPoolExecutor(max_workers=min(_MAX_WORKERS, max(1, len(shards)))) as pool:
        read = list(pool.map(header, shards))
    return {f"{repo_id}@{revision}/{shard}": h for shard, h in zip(shards, read, strict=True)}


def _explain(hub: ModuleType, e: Exception, hub_id: str, repo_id: str, revision: str) -> Exception:
    """One line for what the client raised: who must act (the user's id, token or network)."""
    if isinstance(e, KvplanError):  # kvplan's own reading of what the Hub sent
        return e
    errors = hub.errors
    status = getattr(getattr(e, "response", None), "status_code", None)
    if isinstance(e, errors.GatedRepoError):
        return HubUnavailableError(f"--hub {hub_id}: {GATED}")
    if isinstance(e, errors.RevisionNotFoundError):
        return HubNotFoundError(
            hub_id,
            f"--hub {hub_id}: {repo_id} has no revision {revision!r} (a branch, tag or commit)",
        )
    if isinstance(e, errors.RepositoryNotFoundError):
        return HubNotFoundError(
            hub_id, f"--hub {hub_id}: no model {repo_id} on the Hub (a private one needs HF_TOKEN)"
        )
    if isinstance(e, errors.EntryNotFoundError):
        url = str(getattr(getattr(e, "response", None), "url", CONFIG_NAME))
        missing = url.rsplit("/", 1)[-1][:100]
        return SpecError(f"{repo_id}@{revision}", [f"{missing}: not in this repository"])
    if isinstance(e, (errors.SafetensorsParsingError, errors.NotASafetensorsRepoError)):
        return SpecError(f"{repo_id}@{revision}", [f"not a safetensors file: {str(e)[:200]}"])
    if isinstance(e, errors.HFValidationError):
        return UnitError(f"--hub: {str(e)[:200]}")
    if status == 401:
        return HubUnavailableError(f"--hub {hub_id}: the Hub refused HF_TOKEN (HTTP 401)")
    if status == 403:
        return HubUnavailableError(f"--hub {hub_id}: access denied (HTTP 403); {GATED}")
    if status is not None:
        return HubUnavailableError(
            f"--hub {hub_id}: the Hub answered HTTP {status}; try again later"
        )
    return HubUnavailableError(f"--hub {hub_id}: cannot read it from the Hub ({_reason(e)})")


def _is_network(hub: ModuleType, e: Exception) -> bool:
    """A connection that failed or timed out, as opposed to an answer from the Hub."""
    if isinstance(e, hub.errors.OfflineModeIsEnabled):
        return True
    if isinstance(e, hub.errors.HfHubHTTPError):
        return False
    root = type(e).__module__.split(".")[0]
    return isinstance(e, (OSError, TimeoutError)) or root in _NETWORK_MODULES


def _reason(e: Exception) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= 120 else text[:117] + "..."


def _timeout_s(kind: str) -> float:
    """HF_HUB_{kind}_TIMEOUT when set to a positive number of seconds, else ``_TIMEOUT_S``."""
    try:
        value = float(os.environ.get(f"HF_HUB_{kind}_TIMEOUT", ""))
    except ValueError:
        return _TIMEOUT_S
    return value if value > 0 else _TIMEOUT_S


def _is_true(value: str | None) -> bool:
    return value is not None and value.strip().upper() in _TRUE
