"""Llama 4 (Scout, Maverick): chunked local attention on RoPE layers, global NoPE layers.

``no_rope_layers`` holds one flag per layer (1: RoPE, so chunked within
``attention_chunk_size``; 0: NoPE, global). Released configs leave it empty; the config class
then derives it from ``no_rope_layer_interval`` (default 4: every fourth layer is NoPE).
"""

from __future__ import annotations

from kvplan.importers.reading import Reading, as_list, whole
from kvplan.importers.registry import register, register_wrapper
from kvplan.importers.rules import Rule, layers_explicit

FAMILY = "llama4"


def _layers_llama4(r: Reading, n: int) -> None:
    if layers_explicit(r, n):
        return
    chunk = r.get("attention_chunk_size")
    no_rope = as_list(r.config.get("no_rope_layers") or [], "no_rope_layers")
    if no_rope:
        rope = [bool(x) for x in no_rope]
        why = "no_rope_layers"
    else:
        every = whole(r.get("no_rope_layer_interval"), "no_rope_layer_interval")
        rope = [(i + 1) % every != 0 for i in range(n)]
        why = f"no_rope_layer_interval {every} (no_rope_layers empty)"
    if chunk is None:
        return
    r.spec["attention_chunk_size"] = chunk
    # RoPE layers attend within their chunk; NoPE layers are global.
    r.spec["layer_types"] = ["chunked_attention" if x else "full_attention" for x in rope]
    r.notes.append(f"layer_types from {why}: RoPE layers chunked ({chunk}), NoPE layers full")


register(
    FAMILY,
    "llama4_text",
    Rule(
        layers=_layers_llama4,
        defaults={"attention_chunk_size": 8192, "no_rope_layer_interval": 4},
    ),
    ("full_attention", "chunked_attention"),
    "RoPE layers chunked (attention_chunk_size), NoPE layers global (no_rope_layers)",
)
register_wrapper(FAMILY, "llama4", "llama4_text", "Llama 4: the text model in text_config")
