"""Falcon 7B/40B/180B.

Falcon 7B says ``multi_query: true`` (the config class default too): one shared K/V head, not
71. Falcon 40B/180B set ``new_decoder_architecture`` and keep ``num_kv_heads`` groups.
"""

from __future__ import annotations

from kvplan.importers.parameters import Count, decoder, flag, linear, mlp, norm, shapes, size
from kvplan.importers.reading import Reading
from kvplan.importers.registry import register
from kvplan.importers.rules import UNIFORM_KINDS, Rule

FAMILY = "falcon"


def _kv_heads_falcon(r: Reading) -> int | None:
    heads = r.get("num_attention_heads", "n_head")
    if r.config.get("new_decoder_architecture"):
        kv = r.get("num_kv_heads", "n_head_kv")
        r.notes.append(f"num_key_value_heads {kv}: num_kv_heads (new_decoder_architecture)")
        return kv  # type: ignore[no-any-return]
    if r.config.get("multi_query", True):
        r.notes.append("num_key_value_heads 1: multi_query shares one K/V head")
        return 1
    return heads  # type: ignore[no-any-return]


def _count_falcon(r: Reading) -> Count:
    """Fused query_key_value (MQA: q plus one K and V head; new architecture: the K/V
    groups), dense, a 4x MLP, all with ``bias``; one LayerNorm a layer (two, ln_attn and
    ln_mlp, in the new architecture; two in sequence without ``parallel_attn``)."""
    s = shapes(r)
    bias = flag(r, "bias")
    q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
    width = size(r, "ffn_hidden_size", default=4 * s.hidden)
    if flag(r, "new_decoder_architecture"):
        num_norms = 1 if r.get("num_ln_in_parallel_attn") == 1 else 2
    else:
        num_norms = 1 if flag(r, "parallel_attn", default=True) else 2
    layer = linear(s.hidden, q + 2 * kv, bias) + linear(q, s.hidden, bias)
    layer += mlp(s.hidden, width, gated=False, bias=bias) + norm(s.hidden, bias=True).times(
        num_norms
    )
    return decoder(s, layer.times(s.layers), norm(s.hidden, bias=True))


register(
    FAMILY,
    "falcon",
    Rule(
        kv_heads=_kv_heads_falcon,
        defaults={"max_position_embeddings": 2048, "tie_word_embeddings": True},
        parameters=_count_falcon,
    ),
    UNIFORM_KINDS,
    "multi_query: one K/V head; new_decoder_architecture: num_kv_heads",
    architectures=("FalconForCausalLM",),
)
