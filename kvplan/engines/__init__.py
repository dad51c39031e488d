"""Engine profiles: how each serving engine sizes its KV cache, version by version.

One module per engine. Each states the versions its rules were read for and the source files
they come from, and returns an ``EngineResult``: the bytes it allocates, its own units (blocks,
cells, tokens) and the figures it prints at start-up, under the names it prints them.
"""

from __future__ import annotations

from kvplan.engines.base import ENGINE_NAMES, EngineResult, UnknownEngineError

__all__ = ["ENGINE_NAMES", "EngineResult", "UnknownEngineError"]
