"""Arcee Trinity (``afmoe``): GQA with sliding and global layers, mixture-of-experts MLPs.

AfmoeConfig (configuration_afmoe.py) builds ``layer_types`` when a file states none: a layer
slides (``sliding_window``, default 1024) unless ``(i + 1) % global_attn_every_n_layers == 0``
(default 4); vLLM's afmoe.py reads the same list. ``head_dim`` defaults to 128 and
``num_key_value_heads`` to the number of heads. The gated attention output and the q/k norms
change the weights, not what a token caches.
"""

from __future__ import annotations

from kvplan.importers.parameters import Count, decoder, linear, mlp, moe, norm, plain, shapes, size
from kvplan.importers.reading import Reading, whole
from kvplan.importers.registry import register
from kvplan.importers.rules import Rule, layers_explicit

FAMILY = "afmoe"

# AfmoeConfig defaults for the keys that size the cache or the weights.
_DEFAULTS = {
    "vocab_size": 200192,
    "head_dim": 128,
    "sliding_window": 1024,
    "max_position_embeddings": 16384,
    "num_experts": 64,
    "num_experts_per_tok": 6,
    "num_shared_experts": 2,
    "num_dense_layers": 1,
    "tie_word_embeddings": False,
}


def _layers_afmoe(r: Reading, n: int) -> None:
    if layers_explicit(r, n):
        return
    every = r.config.get("global_attn_every_n_layers")
    if every is None:
        every = 4
        r.notes.append("global_attn_every_n_layers 4: the afmoe default (not in file)")
    every = whole(every, "global_attn_every_n_layers", maximum=n)
    r.spec["sliding_window"] = r.get("sliding_window")
    r.spec["layer_types_pattern"] = ["sliding_attention"] * (every - 1) + ["full_attention"]


def _count_afmoe(r: Reading) -> Count:
    """modeling_afmoe.py: q, k, v, o and the output gate (hidden to heads x head_dim), RMSNorms
    on q and k per head, four RMSNorms a layer; the first ``num_dense_layers`` layers a gated
    MLP of ``intermediate_size``, the rest ``num_experts`` experts of ``moe_intermediate_size``,
    ``num_shared_experts`` shared ones as one MLP, a router and its ``expert_bias``."""
    s = shapes(r)
    q_dim = s.heads * s.head_dim
    base = s.attention() + linear(s.hidden, q_dim) + norm(s.head_dim).times(2)
    base += norm(s.hidden).times(4)
    dense = base + mlp(s.hidden, size(r, "intermediate_size"))
    width = size(r, "moe_intermediate_size")
    num_experts = size(r, "num_experts")
    shared = size(r, "num_shared_experts", minimum=0) * width
    active = size(r, "num_experts_per_tok")
    sparse = base + moe(s.hidden, width, num_experts, active, shared) + plain(num_experts)
    num_dense = min(size(r, "num_dense_layers", minimum=0), s.layers)
    return decoder(s, dense.times(num_dense) + sparse.times(s.layers - num_dense))


register(
    FAMILY,
    "afmoe",
    Rule(layers=_layers_afmoe, defaults=_DEFAULTS, parameters=_count_afmoe),
    ("full_attention", "sliding_attention"),
    "layer_types, else global every global_attn_every_n_layers (default 4), window 1024",
    architectures=("AfmoeForCausalLM",),
)
