"""A multimodal model's encoder, kept apart from its language model: the spec's ``multimodal``
block.

An engine serving a vision (or audio) model loads the encoder's weights beside the language
model's, and before it sizes the KV pool it runs the encoder once on the largest item it will
accept, holding the embeddings that item puts into the language model. What it needs from the
model is here: the modalities, the encoder's parameters (the tower and its projector, already
inside ``num_parameters``) and their dtype, and the most embedding tokens one item yields, as
the model's processor computes them at its largest size.

Video is counted in groups of frames: ``video_frame_tokens`` a group of the processor's
``temporal_patch_size`` frames at the largest frame size, and at most
``video_max_frame_groups`` groups in one video (vLLM's Qwen2-VL dummy video: 14 frames, 7
groups of 2; Qwen3-VL's: one group). Worked example, Qwen2.5-VL: the processor's
``max_pixels`` 12,845,056 is a 3,584 x 3,584 image, 256 x 256 patches of 14, merged 2 x 2 into
16,384 tokens; a video group of two such frames is 16,384 tokens too.

The block is a plain mapping (a ``TypedDict``), so a spec dumps to YAML and JSON as it loads;
the spec's pydantic check refuses unknown keys and values out of range.
"""

from __future__ import annotations

from typing import Annotated, Literal

from annotated_types import Ge, Le
from typing_extensions import NotRequired, TypedDict

from kvplan.model.limits import MAX_DIM, MAX_PARAMETERS, MAX_TOKENS

Modality = Literal["image", "video", "audio"]
#: The modalities a block may name, in vLLM's spelling (``--limit-mm-per-prompt`` keys).
MODALITIES: tuple[Modality, ...] = ("image", "video", "audio")

_Tokens = Annotated[int, Ge(1), Le(MAX_TOKENS)]
_Dim = Annotated[int, Ge(1), Le(MAX_DIM)]


class Multimodal(TypedDict):
    """The encoder of a multimodal model (see the module docstring). Token counts are the
    embedding tokens one item puts into the language model; absent: the modality is not
    taken. ``embedding_width``: the values of one such token the encoder hands over, when
    not ``hidden_size`` (Qwen3-VL's deepstack features: ``out_hidden_size x (1 + levels)``).
    ``vision_num_hidden_layers``, ``vision_hidden_size``: ``vision_config``'s, where its config
    class has them (SigLIP, Pixtral; Qwen-VL's towers say ``depth``), which SGLang reads."""

    modalities: list[Modality]
    encoder_parameters: Annotated[int, Ge(1), Le(MAX_PARAMETERS)]
    encoder_dtype: str
    image_tokens: NotRequired[_Tokens]
    video_frame_tokens: NotRequired[_Tokens]
    video_max_frame_groups: NotRequired[_Tokens]
    audio_tokens: NotRequired[_Tokens]
    embedding_width: NotRequired[_Dim]
    vision_num_hidden_layers: NotRequired[_Dim]
    vision_hidden_size: NotRequired[_Dim]


# Read by pydantic when the spec is checked: unknown keys refused, no "5" for 5.
Multimodal.__pydantic_config__ = {"extra": "forbid", "strict": True}  # type: ignore[attr-defined]


def max_tokens_per_item(block: Multimodal, max_model_len: int) -> dict[str, int]:
    """The most embedding tokens one item of each modality the block takes puts into the
    language model, for requests of ``max_model_len`` tokens: an image's or an audio clip's
    as stated; a video's as many frame groups as ``max_model_len`` holds, at least one and at
    most ``video_max_frame_groups``. Qwen2.5-VL at 32,768: 2 groups of 16,384 = 32,768."""
    out: dict[str, int] = {}
    for modality in block["modalities"]:
        if modality == "video" and "video_frame_tokens" in block:
            group = block["video_frame_tokens"]
            groups = max(1, min(max_model_len // group, block.get("video_max_frame_groups", 1)))
            out["video"] = groups * group
        elif modality == "image" and "image_tokens" in block:
            out["image"] = block["image_tokens"]
        elif modality == "audio" and "audio_tokens" in block:
            out["audio"] = block["audio_tokens"]
    return out
