"""GPT-2, OPT, GPT-J and BLOOM: classic multi-head attention (every head keeps its own K and
V), GPT-era key names (``n_layer``, ``n_embd``, ``n_head``, ``n_positions``, ``ffn_dim``).

GPT-J rotates the first ``rotary_dim`` dimensions of each head and BLOOM adds ALiBi biases;
neither changes what a token caches: K and V of ``n_embd / n_head`` per head, every layer.
"""

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


def _count_gptj(r: Reading) -> Count:
    """GPT-J (modeling_gptj.py): one LayerNorm before the parallel attention (bias-free q, k,
    v, out) and MLP (fc_in to ``n_inner``, default 4 x n_embd, and fc_out, with biases); ln_f;
    an untied lm_head with a bias. No position embeddings (rotary)."""
    s = shapes(r)
    width = size(r, "n_inner", default=4 * s.hidden)
    layer = s.attention() + mlp(s.hidden, width, gated=False, bias=True) + norm(s.hidden, True)
    head_bias = plain(0 if s.tied else s.vocab)
    return decoder(s, layer.times(s.layers), norm(s.hidden, bias=True)) + head_bias


def _count_bloom(r: Reading) -> Count:
    """BLOOM (modeling_bloom.py): embeddings with their own LayerNorm, per layer a fused
    query_key_value and a dense projection with biases, an MLP of 4 x hidden with biases and
    two LayerNorms; ln_f; tied lm_head. ALiBi: no position embeddings."""
    s = shapes(r)
    layer = s.attention(True, True) + mlp(s.hidden, 4 * s.hidden, gated=False, bias=True)
    layer += norm(s.hidden, bias=True).times(2)
    return decoder(s, norm(s.hidden, bias=True) + layer.times(s.layers), norm(s.hidden, True))


def _bloom_width(r: Reading) -> None:
    """The first BLOOM files name the hidden size ``n_embed``; BloomConfig still reads it."""
    if r.spec.get("hidden_size") is None and r.config.get("n_embed") is not None:
        r.spec["hidden_size"] = r.config["n_embed"]
        r.notes.append("hidden_size from n_embed (BloomConfig's older name)")


_DEFAULTS = {"tie_word_embeddings": True}
register(
    FAMILY,
    "gpt2",
    Rule(kv_heads=kv_heads_mha, defaults=_DEFAULTS, parameters=_count_gpt2),
    UNIFORM_KINDS,
    "multi-head: one K/V per head; n_layer, n_embd",
    architectures=("GPT2LMHeadModel",),
)
register(
    FAMILY,
    "opt",
    Rule(kv_heads=kv_heads_mha, defaults=_DEFAULTS, parameters=_count_opt),
    UNIFORM_KINDS,
    "multi-head: one K/V per head; ffn_dim",
    architectures=("OPTForCausalLM",),
)
# GPTJConfig defaults (configuration_gptj.py): untied embeddings; vLLM's gpt_j.py reads
# n_embd / n_head per head and every head's own K and V.
register(
    FAMILY,
    "gptj",
    Rule(
        kv_heads=kv_heads_mha,
        defaults={"tie_word_embeddings": False, "n_positions": 2048},
        parameters=_count_gptj,
    ),
    UNIFORM_KINDS,
    "multi-head: one K/V per head; n_layer, n_embd, n_head; untied (GPTJConfig)",
    architectures=("GPTJForCausalLM",),
)
# BloomConfig (configuration_bloom.py): hidden_size (or the older n_embed), n_layer, n_head,
# tied embeddings, no max_position_embeddings (ALiBi); vLLM's bloom.py caches every head.
register(
    FAMILY,
    "bloom",
    Rule(kv_heads=kv_heads_mha, defaults=_DEFAULTS, state=_bloom_width, parameters=_count_bloom),
    UNIFORM_KINDS,
    "multi-head with ALiBi: one K/V per head; n_layer, n_head; tied (BloomConfig)",
    architectures=("BloomForCausalLM",),
)
