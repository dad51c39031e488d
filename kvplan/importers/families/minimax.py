"""MiniMax-Text-01: lightning (linear) attention with a softmax layer where ``attn_type_list``
says 1. The checkpoint is bfloat16, which its config does not state.

MiniMax-M2: full GQA attention in every layer (no lightning layers), q/k RMSNorms over all the
heads, 256 routed experts with a sigmoid router and its correction bias.
"""

from __future__ import annotations

from kvplan.errors import SpecError
from kvplan.importers.parameters import Count, decoder, flag, linear, moe, norm, shapes, size
from kvplan.importers.reading import Reading
from kvplan.importers.registry import register
from kvplan.importers.rules import UNIFORM_KINDS, Rule, layers_explicit, pattern_every

FAMILY = "minimax"


def _layers_minimax(r: Reading, n: int) -> None:
    if layers_explicit(r, n):
        return
    kinds = r.config.get("attn_type_list")
    if not isinstance(kinds, list) or len(kinds) != n:
        raise SpecError("", [f"attn_type_list: needs one entry per layer ({n})"])
    pattern_every(
        r, n, lambda i: bool(kinds[i]), "linear_attention", "attn_type_list (1 softmax, 0 linear)"
    )


def _lightning_state(r: Reading) -> None:
    # Lightning attention keeps one head_dim x head_dim state per head and no conv tail:
    # a gated-delta-style state with K and V heads equal and a kernel of 1.
    s = r.spec
    heads, dim = s["num_attention_heads"], s.get("head_dim")
    s.update(
        linear_num_key_heads=heads,
        linear_num_value_heads=heads,
        linear_key_head_dim=dim,
        linear_value_head_dim=dim,
        linear_conv_kernel_dim=1,
    )
    r.notes.append(f"linear attention state: {heads} heads x {dim} x {dim}, no conv")


def _count_minimax(r: Reading) -> Count:
    """Lightning layers (fused qkv, output gate, RMSNorm over the heads, out_proj) or softmax
    GQA layers, each followed by ``num_local_experts`` experts and a router; two RMSNorms."""
    s = shapes(r)
    inner = s.heads * s.head_dim
    lightning = linear(s.hidden, 4 * inner) + norm(inner) + linear(inner, s.hidden)
    ffn = moe(
        s.hidden,
        size(r, "intermediate_size"),
        size(r, "num_local_experts"),
        size(r, "num_experts_per_tok"),
    )
    ffn += norm(s.hidden).times(2)
    kinds = r.spec["layer_types"]
    num_linear = kinds.count("linear_attention")
    mixers = lightning.times(num_linear) + s.attention().times(len(kinds) - num_linear)
    return decoder(s, mixers + ffn.times(s.layers))


_RULE = Rule(
    layers=_layers_minimax,
    state=_lightning_state,
    default_dtype="bfloat16",
    parameters=_count_minimax,
)
_NOTES = "attn_type_list (1 softmax, 0 lightning); state heads x head_dim^2; bfloat16 default"

# minimax_text_01 is the released file's name for the minimax architecture.
for _type in ("minimax", "minimax_text_01"):
    register(FAMILY, _type, _RULE, ("full_attention", "linear_attention"), _NOTES)


def _count_minimax_m2(r: Reading) -> Count:
    """MiniMax-M2 (modeling_minimax_m2.py): bias-free GQA with RMSNorms over all of q and all of
    k, ``num_local_experts`` experts of ``intermediate_size`` and a router with its
    ``e_score_correction_bias``; two RMSNorms a layer. The MTP modules are not counted."""
    s = shapes(r)
    bias = flag(r, "attention_bias")
    attention = s.attention(bias, bias) + norm((s.heads + s.kv_heads) * s.head_dim)
    ffn = moe(
        s.hidden,
        size(r, "intermediate_size"),
        size(r, "num_local_experts"),
        size(r, "num_experts_per_tok"),
        router_bias=True,
    )
    return decoder(s, (attention + ffn + norm(s.hidden).times(2)).times(s.layers))


# MiniMaxM2Config defaults (configuration_minimax_m2.py): 8 K/V heads of head_dim 128.
register(
    FAMILY,
    "minimax_m2",
    Rule(
        defaults={"num_key_value_heads": 8, "head_dim": 128},
        parameters=_count_minimax_m2,
    ),
    UNIFORM_KINDS,
    "MiniMax-M2: full attention every layer, read as llama; absent K/V heads 8, head_dim 128",
    architectures=("MiniMaxM2ForCausalLM",),
)
