"""Shared fixtures: small spec files written where each test can see them."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

# No test reaches the Hub: a Hub id the catalog lacks is read from the cache alone, and a test
# of the Hub serves its own on 127.0.0.1 with an environment of its own (tests/hub_server.py).
os.environ["HF_HUB_OFFLINE"] = "1"

TINY = """\
name: tiny
num_hidden_layers: 1
num_attention_heads: 2
num_key_value_heads: 2
head_dim: 3
torch_dtype: float32
"""


@pytest.fixture
def write_spec(tmp_path: Path) -> Callable[[str, str], Path]:
    """Write YAML text to ``tmp_path/<name>`` and return its path."""

    def write(text: str, name: str = "spec.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return write


@pytest.fixture
def tiny_spec(write_spec: Callable[[str, str], Path]) -> Path:
    return write_spec(TINY, "tiny.yaml")


@pytest.fixture(autouse=True)
def _terminal_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """Outputs compared with the docs are drawn at the width of a pipe, not the caller's."""
    monkeypatch.delenv("COLUMNS", raising=False)
