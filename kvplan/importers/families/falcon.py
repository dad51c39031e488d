"""Falcon 7B/40B/180B.

Falcon 7B says ``multi_query: true`` (the config class default too): one shared K/V head, not
71. Falcon 40B/180B set ``new_decoder_architecture`` and keep ``num_kv_heads`` groups.
"""

from __future__ import annotations

from kvplan.importers.reading import Reading
from kvplan.importers.registry import register
from kvplan.importers.rules import UNIFORM_KINDS, Rule

FAMILY = "falcon"


def _kv_heads_falcon(r: Reading) -> int | None:
    heads = r.get("num_attention_heads", "n_head")
    if r.config.get("new_decoder_architecture"):
        kv = r.get("num_kv_heads", "n_head_kv")
        r.notes.append(f"num_key_value_heads {kv}: num_kv_heads (new_decoder_architecture)")
        return kv  # type: ignore[no-any-return]
    if r.config.get("multi_query", True):
        r.notes.append("num_key_value_heads 1: multi_query shares one K/V head")
        return 1
    return heads  # type: ignore[no-any-return]


register(
    FAMILY,
    "falcon",
    Rule(
        kv_heads=_kv_heads_falcon,
        defaults={"max_position_embeddings": 2048, "tie_word_embeddings": True},
    ),
    UNIFORM_KINDS,
    "multi_query: one K/V head; new_decoder_architecture: num_kv_heads",
)
