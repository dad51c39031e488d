"""OLMoE: OLMo's mixture of experts, read like Llama.

OlmoeConfig (configuration_olmoe.py): ``num_key_value_heads`` absent means one per head;
vLLM's olmoe.py reads the same keys and keeps one K/V cache per layer for all experts.
"""

from __future__ import annotations

from kvplan.importers.parameters import Count, decoder, flag, moe, norm, shapes, size
from kvplan.importers.reading import Reading
from kvplan.importers.registry import register
from kvplan.importers.rules import UNIFORM_KINDS, Rule

FAMILY = "olmoe"


def _count_olmoe(r: Reading) -> Count:
    """OLMoE (modeling_olmoe.py): q, k, v, o (``attention_bias``) with RMSNorms over all of q
    (``hidden_size``) and all of k, ``num_experts`` gated experts of ``intermediate_size`` and
    a router, two RMSNorms a layer."""
    s = shapes(r)
    bias = flag(r, "attention_bias")
    attention = s.attention(bias, bias) + norm(s.hidden) + norm(s.kv_heads * s.head_dim)
    ffn = moe(
        s.hidden,
        size(r, "intermediate_size"),
        size(r, "num_experts"),
        size(r, "num_experts_per_tok"),
    )
    return decoder(s, (attention + ffn + norm(s.hidden).times(2)).times(s.layers))


register(
    FAMILY,
    "olmoe",
    Rule(parameters=_count_olmoe),
    UNIFORM_KINDS,
    "OLMoE: read as llama; the experts share one cache",
    architectures=("OlmoeForCausalLM",),
)
