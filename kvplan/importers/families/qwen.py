"""Qwen 2, 2.5, 3 (dense and MoE) and Qwen3-Next.

Qwen2-style configs carry a ``sliding_window`` that ``use_sliding_window: false`` switches off
(Qwen2.5 states 131072 and never slides); when on, layers from ``max_window_layers`` slide.
Qwen3-Next interleaves gated-delta linear attention with full attention every
``full_attention_interval`` layers (default 4: three linear, then one full).
"""

from __future__ import annotations

from kvplan.importers.reading import Reading, whole
from kvplan.importers.registry import register
from kvplan.importers.rules import UNIFORM_KINDS, Rule, layers_explicit, pattern_every

FAMILY = "qwen"

#: Gated-delta linear attention: its state sizes, copied as they are.
_LINEAR = (
    "linear_num_key_heads",
    "linear_num_value_heads",
    "linear_key_head_dim",
    "linear_value_head_dim",
    "linear_conv_kernel_dim",
)


def _layers_qwen2(r: Reading, n: int) -> None:
    window = r.config.get("sliding_window")
    use = bool(r.config.get("use_sliding_window", False))
    if window is not None and not use:
        r.notes.append(f"sliding_window {window} inactive: use_sliding_window is false")
    if layers_explicit(r, n):
        return
    if window is not None:
        r.spec["sliding_window"] = window
        r.spec["use_sliding_window"] = use
        if r.config.get("max_window_layers") is not None:
            r.spec["max_window_layers"] = r.config["max_window_layers"]


def _layers_qwen3_next(r: Reading, n: int) -> None:
    if layers_explicit(r, n):
        return
    every = whole(r.get("full_attention_interval"), "full_attention_interval")
    pattern_every(
        r,
        n,
        lambda i: (i + 1) % every == 0,
        "linear_attention",
        f"full_attention_interval {every}",
    )


_QWEN2 = Rule(layers=_layers_qwen2)
_SLIDING = "sliding_window counts only with use_sliding_window (from max_window_layers)"

for _type in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe"):
    register(FAMILY, _type, _QWEN2, UNIFORM_KINDS, _SLIDING)
register(
    FAMILY,
    "qwen3_next",
    Rule(layers=_layers_qwen3_next, extra=_LINEAR, defaults={"full_attention_interval": 4}),
    ("full_attention", "linear_attention"),
    "linear attention, full every full_attention_interval layers (default 4); linear_* state",
)
