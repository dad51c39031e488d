"""Reflection AI Beam (``beam``): GQA with NoPE global layers and RoPE sliding layers, an output
gate, dense or grouped-sigmoid MoE feed-forwards; served by vLLM 0.33 (models/beam,
BeamForCausalLM; not in vLLM 0.32).

vLLM reads the file through its own BeamConfig (transformers_utils/configs/beam.py, which it
registers over transformers' configuration_beam.py): absent ``layer_types`` is every layer
sliding, absent ``mlp_layer_types`` every layer MoE. Its beam attention caches
``num_key_value_heads`` K/V heads of ``head_dim`` (absent: hidden_size / heads) on every layer,
over ``sliding_window`` tokens on the ``sliding_attention`` layers (it clears the engine-wide
window, so the global layers stay global). transformers' class describes Beam 1.0 501B-A23B
instead (52 layers of 5,120, global where (i + 1) % 6 == 0 and the last, window 512).

Worked example (BeamConfig defaults, bf16): 24 layers, all sliding over 4,096, 4 K/V heads of
2,048 / 32 = 64: 2 x 4 x 64 x 2 = 1,024 B a token each, 24,576 B a token below the window.
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

# BeamConfig defaults (vLLM transformers_utils/configs/beam.py) for the keys that size the
# cache or the weights; its head_dim default is None (hidden_size / heads).
_DEFAULTS = {
    "vocab_size": 151936,
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "num_hidden_layers": 24,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "max_position_embeddings": 32768,
    "sliding_window": 4096,
    "moe_intermediate_size": 768,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "tie_word_embeddings": False,
}


def _layers_beam(r: Reading, n: int) -> None:
    given = r.config.get("layer_types")
    if isinstance(given, list):
        check_kinds(given, UNIFORM_KINDS)  # the config class allows these two only
    if "sliding_window" in r.config and r.config["sliding_window"] is None:
        # no window: vLLM builds every layer full, whatever layer_types says
        r.spec["layer_types"] = ["full_attention"] * n
        return
    if layers_explicit(r, n):
        return
    r.spec["layer_types"] = ["sliding_attention"] * n
    r.spec["sliding_window"] = r.get("sliding_window")
    r.notes.append("layer_types absent: every layer sliding (vLLM BeamConfig)")


def _mlp_kinds(r: Reading, n: int) -> list[str]:
    given = r.config.get("mlp_layer_types")
    if given is None:
        return ["sparse"] * n  # vLLM BeamConfig
    kinds = as_list(given, "mlp_layer_types")
    if len(kinds) != n or any(k not in ("dense", "sparse") for k in kinds):
        raise SpecError("", [f"mlp_layer_types: must be {n} entries of dense or sparse"])
    return [str(k) for k in kinds]


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
    "Beam (vLLM 0.33 models/beam): layer_types (absent: all sliding), sliding_window (default"
    " 4096) on the sliding ones only; vLLM BeamConfig defaults",
    architectures=("BeamForCausalLM",),
)
