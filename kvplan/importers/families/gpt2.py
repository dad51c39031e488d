"""GPT-2 and OPT: classic multi-head attention (every head keeps its own K and V), tied
embeddings, GPT-era key names (``n_layer``, ``n_embd``, ``n_positions``, ``ffn_dim``)."""

from __future__ import annotations

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
from kvplan.importers.rules import UNIFORM_KINDS, Rule, kv_heads_mha

FAMILY = "gpt2"


def _count_gpt2(r: Reading) -> Count:
    """Token and learned position embeddings (``n_positions``), per layer c_attn, c_proj and
    an MLP of ``n_inner`` (default 4 x n_embd), all with biases, two LayerNorms; ln_f."""
    s = shapes(r)
    width = size(r, "n_inner", default=4 * s.hidden)
    layer = s.attention(True, True) + mlp(s.hidden, width, gated=False, bias=True)
    layer += norm(s.hidden, bias=True).times(2)
    positions = plain(size(r, "n_positions", default=1024) * s.hidden)
    return decoder(s, positions + layer.times(s.layers), norm(s.hidden, bias=True))


def _count_opt(r: Reading) -> Count:
    """Embeddings of ``word_embed_proj_dim`` (projected in and out when it differs from the
    hidden size), positions with OPT's offset of 2, biased projections and fc1/fc2, two
    LayerNorms a layer, and the final LayerNorm when ``do_layer_norm_before``."""
    s = shapes(r)
    dim = size(r, "word_embed_proj_dim", default=s.hidden)
    positions = plain((size(r, "max_position_embeddings", default=2048) + 2) * s.hidden)
    embed = plain(s.vocab * dim * (1 if s.tied else 2)) + positions
    if dim != s.hidden:
        embed += linear(dim, s.hidden) + linear(s.hidden, dim)
    layer = s.attention(True, True) + mlp(s.hidden, size(r, "ffn_dim"), gated=False, bias=True)
    layer += norm(s.hidden, bias=True).times(2)
    last = flag(r, "do_layer_norm_before", default=True) and not flag(r, "_remove_final_layer_norm")
    return embed + layer.times(s.layers) + (norm(s.hidden, bias=True) if last else Count())


_DEFAULTS = {"tie_word_embeddings": True}
register(
    FAMILY,
    "gpt2",
    Rule(kv_heads=kv_heads_mha, defaults=_DEFAULTS, parameters=_count_gpt2),
    UNIFORM_KINDS,
    "multi-head: one K/V per head; n_layer, n_embd",
)
register(
    FAMILY,
    "opt",
    Rule(kv_heads=kv_heads_mha, defaults=_DEFAULTS, parameters=_count_opt),
    UNIFORM_KINDS,
    "multi-head: one K/V per head; ffn_dim",
)
