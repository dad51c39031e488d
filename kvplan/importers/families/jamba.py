"""Jamba: Mamba layers with one attention layer every ``attn_layer_period`` layers, at
``attn_layer_offset`` (defaults 8 and 4: layers 4, 12, 20, ... attend)."""

from __future__ import annotations

from kvplan.importers.reading import Reading, whole
from kvplan.importers.registry import register
from kvplan.importers.rules import MAMBA_KEYS, Rule, layers_explicit, pattern_every

FAMILY = "jamba"


def _layers_jamba(r: Reading, n: int) -> None:
    if layers_explicit(r, n):
        return
    period = whole(r.config.get("attn_layer_period", 8), "attn_layer_period")
    offset = whole(r.config.get("attn_layer_offset", 4), "attn_layer_offset", minimum=0)
    pattern_every(
        r,
        n,
        lambda i: i % period == offset,
        "mamba",
        f"attn_layer_period {period}, attn_layer_offset {offset}",
    )


register(
    FAMILY,
    "jamba",
    Rule(layers=_layers_jamba, extra=MAMBA_KEYS),
    ("full_attention", "mamba"),
    "attention every attn_layer_period layers at attn_layer_offset, Mamba elsewhere",
)
