"""Swiss AI Apertus (``apertus``): Llama-shaped GQA, read as Llama.

ApertusConfig (configuration_apertus.py) leaves ``num_key_value_heads`` to the number of
heads and ``head_dim`` to hidden_size / heads; vLLM's apertus.py reads the same keys. Its MLP
is ungated (up and down projections around a xIELU activation with learned alpha_p, alpha_n)
and the q/k RMSNorms change the weights, not what a token caches.
"""

from __future__ import annotations

from kvplan.importers.parameters import Count, decoder, flag, mlp, norm, plain, shapes, size
from kvplan.importers.reading import Reading
from kvplan.importers.registry import register
from kvplan.importers.rules import UNIFORM_KINDS, Rule

FAMILY = "apertus"

# ApertusConfig defaults for the keys that size the cache or the weights.
_DEFAULTS = {"vocab_size": 131072, "max_position_embeddings": 65536, "tie_word_embeddings": False}


def _count_apertus(r: Reading) -> Count:
    """modeling_apertus.py: q, k, v, o (``attention_bias``), q/k RMSNorms per head, an
    up/down MLP (``mlp_bias``) with xIELU's two learned scalars, two RMSNorms a layer."""
    s = shapes(r)
    bias = flag(r, "attention_bias")
    ffn = mlp(s.hidden, size(r, "intermediate_size"), gated=False, bias=flag(r, "mlp_bias"))
    layer = s.attention(bias, bias) + norm(s.head_dim).times(2) + ffn + plain(2)
    return decoder(s, (layer + norm(s.hidden).times(2)).times(s.layers))


register(
    FAMILY,
    "apertus",
    Rule(defaults=_DEFAULTS, parameters=_count_apertus),
    UNIFORM_KINDS,
    "read as llama; K/V heads default to the heads (ApertusConfig)",
    architectures=("ApertusForCausalLM",),
)
