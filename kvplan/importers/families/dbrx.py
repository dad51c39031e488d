"""DBRX keeps its K/V heads in ``attn_config.kv_n_heads``."""

from __future__ import annotations

from kvplan.importers.parameters import Count, decoder, moe, norm, shapes, size, sub
from kvplan.importers.reading import Reading, mapping
from kvplan.importers.registry import register
from kvplan.importers.rules import UNIFORM_KINDS, Rule

FAMILY = "dbrx"


def _kv_heads_dbrx(r: Reading) -> int | None:
    kv = mapping(r.config.get("attn_config"), "attn_config").get("kv_n_heads")
    r.notes.append(f"num_key_value_heads {kv}: attn_config.kv_n_heads")
    return kv


def _count_dbrx(r: Reading) -> Count:
    """Fused Wqkv and out_proj without biases, LayerNorms without bias, and 16 experts of
    ``ffn_config.ffn_hidden_size`` (w1, v1, w2) behind a router, every layer."""
    s = shapes(r)
    ffn = sub(r, "ffn_config", {"moe_num_experts": 4, "moe_top_k": 1})
    width = size(ffn, "ffn_hidden_size")
    layer = s.attention() + norm(s.hidden).times(2)
    layer += moe(s.hidden, width, size(ffn, "moe_num_experts"), size(ffn, "moe_top_k"))
    return decoder(s, layer.times(s.layers))


register(
    FAMILY,
    "dbrx",
    Rule(kv_heads=_kv_heads_dbrx, parameters=_count_dbrx),
    UNIFORM_KINDS,
    "K/V heads from attn_config.kv_n_heads; d_model, n_heads, n_layers names",
    architectures=("DbrxForCausalLM",),
)
