"""Baidu ERNIE 4.5: dense (``ernie4_5``) and mixture-of-experts (``ernie4_5_moe``).

Both are GQA read like Llama: ``num_key_value_heads`` and ``head_dim`` (Ernie4_5Config's
default 128; the MoE config has none, so hidden_size / heads), ``use_bias`` on q, k, v and o.
vLLM serves the dense model with its llama model and the MoE with ernie45_moe.py, which reads
the same keys. The experts share one cache.
"""

from __future__ import annotations

from kvplan.importers.parameters import (
    Count,
    decoder,
    flag,
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

FAMILY = "ernie"

# Ernie4_5Config / Ernie4_5_MoeConfig defaults (configuration_ernie4_5*.py) for the keys that
# size the cache or the weights.
_DENSE = {
    "vocab_size": 103424,
    "num_key_value_heads": 2,
    "head_dim": 128,
    "max_position_embeddings": 131072,
    "tie_word_embeddings": True,
}
_MOE = {
    "vocab_size": 103424,
    "num_key_value_heads": 4,
    "max_position_embeddings": 131072,
    "tie_word_embeddings": True,
}


def _count_ernie(r: Reading) -> Count:
    """Dense ERNIE 4.5: GQA and a gated MLP with ``use_bias``, two RMSNorms a layer."""
    s = shapes(r)
    bias = flag(r, "use_bias")
    mlp_ = mlp(s.hidden, size(r, "intermediate_size"), bias=bias)
    layer = s.attention(bias, bias) + mlp_ + norm(s.hidden).times(2)
    return decoder(s, layer.times(s.layers))


def _is_sparse(r: Reading, i: int, n: int) -> bool:
    """modeling_ernie4_5_moe.py: experts where ``(i + 1) % moe_layer_interval == 0`` and i lies
    from ``moe_layer_start_index`` (default 1) to ``moe_layer_end_index`` (-1: the last)."""
    start = size(r, "moe_layer_start_index", default=1, minimum=0)
    end = r.get("moe_layer_end_index")
    last = n - 1 if end is None or end == -1 else size(r, "moe_layer_end_index", minimum=0)
    every = size(r, "moe_layer_interval", default=1)
    return (i + 1) % every == 0 and start <= i <= last


def _count_ernie_moe(r: Reading) -> Count:
    """ERNIE 4.5 MoE: GQA; dense layers with a gated MLP of ``intermediate_size``; expert
    layers with ``moe_num_experts`` experts of ``moe_intermediate_size`` (``moe_k`` active),
    ``moe_num_shared_experts`` shared ones as one MLP of their joint width, the router and its
    ``e_score_correction_bias`` (moe_statics); two RMSNorms a layer. MTP layers not counted."""
    s = shapes(r)
    bias = flag(r, "use_bias")
    base = s.attention(bias, bias) + norm(s.hidden).times(2)
    dense = base + mlp(s.hidden, size(r, "intermediate_size"), bias=bias)
    width = size(r, "moe_intermediate_size")
    num_experts = size(r, "moe_num_experts", "num_experts")
    shared = size(r, "moe_num_shared_experts", default=0, minimum=0) * width
    active = size(r, "moe_k", "num_experts_per_tok")
    sparse = base + moe(s.hidden, width, num_experts, active, shared) + plain(num_experts)
    num_sparse = sum(1 for i in range(s.layers) if _is_sparse(r, i, s.layers))
    return decoder(s, sparse.times(num_sparse) + dense.times(s.layers - num_sparse))


register(
    FAMILY,
    "ernie4_5",
    Rule(defaults=_DENSE, parameters=_count_ernie),
    UNIFORM_KINDS,
    "read as llama; absent K/V heads 2, head_dim 128, tied (Ernie4_5Config)",
    architectures=("Ernie4_5ForCausalLM",),
)
register(
    FAMILY,
    "ernie4_5_moe",
    Rule(defaults=_MOE, parameters=_count_ernie_moe),
    UNIFORM_KINDS,
    "read as llama, the experts share one cache; absent K/V heads 4 (Ernie4_5_MoeConfig)",
    architectures=("Ernie4_5_MoeForCausalLM",),
)
