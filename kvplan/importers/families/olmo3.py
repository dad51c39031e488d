"""OLMo 3 / 3.1 (``olmo3``): OLMo 2's layer with sliding-window attention on most layers.

Olmo3Config (configuration_olmo3.py) states ``layer_types``; absent, a layer slides unless
``(i + 1) % 4 == 0`` (three sliding, then one global). ``sliding_window`` defaults to 4096; a
null window leaves the sliding layers unbounded, so every layer is read as global. The weights
are OLMo 2's (q and k RMSNorms over all heads, norms after attention and after the MLP).
vLLM 0.32 serves Olmo3ForCausalLM through its Transformers backend.
"""

from __future__ import annotations

from kvplan.importers.families.llama import count_olmo2
from kvplan.importers.reading import Reading
from kvplan.importers.registry import register
from kvplan.importers.rules import Rule, layers_explicit

FAMILY = "olmo3"

# Olmo3Config defaults for the keys that size the cache or the weights.
_OLMO3 = {
    "vocab_size": 50304,
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "max_position_embeddings": 2048,
    "tie_word_embeddings": False,
    "attention_bias": False,
}


def _layers_olmo3(r: Reading, n: int) -> None:
    window = r.config.get("sliding_window", 4096)
    if window is None:
        r.notes.append("sliding_window null: every layer global")
        return
    if layers_explicit(r, n):
        return
    if "sliding_window" not in r.config:
        r.notes.append("sliding_window 4096: the olmo3 default (not in file)")
    r.spec["sliding_window"] = window
    r.spec["layer_types"] = [
        "full_attention" if (i + 1) % 4 == 0 else "sliding_attention" for i in range(n)
    ]
    r.notes.append("layer_types: three sliding then one global (the olmo3 default)")


register(
    FAMILY,
    "olmo3",
    Rule(layers=_layers_olmo3, defaults=_OLMO3, parameters=count_olmo2),
    ("full_attention", "sliding_attention"),
    "OLMo 3: layer_types, else three sliding (window 4096) then one global; null window: global",
    engines=("vllm-transformers",),
)
