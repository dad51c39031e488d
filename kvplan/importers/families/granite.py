"""IBM Granite 3 (dense, read as Llama), Granite 3 MoE (``granitemoe``: read as Llama, the
experts sharing one cache, as vLLM's granitemoe.py does), Granite MoE with a shared MLP
(``granitemoeshared``), the sliding-window Granite SWA models (``granite_swa``,
``granitemoe_swa``) and Granite 4 hybrids (Mamba2 + attention), whose configs state
``layer_types``; a hybrid without it is refused rather than guessed.

GraniteSWAConfig and GraniteMoeSWAConfig build ``layer_types`` when a file states none: layer
``i`` is global when ``i % 4 == 0``, else it slides over ``sliding_window`` (default 128);
vLLM's granite.py (``granite_layer_attn_params``) reads that list. vLLM's granitemoe.py, which
also serves the shared and SWA MoE classes, takes head_dim as hidden_size / heads."""

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

_SWA_KINDS = ("full_attention", "sliding_attention")

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
    router; two RMSNorms a layer; a shared gated MLP of ``shared_intermediate_size`` when it is
    not 0 (modeling_granitemoeshared.py)."""
    s = shapes(r)
    bias = flag(r, "attention_bias")
    num_experts = size(r, "num_local_experts")
    expert = mlp(s.hidden, size(r, "intermediate_size"))
    layer = s.attention(bias, bias) + norm(s.hidden).times(2) + plain(s.hidden * num_experts)
    layer += experts(expert, num_experts, size(r, "num_experts_per_tok"))
    shared = size(r, "shared_intermediate_size", default=0, minimum=0)
    if shared:
        layer += mlp(s.hidden, shared)
    return decoder(s, layer.times(s.layers))


def _layers_granite_swa(r: Reading, n: int) -> None:
    if layers_explicit(r, n):
        return
    r.spec["sliding_window"] = r.get("sliding_window")
    r.spec["layer_types"] = [
        "full_attention" if i % 4 == 0 else "sliding_attention" for i in range(n)
    ]
    r.notes.append("layer_types: global where i % 4 == 0, else sliding (the class default)")


# GraniteSWAConfig defaults (configuration_granite_swa.py).
_GRANITE_SWA = {
    "vocab_size": 100352,
    "hidden_size": 2560,
    "intermediate_size": 8192,
    "num_hidden_layers": 24,
    "num_attention_heads": 20,
    "num_key_value_heads": 4,
    "max_position_embeddings": 8192,
    "sliding_window": 128,
    "tie_word_embeddings": True,
}
# GraniteMoeSharedConfig defaults (configuration_granitemoeshared.py); GraniteMoeSWAConfig adds
# sliding_window 128 (configuration_granitemoe_swa.py).
_GRANITE_MOE_SHARED = {
    "vocab_size": 32000,
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "max_position_embeddings": 2048,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
    "tie_word_embeddings": False,
}


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
register(
    FAMILY,
    "granitemoeshared",
    Rule(defaults=_GRANITE_MOE_SHARED, reads_head_dim=False, parameters=_count_granite_moe),
    UNIFORM_KINDS,
    "Granite MoE with a shared MLP: read as granitemoe, head_dim hidden_size / heads"
    " (vLLM granitemoeshared.py); GraniteMoeSharedConfig defaults",
    architectures=("GraniteMoeSharedForCausalLM",),
)
register(
    FAMILY,
    "granite_swa",
    Rule(layers=_layers_granite_swa, defaults=_GRANITE_SWA),
    _SWA_KINDS,
    "layer_types, else global where i % 4 == 0 and sliding_window (default 128) elsewhere;"
    " K/V heads default 4 (GraniteSWAConfig; vLLM serves it with granite.py)",
    architectures=("GraniteSWAForCausalLM",),
)
register(
    FAMILY,
    "granitemoe_swa",
    Rule(
        layers=_layers_granite_swa,
        defaults={**_GRANITE_MOE_SHARED, "sliding_window": 128},
        reads_head_dim=False,
        parameters=_count_granite_moe,
    ),
    _SWA_KINDS,
    "layer_types, else global where i % 4 == 0 and sliding_window (default 128) elsewhere;"
    " head_dim hidden_size / heads (GraniteMoeSWAConfig; vLLM granitemoeshared.py)",
    architectures=("GraniteMoeSWAForCausalLM",),
)
