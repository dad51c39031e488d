"""Phi-2, Phi-3 and Phi-4: Llama-shaped keys; Phi-2 unties its embeddings by default, and a
Phi-3 ``sliding_window`` slides every layer."""

from __future__ import annotations

from kvplan.importers.parameters import Count, decoder, flag, mlp, norm, plain, shapes, size
from kvplan.importers.reading import Reading
from kvplan.importers.registry import register
from kvplan.importers.rules import UNIFORM_KINDS, Rule

FAMILY = "phi"


def _count_phi(r: Reading) -> Count:
    """Phi-2: attention and MLP in parallel after one LayerNorm; biased q, k, v, dense, fc1
    and fc2; per-head q/k LayerNorms with ``qk_layernorm``; an output head with a bias."""
    s = shapes(r)
    layer = s.attention(True, True) + norm(s.hidden, bias=True)
    layer += mlp(s.hidden, size(r, "intermediate_size"), gated=False, bias=True)
    if flag(r, "qk_layernorm"):
        layer += norm(s.head_dim, bias=True).times(2)
    head_bias = plain(0 if s.tied else s.vocab)
    return decoder(s, layer.times(s.layers) + head_bias, norm(s.hidden, bias=True))


register(
    FAMILY,
    "phi",
    Rule(defaults={"tie_word_embeddings": False}, parameters=_count_phi),
    UNIFORM_KINDS,
    "Phi-2: untied embeddings by default",
)
register(FAMILY, "phi3", Rule(), UNIFORM_KINDS, "a stated sliding_window slides every layer")
