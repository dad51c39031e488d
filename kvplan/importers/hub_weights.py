"""The weight count read from a checkpoint's safetensors headers on the Hub, kept per commit, so
that an answer from the cache (HF_HUB_OFFLINE) is the answer the Hub gave.

The Hugging Face cache holds config.json and the index, but the headers were read by range
requests and are not files of the cache. Their count is a small JSON file under kvplan's own
cache folder (``$XDG_CACHE_HOME/kvplan/hub-weights``, else ``~/.cache/kvplan/hub-weights``),
named by repository and commit; a commit never changes, so neither does its count. The file is
read as untrusted input: anything but the exact fields and types is ignored, and the answer
falls back to the config's shapes as for a folder without safetensors files.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from dataclasses import asdict
from pathlib import Path

from kvplan.errors import KvplanError
from kvplan.files import read_text, write_atomic
from kvplan.importers.safetensors import WeightCount
from kvplan.model.limits import MAX_PARAMETERS

_COMMIT = re.compile(r"[0-9a-f]{40}")
_MAX_BYTES = 64 * 2**10


def kept_folder(kind: str) -> Path:
    """kvplan's own cache folder of ``kind`` (``hub-weights``, ``hub-gguf``):
    ``$XDG_CACHE_HOME/kvplan/KIND``, else ``~/.cache/kvplan/KIND``."""
    root = os.environ.get("XDG_CACHE_HOME", "").strip() or str(Path.home() / ".cache")
    return Path(root) / "kvplan" / kind


def _path(repo_id: str, commit: str) -> Path | None:
    if not _COMMIT.fullmatch(commit):
        return None
    return kept_folder("hub-weights") / f"{repo_id.replace('/', '--')}--{commit}.json"


def save(repo_id: str, commit: str, weights: WeightCount) -> None:
    """Keep ``weights`` for ``repo_id`` at ``commit``; a cache that cannot be written is
    skipped (the answer does not depend on it)."""
    path = _path(repo_id, commit)
    if path is None:
        return
    with contextlib.suppress(OSError, KvplanError):
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(asdict(weights), sort_keys=True), force=True)


def load(repo_id: str, commit: str) -> WeightCount | None:
    """The count kept for ``repo_id`` at ``commit``, or None (none kept, or not one kvplan
    wrote)."""
    path = _path(repo_id, commit)
    if path is None or not path.is_file():
        return None
    try:
        data = json.loads(read_text(path, limit_bytes=_MAX_BYTES))
    except (KvplanError, ValueError, RecursionError):
        return None
    return _checked(data)


def _checked(data: object) -> WeightCount | None:
    if not isinstance(data, dict):
        return None
    counts = ("num_parameters", "num_quantized_parameters", "num_expert_parameters")
    dtypes = data.get("dtypes")
    ok = (
        set(data) == {*counts, "weight_dtype", "dtypes", "how"}
        and all(_count(data[k]) for k in counts)
        and (data["weight_dtype"] is None or isinstance(data["weight_dtype"], str))
        and isinstance(data["how"], str)
        and isinstance(dtypes, dict)
        and all(isinstance(k, str) and _count(v) for k, v in dtypes.items())
    )
    if not ok:
        return None
    return WeightCount(
        num_parameters=data["num_parameters"],
        num_quantized_parameters=data["num_quantized_parameters"],
        weight_dtype=data["weight_dtype"],
        dtypes=dict(data["dtypes"]),
        how=f"{data['how']}, kept from the Hub",
        num_expert_parameters=data["num_expert_parameters"],
    )


def _count(value: object) -> bool:
    return type(value) is int and 0 <= value <= MAX_PARAMETERS
