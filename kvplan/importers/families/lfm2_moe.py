"""LFM2-MoE (Liquid AI): LFM2's short-convolution and attention layers, with a dense MLP on the
first ``num_dense_layers`` layers and routed experts after them.

The cache is LFM2's (``kvplan.importers.families.lfm2``): a ``conv`` layer keeps the last
``conv_L_cache - 1`` inputs over ``hidden_size`` channels (vLLM lfm2_moe.py reuses LFM2's
``short_conv_state_shape``), attention layers K and V; the layer kinds come from
``layer_types`` (transformers ``Lfm2MoeConfig``) or, without it, ``full_attn_idxs``.
"""

from __future__ import annotations

from kvplan.importers.families.lfm2 import conv_state, layers_lfm2
from kvplan.importers.parameters import (
    Count,
    decoder,
    experts,
    flag,
    linear,
    mlp,
    norm,
    plain,
    shapes,
    size,
)
from kvplan.importers.reading import Reading
from kvplan.importers.registry import register
from kvplan.importers.rules import Rule

FAMILY = "lfm2_moe"

#: Lfm2MoeConfig's defaults for the keys that size the cache and the weights.
_DEFAULTS = {
    "conv_L_cache": 3,
    "conv_bias": False,
    "tie_word_embeddings": True,
    "num_dense_layers": 2,
    "num_experts": 32,
    "num_experts_per_tok": 4,
    "use_expert_bias": True,
    "moe_intermediate_size": 1792,
    "intermediate_size": 7168,
}


def _count(r: Reading) -> Count:
    """Attention layers (q, k, v, out and per-head q/k RMSNorms) or short convolutions
    (in_proj to 3 x hidden, a depthwise kernel, out_proj, ``conv_bias`` on all three); a
    SwiGLU MLP of ``intermediate_size`` on the first ``num_dense_layers`` layers, then a
    router, ``num_experts`` SwiGLU experts of ``moe_intermediate_size`` and the expert bias
    (a stored buffer); two RMSNorms a layer; the final norm."""
    s = shapes(r)
    kernel = size(r, "conv_L_cache")
    bias = flag(r, "conv_bias")
    conv = (
        linear(s.hidden, 3 * s.hidden, bias)
        + plain(s.hidden * kernel + (s.hidden if bias else 0))
        + linear(s.hidden, s.hidden, bias)
    )
    attention = s.attention() + norm(s.head_dim).times(2)
    kinds = r.spec["layer_types"]
    num_conv = kinds.count("short_conv")
    mixers = conv.times(num_conv) + attention.times(len(kinds) - num_conv)
    num_dense = min(size(r, "num_dense_layers", minimum=0), s.layers)
    num_experts = size(r, "num_experts")
    routed = experts(
        mlp(s.hidden, size(r, "moe_intermediate_size")),
        num_experts,
        size(r, "num_experts_per_tok"),
    )
    router = plain(num_experts * s.hidden + (num_experts if flag(r, "use_expert_bias") else 0))
    dense = mlp(s.hidden, size(r, "intermediate_size"))
    ffn = dense.times(num_dense) + (routed + router).times(s.layers - num_dense)
    return decoder(s, mixers + ffn + norm(s.hidden).times(2 * s.layers))


register(
    FAMILY,
    "lfm2_moe",
    Rule(
        layers=layers_lfm2,
        state=conv_state,
        defaults=_DEFAULTS,
        default_dtype="bfloat16",
        parameters=_count,
    ),
    ("full_attention", "short_conv"),
    "LFM2's layers (transformers Lfm2MoeConfig, vLLM lfm2_moe.py): conv -> short_conv over"
    " hidden_size, conv_L_cache - 1 inputs kept; dense then routed FFN; bfloat16 when unstated",
    architectures=("Lfm2MoeForCausalLM",),
)
