"""OLMo Hybrid (``olmo_hybrid``): gated delta net layers with full attention every fourth.

OlmoHybridConfig (transformers configuration_olmo_hybrid.py) states ``layer_types``; absent,
layer ``i`` is full attention when ``i % 4 == 3`` (the last layer when none is). The gated
delta net sizes default from the attention: ``linear_num_key_heads`` and
``linear_num_value_heads`` to ``num_attention_heads``, ``linear_key_head_dim`` to ``0.75 x
hidden_size / linear_num_key_heads`` and ``linear_value_head_dim`` to twice that; K/V heads to
the attention heads. vLLM 0.32 (olmo_hybrid.py) reads the same keys and keeps the recurrent
state in the model dtype.
"""

from __future__ import annotations

from kvplan.errors import SpecError
from kvplan.importers.parameters import (
    Count,
    decoder,
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
from kvplan.importers.rules import Rule, layers_explicit

FAMILY = "olmo_hybrid"

#: OlmoHybridConfig defaults for the keys that size the cache or the weights.
_DEFAULTS = {
    "vocab_size": 100352,
    "hidden_size": 3840,
    "intermediate_size": 11008,
    "num_hidden_layers": 32,
    "num_attention_heads": 30,
    "max_position_embeddings": 65536,
    "linear_conv_kernel_dim": 4,
    "tie_word_embeddings": False,
}


def _layers(r: Reading, n: int) -> None:
    if not layers_explicit(r, n):
        kinds = ["full_attention" if i % 4 == 3 else "linear_attention" for i in range(n)]
        if "full_attention" not in kinds:
            kinds[-1] = "full_attention"
        r.spec["layer_types"] = kinds
        r.notes.append("layer_types: three linear then one full (OlmoHybridConfig)")
    kinds = r.spec["layer_types"]
    if "linear_attention" not in kinds or "full_attention" not in kinds:
        raise SpecError("", ["layer_types: OLMo Hybrid needs linear and full attention layers"])


def _linear_sizes(r: Reading) -> tuple[int, int, int, int, int]:
    heads = size(r, "num_attention_heads")
    key_heads = size(r, "linear_num_key_heads", default=heads)
    value_heads = size(r, "linear_num_value_heads", default=heads)
    key_dim = r.get("linear_key_head_dim")
    if key_dim is None:
        key_dim = int(0.75 * size(r, "hidden_size") / key_heads)
        r.notes.append(f"linear_key_head_dim {key_dim}: 0.75 x hidden_size / key heads")
    value_dim = size(r, "linear_value_head_dim", default=2 * key_dim)
    return key_heads, value_heads, key_dim, value_dim, size(r, "linear_conv_kernel_dim")


def _state(r: Reading) -> None:
    sizes = _linear_sizes(r)
    keys = (
        "linear_num_key_heads",
        "linear_num_value_heads",
        "linear_key_head_dim",
        "linear_value_head_dim",
        "linear_conv_kernel_dim",
    )
    r.spec.update(zip(keys, sizes, strict=True))
    r.spec["state_dtype"] = r.spec["torch_dtype"]  # vLLM: the model dtype unless told


def _count(r: Reading) -> Count:
    """Attention layers as OLMo 2's (q, k, v, o; q and k RMSNorms over all heads; norms after
    attention and after the MLP); gated delta net layers of separate q, k, v, a, b and g
    projections, a bias-free depthwise conv over q, k and v, A_log and dt_bias per value head,
    a gated RMSNorm of the value head dim, o (modeling_olmo_hybrid.py), with norms before
    the mixer and before the MLP. A gated MLP on every layer; embeddings, head, final norm."""
    s = shapes(r)
    key_heads, value_heads, key_dim, value_dim, kernel = _linear_sizes(r)
    keys, values = key_heads * key_dim, value_heads * value_dim
    bias = flag(r, "attention_bias")
    q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
    attention = linear(s.hidden, q + 2 * kv, bias) + linear(q, s.hidden, bias)
    attention += norm(q) + norm(kv)
    delta = linear(s.hidden, 2 * keys + 2 * values + 2 * value_heads) + linear(values, s.hidden)
    delta += plain((2 * keys + values) * kernel + 2 * value_heads) + norm(value_dim)
    common = mlp(s.hidden, size(r, "intermediate_size")) + norm(s.hidden).times(2)
    kinds = r.spec["layer_types"]
    linear_layers = kinds.count("linear_attention")
    layers = (attention + common).times(len(kinds) - linear_layers)
    return decoder(s, layers + (delta + common).times(linear_layers))


register(
    FAMILY,
    "olmo_hybrid",
    Rule(layers=_layers, state=_state, defaults=_DEFAULTS, parameters=_count),
    ("full_attention", "linear_attention"),
    "layer_types, else gated delta net with full attention every fourth layer; linear_* sizes"
    " default from the heads (transformers OlmoHybridConfig, vLLM olmo_hybrid.py)",
    architectures=("OlmoHybridForCausalLM",),
)
