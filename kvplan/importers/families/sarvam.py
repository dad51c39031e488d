"""Sarvam AI's MoE models (remote code; vLLM sarvam.py).

``sarvam_moe`` (SarvamMoEForCausalLM): vLLM serves it as BailingMoeForCausalLM, so its cache
is GQA read like Llama: ``num_key_value_heads`` K/V heads of ``head_dim`` (absent or null:
hidden_size / heads). ``sarvam_mla`` (SarvamMLAForCausalLM): DeepSeek's multi-head latent
attention, one latent of ``kv_lora_rank + qk_rope_head_dim`` a layer, with Bailing-style
expert keys (``num_experts``, ``num_shared_experts``).
"""

from __future__ import annotations

from kvplan.importers.families.bailing import count_bailing
from kvplan.importers.families.deepseek import MLA_KEYS, mla_attention
from kvplan.importers.parameters import (
    Count,
    decoder,
    flag,
    mlp,
    moe,
    norm,
    shapes,
    size,
)
from kvplan.importers.reading import Reading
from kvplan.importers.registry import register
from kvplan.importers.rules import UNIFORM_KINDS, Rule

FAMILY = "sarvam"

# vLLM sarvam.py's getattr defaults (SarvamMLABlock, SarvamMLAMoE).
_SARVAM_MLA = {
    "intermediate_size": 16384,
    "first_k_dense_replace": 1,
    "moe_layer_freq": 1,
    "num_shared_experts": 1,
    "moe_router_enable_expert_bias": True,
}


def _count_sarvam_mla(r: Reading) -> Count:
    """MLA and two RMSNorms a layer; a gated MLP of ``intermediate_size`` on the first
    ``first_k_dense_replace`` layers (and between MoE layers when ``moe_layer_freq`` > 1),
    else ``num_experts`` experts of ``moe_intermediate_size``, ``num_shared_experts`` shared
    ones as one MLP (``moe_shared_expert_intermediate_size`` each when stated), a router and
    its expert bias (``moe_router_enable_expert_bias``)."""
    s = shapes(r)
    base = mla_attention(r, s.hidden, s.heads) + norm(s.hidden).times(2)
    dense = base + mlp(s.hidden, size(r, "intermediate_size"))
    if r.get("num_experts") is None:
        return decoder(s, dense.times(s.layers))
    width = size(r, "moe_intermediate_size")
    shared_width = size(r, "moe_shared_expert_intermediate_size", default=width)
    shared = size(r, "num_shared_experts", minimum=0) * shared_width
    bias = flag(r, "moe_router_enable_expert_bias")
    num_experts, active = size(r, "num_experts"), size(r, "num_experts_per_tok")
    sparse = base + moe(s.hidden, width, num_experts, active, shared, router_bias=bias)
    first, every = size(r, "first_k_dense_replace", minimum=0), size(r, "moe_layer_freq")
    num_sparse = sum(1 for i in range(first, s.layers) if (i - first) % every == 0)
    return decoder(s, sparse.times(num_sparse) + dense.times(s.layers - num_sparse))


register(
    FAMILY,
    "sarvam_moe",
    Rule(parameters=count_bailing),
    UNIFORM_KINDS,
    "Sarvam MoE (vLLM sarvam.py: BailingMoeForCausalLM): GQA read as llama, head_dim or"
    " hidden_size / heads",
    architectures=("SarvamMoEForCausalLM",),
)
register(
    FAMILY,
    "sarvam_mla",
    Rule(extra=MLA_KEYS, reads_head_dim=False, defaults=_SARVAM_MLA, parameters=_count_sarvam_mla),
    ("mla_latent",),
    "Sarvam MLA (vLLM sarvam.py, SarvamMLAAttention): one latent of kv_lora_rank +"
    " qk_rope_head_dim per layer (no factor 2)",
    architectures=("SarvamMLAForCausalLM",),
)
