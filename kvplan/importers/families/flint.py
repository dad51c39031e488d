"""Recursive Superintelligence Flint (``flint``): a Qwen3-MoE-like decoder with attention sinks,
sliding and global layers, dense MLPs on ``mlp_only_layers``; served by vLLM 0.33 (models/flint,
FlintForCausalLM; not in vLLM 0.32).

vLLM's flint attention caches ``num_key_value_heads`` K/V heads of ``head_dim`` on every layer,
over ``sliding_window`` tokens (the current token included, so 513 is 512 back and itself) on
the ``sliding_attention`` layers of ``layer_types``; a learned sink logit per head caches
nothing. FlintConfig (transformers configuration_flint.py) defaults: 49 layers, global where
i < 2, i % 4 == 1 or the last, 4 K/V heads of 128, window 513; layers 0 and 1 dense.

Worked example (the defaults, bf16): 14 global and 35 sliding layers of 2 x 4 x 128 x 2 =
2,048 B a token: 100,352 B a token below the window.
"""

from __future__ import annotations

from kvplan.importers.parameters import (
    Count,
    decoder,
    flag,
    mlp,
    moe,
    norm,
    plain,
    shapes,
    size,
)
from kvplan.importers.reading import Reading, as_list, whole
from kvplan.importers.registry import register
from kvplan.importers.rules import UNIFORM_KINDS, Rule, check_kinds, layers_explicit
from kvplan.model.limits import MAX_LAYERS

FAMILY = "flint"

# FlintConfig defaults (transformers configuration_flint.py) for the keys that size the cache
# or the weights.
_DEFAULTS = {
    "vocab_size": 150144,
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "num_hidden_layers": 49,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "max_position_embeddings": 262144,
    "sliding_window": 513,
    "moe_intermediate_size": 512,
    "shared_expert_intermediate_size": 1024,
    "num_experts": 256,
    "num_experts_per_tok": 6,
    "tie_word_embeddings": False,
}


def _layers_flint(r: Reading, n: int) -> None:
    given = r.config.get("layer_types")
    if isinstance(given, list):
        check_kinds(given, UNIFORM_KINDS)  # the config class allows these two only
    if layers_explicit(r, n):
        return
    r.spec["layer_types"] = [
        "full_attention" if i < 2 or i % 4 == 1 or i == n - 1 else "sliding_attention"
        for i in range(n)
    ]
    r.spec["sliding_window"] = r.get("sliding_window")
    r.notes.append("layer_types from FlintConfig: global where i < 2, i % 4 == 1 or the last")


def _dense_layers(r: Reading, n: int) -> int:
    given = r.config.get("mlp_only_layers")
    if given is None:
        return min(2, n)  # FlintConfig: [0, 1]
    stated = as_list(given, "mlp_only_layers")
    layers = {whole(i, "mlp_only_layers", minimum=0, maximum=MAX_LAYERS) for i in stated}
    return sum(1 for i in layers if i < n)


def _count_flint(r: Reading) -> Count:
    """vLLM models/flint: per layer q, k, v, o, q/k RMSNorms of head_dim, a sink per head and
    two RMSNorms; a dense gated MLP on ``mlp_only_layers``, elsewhere ``num_experts`` experts,
    a gated shared expert of ``shared_expert_intermediate_size`` and a router without bias;
    untied head, final norm."""
    s = shapes(r)
    bias = flag(r, "attention_bias")
    layer = s.attention(bias) + norm(s.head_dim).times(2) + plain(s.heads) + norm(s.hidden).times(2)
    dense = mlp(s.hidden, size(r, "intermediate_size"))
    sparse = moe(
        s.hidden,
        size(r, "moe_intermediate_size"),
        size(r, "num_experts"),
        size(r, "num_experts_per_tok"),
        size(r, "shared_expert_intermediate_size"),
    )
    num_dense = _dense_layers(r, s.layers)
    ffn = dense.times(num_dense) + sparse.times(s.layers - num_dense)
    return decoder(s, layer.times(s.layers) + ffn)


register(
    FAMILY,
    "flint",
    Rule(layers=_layers_flint, defaults=_DEFAULTS, parameters=_count_flint),
    UNIFORM_KINDS,
    "Flint (vLLM 0.33 models/flint): layer_types (default global where i < 2, i % 4 == 1 or the"
    " last), sliding_window 513 counting the current token; FlintConfig defaults",
    architectures=("FlintForCausalLM",),
)
