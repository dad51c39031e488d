"""Seed-OSS (ByteDance): Llama keys with biased q, k, v.

SeedOssConfig (configuration_seed_oss.py) defaults: 8 K/V heads, head_dim 128,
``attention_bias`` true (q, k, v), ``attention_out_bias`` false. vLLM 0.32 serves
SeedOssForCausalLM through its Transformers backend, which caches what transformers does.
"""

from __future__ import annotations

from kvplan.importers.parameters import Count, decoder, flag, mlp, norm, shapes, size
from kvplan.importers.reading import Reading
from kvplan.importers.registry import register
from kvplan.importers.rules import UNIFORM_KINDS, Rule

FAMILY = "seed_oss"


def _count_seed_oss(r: Reading) -> Count:
    """Seed-OSS (modeling_seed_oss.py): q, k, v with ``attention_bias``, o with
    ``attention_out_bias``, a gated MLP (``mlp_bias``), two RMSNorms a layer."""
    s = shapes(r)
    attention = s.attention(flag(r, "attention_bias"), flag(r, "attention_out_bias"))
    ffn = mlp(s.hidden, size(r, "intermediate_size"), bias=flag(r, "mlp_bias"))
    return decoder(s, (attention + ffn + norm(s.hidden).times(2)).times(s.layers))


register(
    FAMILY,
    "seed_oss",
    Rule(
        defaults={"num_key_value_heads": 8, "head_dim": 128, "attention_bias": True},
        parameters=_count_seed_oss,
    ),
    UNIFORM_KINDS,
    "Seed-OSS: read as llama; absent K/V heads 8, head_dim 128 (SeedOssConfig)",
    architectures=(),
    engines=("vllm-transformers",),
)
