"""Qwen2.5-VL and Qwen3-VL: their ``multimodal`` blocks, and Qwen2.5-VL's rule.

Qwen2.5-VL is a Qwen2 text model and a windowed ViT, both read from one config.json.

The released configs (transformers 4.41) state the text model's keys at the top level, beside
``vision_config``, so ``qwen2_5_vl`` is read by Qwen2's rule with the vision tower added to
its count; later re-saves nest a copy in ``text_config`` and keep the top-level keys.

The tower (transformers modeling_qwen2_5_vl.py, ``Qwen2_5_VisionTransformerPretrainedModel``):
a Conv3d patch embedding without bias (``in_chans x temporal_patch_size x patch_size^2``
inputs), ``depth`` blocks of two RMSNorms, a biased qkv and proj and a biased gated MLP of
``intermediate_size``, and the merger: an RMSNorm and a two-layer MLP over
``spatial_merge_size^2`` patches to ``out_hidden_size``. Qwen2.5-VL 3B, by torchinfo: patch
embedding 1,505,280; a block 19,702,200; merger 1,280 + 36,707,328.

Embedding tokens an item yields (the processor's defaults, preprocessor_config.json
``max_pixels`` 12,845,056 = 16,384 x 28 x 28; vLLM qwen2_vl.py ``get_max_image_tokens``): the
largest image is 16,384 merged patches of 28 x 28 pixels, 16,384 tokens; a video frame group
(``temporal_patch_size`` 2 frames at that size) is 16,384 tokens too, and vLLM's dummy video
holds at most 14 frames (``_MAX_FRAMES_PER_VIDEO``): 7 groups.

Qwen3-VL (registered in qwen.py: Qwen3 in ``text_config``, Qwen3.5's tower plus a merger per
deepstack layer) takes images up to 16,777,216 pixels, 16,384 tokens of 32 x 32 (patches of 16
merged 2 x 2), and video groups of 2 frames of 12,582,912 pixels, 12,288 tokens, one group in
vLLM's dummy video; each token hands over ``out_hidden_size`` values per deepstack level and one
more (Qwen3-VL 4B: 2,560 x 4). Qwen3.5 takes the same sizes and has no deepstack levels.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from kvplan.importers.parameters import (
    Count,
    encoder_block,
    linear,
    plain,
    register_multimodal,
    size,
    vision,
)
from kvplan.importers.reading import Config, Reading, as_list, mapping
from kvplan.importers.registry import register, rule_for, vision_for
from kvplan.importers.rules import UNIFORM_KINDS, Rule

FAMILY = "qwen_vl"

# Qwen2_5_VLVisionConfig defaults (configuration_qwen2_5_vl.py) for the keys that size it.
_QWEN2_5_VISION = {
    "depth": 32,
    "hidden_size": 3584,
    "intermediate_size": 3420,
    "in_chans": 3,
    "patch_size": 14,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
    "out_hidden_size": 3584,
}
#: The image processor's ``max_pixels`` (Qwen2VLImageProcessor's default, which the released
#: preprocessor_config.json states), and vLLM's most frames in its dummy video.
_MAX_PIXELS = 12_845_056
_MAX_VIDEO_FRAMES = 14


def _tower(config: Config) -> Reading:
    tower = mapping(config.get("vision_config"), "vision_config")
    return Reading("qwen2_5_vl.vision_config", tower, _QWEN2_5_VISION)


def _count_qwen2_5_vision(config: Config) -> Count:
    """The vision tower and merger of the module docstring."""
    v = _tower(config)
    h, inner = size(v, "hidden_size"), size(v, "intermediate_size")
    patch, frames = size(v, "patch_size"), size(v, "temporal_patch_size")
    merged = h * size(v, "spatial_merge_size") ** 2
    embed = plain(size(v, "in_chans") * frames * patch * patch * h)
    block = plain(2 * h) + linear(h, 3 * h, True) + linear(h, h, True)
    block += linear(h, inner, True).times(2) + linear(inner, h, True)
    merger = plain(h) + linear(merged, merged, True)
    merger += linear(merged, size(v, "out_hidden_size"), True)
    return vision(embed + block.times(size(v, "depth")) + merger)


def _multimodal(config: Config, spec: Mapping[str, Any]) -> dict[str, Any]:
    """Images and videos: the tower's parameters and the tokens of the module docstring."""
    v = _tower(config)
    unit = size(v, "patch_size") * size(v, "spatial_merge_size")
    tokens = _MAX_PIXELS // (unit * unit)  # a frame at the largest size: merged patches
    groups = _MAX_VIDEO_FRAMES // size(v, "temporal_patch_size")
    return encoder_block(
        spec,
        _count_qwen2_5_vision(config),
        {
            "image_tokens": tokens,
            "video_frame_tokens": tokens,
            "video_max_frame_groups": groups,
            "vision_hidden_size": size(v, "hidden_size"),
        },
    )


def _rule() -> Rule:
    """Qwen2's rule (attention biases on q, k and v), its count plus the vision tower."""
    qwen2 = rule_for("qwen2")
    if qwen2 is None:  # the qwen family registers it first (families/__init__.py's order)
        raise RuntimeError("qwen_vl: the qwen2 rule is not registered")
    text = qwen2.parameters
    return replace(qwen2, parameters=lambda r: text(r) + _count_qwen2_5_vision(r.config))


# Qwen3-VL's processors (preprocessor_config.json, video_preprocessor_config.json): images up
# to 16,777,216 pixels, video frames up to 25,165,824 per temporal group of 2; vLLM's
# qwen3_vl.py profiles a video of one group (2 frames).
_QWEN3_MAX_PIXELS = 16_777_216
_QWEN3_VIDEO_MAX_PIXELS = 25_165_824


def _qwen3_vl_multimodal(config: Config, spec: Mapping[str, Any]) -> dict[str, Any]:
    """Qwen3-VL: images and videos, the tower of ``vision_for`` (qwen.py's count, deepstack
    mergers included), and embeddings of ``out_hidden_size x (1 + deepstack levels)``."""
    tower = mapping(config.get("vision_config"), "vision_config")
    v = Reading("qwen3_vl.vision_config", tower, {})
    unit = size(v, "patch_size") * size(v, "spatial_merge_size")
    group = _QWEN3_VIDEO_MAX_PIXELS // size(v, "temporal_patch_size") // (unit * unit)
    levels = len(as_list(tower.get("deepstack_visual_indexes", []), "deepstack_visual_indexes"))
    counter = vision_for(config.get("model_type"))
    encoder = counter(config, spec["hidden_size"]) if counter is not None else Count()
    tokens = {
        "image_tokens": _QWEN3_MAX_PIXELS // (unit * unit),
        "video_frame_tokens": group,
        "video_max_frame_groups": 1,
    }
    if levels:  # Qwen3.5 has none: a token is out_hidden_size, the text width, wide
        tokens["embedding_width"] = size(v, "out_hidden_size") * (1 + levels)
    tokens["vision_hidden_size"] = size(v, "hidden_size")
    return encoder_block(spec, encoder, tokens)


register(
    FAMILY,
    "qwen2_5_vl",
    _rule(),
    UNIFORM_KINDS,
    "Qwen2.5-VL: Qwen2's rule on the top-level keys; the windowed ViT counted apart (multimodal)",
    architectures=("Qwen2_5_VLForConditionalGeneration",),
)
register_multimodal("qwen2_5_vl", _multimodal)
# Qwen3.5 (dense and MoE): vLLM's qwen3_5.py reuses Qwen3-VL's processing info, and the
# released preprocessor_config.json and video_preprocessor_config.json (Qwen/Qwen3.5-9B,
# Qwen/Qwen3.5-35B-A3B) state Qwen3-VL's sizes: the same tokens, without deepstack levels.
for _wrapper in ("qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe"):
    register_multimodal(_wrapper, _qwen3_vl_multimodal)
