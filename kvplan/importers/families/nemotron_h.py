"""Nemotron-H: one character per layer in ``hybrid_override_pattern`` (``M`` Mamba2, ``*``
attention, ``-`` MLP and ``E`` MoE without any cache), and Mamba2 sizes under its own names."""

from __future__ import annotations

from kvplan.errors import SpecError
from kvplan.importers.parameters import (
    Count,
    decoder,
    experts,
    flag,
    mamba2,
    mlp,
    norm,
    plain,
    shapes,
    size,
)
from kvplan.importers.reading import Reading
from kvplan.importers.registry import register
from kvplan.importers.rules import Rule

FAMILY = "nemotron_h"

# The spec's Mamba keys and Nemotron-H's names for them.
_RENAMED = (
    ("mamba_d_state", "ssm_state_size"),
    ("mamba_d_conv", "conv_kernel"),
    ("mamba_expand", "expand"),
    ("mamba_n_heads", "mamba_num_heads"),
    ("mamba_d_head", "mamba_head_dim"),
    ("mamba_n_groups", "n_groups"),
)


def _layers_nemotron_h(r: Reading, n: int) -> None:
    pattern = r.config.get("hybrid_override_pattern")
    if not isinstance(pattern, str) or len(pattern) != n:
        raise SpecError("", [f"hybrid_override_pattern: needs one character per layer ({n})"])
    kinds = {"M": "mamba", "*": "full_attention", "-": "no_cache", "E": "no_cache"}
    bad = sorted(set(pattern) - set(kinds))
    if bad:
        raise SpecError(
            "", [f"hybrid_override_pattern: unknown layer {bad[0]!r}; allowed: M, *, -, E"]
        )
    r.spec["layer_types"] = [kinds[c] for c in pattern]
    r.notes.append("layer_types from hybrid_override_pattern (M mamba, * attention, -/E none)")


def _mamba_state(r: Reading) -> None:
    for ours, theirs in _RENAMED:
        if r.config.get(theirs) is not None:
            r.spec[ours] = r.config[theirs]


def _moe(r: Reading, hidden: int) -> Count:
    """An ``E`` layer: routed experts with up/down projections (not gated), a shared one of
    ``moe_shared_expert_intermediate_size``, a router with its correction bias."""
    num_experts = size(r, "n_routed_experts")
    expert = mlp(hidden, size(r, "moe_intermediate_size"), gated=False)
    shared = size(r, "moe_shared_expert_intermediate_size", default=0, minimum=0)
    routed = experts(expert, num_experts, size(r, "num_experts_per_tok"))
    return routed + mlp(hidden, shared, gated=False) + plain((hidden + 1) * num_experts)


def _count_nemotron_h(r: Reading) -> Count:
    """One mixer and one RMSNorm a layer, by ``hybrid_override_pattern``: Mamba2 (M),
    attention (*), a squared-ReLU MLP of ``intermediate_size`` (-) or experts (E)."""
    s = shapes(r)
    pattern = r.config["hybrid_override_pattern"]
    bias = flag(r, "attention_bias")
    blocks = {"*": lambda: s.attention(bias, bias)}
    blocks["-"] = lambda: mlp(
        s.hidden, size(r, "intermediate_size"), gated=False, bias=flag(r, "mlp_bias")
    )
    blocks["E"] = lambda: _moe(r, s.hidden)
    blocks["M"] = lambda: mamba2(
        s.hidden,
        size(r, "mamba_num_heads"),
        size(r, "mamba_head_dim"),
        size(r, "n_groups", default=8),
        size(r, "ssm_state_size"),
        size(r, "conv_kernel", default=4),
        flag(r, "use_conv_bias", default=True),
        flag(r, "use_bias"),
    )
    layers = Count()
    for char in set(pattern):
        layers += (blocks[char]() + norm(s.hidden)).times(pattern.count(char))
    return decoder(s, layers)


register(
    FAMILY,
    "nemotron_h",
    Rule(layers=_layers_nemotron_h, state=_mamba_state, parameters=_count_nemotron_h),
    ("full_attention", "mamba", "no_cache"),
    "hybrid_override_pattern (M mamba, * attention, -/E no cache); ssm_state_size etc. renamed",
    architectures=("NemotronHForCausalLM",),
)
