"""StableLM (StableLM 2, StableLM Zephyr): Llama keys, LayerNorms and partial rotary.

StableLmConfig (configuration_stablelm.py) defaults ``num_key_value_heads`` to 32, as vLLM's
stablelm.py reads it; partial rotary (``partial_rotary_factor``) does not change the cache.
"""

from __future__ import annotations

from kvplan.importers.parameters import Count, decoder, flag, mlp, norm, shapes, size
from kvplan.importers.reading import Reading
from kvplan.importers.registry import register
from kvplan.importers.rules import UNIFORM_KINDS, Rule

FAMILY = "stablelm"


def _count_stablelm(r: Reading) -> Count:
    """StableLM: q, k, v with ``use_qkv_bias``, o without; per-head q/k LayerNorms (no bias)
    with ``qk_layernorm``; a gated MLP; LayerNorms with bias (one when
    ``use_parallel_residual``)."""
    s = shapes(r)
    layer = s.attention(flag(r, "use_qkv_bias"), False)
    layer += mlp(s.hidden, size(r, "intermediate_size"))
    layer += norm(s.hidden, bias=True).times(1 if flag(r, "use_parallel_residual") else 2)
    if flag(r, "qk_layernorm"):
        layer += norm((s.heads + s.kv_heads) * s.head_dim)
    return decoder(s, layer.times(s.layers), norm(s.hidden, bias=True))


register(
    FAMILY,
    "stablelm",
    Rule(defaults={"num_key_value_heads": 32}, parameters=_count_stablelm),
    UNIFORM_KINDS,
    "StableLM: read as llama; absent num_key_value_heads 32 (StableLmConfig)",
    architectures=("StableLmForCausalLM",),
)
