"""Gemma 1, 2 and 3.

Gemma configs leave out what their config class supplies: ``head_dim`` 256, Gemma 2's window
of 4096, and for Gemma 3 (whose text model sits in ``text_config``) often the heads, KV heads,
``max_position_embeddings`` and ``sliding_window_pattern``. The defaults apply, and the spec
notes each value that came from one. Gemma 2 alternates sliding and global layers; Gemma 3
slides ``sliding_window_pattern - 1`` layers of every ``sliding_window_pattern`` (default 6).
"""

from __future__ import annotations

from kvplan.importers.parameters import (
    Count,
    decoder,
    flag,
    linear,
    mlp,
    norm,
    plain,
    shapes,
    size,
    vision,
)
from kvplan.importers.reading import Config, Reading, mapping, whole
from kvplan.importers.registry import register, register_wrapper
from kvplan.importers.rules import UNIFORM_KINDS, Rule, layers_explicit

FAMILY = "gemma"

# transformers configuration_gemma*.py defaults (keys that change the cache or the weights).
_GEMMA3_TEXT = {
    "num_hidden_layers": 26,
    "hidden_size": 2304,
    "num_attention_heads": 8,
    "intermediate_size": 9216,
    "max_position_embeddings": 131072,
    "head_dim": 256,
    "sliding_window": 4096,
    "num_key_value_heads": 4,
    "vocab_size": 262208,
    "tie_word_embeddings": True,
}


def _layers_gemma2(r: Reading, n: int) -> None:
    r.spec["sliding_window"] = r.get("sliding_window")
    if layers_explicit(r, n):
        return
    r.spec["layer_types_pattern"] = ["sliding_attention", "full_attention"]
    r.notes.append("layer_types_pattern: even layers slide, odd layers are global (Gemma 2)")


def _layers_gemma3(r: Reading, n: int) -> None:
    r.spec["sliding_window"] = r.get("sliding_window")
    if layers_explicit(r, n):
        return
    every = r.config.get("sliding_window_pattern")
    if every is None:
        every = 6
        r.notes.append("sliding_window_pattern 6: the gemma3_text default (not in file)")
    every = whole(every, "sliding_window_pattern", maximum=n)
    r.spec["layer_types_pattern"] = ["sliding_attention"] * (every - 1) + ["full_attention"]


# SiglipVisionConfig defaults (configuration_siglip.py).
_SIGLIP = {
    "hidden_size": 768,
    "intermediate_size": 3072,
    "num_hidden_layers": 12,
    "num_channels": 3,
    "image_size": 224,
    "patch_size": 16,
}


def _count_gemma(r: Reading) -> Count:
    """Gemma: two RMSNorms a layer; Gemma 2 and 3 four (before and after attention and MLP);
    Gemma 3 adds q/k norms of head_dim. Gated MLP, tied embeddings."""
    s = shapes(r)
    bias = flag(r, "attention_bias")
    layer = s.attention(bias, bias) + mlp(s.hidden, size(r, "intermediate_size"))
    layer += norm(s.hidden).times(2 if r.model_type == "gemma" else 4)
    if r.model_type == "gemma3_text":
        layer += norm(s.head_dim).times(2)
    return decoder(s, layer.times(s.layers))


def _count_siglip(config: Config, text_hidden: int) -> Count:
    """Gemma 3's SigLIP tower (patch conv with bias, learned positions, pre-norm encoder
    layers with biases, post norm; no pooling head) and its projector (a vision x text
    matrix and an RMSNorm)."""
    v = Reading(
        "siglip_vision_model", mapping(config.get("vision_config"), "vision_config"), _SIGLIP
    )
    h, width = size(v, "hidden_size"), size(v, "intermediate_size")
    patch, channels = size(v, "patch_size"), size(v, "num_channels")
    num_patches = (size(v, "image_size") // patch) ** 2
    layer = linear(h, h, True).times(4) + mlp(h, width, gated=False, bias=True)
    layer += norm(h, bias=True).times(2)
    tower = plain(channels * patch * patch * h + h + num_patches * h)
    tower += layer.times(size(v, "num_hidden_layers")) + norm(h, bias=True)
    return vision(tower + plain(h * text_hidden) + norm(h))


register(
    FAMILY,
    "gemma",
    Rule(defaults={"head_dim": 256, "tie_word_embeddings": True}, parameters=_count_gemma),
    UNIFORM_KINDS,
    "head_dim 256 and tied embeddings by default",
    architectures=("GemmaForCausalLM",),
)
register(
    FAMILY,
    "gemma2",
    Rule(
        layers=_layers_gemma2,
        defaults={"head_dim": 256, "sliding_window": 4096, "tie_word_embeddings": True},
        parameters=_count_gemma,
    ),
    ("full_attention", "sliding_attention"),
    "even layers slide (sliding_window, default 4096), odd layers are global",
    architectures=("Gemma2ForCausalLM",),
)
register(
    FAMILY,
    "gemma3_text",
    Rule(layers=_layers_gemma3, defaults=_GEMMA3_TEXT, parameters=_count_gemma),
    ("full_attention", "sliding_attention"),
    "5 sliding : 1 global (sliding_window_pattern); config-class defaults for omitted keys",
    architectures=("Gemma3ForCausalLM",),
)
register_wrapper(
    FAMILY,
    "gemma3",
    "gemma3_text",
    "Gemma 3 with vision: the text model in text_config",
    vision=_count_siglip,
    architectures=("Gemma3ForConditionalGeneration",),
)
