"""Qwen 2, 2.5, 3 (dense and MoE), Qwen3-Next, and Xiaomi's MiMo (a Qwen2 with MTP layers).

Qwen2-style configs carry a ``sliding_window`` that ``use_sliding_window: false`` switches off
(Qwen2.5 states 131072 and never slides); when on, layers from ``max_window_layers`` slide.
Qwen3-Next interleaves gated-delta linear attention with full attention every
``full_attention_interval`` layers (default 4: three linear, then one full).
"""

from __future__ import annotations

from kvplan.importers.parameters import (
    Count,
    decoder,
    flag,
    gated_delta,
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
from kvplan.importers.rules import UNIFORM_KINDS, Rule, layers_explicit, pattern_every

FAMILY = "qwen"

#: Gated-delta linear attention: its state sizes, copied as they are.
_LINEAR = (
    "linear_num_key_heads",
    "linear_num_value_heads",
    "linear_key_head_dim",
    "linear_value_head_dim",
    "linear_conv_kernel_dim",
)


def _layers_qwen2(r: Reading, n: int) -> None:
    window = r.config.get("sliding_window")
    use = bool(r.config.get("use_sliding_window", False))
    if window is not None and not use:
        r.notes.append(f"sliding_window {window} inactive: use_sliding_window is false")
    if layers_explicit(r, n):
        return
    if window is not None:
        r.spec["sliding_window"] = window
        r.spec["use_sliding_window"] = use
        if r.config.get("max_window_layers") is not None:
            r.spec["max_window_layers"] = r.config["max_window_layers"]


def _layers_qwen3_next(r: Reading, n: int) -> None:
    if layers_explicit(r, n):
        return
    every = whole(r.get("full_attention_interval"), "full_attention_interval")
    pattern_every(
        r,
        n,
        lambda i: (i + 1) % every == 0,
        "linear_attention",
        f"full_attention_interval {every}",
    )


def _ffn(r: Reading, hidden: int) -> tuple[Count, Count]:
    """The MLP of a dense layer and of a sparse one: routed experts of
    ``moe_intermediate_size``, a router, and (Qwen2-MoE, Qwen3-Next) a shared expert of
    ``shared_expert_intermediate_size`` with its one-output gate."""
    dense = mlp(hidden, size(r, "intermediate_size"))
    num_experts = size(r, "num_experts", default=0, minimum=0)
    if not num_experts:
        return dense, dense
    shared = size(r, "shared_expert_intermediate_size", default=0, minimum=0)
    width, active = size(r, "moe_intermediate_size"), size(r, "num_experts_per_tok")
    sparse = moe(hidden, width, num_experts, active, shared) + plain(hidden if shared else 0)
    return dense, sparse


def _is_sparse(r: Reading, n: int) -> list[bool]:
    """Qwen MoE layers: every ``decoder_sparse_step``-th layer not in ``mlp_only_layers``."""
    if not size(r, "num_experts", default=0, minimum=0):
        return [False] * n
    step = size(r, "decoder_sparse_step", default=1)
    dense_only = set(as_list(r.get("mlp_only_layers") or [], "mlp_only_layers"))
    return [i not in dense_only and (i + 1) % step == 0 for i in range(n)]


def _count_qwen(r: Reading) -> Count:
    """Qwen2 (q, k, v biases), Qwen3 (q/k norms of head_dim; ``attention_bias`` on all four
    projections) and their MoE: two RMSNorms a layer."""
    s = shapes(r)
    if r.model_type.startswith("qwen2") or r.model_type == "mimo":
        attention = s.attention(flag(r, "qkv_bias", default=True), False)
    else:
        bias = flag(r, "attention_bias")
        attention = s.attention(bias, bias) + norm(s.head_dim).times(2)
    dense, sparse = _ffn(r, s.hidden)
    base = attention + norm(s.hidden).times(2)
    num_sparse = sum(_is_sparse(r, s.layers))
    return decoder(
        s, (base + sparse).times(num_sparse) + (base + dense).times(s.layers - num_sparse)
    )


def _count_qwen3_next(r: Reading) -> Count:
    """Qwen3-Next: gated full attention (q_proj doubled for the output gate, q/k norms) or a
    gated delta net (``linear_*``), then the MoE block; two RMSNorms a layer. The
    multi-token-prediction layers are not counted."""
    s = shapes(r)
    q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
    bias = flag(r, "attention_bias")
    full = linear(s.hidden, 2 * q + 2 * kv, bias) + linear(q, s.hidden, bias)
    full += norm(s.head_dim).times(2)
    delta = gated_delta(
        s.hidden,
        size(r, "linear_num_key_heads"),
        size(r, "linear_num_value_heads"),
        size(r, "linear_key_head_dim"),
        size(r, "linear_value_head_dim"),
        size(r, "linear_conv_kernel_dim"),
    )
    dense, sparse = _ffn(r, s.hidden)
    layers = Count()
    for kind, is_sparse in zip(r.spec["layer_types"], _is_sparse(r, s.layers), strict=True):
        mixer = full if kind == "full_attention" else delta
        layers += mixer + (sparse if is_sparse else dense) + norm(s.hidden).times(2)
    return decoder(s, layers)


_QWEN2 = Rule(layers=_layers_qwen2, parameters=_count_qwen)
_SLIDING = "sliding_window counts only with use_sliding_window (from max_window_layers)"

_CLASSES = {
    "qwen2": "Qwen2ForCausalLM",
    "qwen2_moe": "Qwen2MoeForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "qwen3_moe": "Qwen3MoeForCausalLM",
}
for _type, _class in _CLASSES.items():
    register(FAMILY, _type, _QWEN2, UNIFORM_KINDS, _SLIDING, architectures=(_class,))
register(
    FAMILY,
    "qwen3_next",
    Rule(
        layers=_layers_qwen3_next,
        extra=_LINEAR,
        defaults={"full_attention_interval": 4},
        parameters=_count_qwen3_next,
    ),
    ("full_attention", "linear_attention"),
    "linear attention, full every full_attention_interval layers (default 4); linear_* state",
    architectures=("Qwen3NextForCausalLM",),
)
# MiMo's config is Qwen2's plus num_nextn_predict_layers; vLLM's MiMoModel is its Qwen2Model.
register(
    FAMILY,
    "mimo",
    _QWEN2,
    UNIFORM_KINDS,
    "MiMo: read as qwen2 (vLLM's MiMoModel extends Qwen2Model); MTP layers not counted",
    architectures=("MiMoForCausalLM",),
)
