"""OrionStar Orion (``orion``): Llama-shaped attention under LayerNorms with bias.

The remote-code OrionConfig states ``num_key_value_heads``; vLLM's orion.py takes head_dim as
``hidden_size / num_attention_heads`` whatever else the file says, so the rule does too.
"""

from __future__ import annotations

from kvplan.importers.parameters import Count, decoder, mlp, norm, shapes, size
from kvplan.importers.reading import Reading
from kvplan.importers.registry import register
from kvplan.importers.rules import UNIFORM_KINDS, Rule

FAMILY = "orion"


def _count_orion(r: Reading) -> Count:
    """modeling_orion.py: bias-free GQA and gated MLP, two LayerNorms (weight and bias) a
    layer and a final LayerNorm."""
    s = shapes(r)
    layer = s.attention() + mlp(s.hidden, size(r, "intermediate_size"))
    layer += norm(s.hidden, bias=True).times(2)
    return decoder(s, layer.times(s.layers), norm(s.hidden, bias=True))


register(
    FAMILY,
    "orion",
    Rule(reads_head_dim=False, parameters=_count_orion),
    UNIFORM_KINDS,
    "num_key_value_heads; head_dim hidden_size / heads as vLLM orion.py computes it"
    " (remote-code config)",
    architectures=("OrionForCausalLM",),
)
