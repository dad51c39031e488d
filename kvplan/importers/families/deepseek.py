"""DeepSeek V2/V3/R1 and Kimi K2: multi-head latent attention (MLA); DeepSeek MoE (V1).

Each layer caches one compressed latent of ``kv_lora_rank`` plus the shared RoPE key of
``qk_rope_head_dim``, not K and V per head: no factor 2 and no heads. The MLA ranks are copied
as they are; ``head_dim`` is not read, since the latent replaces it.

DeepSeek V1 (``deepseek``, DeepSeek-MoE and DeepSeek-LLM under remote code) has plain
GQA/MHA attention: vLLM's deepseek_v2.py serves DeepseekForCausalLM with its non-MLA
attention for this model_type, ``num_key_value_heads`` K/V heads of hidden_size / heads.
"""

from __future__ import annotations

from kvplan.importers.parameters import (
    Count,
    decoder,
    linear,
    mlp,
    moe,
    norm,
    shapes,
    size,
)
from kvplan.importers.reading import Reading
from kvplan.importers.registry import register, register_wrapper
from kvplan.importers.rules import UNIFORM_KINDS, Rule

FAMILY = "deepseek"

_MLA = ("kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")


def _mla(r: Reading, hidden: int, heads: int) -> Count:
    """MLA projections: q (through the ``q_lora_rank`` latent and its norm when set), the
    joint K/V latent with the RoPE key, its norm, the per-head K/V up-projection, o."""
    nope, rope = size(r, "qk_nope_head_dim"), size(r, "qk_rope_head_dim")
    v_dim, kv_rank = size(r, "v_head_dim"), size(r, "kv_lora_rank")
    q_dim = heads * (nope + rope)
    if r.get("q_lora_rank") is None:
        q = linear(hidden, q_dim)
    else:
        q_rank = size(r, "q_lora_rank")
        q = linear(hidden, q_rank) + norm(q_rank) + linear(q_rank, q_dim)
    kv = linear(hidden, kv_rank + rope) + norm(kv_rank) + linear(kv_rank, heads * (nope + v_dim))
    return q + kv + linear(heads * v_dim, hidden)


def count_deepseek_moe(r: Reading, attention: Count) -> Count:
    """Layers of ``attention`` (with two RMSNorms); dense MLP on the first
    ``first_k_dense_replace`` layers, then every ``moe_layer_freq``-th layer routed experts
    plus ``n_shared_experts`` shared ones (one MLP of their joint width) and a router, with
    V3's ``e_score_correction_bias`` (noaux_tc). MTP layers are not counted."""
    s = shapes(r)
    base = attention + norm(s.hidden).times(2)
    dense = base + mlp(s.hidden, size(r, "intermediate_size"))
    num_experts = size(r, "n_routed_experts", default=0, minimum=0)
    if not num_experts:
        return decoder(s, dense.times(s.layers))
    width = size(r, "moe_intermediate_size")
    first = size(r, "first_k_dense_replace", default=0, minimum=0)
    every = size(r, "moe_layer_freq", default=1)
    shared = size(r, "n_shared_experts", default=0, minimum=0) * width
    active = size(r, "num_experts_per_tok")
    bias = r.get("topk_method") == "noaux_tc"
    sparse = base + moe(s.hidden, width, num_experts, active, shared, bias)
    num_sparse = sum(1 for i in range(first, s.layers) if i % every == 0)
    return decoder(s, sparse.times(num_sparse) + dense.times(s.layers - num_sparse))


def count_mla(r: Reading) -> Count:
    """MLA attention in DeepSeek V2/V3's layer layout (``count_deepseek_moe``)."""
    s = shapes(r)
    return count_deepseek_moe(r, _mla(r, s.hidden, s.heads))


def _count_deepseek_v1(r: Reading) -> Count:
    """DeepSeek V1: bias-free GQA/MHA in DeepSeek V2's MoE layer layout."""
    return count_deepseek_moe(r, shapes(r).attention())


def _count_deepseek(r: Reading) -> Count:
    """MLA attention, then ``count_deepseek_moe``'s dense and expert layers."""
    return count_mla(r)


#: What an MLA model's rule copies into the spec (GLM-4.7-Flash reads them too).
MLA_KEYS = _MLA

_RULE = Rule(extra=_MLA, reads_head_dim=False, parameters=_count_deepseek)
_NOTES = "MLA: one latent of kv_lora_rank + qk_rope_head_dim per layer (no factor 2)"

# Kimi K2's config.json names DeepSeek V3's class: vLLM serves it with that model.
for _type, _class in (
    ("deepseek_v2", "DeepseekV2ForCausalLM"),
    ("deepseek_v3", "DeepseekV3ForCausalLM"),
    ("kimi_k2", "DeepseekV3ForCausalLM"),
):
    register(FAMILY, _type, _RULE, ("mla_latent",), _NOTES, architectures=(_class,))
register(
    FAMILY,
    "deepseek",
    Rule(reads_head_dim=False, parameters=_count_deepseek_v1),
    UNIFORM_KINDS,
    "DeepSeek V1: num_key_value_heads of hidden_size / heads (vLLM deepseek_v2.py, no MLA)",
    architectures=("DeepseekForCausalLM",),
)
register_wrapper(
    FAMILY,
    "kimi_k25",
    "kimi_k2",
    "Kimi K2.5 with vision (vLLM: KimiK25ForConditionalGeneration): DeepSeek V3 in text_config;"
    " the vision tower is not counted",
    engines=("vllm",),
)
