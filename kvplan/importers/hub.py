"""The Hugging Face Hub: ``config.json`` and the safetensors index, never the weights.

``huggingface_hub`` is an optional extra (``pip install 'kvplan[hub]'``); without it,
``download_from_hub`` raises HubUnavailableError with that hint.
"""

from __future__ import annotations

from pathlib import Path

from kvplan.errors import HubUnavailableError
from kvplan.importers.reading import CONFIG_NAME
from kvplan.importers.safetensors import INDEX_NAME

HUB_HINT = (
    "--hub needs huggingface_hub, which kvplan does not install by default:"
    " pip install 'kvplan[hub]'"
)


def download_from_hub(repo_id: str, revision: str | None = None) -> Path:
    """Download ``config.json`` (and the safetensors index when the repo has one, never the
    weights) into the Hugging Face cache; returns the folder. Raises HubUnavailableError."""
    try:
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import EntryNotFoundError
    except ImportError:
        raise HubUnavailableError(HUB_HINT) from None
    try:
        config = hf_hub_download(repo_id, CONFIG_NAME, revision=revision)
    except Exception as e:  # the hub raises many kinds: offline, gated, missing repo
        raise HubUnavailableError(f"--hub {repo_id}: cannot download {CONFIG_NAME}: {e}") from None
    try:
        hf_hub_download(repo_id, INDEX_NAME, revision=revision)
    except EntryNotFoundError:
        pass  # single-file checkpoints have no index; the parameter count stays unknown
    except Exception as e:
        raise HubUnavailableError(f"--hub {repo_id}: cannot download {INDEX_NAME}: {e}") from None
    return Path(config).parent
