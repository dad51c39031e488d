"""Nemotron (Nemotron-4 and its Minitron prunings): Llama keys with their own defaults.

NemotronConfig (configuration_nemotron.py): ``num_key_value_heads`` absent means one per head,
``head_dim`` absent means ``hidden_size / num_attention_heads``; vLLM's nemotron.py reads the
same keys. Partial rotary embedding does not change what is cached.
"""

from __future__ import annotations

from kvplan.importers.parameters import Count, decoder, flag, mlp, norm, shapes, size
from kvplan.importers.reading import Reading
from kvplan.importers.registry import register
from kvplan.importers.rules import UNIFORM_KINDS, Rule

FAMILY = "nemotron"


def _count_nemotron(r: Reading) -> Count:
    """Nemotron: q, k, v, o (``attention_bias``), a squared-ReLU MLP of up and down
    projections (``mlp_bias``), LayerNorms with bias (LayerNorm1P) before each block and at
    the end."""
    s = shapes(r)
    bias = flag(r, "attention_bias")
    layer = s.attention(bias, bias) + norm(s.hidden, bias=True).times(2)
    layer += mlp(s.hidden, size(r, "intermediate_size"), gated=False, bias=flag(r, "mlp_bias"))
    return decoder(s, layer.times(s.layers), norm(s.hidden, bias=True))


register(
    FAMILY,
    "nemotron",
    Rule(parameters=_count_nemotron),
    UNIFORM_KINDS,
    "Nemotron-4/Minitron: read as llama (head_dim or hidden_size / heads)",
    architectures=("NemotronForCausalLM",),
)
