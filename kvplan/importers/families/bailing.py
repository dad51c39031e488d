"""inclusionAI Ling / Ring (``bailing_moe``: BailingMoeForCausalLM and BailingMoeV2ForCausalLM)
and BharatGen Param2 (``param2moe``), which keeps the same keys.

GQA read like Llama: ``num_key_value_heads`` K/V heads of ``head_dim`` (absent or null:
hidden_size / heads), as vLLM's bailing_moe.py reads them; the config class ships with the
checkpoint (remote code). The experts share one cache; the optional q/k norms and partial
rotary change the weights or the positions, not what a token caches.
"""

from __future__ import annotations

from kvplan.importers.parameters import (
    Count,
    decoder,
    flag,
    linear,
    mlp,
    moe,
    norm,
    plain,
    shapes,
    size,
)
from kvplan.importers.reading import Reading
from kvplan.importers.registry import register
from kvplan.importers.rules import UNIFORM_KINDS, Rule

FAMILY = "bailing"


def count_bailing(r: Reading) -> Count:
    """vLLM bailing_moe.py: a fused query_key_value (bias with ``use_bias`` or
    ``use_qkv_bias``) and a dense output (``use_bias``), q/k norms with ``use_qk_norm``
    (RMSNorm with ``use_rmsnorm``, else LayerNorm), two RMSNorms a layer; the first
    ``first_k_dense_replace`` layers a gated MLP of ``intermediate_size``, the rest
    ``num_experts`` experts of ``moe_intermediate_size``, ``num_shared_experts`` shared ones as
    one MLP, a router and, with ``moe_router_enable_expert_bias``, its expert bias."""
    s = shapes(r)
    q_dim, kv_dim = s.heads * s.head_dim, s.kv_heads * s.head_dim
    qkv_bias = flag(r, "use_bias") or flag(r, "use_qkv_bias")
    base = linear(s.hidden, q_dim + 2 * kv_dim, qkv_bias) + linear(
        q_dim, s.hidden, flag(r, "use_bias")
    )
    if flag(r, "use_qk_norm"):
        base += norm(s.head_dim, bias=not flag(r, "use_rmsnorm")).times(2)
    base += norm(s.hidden).times(2)
    dense = base + mlp(s.hidden, size(r, "intermediate_size"))
    width = size(r, "moe_intermediate_size")
    num_experts = size(r, "num_experts")
    shared_width = size(r, "moe_shared_expert_intermediate_size", default=width)
    shared = size(r, "num_shared_experts", default=0, minimum=0) * shared_width
    bias = plain(num_experts if flag(r, "moe_router_enable_expert_bias") else 0)
    sparse = base + moe(s.hidden, width, num_experts, size(r, "num_experts_per_tok"), shared) + bias
    num_dense = min(size(r, "first_k_dense_replace", default=0, minimum=0), s.layers)
    return decoder(s, dense.times(num_dense) + sparse.times(s.layers - num_dense))


register(
    FAMILY,
    "bailing_moe",
    Rule(parameters=count_bailing),
    UNIFORM_KINDS,
    "read as llama (head_dim or hidden_size / heads), the experts share one cache",
    architectures=("BailingMoeForCausalLM", "BailingMoeV2ForCausalLM"),
)

# Param2 (vLLM param2moe.py, no transformers class): BailingMoeV2's layout and keys, with the
# model file's getattr defaults where they differ from bailing_moe.py's: the router keeps its
# expert bias and one shared expert unless told otherwise, layer 0 dense.
_PARAM2 = {
    "moe_router_enable_expert_bias": True,
    "num_shared_experts": 1,
    "first_k_dense_replace": 1,
}

register(
    FAMILY,
    "param2moe",
    Rule(defaults=_PARAM2, parameters=count_bailing),
    UNIFORM_KINDS,
    "Param2 (vLLM param2moe.py): GQA read as llama (head_dim or hidden_size / heads);"
    " BailingMoeV2's expert keys with vLLM's defaults",
    architectures=("Param2MoEForCausalLM",),
)
