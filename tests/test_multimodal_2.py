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
from kvplan.errors import SpecError
from kvplan.importers import import_config

FIXTURES = Path(__file__).parent / "fixtures" / "hf"


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
