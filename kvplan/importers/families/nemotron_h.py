"""Nemotron-H: one character per layer in ``hybrid_override_pattern`` (``M`` Mamba2, ``*``
attention, ``-`` MLP and ``E`` MoE without any cache), and Mamba2 sizes under its own names."""

from __future__ import annotations

from kvplan.errors import SpecError
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


register(
    FAMILY,
    "nemotron_h",
    Rule(layers=_layers_nemotron_h, state=_mamba_state),
    ("full_attention", "mamba", "no_cache"),
    "hybrid_override_pattern (M mamba, * attention, -/E no cache); ssm_state_size etc. renamed",
)
