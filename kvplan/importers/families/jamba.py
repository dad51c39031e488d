"""Jamba: Mamba layers with one attention layer every ``attn_layer_period`` layers, at
``attn_layer_offset`` (defaults 8 and 4: layers 4, 12, 20, ... attend)."""

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
from kvplan.importers.reading import Reading, whole
from kvplan.importers.registry import register
from kvplan.importers.rules import MAMBA_KEYS, Rule, layers_explicit, pattern_every

FAMILY = "jamba"


def _layers_jamba(r: Reading, n: int) -> None:
    if layers_explicit(r, n):
        return
    period = whole(r.config.get("attn_layer_period", 8), "attn_layer_period")
    offset = whole(r.config.get("attn_layer_offset", 4), "attn_layer_offset", minimum=0)
    pattern_every(
        r,
        n,
        lambda i: i % period == offset,
        "mamba",
        f"attn_layer_period {period}, attn_layer_offset {offset}",
    )


def _mamba1(r: Reading, hidden: int) -> Count:
    """A Mamba1 mixer: in_proj (x and z), conv1d, x_proj (dt, B, C), dt_proj with bias, A_log,
    D, out_proj, and Jamba's RMSNorms of dt, B and C."""
    inner = size(r, "mamba_expand") * hidden
    state, kernel = size(r, "mamba_d_state"), size(r, "mamba_d_conv")
    rank = r.get("mamba_dt_rank")
    rank = -(-hidden // 16) if rank in (None, "auto") else size(r, "mamba_dt_rank")
    proj_bias = flag(r, "mamba_proj_bias")
    conv = inner * kernel + (inner if flag(r, "mamba_conv_bias", default=True) else 0)
    return (
        linear(hidden, 2 * inner, proj_bias)
        + plain(conv)
        + linear(inner, rank + 2 * state)
        + linear(rank, inner, True)
        + plain(inner * state + inner + rank + 2 * state)
        + linear(inner, hidden, proj_bias)
    )


def _count_jamba(r: Reading) -> Count:
    """Mamba1 or attention mixers (``layer_types``); routed experts on every
    ``expert_layer_period``-th layer from ``expert_layer_offset``, a dense MLP elsewhere;
    two RMSNorms a layer."""
    s = shapes(r)
    width = size(r, "intermediate_size")
    num_experts = size(r, "num_experts", default=16)
    period = size(r, "expert_layer_period", default=2)
    offset = size(r, "expert_layer_offset", default=1, minimum=0)
    sparse = moe(s.hidden, width, num_experts, size(r, "num_experts_per_tok", default=2))
    dense = mlp(s.hidden, width)
    mamba, attention = _mamba1(r, s.hidden), s.attention()
    layers = Count()
    for i, kind in enumerate(r.spec["layer_types"]):
        ffn = sparse if num_experts > 1 and i % period == offset else dense
        layers += (mamba if kind == "mamba" else attention) + ffn + norm(s.hidden).times(2)
    return decoder(s, layers)


register(
    FAMILY,
    "jamba",
    Rule(layers=_layers_jamba, extra=MAMBA_KEYS, parameters=_count_jamba),
    ("full_attention", "mamba"),
    "attention every attn_layer_period layers at attn_layer_offset, Mamba elsewhere",
    architectures=("JambaForCausalLM",),
)
