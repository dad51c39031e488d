"""DBRX keeps its K/V heads in ``attn_config.kv_n_heads``."""

from __future__ import annotations

from kvplan.importers.reading import Reading, mapping
from kvplan.importers.registry import register
from kvplan.importers.rules import UNIFORM_KINDS, Rule

FAMILY = "dbrx"


def _kv_heads_dbrx(r: Reading) -> int | None:
    kv = mapping(r.config.get("attn_config"), "attn_config").get("kv_n_heads")
    r.notes.append(f"num_key_value_heads {kv}: attn_config.kv_n_heads")
    return kv


register(
    FAMILY,
    "dbrx",
    Rule(kv_heads=_kv_heads_dbrx),
    UNIFORM_KINDS,
    "K/V heads from attn_config.kv_n_heads; d_model, n_heads, n_layers names",
)
