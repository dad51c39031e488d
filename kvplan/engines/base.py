"""What every engine profile returns, and the names of the engines kvplan models."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kvplan.errors import UnknownEngineError

__all__ = ["ENGINE_NAMES", "EngineResult", "UnknownEngineError"]

#: Engines with a profile. ``ideal`` is the core formula with no engine rules.
ENGINE_NAMES = (
    "ideal",
    "vllm",
    "sglang",
    "llama.cpp",
    "ik_llama.cpp",
    "trtllm",
    "tgi",
    "transformers",
)


@dataclass(frozen=True, slots=True)
class EngineResult:
    """What an engine allocates for its KV cache, and what it prints about it.

    ``kv_cache_bytes``: bytes of KV cache (and recurrent state) the engine allocates, per GPU
    (per device for llama.cpp). ``num_blocks``/``block_size``: its allocation unit (vLLM blocks,
    llama.cpp cells have block_size 1). ``kv_cache_tokens``: token slots. ``engine_log``: the
    engine's own printed figures under the names it prints (``num_gpu_blocks``, ``cells``,
    ``k_mib``...), as exact integers where the engine prints integers; ``log_lines``: those
    lines as the engine prints them.
    """

    engine: str
    engine_version: str
    kv_cache_bytes: int
    num_blocks: int | None = None
    block_size: int | None = None
    kv_cache_tokens: int | None = None
    engine_log: Mapping[str, int | float | str] = field(default_factory=dict)
    log_lines: tuple[str, ...] = ()
