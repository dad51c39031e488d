"""Llama and the configs read like it: Mistral, Mixtral, Cohere, OLMo 2, StarCoder2, InternLM2.

They all state ``num_key_value_heads`` (absent: one K/V head per head), ``head_dim`` or leave
it to ``hidden_size / num_attention_heads``, and a ``sliding_window`` that, when stated,
applies to every layer. Mistral's config class alone fills a missing window in.
"""

from __future__ import annotations

from kvplan.importers.reading import Reading
from kvplan.importers.registry import register, register_wrapper
from kvplan.importers.rules import UNIFORM_KINDS, Rule, layers_explicit

FAMILY = "llama"


def _layers_mistral(r: Reading, n: int) -> None:
    if layers_explicit(r, n):
        return
    # MistralConfig defaults sliding_window to 4096 when the key is absent; null means none.
    window = r.config["sliding_window"] if "sliding_window" in r.config else r.get("sliding_window")
    if window is not None:
        r.spec["sliding_window"] = window


_MISTRAL = Rule(layers=_layers_mistral, defaults={"sliding_window": 4096})

register(
    FAMILY,
    "llama",
    Rule(),
    UNIFORM_KINDS,
    "num_key_value_heads (GQA), head_dim or hidden_size / heads; a stated sliding_window slides",
)
register(
    FAMILY,
    "mistral",
    _MISTRAL,
    UNIFORM_KINDS,
    "sliding_window defaults to 4096 when absent (MistralConfig); null means none",
)
register(FAMILY, "mixtral", Rule(), UNIFORM_KINDS, "read as llama; the experts share one cache")
register_wrapper(
    FAMILY, "mistral3", "mistral", "Mistral 3 with vision: the text model in text_config"
)
for _type, _name in (
    ("cohere", "Command R"),
    ("olmo2", "OLMo 2"),
    ("starcoder2", "StarCoder2"),
    ("internlm2", "InternLM2"),
):
    register(FAMILY, _type, Rule(), UNIFORM_KINDS, f"{_name}: read as llama")
