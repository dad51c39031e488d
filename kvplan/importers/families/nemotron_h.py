"""Nemotron-H: one character per layer in ``hybrid_override_pattern`` (``M`` Mamba2, ``*``
attention, ``-`` MLP and ``E`` MoE without any cache), and Mamba2 sizes under its own names.

Nemotron-H Puzzle (``nemotron_h_puzzle``) adds ``block_configs``, one block a layer whose keys
override the top level's: its rule is the block at the end."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvplan.errors import SpecError
from kvplan.importers.parameters import (
    Count,
    Shapes,
    decoder,
    experts,
    flag,
    linear,
    mamba2,
    mlp,
    norm,
    plain,
    shapes,
    size,
)
from kvplan.importers.reading import Reading, as_list, mapping, whole
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
    ``moe_shared_expert_intermediate_size``, a router with its correction bias. With
    ``moe_latent_size`` (vLLM ``NemotronHMoE``'s latent MoE) the experts work in that width,
    between fc1_latent_proj and fc2_latent_proj (biased with ``mlp_bias``)."""
    num_experts = size(r, "n_routed_experts")
    latent = r.get("moe_latent_size")
    width = hidden if latent is None else size(r, "moe_latent_size")
    expert = mlp(width, size(r, "moe_intermediate_size"), gated=False)
    shared = size(r, "moe_shared_expert_intermediate_size", default=0, minimum=0)
    routed = experts(expert, num_experts, size(r, "num_experts_per_tok"))
    if latent is not None:
        bias = flag(r, "mlp_bias")
        routed += linear(hidden, width, bias) + linear(width, hidden, bias)
    return routed + mlp(hidden, shared, gated=False) + plain((hidden + 1) * num_experts)


def _mixer(r: Reading, s: Shapes, char: str) -> Count:
    """One layer's mixer, by its ``hybrid_override_pattern`` character: Mamba2 (M),
    attention (*), a squared-ReLU MLP of ``intermediate_size`` (-) or experts (E)."""
    if char == "*":
        bias = flag(r, "attention_bias")
        return s.attention(bias, bias)
    if char == "-":
        return mlp(s.hidden, size(r, "intermediate_size"), gated=False, bias=flag(r, "mlp_bias"))
    if char == "E":
        return _moe(r, s.hidden)
    return mamba2(
        s.hidden,
        size(r, "mamba_num_heads"),
        size(r, "mamba_head_dim"),
        size(r, "n_groups", default=8),
        size(r, "ssm_state_size"),
        size(r, "conv_kernel", default=4),
        flag(r, "use_conv_bias", default=True),
        flag(r, "use_bias"),
    )


def _count_nemotron_h(r: Reading) -> Count:
    """One mixer (``_mixer``) and one RMSNorm a layer, by ``hybrid_override_pattern``."""
    s = shapes(r)
    pattern = r.config["hybrid_override_pattern"]
    layers = Count()
    for char in set(pattern):
        layers += (_mixer(r, s, char) + norm(s.hidden)).times(pattern.count(char))
    return decoder(s, layers)


register(
    FAMILY,
    "nemotron_h",
    Rule(layers=_layers_nemotron_h, state=_mamba_state, parameters=_count_nemotron_h),
    ("full_attention", "mamba", "no_cache"),
    "hybrid_override_pattern (M mamba, * attention, -/E no cache); ssm_state_size etc. renamed",
    architectures=("NemotronHForCausalLM",),
)


# Nemotron-H Puzzle (``nemotron_h_puzzle``, remote code; vLLM serves NemotronHPuzzleForCausalLM
# with nemotron_h.py's NemotronHForCausalLM). Its NAS-searched layers differ one by one:
# ``block_configs`` holds one object a layer, whose stated keys override the top-level ones for
# that layer (the config class's get_nemotron_h_config_for_layer, which vLLM's attention, MLP
# and MoE layers call; Mamba layers read the top-level config). An attention block's
# ``sliding_window`` (else the top-level one) becomes the layer's per_layer_sliding_window, a
# SlidingWindowSpec; without one the layer is full attention.

#: Block keys that would change an attention layer's K/V shape, which a spec holds once.
_PUZZLE_SHAPE_KEYS = ("num_key_value_heads", "head_dim", "num_attention_heads")


def _puzzle_blocks(r: Reading, n: int) -> list[Mapping[str, Any]]:
    """``block_configs`` as one mapping a layer; SpecError for a missing or short list."""
    given = r.config.get("block_configs")
    if given is None:
        raise SpecError("", ["block_configs: required (one block a layer) for nemotron_h_puzzle"])
    blocks = as_list(given, "block_configs")
    if len(blocks) != n:
        raise SpecError("", [f"block_configs: has {len(blocks):,} entries but {n} layers"])
    return [mapping(block, f"block_configs.{i}") for i, block in enumerate(blocks)]


def _layer_reading(r: Reading, block: Mapping[str, Any]) -> Reading:
    """The reading of one layer: the top-level config with the block's stated keys over it."""
    stated = {k: v for k, v in block.items() if v is not None}
    return Reading(r.model_type, {**r.config, **stated}, r.defaults, r.spec, r.notes)


def _puzzle_window(r: Reading, i: int, block: Mapping[str, Any]) -> int | None:
    """Attention layer ``i``'s window: its block's ``sliding_window``, else the top level's;
    SpecError for a block that changes the K/V shape."""
    for key in _PUZZLE_SHAPE_KEYS:
        if block.get(key) is not None and block[key] != r.config.get(key):
            raise SpecError(
                "", [f"block_configs.{i}.{key}: differs from the top level; a spec holds one"]
            )
    window = _layer_reading(r, block).config.get("sliding_window")
    return None if window is None else whole(window, f"block_configs.{i}.sliding_window")


def _layers_puzzle(r: Reading, n: int) -> None:
    _layers_nemotron_h(r, n)
    blocks = _puzzle_blocks(r, n)
    kinds = r.spec["layer_types"]
    windows = {
        i: _puzzle_window(r, i, block)
        for i, block in enumerate(blocks)
        if kinds[i] == "full_attention"
    }
    stated = {w for w in windows.values() if w is not None}
    if len(stated) > 1:
        raise SpecError(
            "",
            [f"block_configs: attention windows {sorted(stated)}; a spec holds one window"],
        )
    if stated:
        r.spec["sliding_window"] = window = stated.pop()
        for i, w in windows.items():
            if w is not None:
                kinds[i] = "sliding_attention"
        r.notes.append(f"attention blocks with sliding_window {window} slide (block_configs)")


def _puzzle_state(r: Reading) -> None:
    """The Mamba2 sizes (top level), the conv tail in the model dtype and the SSM state in
    ``mamba_ssm_cache_dtype`` (absent: float32), as vLLM's NemotronHForCausalLMConfig sets
    ``--mamba-ssm-cache-dtype`` auto for NemotronHPuzzleForCausalLM too (models/config.py)."""
    _mamba_state(r)
    r.spec["conv_dtype"] = r.spec["torch_dtype"]
    r.spec["state_dtype"] = r.config.get("mamba_ssm_cache_dtype") or "float32"
    r.notes.append(
        f"Mamba conv tail in {r.spec['torch_dtype']}, SSM state in {r.spec['state_dtype']}"
        " (vLLM NemotronHForCausalLMConfig)"
    )


def _count_puzzle(r: Reading) -> Count:
    """``_count_nemotron_h`` layer by layer, each from its block's keys over the top level."""
    s = shapes(r)
    pattern = r.config["hybrid_override_pattern"]
    layers = Count()
    for char, block in zip(pattern, _puzzle_blocks(r, s.layers), strict=True):
        layer = r if char == "M" else _layer_reading(r, block)
        layers += _mixer(layer, s, char) + norm(s.hidden)
    return decoder(s, layers)


register(
    FAMILY,
    "nemotron_h_puzzle",
    Rule(layers=_layers_puzzle, state=_puzzle_state, parameters=_count_puzzle),
    ("full_attention", "sliding_attention", "mamba", "no_cache"),
    "Nemotron-H Puzzle (vLLM nemotron_h.py): hybrid_override_pattern as nemotron_h;"
    " block_configs override each layer's sizes, an attention block's sliding_window slides",
    architectures=("NemotronHPuzzleForCausalLM",),
)
