"""Reflection AI Beam (``beam``): GQA with NoPE global layers and RoPE sliding layers, an output
gate, dense then grouped-sigmoid MoE feed-forwards; served by vLLM 0.33 (models/beam,
BeamForCausalLM; not in vLLM 0.32).

vLLM's beam attention caches ``num_key_value_heads`` K/V heads of ``head_dim`` on every layer,
over ``sliding_window`` tokens on the ``sliding_attention`` layers of ``layer_types`` (it clears
the engine-wide window, so the global layers stay global). BeamConfig (transformers
configuration_beam.py; the checkpoint it names is Beam 1.0 501B-A23B) defaults: 52 layers,
global where (i + 1) % 6 == 0 and the last, 8 K/V heads of 128, window 512; ``mlp_layer_types``
three dense layers, then experts.

Worked example (the defaults, bf16): 9 global and 43 sliding layers of 2 x 8 x 128 x 2 =
4,096 B a token: 212,992 B a token below the window; past it only the 9 global layers grow.
"""

from __future__ import annotations

from kvplan.errors import SpecError
from kvplan.importers.parameters import (
    Count,
    decoder,
    linear,
    mlp,
    moe,
    norm,
    plain,
    shapes,
    size,
    total,
)
from kvplan.importers.reading import Reading, as_list
from kvplan.importers.registry import register
from kvplan.importers.rules import UNIFORM_KINDS, Rule, check_kinds, layers_explicit

FAMILY = "beam"

# BeamConfig defaults (transformers configuration_beam.py) for the keys that size the cache
# or the weights.
_DEFAULTS = {
    "vocab_size": 151936,
    "hidden_size": 5120,
    "intermediate_size": 20480,
    "num_hidden_layers": 52,
    "num_attention_heads": 48,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "max_position_embeddings": 8192,
    "sliding_window": 512,
    "moe_intermediate_size": 2560,
    "num_experts": 256,
    "num_experts_per_tok": 8,
    "tie_word_embeddings": False,
}


def _layers_beam(r: Reading, n: int) -> None:
    given = r.config.get("layer_types")
    if isinstance(given, list):
        check_kinds(given, UNIFORM_KINDS)  # the config class allows these two only
    if layers_explicit(r, n):
        return
    kinds = ["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(n)]
    kinds[-1] = "full_attention"
    r.spec["layer_types"] = kinds
    r.spec["sliding_window"] = r.get("sliding_window")
    r.notes.append("layer_types from BeamConfig: global where (i + 1) % 6 == 0 and the last")


def _mlp_kinds(r: Reading, n: int) -> list[object]:
    given = r.config.get("mlp_layer_types")
    if given is None:
        dense = min(3, n)
        return [*(["dense"] * dense), *(["sparse"] * (n - dense))]
    kinds = as_list(given, "mlp_layer_types")
    if len(kinds) != n or any(k not in ("dense", "sparse") for k in kinds):
        raise SpecError("", [f"mlp_layer_types: must be {n} entries of dense or sparse"])
    return kinds


def _count_beam(r: Reading) -> Count:
    """vLLM models/beam: per layer q, k, v and the output gate (q's width) in, o out, q/k
    RMSNorms of head_dim, a gate bias per head and four RMSNorms; a dense gated MLP of
    ``intermediate_size`` or ``num_experts`` experts of ``moe_intermediate_size`` with a router
    and its fp32 ``e_score_correction_bias``; untied head, final norm."""
    s = shapes(r)
    q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
    attention = total([linear(s.hidden, 2 * q + 2 * kv), linear(q, s.hidden)])
    attention += norm(s.head_dim).times(2) + plain(s.heads)
    dense = mlp(s.hidden, size(r, "intermediate_size"))
    sparse = moe(
        s.hidden,
        size(r, "moe_intermediate_size"),
        size(r, "num_experts"),
        size(r, "num_experts_per_tok"),
        router_bias=True,
    )
    kinds = _mlp_kinds(r, s.layers)
    num_dense = kinds.count("dense")
    layer = attention + norm(s.hidden).times(4)
    return decoder(
        s, layer.times(s.layers) + dense.times(num_dense) + sparse.times(s.layers - num_dense)
    )


register(
    FAMILY,
    "beam",
    Rule(layers=_layers_beam, defaults=_DEFAULTS, parameters=_count_beam),
    UNIFORM_KINDS,
    "Beam (vLLM 0.33 models/beam): layer_types (default global where (i + 1) % 6 == 0 and the"
    " last), sliding_window 512; BeamConfig defaults",
    architectures=("BeamForCausalLM",),
)
