"""GLM-4 (``glm4``, ``glm4_moe``: Llama-shaped keys) and ChatGLM, which calls its K/V groups
``multi_query_group_num`` (used when ``multi_query_attention``) and its head dim
``kv_channels``."""

from __future__ import annotations

from kvplan.importers.reading import Reading
from kvplan.importers.registry import register
from kvplan.importers.rules import UNIFORM_KINDS, Rule

FAMILY = "glm"


def _kv_heads_chatglm(r: Reading) -> int | None:
    if r.config.get("multi_query_attention"):
        kv = r.config.get("multi_query_group_num")
        r.notes.append(f"num_key_value_heads {kv}: multi_query_group_num")
        return kv
    return None


register(
    FAMILY,
    "chatglm",
    Rule(kv_heads=_kv_heads_chatglm),
    UNIFORM_KINDS,
    "K/V heads from multi_query_group_num, head_dim from kv_channels",
)
register(FAMILY, "glm4", Rule(), UNIFORM_KINDS, "read as llama")
register(FAMILY, "glm4_moe", Rule(), UNIFORM_KINDS, "read as llama; the experts share one cache")
