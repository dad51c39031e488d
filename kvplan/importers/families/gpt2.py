"""GPT-2 and OPT: classic multi-head attention (every head keeps its own K and V), tied
embeddings, GPT-era key names (``n_layer``, ``n_embd``, ``n_positions``, ``ffn_dim``)."""

from __future__ import annotations

from kvplan.importers.registry import register
from kvplan.importers.rules import UNIFORM_KINDS, Rule, kv_heads_mha

FAMILY = "gpt2"

_RULE = Rule(kv_heads=kv_heads_mha, defaults={"tie_word_embeddings": True})

register(FAMILY, "gpt2", _RULE, UNIFORM_KINDS, "multi-head: one K/V per head; n_layer, n_embd")
register(FAMILY, "opt", _RULE, UNIFORM_KINDS, "multi-head: one K/V per head; ffn_dim")
