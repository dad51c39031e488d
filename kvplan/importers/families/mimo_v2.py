"""MiMo-V2-Flash and MiMo-V2 (Xiaomi): sliding and full attention layers with their own K/V
heads, K heads wider than V heads, and a MoE after a dense first layer.

vLLM 0.32 (mimo_v2.py) reads ``hybrid_layer_pattern`` (1: a sliding layer of
``sliding_window_size`` tokens with ``swa_num_key_value_heads`` K/V heads of ``swa_head_dim``
/ ``swa_v_head_dim``; 0: full attention with ``num_key_value_heads`` of ``head_dim`` /
``v_head_dim``). transformers' MiMoV2FlashConfig states none of the ``swa_*`` keys: its layer
types are full on layer 0 and every sixth layer, and a sliding layer has twice the K/V heads
(modeling_mimo_v2_flash.py). The spec has one K and one V head dim for every layer, so the two
kinds must agree on them; the K/V heads go per layer. ``mimo_v2`` (MiMo-V2.5 and later) has
no transformers config class: the same keys, read the same way.
"""

from __future__ import annotations

from kvplan.errors import SpecError
from kvplan.importers.parameters import (
    Count,
    Shapes,
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
from kvplan.importers.reading import Reading, as_list, whole
from kvplan.importers.registry import register
from kvplan.importers.rules import Rule, layers_explicit
from kvplan.model.limits import MAX_DIM

FAMILY = "mimo_v2"

#: MiMoV2FlashConfig defaults (transformers configuration_mimo_v2_flash.py).
_DEFAULTS = {
    "vocab_size": 152576,
    "hidden_size": 4096,
    "intermediate_size": 16384,
    "num_hidden_layers": 48,
    "num_attention_heads": 64,
    "num_key_value_heads": 4,
    "max_position_embeddings": 131072,
    "head_dim": 192,
    "v_head_dim": 128,
    "sliding_window": 128,
    "moe_intermediate_size": 2048,
    "num_experts_per_tok": 8,
    "n_routed_experts": 256,
    "tie_word_embeddings": False,
}


def _sliding(r: Reading, n: int) -> list[bool]:
    """Which layers slide: ``hybrid_layer_pattern`` (vLLM), else ``layer_types``, else the
    config class's: full on layer 0 and on every sixth layer."""
    pattern = r.config.get("hybrid_layer_pattern")
    if pattern is not None:
        given = as_list(pattern, "hybrid_layer_pattern")
        if len(given) != n or any(p not in (0, 1) for p in given):
            raise SpecError("", [f"hybrid_layer_pattern: needs one 0 or 1 per layer ({n})"])
        return [p == 1 for p in given]
    if layers_explicit(r, n):
        return [k == "sliding_attention" for k in r.spec["layer_types"]]
    r.notes.append("layer_types: full on layer 0 and every sixth layer (MiMoV2FlashConfig)")
    return [not (i == 0 or (i + 1) % 6 == 0) for i in range(n)]


def _swa(r: Reading, key: str, fallback: int, why: str) -> int:
    value = r.config.get(key)
    if value is None:
        r.notes.append(f"{key} {fallback}: not in file ({why})")
        return fallback
    return whole(value, key, maximum=MAX_DIM)


def _dims(r: Reading) -> tuple[int, int, int, int]:
    """Full K/V heads, sliding K/V heads, K head dim, V head dim; SpecError when the two
    kinds' head dims differ (the spec holds one K and one V dim for every layer)."""
    kv = size(r, "num_key_value_heads")
    head_dim, v_dim = size(r, "head_dim"), size(r, "v_head_dim")
    swa_kv = _swa(r, "swa_num_key_value_heads", 2 * kv, "twice num_key_value_heads, transformers")
    if r.config.get("swa_head_dim") is None:
        # a file vLLM cannot load (it requires swa_head_dim): transformers' reading
        swa_dim = _swa(r, "swa_head_dim", head_dim, "head_dim, transformers")
        swa_v = _swa(r, "swa_v_head_dim", v_dim, "v_head_dim, transformers")
    else:
        swa_dim = _swa(r, "swa_head_dim", head_dim, "head_dim")
        # vLLM: a sliding layer's V dim is swa_v_head_dim, absent its K dim
        swa_v = _swa(r, "swa_v_head_dim", swa_dim, "swa_head_dim, as vLLM reads it")
    if (swa_dim, swa_v) != (head_dim, v_dim):
        raise SpecError(
            "",
            [
                f"swa_head_dim, swa_v_head_dim: {swa_dim}/{swa_v} differ from head_dim,"
                f" v_head_dim {head_dim}/{v_dim}; kvplan's spec has one K and one V head dim"
            ],
        )
    return kv, swa_kv, head_dim, v_dim


def _layers(r: Reading, n: int) -> None:
    sliding = _sliding(r, n)
    kv, swa_kv, head_dim, v_dim = _dims(r)
    r.spec["layer_types"] = ["sliding_attention" if s else "full_attention" for s in sliding]
    r.spec["head_dim"], r.spec["v_head_dim"] = head_dim, v_dim
    if any(sliding):
        window = r.config.get("sliding_window_size")
        if window is None:
            window = r.get("sliding_window")
            r.notes.append("sliding window from sliding_window (no sliding_window_size)")
        r.spec["sliding_window"] = window
        r.spec["num_key_value_heads_per_layer"] = [swa_kv if s else kv for s in sliding]


def _attention(s: Shapes, kv: int, v_dim: int) -> Count:
    q = s.heads * s.head_dim
    qkv = linear(s.hidden, q + kv * s.head_dim + kv * v_dim, False)
    return qkv + linear(s.heads * v_dim, s.hidden)


def _is_moe(r: Reading, n: int) -> list[bool]:
    """``moe_layer_freq`` as vLLM reads it (a list: 1 is MoE), else MoE after layer 0."""
    freq = r.config.get("moe_layer_freq")
    if isinstance(freq, list) and len(freq) == n:
        return [bool(f) for f in freq]
    return [i > 0 for i in range(n)]


def _count(r: Reading) -> Count:
    """Per layer: q (heads x head_dim), k (K/V heads x head_dim) and v (x v_head_dim), o from
    heads x v_head_dim; attention-sink logits per head where the file adds them; a dense gated
    MLP or routed experts with a sigmoid router and its correction bias; two RMSNorms."""
    s = shapes(r)
    n, v_dim = s.layers, size(r, "v_head_dim")
    kinds = r.spec["layer_types"]
    per_layer = r.spec.get("num_key_value_heads_per_layer") or [s.kv_heads] * n
    sinks = {
        "sliding_attention": flag(r, "add_swa_attention_sink_bias"),
        "full_attention": flag(r, "add_full_attention_sink_bias"),
    }
    experts = moe(
        s.hidden,
        size(r, "moe_intermediate_size"),
        size(r, "n_routed_experts"),
        size(r, "num_experts_per_tok"),
        router_bias=True,
    )
    dense = mlp(s.hidden, size(r, "intermediate_size"))
    layers = Count()
    for i, is_moe in enumerate(_is_moe(r, n)):
        layers += _attention(s, per_layer[i], v_dim) + norm(s.hidden).times(2)
        layers += plain(s.heads if sinks[kinds[i]] else 0) + (experts if is_moe else dense)
    return decoder(s, layers)


_RULE = Rule(layers=_layers, defaults=_DEFAULTS, parameters=_count)
_NOTES = (
    "hybrid_layer_pattern (1 slides, sliding_window_size) with swa_* K/V heads per layer;"
    " V head dim v_head_dim; transformers MiMoV2FlashConfig, vLLM mimo_v2.py"
)

register(
    FAMILY,
    "mimo_v2_flash",
    _RULE,
    ("full_attention", "sliding_attention"),
    _NOTES,
    architectures=("MiMoV2FlashForCausalLM",),
)
register(
    FAMILY,
    "mimo_v2",
    _RULE,
    ("full_attention", "sliding_attention"),
    "MiMo-V2.5 and later: no transformers config class; read as mimo_v2_flash (vLLM mimo_v2.py)",
    architectures=("MiMoV2ForCausalLM",),
)
