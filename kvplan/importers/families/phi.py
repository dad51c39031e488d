"""Phi-2, Phi-3, Phi-4 and Phi-3.5-MoE: Llama-shaped keys; Phi-2 unties its embeddings by
default, and a Phi-3 or PhiMoE ``sliding_window`` slides every layer."""

from __future__ import annotations

from kvplan.importers.parameters import Count, decoder, flag, mlp, moe, norm, plain, shapes, size
from kvplan.importers.reading import Reading
from kvplan.importers.registry import register
from kvplan.importers.rules import UNIFORM_KINDS, Rule

FAMILY = "phi"


def _count_phi(r: Reading) -> Count:
    """Phi-2: attention and MLP in parallel after one LayerNorm; biased q, k, v, dense, fc1
    and fc2; per-head q/k LayerNorms with ``qk_layernorm``; an output head with a bias."""
    s = shapes(r)
    layer = s.attention(True, True) + norm(s.hidden, bias=True)
    layer += mlp(s.hidden, size(r, "intermediate_size"), gated=False, bias=True)
    if flag(r, "qk_layernorm"):
        layer += norm(s.head_dim, bias=True).times(2)
    head_bias = plain(0 if s.tied else s.vocab)
    return decoder(s, layer.times(s.layers) + head_bias, norm(s.hidden, bias=True))


register(
    FAMILY,
    "phi",
    Rule(defaults={"tie_word_embeddings": False}, parameters=_count_phi),
    UNIFORM_KINDS,
    "Phi-2: untied embeddings by default",
)
register(
    FAMILY,
    "phi3",
    Rule(),
    UNIFORM_KINDS,
    "a stated sliding_window slides every layer",
    architectures=("Phi3ForCausalLM",),
)


def _count_phimoe(r: Reading) -> Count:
    """Phi-3.5-MoE (modeling_phimoe.py): q, k, v and o with ``attention_bias``, LayerNorms
    with bias, ``num_local_experts`` gated experts and a router, an output head with a bias
    (``lm_head_bias``)."""
    s = shapes(r)
    bias = flag(r, "attention_bias")
    ffn = moe(
        s.hidden,
        size(r, "intermediate_size"),
        size(r, "num_local_experts"),
        size(r, "num_experts_per_tok"),
    )
    layer = s.attention(bias, bias) + ffn + norm(s.hidden, bias=True).times(2)
    head_bias = plain(s.vocab if flag(r, "lm_head_bias") else 0)
    return decoder(s, layer.times(s.layers) + head_bias, norm(s.hidden, bias=True))


# PhiMoEConfig defaults (configuration_phimoe.py): 8 K/V heads, no sliding window.
register(
    FAMILY,
    "phimoe",
    Rule(defaults={"num_key_value_heads": 8}, parameters=_count_phimoe),
    UNIFORM_KINDS,
    "Phi-3.5-MoE: read as phi3 (a stated sliding_window slides); absent K/V heads 8",
    architectures=("PhiMoEForCausalLM",),
)
