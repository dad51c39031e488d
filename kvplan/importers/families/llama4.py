"""Llama 4 (Scout, Maverick): chunked local attention on RoPE layers, global NoPE layers.

``no_rope_layers`` holds one flag per layer (1: RoPE, so chunked within
``attention_chunk_size``; 0: NoPE, global). Released configs leave it empty; the config class
then derives it from ``no_rope_layer_interval`` (default 4: every fourth layer is NoPE).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvplan.errors import SpecError
from kvplan.importers.parameters import (
    Count,
    decoder,
    encoder_block,
    flag,
    linear,
    mlp,
    moe,
    norm,
    plain,
    register_multimodal,
    shapes,
    size,
    vision,
)
from kvplan.importers.reading import Config, Reading, as_list, mapping, whole
from kvplan.importers.registry import register, register_wrapper
from kvplan.importers.rules import Rule, layers_explicit

FAMILY = "llama4"


def _layers_llama4(r: Reading, n: int) -> None:
    if layers_explicit(r, n):
        return
    chunk = r.get("attention_chunk_size")
    no_rope = as_list(r.config.get("no_rope_layers") or [], "no_rope_layers")
    if no_rope:
        rope = [bool(x) for x in no_rope]
        why = "no_rope_layers"
    else:
        every = whole(r.get("no_rope_layer_interval"), "no_rope_layer_interval")
        rope = [(i + 1) % every != 0 for i in range(n)]
        why = f"no_rope_layer_interval {every} (no_rope_layers empty)"
    if chunk is None:
        return
    r.spec["attention_chunk_size"] = chunk
    # RoPE layers attend within their chunk; NoPE layers are global.
    r.spec["layer_types"] = ["chunked_attention" if x else "full_attention" for x in rope]
    r.notes.append(f"layer_types from {why}: RoPE layers chunked ({chunk}), NoPE layers full")


# Llama4VisionConfig defaults (configuration_llama4.py).
_VISION = {
    "hidden_size": 768,
    "intermediate_size": 5632,
    "num_hidden_layers": 34,
    "num_channels": 3,
    "image_size": 448,
    "patch_size": 14,
    "projector_input_dim": 4096,
    "projector_output_dim": 4096,
    "vision_output_dim": 7680,
    "pixel_shuffle_ratio": 0.5,
}
#: Llama4ImageProcessorFast's ``max_patches`` (the released preprocessor_config.json's 16): the
#: most tiles of ``image_size`` one image is cut into, besides its global tile.
_MAX_TILES = 16


def _count_llama4(r: Reading) -> Count:
    """Bias-free attention (its q/k norm has no weights); every ``interleave_moe_layer_step``-th
    layer routed experts (fused gate/up), a shared expert and a router, the other layers a
    dense MLP of ``intermediate_size_mlp``; two RMSNorms a layer."""
    s = shapes(r)
    bias = flag(r, "attention_bias")
    base = s.attention(bias, bias) + norm(s.hidden).times(2)
    width = size(r, "intermediate_size")
    num_experts, active = size(r, "num_local_experts"), size(r, "num_experts_per_tok", default=1)
    sparse = base + moe(s.hidden, width, num_experts, active, shared_width=width)
    dense = base + mlp(s.hidden, size(r, "intermediate_size_mlp", default=width))
    num_sparse = s.layers // size(r, "interleave_moe_layer_step", default=1)
    return decoder(s, sparse.times(num_sparse) + dense.times(s.layers - num_sparse))


def _count_vision(config: Config, text_hidden: int) -> Count:
    """Llama 4's vision tower (unfolded patch projection, class token, learned positions,
    LayerNorms and biased encoder layers), its pixel-shuffle MLP and the projector."""
    v = Reading(
        "llama4_vision_model", mapping(config.get("vision_config"), "vision_config"), _VISION
    )
    h, width = size(v, "hidden_size"), size(v, "intermediate_size")
    patch, channels = size(v, "patch_size"), size(v, "num_channels")
    positions = (size(v, "image_size") // patch) ** 2 + 1
    layer = linear(h, h, True).times(4) + mlp(h, width, gated=False, bias=True)
    layer += norm(h, bias=True).times(2)
    tower = plain(channels * patch * patch * h + h + positions * h) + norm(h, bias=True).times(2)
    tower += layer.times(size(v, "num_hidden_layers"))
    adapter = linear(width, size(v, "projector_input_dim"))
    adapter += linear(size(v, "projector_input_dim"), size(v, "projector_output_dim"))
    projector = linear(size(v, "vision_output_dim"), text_hidden)
    return vision(tower + adapter + projector)


def _llama4_multimodal(config: Config, spec: Mapping[str, Any]) -> dict[str, Any]:
    """Images only, as vLLM 0.32's mllama4.py counts its largest one: a 16:1 image of
    ``_MAX_TILES`` tiles of ``image_size`` plus the global tile (``1 + 16`` chunks), each
    ``(image_size // patch_size)^2`` patches shuffled down by ``1 / pixel_shuffle_ratio^2``
    (``get_patch_per_chunk``). Scout: 336 // 14 = 24, 576 / 4 = 144 a tile, 17 x 144 = 2,448."""
    tower = mapping(config.get("vision_config"), "vision_config")
    v = Reading("llama4_vision_model", tower, _VISION)
    ratio = v.get("pixel_shuffle_ratio")
    if ratio not in (0.5, 0.25, 1, 1.0):
        raise SpecError("", ["vision_config.pixel_shuffle_ratio: must be 0.5, 0.25 or 1"])
    shuffle = {0.5: 4, 0.25: 16}.get(ratio, 1)
    per_tile = (size(v, "image_size") // size(v, "patch_size")) ** 2 // shuffle
    shape = {"vision_num_hidden_layers": size(v, "num_hidden_layers")}
    shape["vision_hidden_size"] = size(v, "hidden_size")
    tokens = {"image_tokens": (_MAX_TILES + 1) * per_tile, **shape}
    return encoder_block(spec, _count_vision(config, spec["hidden_size"]), tokens)


register(
    FAMILY,
    "llama4_text",
    Rule(
        layers=_layers_llama4,
        defaults={"attention_chunk_size": 8192, "no_rope_layer_interval": 4},
        parameters=_count_llama4,
    ),
    ("full_attention", "chunked_attention"),
    "RoPE layers chunked (attention_chunk_size), NoPE layers global (no_rope_layers)",
    architectures=("Llama4ForCausalLM",),
)
register_wrapper(
    FAMILY,
    "llama4",
    "llama4_text",
    "Llama 4: the text model in text_config",
    vision=_count_vision,
)
register_multimodal("llama4", _llama4_multimodal)
