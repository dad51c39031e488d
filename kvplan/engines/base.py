"""What every engine profile returns, and the names of the engines kvplan models."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kvplan.errors import UnitError, UnknownEngineError

__all__ = ["ENGINE_NAMES", "EngineResult", "UnknownEngineError", "refuse_unread_kinds"]

#: The layer kinds that every engine profile reads (or refuses by name itself). A kind past
#: them (DeepSeek V4's compressed latents, MiniMax M3's sparse indexer: kvplan.model.sparse)
#: is modelled only where an engine's rules say so, and refused everywhere else.
READ_KINDS = frozenset(
    {
        "full_attention", "sliding_attention", "chunked_attention", "mla_latent", "mamba",
        "linear_attention", "short_conv", "attention_mamba", "no_cache", "kv_shared",
    }
)  # fmt: skip


def refuse_unread_kinds(layers: Iterable[object], profile: str) -> None:
    """Raise UnitError naming the first layer kind past READ_KINDS: a profile must never size
    a cache it does not model as nothing (``profile``: "SGLang profile", ...)."""
    for layer in layers:
        kind = str(getattr(layer, "kind", ""))
        if getattr(layer, "replicated_values", 0):
            raise UnitError(
                f"{profile}: Qwen4Exp's PLE conv state is not modelled (the ideal cache,"
                " `kvplan calc` with no engine, gives its exact bytes)"
            )
        if kind not in READ_KINDS:
            raise UnitError(
                f"{profile}: {kind} layers are not modelled (the ideal cache, `kvplan calc`"
                " with no engine, gives their exact bytes)"
            )


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
