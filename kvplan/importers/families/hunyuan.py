"""Tencent Hunyuan 3 (``hy_v3``): GQA on every layer, dense first layers then MoE.

vLLM 0.32's hy_v3.py builds every layer's attention with ``num_key_value_heads`` K/V heads of
``head_dim`` (else hidden_size / heads) and no window; its MoE reads ``expert_hidden_dim``
and ``first_k_dense_replace``, keys the transformers HYV3Config (configuration_hy_v3.py) does
not define, so the count reads them with the config class's ``moe_intermediate_size`` and
its one dense layer as fallbacks. Released checkpoints state no dtype; they are bfloat16.

Hunyuan 4 (``hy_v4``) is not mapped: its MLA layers keep the DeepSeek-V3.2 indexer cache
only on the layers whose ``indexer_types`` entry is ``full`` (default: layer 0 and every
fourth from layer 1), and a spec gives every MLA layer the same indexer.
"""

from __future__ import annotations

from kvplan.importers.parameters import Count, decoder, mlp, moe, norm, shapes, size
from kvplan.importers.reading import Reading
from kvplan.importers.registry import register
from kvplan.importers.rules import UNIFORM_KINDS, Rule

FAMILY = "hunyuan"

# HYV3Config defaults for the keys that size the cache or the weights.
_HY_V3 = {
    "vocab_size": 120832,
    "hidden_size": 4096,
    "intermediate_size": 13312,
    "num_hidden_layers": 80,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "max_position_embeddings": 131072,
    "tie_word_embeddings": False,
    "num_experts": 192,
    "num_experts_per_tok": 8,
    "num_shared_experts": 1,
    "moe_intermediate_size": 1536,
}


def _count_hy_v3(r: Reading) -> Count:
    """vLLM hy_v3.py: q, k, v, o without bias, q/k RMSNorms of head_dim with ``qk_norm``;
    the first ``first_k_dense_replace`` (default 1) layers a dense gated MLP, the others
    ``num_experts`` experts of ``expert_hidden_dim`` with a shared MLP of
    ``num_shared_experts`` x that width and a router with a per-expert bias; two norms."""
    s = shapes(r)
    width = size(r, "expert_hidden_dim", "moe_intermediate_size")
    num_shared = size(r, "num_shared_experts", minimum=0)
    sparse = moe(
        s.hidden,
        width,
        size(r, "num_experts"),
        size(r, "num_experts_per_tok"),
        shared_width=width * num_shared,
        router_bias=True,
    )
    dense_ffn = mlp(s.hidden, size(r, "intermediate_size"))
    attention = s.attention() + norm(s.hidden).times(2)
    if r.get("qk_norm"):
        attention += norm(s.head_dim).times(2)
    num_dense = min(size(r, "first_k_dense_replace", default=1, minimum=0), s.layers)
    layers = (attention + dense_ffn).times(num_dense)
    layers += (attention + sparse).times(s.layers - num_dense)
    return decoder(s, layers)


register(
    FAMILY,
    "hy_v3",
    Rule(defaults=_HY_V3, default_dtype="bfloat16", parameters=_count_hy_v3),
    UNIFORM_KINDS,
    "Hunyuan 3: num_key_value_heads K/V heads of head_dim on every layer, no window (vLLM"
    " hy_v3.py); HYV3Config defaults; no dtype stated: bfloat16",
    architectures=("HYV3ForCausalLM",),
)
