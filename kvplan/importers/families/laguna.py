"""Poolside Laguna (``laguna``): GQA with a per-layer query head count and sliding layers.

LagunaConfig (configuration_laguna.py) states ``layer_types`` (absent: every layer global) and a
``sliding_window`` (default 512) for the sliding ones; ``num_attention_heads_per_layer`` varies
only the query heads, so every layer caches ``num_key_value_heads`` (default 8) K/V heads of
``head_dim`` (default 128). vLLM's laguna.py reads the same keys and clears the engine-wide
window, so global layers stay global. Laguna XS.2: 10 global + 30 sliding layers of 8 x 128.
"""

from __future__ import annotations

from kvplan.errors import SpecError
from kvplan.importers.parameters import (
    Count,
    decoder,
    linear,
    mlp,
    moe,
    norm,
    shapes,
    size,
    total,
)
from kvplan.importers.reading import Reading, as_list, whole
from kvplan.importers.registry import register
from kvplan.importers.rules import Rule, layers_explicit
from kvplan.model.limits import MAX_DIM

FAMILY = "laguna"

# LagunaConfig defaults for the keys that size the cache or the weights.
_DEFAULTS = {
    "vocab_size": 100352,
    "hidden_size": 2048,
    "intermediate_size": 8192,
    "num_hidden_layers": 40,
    "num_attention_heads": 48,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "max_position_embeddings": 131072,
    "sliding_window": 512,
    "moe_intermediate_size": 512,
    "shared_expert_intermediate_size": 512,
    "num_experts": 256,
    "num_experts_per_tok": 8,
    "tie_word_embeddings": False,
}


def _layers_laguna(r: Reading, n: int) -> None:
    if not layers_explicit(r, n):
        r.notes.append("layer_types absent: every layer global (LagunaConfig)")


def _per_layer(r: Reading, key: str, n: int, default: list[str] | list[int]) -> list[object]:
    value = r.config.get(key)
    if value is None:
        return list(default)
    given = as_list(value, key)
    if len(given) != n:
        raise SpecError("", [f"{key}: has {len(given):,} entries but {n} layers"])
    return given


def _count_laguna(r: Reading) -> Count:
    """modeling_laguna.py: per layer q (``num_attention_heads_per_layer`` heads), k, v, o, q/k
    RMSNorms of head_dim and a gate ``g_proj`` (one per head, or per head and dim with
    ``gating: per-element``); a dense gated MLP where ``mlp_layer_types`` says dense (default:
    the first layer), else routed experts with a shared expert and a biased router."""
    s = shapes(r)
    n = s.layers
    heads = _per_layer(r, "num_attention_heads_per_layer", n, [s.heads] * n)
    dense = ["dense"] + ["sparse"] * (n - 1)
    kinds = _per_layer(r, "mlp_layer_types", n, dense)
    per_element = r.config.get("gating") == "per-element"
    kv = s.kv_heads * s.head_dim
    experts = moe(
        s.hidden,
        size(r, "moe_intermediate_size"),
        size(r, "num_experts"),
        size(r, "num_experts_per_tok"),
        size(r, "shared_expert_intermediate_size"),
        router_bias=True,
    )
    layers = []
    for num_heads, kind in zip(heads, kinds, strict=True):
        q = whole(num_heads, "num_attention_heads_per_layer", maximum=MAX_DIM) * s.head_dim
        gate = q if per_element else q // s.head_dim
        attention = linear(s.hidden, q + 2 * kv) + linear(q, s.hidden) + linear(s.hidden, gate)
        ffn = mlp(s.hidden, size(r, "intermediate_size")) if kind == "dense" else experts
        layers.append(attention + norm(s.head_dim).times(2) + ffn + norm(s.hidden).times(2))
    return decoder(s, total(layers))


register(
    FAMILY,
    "laguna",
    Rule(layers=_layers_laguna, defaults=_DEFAULTS, parameters=_count_laguna),
    ("full_attention", "sliding_attention"),
    "layer_types (absent: all global), sliding_window (default 512); query heads per layer vary,"
    " K/V heads do not (LagunaConfig, vLLM laguna.py)",
    architectures=("LagunaForCausalLM",),
)
