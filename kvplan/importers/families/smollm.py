"""SmolLM3: Llama keys with NoPE layers.

SmolLM3Config (configuration_smollm3.py): every fourth layer (``no_rope_layers`` 0) skips the
rotary embedding but still keeps its K and V, so every layer caches alike; a layer slides only
with ``use_sliding_window`` and a ``sliding_window`` (transformers derives ``layer_types``
from them; the released files state all full attention). Defaults: 4 K/V heads, tied
embeddings. vLLM 0.32 serves SmolLM3ForCausalLM through its Transformers backend. SmolLM2 is
a plain ``llama`` config.
"""

from __future__ import annotations

from kvplan.importers.reading import Reading, whole
from kvplan.importers.registry import register
from kvplan.importers.rules import UNIFORM_KINDS, Rule, layers_explicit

FAMILY = "smollm"


def _layers_smollm3(r: Reading, n: int) -> None:
    if layers_explicit(r, n):
        return
    window = r.config.get("sliding_window")
    if window is not None and r.config.get("use_sliding_window"):
        every = whole(r.get("no_rope_layer_interval"), "no_rope_layer_interval")
        rope = r.config.get("no_rope_layers") or [int((i + 1) % every != 0) for i in range(n)]
        r.spec["layer_types"] = [
            "sliding_attention" if i < len(rope) and not rope[i] else "full_attention"
            for i in range(n)
        ]
        r.spec["sliding_window"] = window
        r.notes.append("NoPE layers slide: use_sliding_window with sliding_window")


register(
    FAMILY,
    "smollm3",
    Rule(
        layers=_layers_smollm3,
        defaults={
            "num_key_value_heads": 4,
            "tie_word_embeddings": True,
            "no_rope_layer_interval": 4,
        },
    ),
    UNIFORM_KINDS,
    "SmolLM3: read as llama; NoPE layers cache K/V like the rest; absent K/V heads 4",
    architectures=(),
    engines=("vllm-transformers",),
)
