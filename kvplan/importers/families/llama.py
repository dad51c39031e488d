"""Llama and the configs read like it: Mistral, Ministral 3 (Devstral 2), Mixtral, Cohere, OLMo 2,
StarCoder2, InternLM2 and InternLM3.

They all state ``num_key_value_heads`` (absent: one K/V head per head), ``head_dim`` or leave
it to ``hidden_size / num_attention_heads``, and a ``sliding_window`` that, when stated,
applies to every layer. Mistral's config class alone fills a missing window in.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvplan.importers.parameters import (
    Count,
    decoder,
    encoder_block,
    flag,
    linear,
    mlp,
    norm,
    plain,
    register_multimodal,
    shapes,
    size,
    vision,
)
from kvplan.importers.reading import Config, Reading, mapping
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

# Ministral3Config defaults (configuration_ministral3.py) for the keys that size the cache or
# the weights; its sliding_window defaults to None (no window), unlike MistralConfig's.
_MINISTRAL3 = {
    "vocab_size": 131072,
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 34,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "max_position_embeddings": 262144,
    "tie_word_embeddings": False,
}

# PixtralVisionConfig defaults (configuration_pixtral.py).
_PIXTRAL = {
    "hidden_size": 1024,
    "intermediate_size": 4096,
    "num_hidden_layers": 24,
    "num_attention_heads": 16,
    "num_channels": 3,
    "patch_size": 16,
    "image_size": 1024,
}


def _count_pixtral(config: Config, text_hidden: int) -> Count:
    """Mistral 3's Pixtral tower (patch conv without bias, RMSNorms, bias-free attention and
    gated MLP; RoPE, so no position table) and its projector: an RMSNorm, the patch merger
    (``spatial_merge_size``^2 patches into one) and two Linear layers to the text width."""
    v = Reading("pixtral", mapping(config.get("vision_config"), "vision_config"), _PIXTRAL)
    h, heads = size(v, "hidden_size"), size(v, "num_attention_heads")
    inner = heads * size(v, "head_dim", default=h // heads)
    patch, channels = size(v, "patch_size"), size(v, "num_channels")
    layer = linear(h, 3 * inner) + linear(inner, h) + mlp(h, size(v, "intermediate_size"))
    tower = plain(channels * patch * patch * h) + norm(h)
    tower += (layer + norm(h).times(2)).times(size(v, "num_hidden_layers"))
    merge = size(Reading("mistral3", config), "spatial_merge_size", default=2)
    layers_used = config.get("vision_feature_layer", -1)
    num_used = len(layers_used) if isinstance(layers_used, list) else 1
    bias = bool(config.get("multimodal_projector_bias", True))
    projector = norm(h) + linear(h * merge * merge, h)
    projector += linear(h * num_used, text_hidden, bias) + linear(text_hidden, text_hidden, bias)
    return vision(tower + projector)


def _mistral3_multimodal(config: Config, spec: Mapping[str, Any]) -> dict[str, Any]:
    """Images only. vLLM 0.32's mistral3.py profiles a square image of the processor's
    ``longest_edge`` (the released preprocessor_config.json's 1,540, which config.json states as
    ``vision_config.image_size``) and cuts it into merged patches of ``patch_size x
    spatial_merge_size`` pixels, ``(edge - 1) // merged + 1`` a side; each is one embedding
    (the break and end tokens between rows carry none). Mistral Small 3.1: 28-pixel merged
    patches, 1,539 // 28 + 1 = 55 a side, 55 x 55 = 3,025 tokens."""
    v = Reading("pixtral", mapping(config.get("vision_config"), "vision_config"), _PIXTRAL)
    edge = size(v, "image_size")
    merge = size(Reading("mistral3", config), "spatial_merge_size", default=2)
    merged = size(v, "patch_size") * merge
    side = (edge - 1) // merged + 1
    shape = {"vision_num_hidden_layers": size(v, "num_hidden_layers")}
    shape["vision_hidden_size"] = size(v, "hidden_size")
    encoder = _count_pixtral(config, spec["hidden_size"])
    return encoder_block(spec, encoder, {"image_tokens": side * side, **shape})


def _count_cohere(r: Reading) -> Count:
    """Command R: attention and MLP in parallel after one LayerNorm without bias; q/k
    LayerNorms per head with ``use_qk_norm``; tied embeddings."""
    s = shapes(r)
    bias = flag(r, "attention_bias")
    layer = s.attention(bias, bias) + mlp(s.hidden, size(r, "intermediate_size")) + norm(s.hidden)
    if flag(r, "use_qk_norm"):
        layer += norm((s.heads + s.kv_heads) * s.head_dim)
    return decoder(s, layer.times(s.layers))


def count_olmo2(r: Reading) -> Count:
    """OLMo 2: norms after attention and after the MLP (no input norm), and RMSNorms over all
    of q and all of k."""
    s = shapes(r)
    bias = flag(r, "attention_bias")
    layer = s.attention(bias, bias) + norm((s.heads + s.kv_heads) * s.head_dim)
    layer += mlp(s.hidden, size(r, "intermediate_size")) + norm(s.hidden).times(2)
    return decoder(s, layer.times(s.layers))


def _count_starcoder2(r: Reading) -> Count:
    """StarCoder2: biased projections (``use_bias``), a c_fc/c_proj MLP (not gated),
    LayerNorms with bias."""
    s = shapes(r)
    bias = flag(r, "use_bias", default=True)
    layer = s.attention(bias, bias) + norm(s.hidden, bias=True).times(2)
    layer += mlp(s.hidden, size(r, "intermediate_size"), gated=False, bias=bias)
    return decoder(s, layer.times(s.layers), norm(s.hidden, bias=True))


register(
    FAMILY,
    "llama",
    Rule(),
    UNIFORM_KINDS,
    "num_key_value_heads (GQA), head_dim or hidden_size / heads; a stated sliding_window slides",
    # LLaMAForCausalLM: the early decapoda-research conversions name the class so.
    architectures=("LlamaForCausalLM", "LLaMAForCausalLM"),
)
register(
    FAMILY,
    "mistral",
    _MISTRAL,
    UNIFORM_KINDS,
    "sliding_window defaults to 4096 when absent (MistralConfig); null means none",
    architectures=("MistralForCausalLM",),
)
register(
    FAMILY,
    "mixtral",
    Rule(),
    UNIFORM_KINDS,
    "read as llama; the experts share one cache",
    architectures=("MixtralForCausalLM",),
)
register(
    FAMILY,
    "ministral3",
    Rule(defaults=_MINISTRAL3),
    UNIFORM_KINDS,
    "Ministral 3 / Devstral 2: read as llama (vLLM serves Ministral3ForCausalLM with its mistral"
    " model); Ministral3Config defaults: 8 K/V heads, head_dim 128, no sliding_window",
    architectures=("Ministral3ForCausalLM",),
)
register_wrapper(
    FAMILY,
    "mistral3",
    "mistral",
    "Mistral 3 with vision: the text model in text_config",
    vision=_count_pixtral,
)
register_multimodal("mistral3", _mistral3_multimodal)
register(
    FAMILY,
    "cohere",
    Rule(defaults={"tie_word_embeddings": True}, parameters=_count_cohere),
    UNIFORM_KINDS,
    "Command R: read as llama",
    architectures=("CohereForCausalLM",),
)
register(FAMILY, "olmo2", Rule(parameters=count_olmo2), UNIFORM_KINDS, "OLMo 2: read as llama")
register(
    FAMILY,
    "starcoder2",
    Rule(parameters=_count_starcoder2),
    UNIFORM_KINDS,
    "StarCoder2: read as llama",
)
register(
    FAMILY,
    "internlm2",
    Rule(),
    UNIFORM_KINDS,
    "InternLM2: read as llama",
    architectures=("InternLM2ForCausalLM",),
)
register(
    FAMILY,
    "internlm3",
    Rule(),
    UNIFORM_KINDS,
    "InternLM3: read as llama (vLLM serves InternLM3ForCausalLM with its llama model)",
    architectures=("InternLM3ForCausalLM",),
)
