"""IBM Granite 3 (dense, read as Llama), Granite 3 MoE (``granitemoe``: read as Llama, the
experts sharing one cache, as vLLM's granitemoe.py does) and Granite 4 hybrids (Mamba2 +
attention), whose configs state ``layer_types``; a hybrid without it is refused rather than
guessed."""

from __future__ import annotations

from kvplan.errors import SpecError
from kvplan.importers.parameters import (
    Count,
    decoder,
    experts,
    flag,
    mamba2,
    mlp,
    norm,
    plain,
    shapes,
    size,
)
from kvplan.importers.reading import Reading
from kvplan.importers.registry import register
from kvplan.importers.rules import MAMBA_KEYS, UNIFORM_KINDS, Rule, layers_explicit

FAMILY = "granite"


def _layers_hybrid_granite(r: Reading, n: int) -> None:
    if not layers_explicit(r, n):
        raise SpecError("", ["layer_types: required for granitemoehybrid"])


def _count_granite_hybrid(r: Reading) -> Count:
    """Mamba2 or attention mixers (from ``layer_types``), each layer with ``num_local_experts``
    experts (fused gate/up, ``intermediate_size``) behind a router, and a shared MLP of
    ``shared_intermediate_size``; two RMSNorms a layer."""
    s = shapes(r)
    bias = flag(r, "attention_bias")
    attention = s.attention(bias, bias)
    mamba = mamba2(
        s.hidden,
        size(r, "mamba_n_heads"),
        size(r, "mamba_d_head"),
        size(r, "mamba_n_groups", default=1),
        size(r, "mamba_d_state"),
        size(r, "mamba_d_conv"),
        flag(r, "mamba_conv_bias", default=True),
        flag(r, "mamba_proj_bias"),
    )
    ffn = mlp(s.hidden, size(r, "shared_intermediate_size")) + norm(s.hidden).times(2)
    num_experts = size(r, "num_local_experts", default=0, minimum=0)
    if num_experts:
        expert = mlp(s.hidden, size(r, "intermediate_size"))
        ffn += experts(expert, num_experts, size(r, "num_experts_per_tok"))
        ffn += plain(s.hidden * num_experts)
    kinds = r.spec["layer_types"]
    num_mamba = kinds.count("mamba")
    layers = mamba.times(num_mamba) + attention.times(len(kinds) - num_mamba)
    return decoder(s, layers + ffn.times(s.layers))


def _count_granite_moe(r: Reading) -> Count:
    """Granite MoE (modeling_granitemoe.py): GQA (``attention_bias``), ``num_local_experts``
    experts with fused input_linear (2 x ``intermediate_size``) and output_linear, a bias-free
    router; two RMSNorms a layer."""
    s = shapes(r)
    bias = flag(r, "attention_bias")
    num_experts = size(r, "num_local_experts")
    expert = mlp(s.hidden, size(r, "intermediate_size"))
    layer = s.attention(bias, bias) + norm(s.hidden).times(2) + plain(s.hidden * num_experts)
    layer += experts(expert, num_experts, size(r, "num_experts_per_tok"))
    return decoder(s, layer.times(s.layers))


# GraniteMoeConfig defaults (configuration_granitemoe.py): 8 experts, 2 active.
register(
    FAMILY,
    "granitemoe",
    Rule(
        defaults={"num_local_experts": 8, "num_experts_per_tok": 2}, parameters=_count_granite_moe
    ),
    UNIFORM_KINDS,
    "read as llama, the experts share one cache; absent experts 8, active 2 (GraniteMoeConfig)",
    architectures=("GraniteMoeForCausalLM",),
)
register(
    FAMILY,
    "granite",
    Rule(),
    UNIFORM_KINDS,
    "read as llama",
    architectures=("GraniteForCausalLM",),
)
register(
    FAMILY,
    "granitemoehybrid",
    Rule(layers=_layers_hybrid_granite, extra=MAMBA_KEYS, parameters=_count_granite_hybrid),
    ("full_attention", "mamba"),
    "Mamba2 and attention layers from layer_types (required); mamba_* state",
    architectures=("GraniteMoeHybridForCausalLM",),
)
