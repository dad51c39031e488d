"""The ``multimodal`` block of the wrappers beyond Gemma 3 and Qwen-VL: Mistral 3 (Pixtral) and
Llama 4, and the bundled Qwen3-VL releases.

Every figure is worked by hand below from the released config.json (tests/fixtures/hf) and the
processor sizes vLLM 0.32's model files read (mistral3.py, mllama4.py, qwen3_vl.py), never
taken from kvplan's output.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvplan.catalog.lookup import load_model
from kvplan.engines import vllm
from kvplan.engines.vllm_config import with_batch_defaults
from kvplan.engines.vllm_multimodal import encoder_profile
from kvplan.errors import SpecError
from kvplan.hardware.lookup import find_gpu
from kvplan.importers import import_config

FIXTURES = Path(__file__).parent / "fixtures" / "hf"
H100 = find_gpu("h100")


def _pixtral_tower(layers: int = 24) -> int:
    """Pixtral of Mistral Small 3.1 / Ministral 3: hidden 1,024, 16 heads of 64, MLP 4,096,
    patches of 14 on 3 channels; no biases, no position table (RoPE)."""
    layer = 1024 * 3 * 1024 + 1024 * 1024 + 3 * 1024 * 4096 + 2 * 1024  # 16,779,264
    return 3 * 14 * 14 * 1024 + 1024 + layers * layer  # patch conv, ln_pre, layers


def _pixtral_projector(text_hidden: int) -> int:
    """An RMSNorm, the 2 x 2 patch merger (4,096 -> 1,024) and two Linear layers without bias
    (``multimodal_projector_bias`` false) to the text width."""
    return 1024 + 4096 * 1024 + 1024 * text_hidden + text_hidden * text_hidden


# vLLM mistral3.py: a square image of the processor's longest_edge 1,540, cut into merged
# patches of 14 x 2 = 28 pixels: (1540 - 1) // 28 + 1 = 55 a side, one embedding each.
PIXTRAL_TOKENS = 55 * 55  # 3,025


@pytest.mark.parametrize(
    ("fixture", "text_hidden", "encoder"),
    [
        # Mistral Small 3.1 / Devstral Small 2: text hidden 5,120
        ("mistral-small-3.1-24b", 5120, 438_958_080),
        ("devstral-small-2-24b", 5120, 438_958_080),
        # Ministral 3 3B: text hidden 3,072
        ("ministral-3-3b", 3072, 420_083_712),
    ],
    ids=[
        "mistral-small-3.1: 603,136 + 24 x 16,779,264 + 35,652,608 = 438,958,080",
        "devstral-small-2: the same tower and text width",
        "ministral-3-3b: 603,136 + 402,702,336 + 16,778,240 = 420,083,712",
    ],
)
def test_the_mistral3_block_counts_pixtral_and_3025_tokens_an_image(
    fixture: str, text_hidden: int, encoder: int
) -> None:
    assert _pixtral_tower() + _pixtral_projector(text_hidden) == encoder
    block = import_config(FIXTURES / fixture / "config.json").spec.multimodal
    assert block == {
        "modalities": ["image"],
        "encoder_parameters": encoder,
        "encoder_dtype": "bfloat16",
        "image_tokens": PIXTRAL_TOKENS,
        "vision_num_hidden_layers": 24,
        "vision_hidden_size": 1024,
    }
    assert load_model(fixture).multimodal == block  # the bundled spec carries it


def _llama4_encoder() -> int:
    """Llama 4's vision model (Scout and Maverick alike): hidden 1,408, MLP 5,632 with biases,
    34 layers, patches of 14 on 336 pixels (576 + the class position), then the pixel-shuffle
    MLP 5,632 -> 4,096 -> 4,096 and the projector 4,096 -> 5,120, all without bias."""
    layer = 4 * (1408 * 1408 + 1408) + (1408 * 5632 + 5632) + (5632 * 1408 + 1408) + 4 * 1408
    assert layer == 23_807_872
    stem = 3 * 14 * 14 * 1408 + 1408 + 577 * 1408 + 4 * 1408  # patch, class, positions, 2 LNs
    return stem + 34 * layer + 5632 * 4096 + 4096 * 4096 + 4096 * 5120


# vLLM mllama4.py: the largest image is 16:1, max_patches 16 tiles plus the global tile; a tile
# of 336 is (336 // 14)^2 = 576 patches, pixel-shuffled 0.5 x 0.5 to 144: 17 x 144 = 2,448.
LLAMA4_TOKENS = (16 + 1) * (336 // 14) ** 2 // 4


@pytest.mark.parametrize("fixture", ["llama-4-scout", "llama-4-scout-instruct", "llama-4-maverick"])
def test_the_llama4_block_counts_17_tiles_of_144_tokens(fixture: str) -> None:
    assert (_llama4_encoder(), LLAMA4_TOKENS) == (871_932_416, 2448)
    block = import_config(FIXTURES / fixture / "config.json").spec.multimodal
    assert block == {
        "modalities": ["image"],
        "encoder_parameters": 871_932_416,
        "encoder_dtype": "bfloat16",
        "image_tokens": 2448,
        "vision_num_hidden_layers": 34,
        "vision_hidden_size": 1408,
    }
    assert load_model(fixture).multimodal == block


def test_an_unknown_pixel_shuffle_ratio_is_refused(tmp_path: Path) -> None:
    data = json.loads((FIXTURES / "llama-4-scout" / "config.json").read_text())
    data["vision_config"]["pixel_shuffle_ratio"] = 0.3
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    with pytest.raises(SpecError, match=r"vision_config\.pixel_shuffle_ratio"):
        import_config(path)


def _qwen3_vl_tower(out_hidden: int) -> int:
    """Qwen3-VL's 27-block tower (8B, 32B, the MoE releases): hidden 1,152, MLP 4,304, patches
    of 16 over 2 frames, 2,304 learned positions; a merger over 2 x 2 patches (4,608) to
    ``out_hidden`` and three deepstack mergers, whose LayerNorm spans the 4,608 merged values."""
    embed = 3 * 2 * 16 * 16 * 1152 + 1152 + 2304 * 1152  # Conv3d with bias, position table
    block = (
        4 * 1152
        + (1152 * 3456 + 3456)
        + (1152 * 1152 + 1152)
        + (1152 * 4304 + 4304)
        + (4304 * 1152 + 1152)
    )
    assert block == 15_239_504
    merger = 2 * 1152 + (4608 * 4608 + 4608) + (4608 * out_hidden + out_hidden)
    deepstack = 3 * (merger + 2 * 4608 - 2 * 1152)
    return embed + 27 * block + merger + deepstack


@pytest.mark.parametrize(
    ("name", "out_hidden", "levels"),
    [
        ("qwen3-vl-8b", 4096, 4),
        ("qwen3-vl-32b", 5120, 4),
        ("qwen3-vl-30b-a3b", 2048, 4),
        ("qwen3-vl-235b-a22b", 4096, 4),
    ],
    ids=[
        "qwen3-vl-8b: 576,388,336 tower; 4,096 x (1 + 3 deepstack) values a token",
        "qwen3-vl-32b: merger to 5,120; 20,480 values a token",
        "qwen3-vl-30b-a3b: merger to 2,048; 8,192 values a token",
        "qwen3-vl-235b-a22b: the 8B tower; 16,384 values a token",
    ],
)
def test_the_bundled_qwen3_vl_blocks(name: str, out_hidden: int, levels: int) -> None:
    block = load_model(name).multimodal
    assert block is not None
    # images up to 16,777,216 pixels in merged patches of 32 x 32; a video group of 2 frames
    # of 25,165,824 // 2 pixels; both as tests/test_multimodal.py derives them for 4B
    assert block == {
        "modalities": ["image", "video"],
        "encoder_parameters": _qwen3_vl_tower(out_hidden),
        "encoder_dtype": "bfloat16",
        "image_tokens": 16_777_216 // (32 * 32),
        "video_frame_tokens": 25_165_824 // 2 // (32 * 32),
        "video_max_frame_groups": 1,
        "embedding_width": out_hidden * levels,
        "vision_hidden_size": 1152,
    }
    assert import_config(FIXTURES / name / "config.json").spec.multimodal == block
    assert _qwen3_vl_tower(4096) == 576_388_336


def test_vllm_profiles_two_pixtral_images_at_8192() -> None:
    # Mistral Small 3.1 at 8,192: 3,025 tokens an image; budget max(8,192, 3,025) = 8,192 holds
    # 8,192 // 3,025 = 2; a prompt holds min(999, 8,192 // 3,025) = 2: 2 images of 3,025
    # tokens x 5,120 (text hidden) x 2 B
    profile = vllm.profile(load_model("mistral-small-3.1-24b"), H100, vllm.config(8192))
    encoder = profile.encoder
    assert encoder is not None
    assert (encoder.modality, encoder.budget_tokens, encoder.num_items) == ("image", 8192, 2)
    assert encoder.cache_bytes == 2 * 3025 * 5120 * 2 == 61_952_000


def test_vllm_profiles_llama4_images_of_17_tiles() -> None:
    # Llama 4 Scout at 32,768: 2,448 tokens an image; budget max(8,192, 2,448) = 8,192 holds
    # 8,192 // 2,448 = 3 (a prompt holds 32,768 // 2,448 = 13): 3 x 2,448 x 5,120 x 2 B
    encoder = vllm.profile(load_model("llama-4-scout"), H100, vllm.config(32768)).encoder
    assert encoder is not None
    assert (encoder.modality, encoder.budget_tokens, encoder.num_items) == ("image", 8192, 3)
    assert encoder.cache_bytes == 3 * 2448 * 5120 * 2 == 75_202_560


@pytest.mark.parametrize(
    ("name", "out_hidden"),
    [
        ("qwen3.5-9b", 4096),
        ("qwen3.5-27b", 5120),
        ("qwen3.5-35b-a3b", 2048),
        ("qwen3.5-122b-a10b", 3072),
        ("qwen3.5-397b-a17b", 4096),
    ],
    ids=[
        "qwen3.5-9b: the Qwen3-VL tower less its 3 deepstack mergers, 456,010,480",
        "qwen3.5-27b: merger to 5,120",
        "qwen3.5-35b-a3b: merger to 2,048",
        "qwen3.5-122b-a10b: merger to 3,072",
        "qwen3.5-397b-a17b: merger to 4,096",
    ],
)
def test_the_qwen3_5_blocks_take_qwen3_vl_sizes_without_deepstack(
    name: str, out_hidden: int
) -> None:
    # vLLM's qwen3_5.py reuses Qwen3-VL's processing info; the released processor files state
    # 16,777,216 image pixels and 25,165,824 a video group, patches of 16 merged 2 x 2
    merger = 2 * 1152 + (4608 * 4608 + 4608) + (4608 * out_hidden + out_hidden)
    deepstack = 3 * (merger + 2 * 4608 - 2 * 1152)
    tower = _qwen3_vl_tower(out_hidden) - deepstack
    block = load_model(name).multimodal
    assert block == {
        "modalities": ["image", "video"],
        "encoder_parameters": tower,
        "encoder_dtype": "bfloat16",
        "image_tokens": 16_384,
        "video_frame_tokens": 12_288,
        "video_max_frame_groups": 1,
        "vision_hidden_size": 1152,
    }
    assert import_config(FIXTURES / name / "config.json").spec.multimodal == block
    assert _qwen3_vl_tower(4096) - 3 * (40_119_040 + 6912) == 456_010_480


def _gemma4_encoder(text_hidden: int) -> int:
    """Gemma 4's vision tower (31B and 26B-A4B alike): 27 layers of 1,152, 16 heads of 72 (as
    many K/V heads), a gated MLP of 4,304, q and k RMSNorms, four RMSNorms a layer; patches of
    16 without bias, a two-axis table of 10,240 positions; a 1,152 x text projector."""
    layer = 1152 * 48 * 72 + 1152 * 1152 + 2 * 72 + 3 * 1152 * 4304 + 4 * 1152
    assert layer == 20_187_792
    return 3 * 16 * 16 * 1152 + 2 * 10240 * 1152 + 27 * layer + 1152 * text_hidden


@pytest.mark.parametrize(
    ("name", "text_hidden", "encoder"),
    [("gemma-4-31b", 5376, 575_741_232), ("gemma-4-26b-a4b", 2816, 572_792_112)],
    ids=["gemma-4-31b: projector to 5,376", "gemma-4-26b-a4b: projector to 2,816"],
)
def test_the_gemma4_block_counts_280_token_images_and_32_frame_videos(
    name: str, text_hidden: int, encoder: int
) -> None:
    assert _gemma4_encoder(text_hidden) == encoder
    # vLLM gemma4_mm.py: an image is default_output_length 280 soft tokens; a video 32 frames
    # of 70 soft tokens, a begin, an end and ~6 timestamp tokens: 32 x 78 = 2,496
    block = load_model(name).multimodal
    assert block == {
        "modalities": ["image", "video"],
        "encoder_parameters": encoder,
        "encoder_dtype": "bfloat16",
        "image_tokens": 280,
        "video_frame_tokens": 78,
        "video_max_frame_groups": 32,
        "vision_num_hidden_layers": 27,
        "vision_hidden_size": 1152,
    }
    assert import_config(FIXTURES / name / "config.json").spec.multimodal == block


def test_vllm_profiles_three_gemma4_videos_at_32768() -> None:
    # Gemma 4 31B at 32,768: a video of 2,496 tokens is the largest item; budget max(8,192,
    # 2,496) = 8,192 holds 8,192 // 2,496 = 3 (a prompt holds 32,768 // 2,496 = 13):
    # 3 x 2,496 tokens x 5,376 (text hidden) x 2 B
    # (the encoder's part is read alone)
    cfg = with_batch_defaults(vllm.config(32768), H100)
    encoder = encoder_profile(load_model("gemma-4-31b"), cfg, "bfloat16")
    assert encoder is not None
    assert (encoder.modality, encoder.tokens_per_item, encoder.num_items) == ("video", 2496, 3)
    assert encoder.cache_bytes == 3 * 2496 * 5376 * 2 == 80_510_976
