"""Gemma 1, 2, 3, 3n and 4.

Gemma configs leave out what their config class supplies: ``head_dim`` 256, Gemma 2's window
of 4096, and for Gemma 3 (whose text model sits in ``text_config``) often the heads, KV heads,
``max_position_embeddings`` and ``sliding_window_pattern``. The defaults apply, and the spec
notes each value that came from one. Gemma 2 alternates sliding and global layers; Gemma 3
slides ``sliding_window_pattern - 1`` layers of every ``sliding_window_pattern`` (default 6).
Gemma 3n and 4 let the last ``num_kv_shared_layers`` layers read the K and V of the last earlier
layer of their kind (vLLM's ``kv_sharing_target_layer_name``), and Gemma 4's full-attention
layers have heads of ``global_head_dim`` (and ``num_global_key_value_heads`` of them when
``attention_k_eq_v``: transformers' Gemma4TextConfig builds ``per_layer_config`` from both, and
vLLM gemma4.py reads it; a k_eq_v layer still caches V, loaded from the K weights).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvplan.errors import SpecError
from kvplan.importers.families.rnj1 import RNJ1_CLASS, layers_rnj1
from kvplan.importers.parameters import (
    Count,
    decoder,
    encoder_block,
    experts,
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
    classes = r.config.get("architectures")
    if isinstance(classes, list) and RNJ1_CLASS in classes:  # vLLM serves it with rnj1.py
        layers_rnj1(r, n)
        return
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
    "5 sliding : 1 global (sliding_window_pattern); config-class defaults for omitted keys;"
    " Rnj1ForCausalLM (vLLM rnj1.py): only chunked_attention layers slide",
    architectures=("Gemma3ForCausalLM", RNJ1_CLASS),
)
register_wrapper(
    FAMILY,
    "gemma3",
    "gemma3_text",
    "Gemma 3 with vision: the text model in text_config",
    vision=_count_siglip,
    architectures=("Gemma3ForConditionalGeneration",),
)


def _gemma3_multimodal(config: Config, spec: Mapping[str, Any]) -> dict[str, Any]:
    """Images only: ``mm_tokens_per_image`` (Gemma3Config's default 256) embeddings each, as
    vLLM's gemma3_mm.py counts an image without pan-and-scan crops (its default)."""
    stated = config.get("mm_tokens_per_image")
    tokens = whole(256 if stated is None else stated, "mm_tokens_per_image")
    encoder = _count_siglip(config, spec["hidden_size"])
    v = Reading(
        "siglip_vision_model", mapping(config.get("vision_config"), "vision_config"), _SIGLIP
    )
    shape = {"vision_num_hidden_layers": size(v, "num_hidden_layers")}
    shape["vision_hidden_size"] = size(v, "hidden_size")
    return encoder_block(spec, encoder, {"image_tokens": tokens, **shape})


register_multimodal("gemma3", _gemma3_multimodal)


# Gemma3nTextConfig defaults (configuration_gemma3n.py).
_GEMMA3N_TEXT = {
    "num_hidden_layers": 35,
    "hidden_size": 2048,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 256,
    "max_position_embeddings": 32768,
    "sliding_window": 512,
    "num_kv_shared_layers": 15,
    "vocab_size": 262400,
    "tie_word_embeddings": True,
}

# Gemma4TextConfig defaults (configuration_gemma4.py; global_head_dim is popped with 512).
_GEMMA4_TEXT = {
    "num_hidden_layers": 30,
    "hidden_size": 2304,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "global_head_dim": 512,
    "max_position_embeddings": 131072,
    "sliding_window": 512,
    "intermediate_size": 9216,
    "vocab_size": 262144,
    "tie_word_embeddings": True,
}


def _shared(r: Reading) -> None:
    shared = r.get("num_kv_shared_layers")
    if shared:
        r.spec["num_kv_shared_layers"] = shared


def _layers_gemma3n(r: Reading, n: int) -> None:
    r.spec["sliding_window"] = r.get("sliding_window")
    if not layers_explicit(r, n):
        r.spec["layer_types"] = [
            "full_attention" if (i + 1) % 5 == 0 else "sliding_attention" for i in range(n)
        ]
        r.notes.append("layer_types: four sliding then one full (Gemma3nTextConfig)")
    _shared(r)


def _layers_gemma4(r: Reading, n: int) -> None:
    if not layers_explicit(r, n):
        r.spec["layer_types"] = [
            "full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(n)
        ]
        r.notes.append("layer_types: five sliding then one full (Gemma4TextConfig)")
    kinds = list(r.spec["layer_types"])
    if kinds[-1] != "full_attention":
        kinds[-1] = "full_attention"  # Gemma4TextConfig forces the last layer global
        r.spec["layer_types"] = kinds
        r.notes.append("last layer full_attention, as Gemma4TextConfig forces it")
    window = r.get("sliding_window")
    if r.config.get("use_bidirectional_attention") == "all":
        window = window // 2 + 1  # Gemma4TextConfig: exclusive bounds for bidirectional layers
        r.notes.append(f"sliding_window {window}: halved plus one for bidirectional attention")
    r.spec["sliding_window"] = window
    r.spec["global_head_dim"] = r.get("global_head_dim")
    global_kv = r.config.get("num_global_key_value_heads")
    if r.config.get("attention_k_eq_v") and global_kv is not None:
        r.spec["num_global_key_value_heads"] = global_kv
    _shared(r)


def _not_counted(r: Reading) -> Count:
    """Gemma 3n's AltUp, LAuReL and per-layer embeddings are not counted here."""
    raise SpecError("", [f"num_parameters: {r.model_type} is not counted from the config's shapes"])


def _gemma4_attention(r: Reading, full: bool, shared: bool) -> Count:
    """q (and its RMSNorm), o; unless the layer reuses earlier K/V, k (and its RMSNorm) and v,
    which a full layer of ``attention_k_eq_v`` leaves out (V is read from K's projection)."""
    s = shapes(r)
    head_dim = r.spec["global_head_dim"] if full else s.head_dim
    kv = r.spec.get("num_global_key_value_heads", s.kv_heads) if full else s.kv_heads
    q = s.heads * head_dim
    part = linear(s.hidden, q) + norm(head_dim) + linear(q, s.hidden)
    if not shared:
        no_v = full and flag(r, "attention_k_eq_v")
        part += linear(s.hidden, kv * head_dim * (1 if no_v else 2)) + norm(head_dim)
    return part


def _count_gemma4(r: Reading) -> Count:
    """Gemma 4 text: per layer the attention, a gated MLP (twice as wide on shared layers with
    ``use_double_wide_mlp``), four RMSNorms; with ``enable_moe_block`` also routed experts
    (a router of num_experts x hidden, its scale and per-expert scale, three more norms); with
    ``hidden_size_per_layer_input`` the per-layer input gate, projection and norm, and the
    model's per-layer embeddings and projection. Tied embeddings, final norm."""
    s = shapes(r)
    first_shared = s.layers - (r.spec.get("num_kv_shared_layers") or 0)
    per_layer = size(r, "hidden_size_per_layer_input", default=0, minimum=0)
    width = size(r, "intermediate_size")
    layers = Count()
    for i, kind in enumerate(r.spec["layer_types"]):
        shared = i >= first_shared
        wide = 2 if shared and flag(r, "use_double_wide_mlp") else 1
        layers += _gemma4_attention(r, kind == "full_attention", shared)
        layers += mlp(s.hidden, width * wide) + norm(s.hidden).times(4)
        if per_layer:
            layers += linear(s.hidden, per_layer) + linear(per_layer, s.hidden) + norm(s.hidden)
        if flag(r, "enable_moe_block"):
            num_experts = size(r, "num_experts")
            router = plain(num_experts * s.hidden + s.hidden + num_experts)
            routed = experts(
                mlp(s.hidden, size(r, "moe_intermediate_size")),
                num_experts,
                size(r, "top_k_experts"),
            )
            layers += router + routed + norm(s.hidden).times(3)
    count = decoder(s, layers)
    if per_layer:
        vocab = size(r, "vocab_size_per_layer_input")
        columns = s.layers * per_layer
        count += plain(vocab * columns) + plain(s.hidden * columns) + norm(per_layer)
    return count


# Gemma4VisionConfig defaults for the keys that size the tower.
_GEMMA4_VISION = {
    "hidden_size": 768,
    "intermediate_size": 3072,
    "num_hidden_layers": 16,
    "num_attention_heads": 12,
    "num_key_value_heads": 12,
    "head_dim": 64,
    "patch_size": 16,
    "position_embedding_size": 10240,
}


def _count_gemma4_vision(config: Config, text_hidden: int) -> Count:
    """Gemma 4's vision tower (a patch projection without bias, a two-axis position table,
    encoder layers of q/k/v/o without biases, q and k RMSNorms, a gated MLP and four RMSNorms)
    and its projector (a vision x text matrix after a scale-free norm). An audio tower is not
    counted."""
    if config.get("audio_config") is not None:
        raise SpecError("", ["num_parameters: the Gemma 4 audio tower is not counted"])
    v = Reading(
        "gemma4_vision", mapping(config.get("vision_config"), "vision_config"), _GEMMA4_VISION
    )
    h, width = size(v, "hidden_size"), size(v, "intermediate_size")
    heads, kv = size(v, "num_attention_heads"), size(v, "num_key_value_heads")
    head_dim, patch = size(v, "head_dim"), size(v, "patch_size")
    layer = linear(h, (heads + 2 * kv) * head_dim) + linear(heads * head_dim, h)
    layer += norm(head_dim).times(2) + mlp(h, width) + norm(h).times(4)
    tower = plain(3 * patch * patch * h + 2 * size(v, "position_embedding_size") * h)
    tower += layer.times(size(v, "num_hidden_layers"))
    return vision(tower + plain(h * text_hidden))


#: vLLM's gemma4_mm.py: a video is at most 32 frames (``_VIDEO_MAX_FRAMES``), each 70 soft
#: tokens (``_VIDEO_MAX_SOFT_TOKENS``) plus its begin, end and about 6 timestamp tokens.
_GEMMA4_VIDEO_FRAMES = 32
_GEMMA4_FRAME_TOKENS = 70 + 2 + 6


def _gemma4_multimodal(config: Config, spec: Mapping[str, Any]) -> dict[str, Any]:
    """Images and video, as vLLM's gemma4_mm.py ``get_mm_max_tokens_per_item`` counts them:
    an image is ``vision_config.default_output_length`` soft tokens (280), a video 32 frames of
    78 tokens (2,496), one frame a group. The audio tower is refused by the count."""
    encoder = _count_gemma4_vision(config, spec["hidden_size"])
    tower = mapping(config.get("vision_config"), "vision_config")
    v = Reading("gemma4_vision", tower, {**_GEMMA4_VISION, "default_output_length": 280})
    tokens = {
        "image_tokens": size(v, "default_output_length"),
        "video_frame_tokens": _GEMMA4_FRAME_TOKENS,
        "video_max_frame_groups": _GEMMA4_VIDEO_FRAMES,
        "vision_num_hidden_layers": size(v, "num_hidden_layers"),
        "vision_hidden_size": size(v, "hidden_size"),
    }
    return encoder_block(spec, encoder, tokens)


register(
    FAMILY,
    "gemma3n_text",
    Rule(layers=_layers_gemma3n, defaults=_GEMMA3N_TEXT, parameters=_not_counted),
    ("full_attention", "sliding_attention"),
    "layer_types, else 4 sliding : 1 full (window 512); the last num_kv_shared_layers (15)"
    " reuse earlier K/V (transformers Gemma3nTextConfig, vLLM gemma3n.py)",
    architectures=("Gemma3nForCausalLM",),
)
register_wrapper(
    FAMILY,
    "gemma3n",
    "gemma3n_text",
    "Gemma 3n with vision and audio: the text model in text_config",
    engines=("vllm",),  # vLLM Gemma3nForConditionalGeneration, a multimodal class
)
register(
    FAMILY,
    "gemma4_text",
    Rule(layers=_layers_gemma4, defaults=_GEMMA4_TEXT, parameters=_count_gemma4),
    ("full_attention", "sliding_attention"),
    "layer_types, else 5 sliding : 1 full; full layers of global_head_dim (512) and, with"
    " attention_k_eq_v, num_global_key_value_heads; num_kv_shared_layers (Gemma4TextConfig,"
    " vLLM gemma4.py)",
    architectures=("Gemma4ForCausalLM",),
)
register_wrapper(
    FAMILY,
    "gemma4",
    "gemma4_text",
    "Gemma 4 with vision (and audio): the text model in text_config",
    vision=_count_gemma4_vision,
    engines=("vllm",),  # vLLM Gemma4ForConditionalGeneration, a multimodal class
)
register_multimodal("gemma4", _gemma4_multimodal)
