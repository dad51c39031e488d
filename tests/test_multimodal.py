"""Multimodal models deployed as such: the spec's ``multimodal`` block as the importers fill it,
and vLLM's encoder budget, ``--limit-mm-per-prompt`` and ``--language-model-only``.

Every figure is derived by hand below from the released config.json (tests/fixtures/hf), the
model's processor defaults and vLLM 0.32's rules (kvplan/engines/vllm_multimodal.py names the
source files). Qwen2.5-VL 3B (fixture ``qwen2.5-vl-3b``): text hidden 2,048, 36 layers, 2 K/V
heads of 128 (2048 / 16), tied embeddings over 151,936 tokens, MLP 11,008; vision tower of 32
blocks of 1,280 (MLP 3,420), patches of 14, merged 2 x 2, 2 frames a patch in time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kvplan import estimate
from kvplan.answers.plans import answer
from kvplan.answers.question import Question
from kvplan.catalog.lookup import load_model
from kvplan.cli import app
from kvplan.engines import vllm
from kvplan.engines.vllm_multimodal import parse_limits
from kvplan.errors import SpecError, UnitError
from kvplan.hardware.lookup import find_gpu
from kvplan.importers import import_config
from kvplan.model.multimodal import max_tokens_per_item
from kvplan.model.spec import parse_spec

FIXTURES = Path(__file__).parent / "fixtures" / "hf"
QWEN = FIXTURES / "qwen2.5-vl-3b" / "config.json"
runner = CliRunner()

# --- the vision tower, counted by hand ----------------------------------------------------------

# patch embedding: Conv3d without bias, 3 channels x 2 frames x 14 x 14 inputs to 1,280
PATCH = 3 * 2 * 14 * 14 * 1280  # 1,505,280
# a block: two RMSNorms, qkv and proj with biases, gate/up/down with biases
BLOCK = (
    2 * 1280
    + (1280 * 3840 + 3840)
    + (1280 * 1280 + 1280)
    + 2 * (1280 * 3420 + 3420)
    + (3420 * 1280 + 1280)
)  # 19,702,200
# the merger: an RMSNorm of 1,280, then 5,120 -> 5,120 -> 2,048 (4 merged patches of 1,280)
MERGER = 1280 + (5120 * 5120 + 5120) + (5120 * 2048 + 2048)  # 36,708,608
TOWER = PATCH + 32 * BLOCK + MERGER
# the text model: tied embeddings; q with bias, k and v of 256 with biases, o; MLP; 2 norms
LAYER = (2048 * 2048 + 2048) + 2 * (2048 * 256 + 256) + 2048 * 2048 + 3 * 2048 * 11008 + 2 * 2048
TEXT = 151936 * 2048 + 36 * LAYER + 2048


def test_the_qwen2_5_vl_tower_and_text_model_add_up_to_the_checkpoint() -> None:
    # the parts as a torchinfo summary of the 3B model reports them
    assert (PATCH, BLOCK, LAYER) == (1_505_280, 19_702_200, 77_076_992)
    assert TOWER == 668_684_288
    assert TEXT == 3_085_938_688
    spec = import_config(QWEN).spec
    assert spec.num_parameters == TEXT + TOWER == 3_754_622_976
    assert spec.model_type == "qwen2_5_vl"
    # the cache is the text model's: 2 x 36 layers x 2 heads x 128 x 2 B a token
    assert estimate(spec, 1).kv_cache_bytes == 2 * 36 * 2 * 128 * 2


def test_the_qwen2_5_vl_block_holds_the_processors_largest_items() -> None:
    block = import_config(QWEN).spec.multimodal
    # max_pixels 12,845,056 // (28 x 28) = 16,384 merged patches; 14 frames // 2 = 7 groups
    assert block == {
        "modalities": ["image", "video"],
        "encoder_parameters": TOWER,
        "encoder_dtype": "bfloat16",
        "image_tokens": 12_845_056 // (28 * 28),
        "video_frame_tokens": 16_384,
        "video_max_frame_groups": 14 // 2,
        "vision_hidden_size": 1280,  # SGLang reads it; the tower states depth, not layers
    }
    # a video: as many groups as the request length holds, 1 to 7
    assert max_tokens_per_item(block, 8192) == {"image": 16384, "video": 16384}
    assert max_tokens_per_item(block, 32768)["video"] == 2 * 16384
    assert max_tokens_per_item(block, 128000)["video"] == 7 * 16384  # 128,000 // 16,384 = 7


def test_the_gemma3_block_counts_siglip_and_256_tokens_an_image() -> None:
    # SigLIP of gemma-3-4b: hidden 1,152, MLP 4,304, 27 layers, patches of 14 on 896 pixels
    positions = (896 // 14) ** 2 * 1152
    layer = 4 * (1152 * 1152 + 1152) + (1152 * 4304 + 4304) + (4304 * 1152 + 1152) + 4 * 1152
    tower = (3 * 14 * 14 * 1152 + 1152) + positions + 27 * layer + 2 * 1152
    projector = 1152 * 2560 + 1152  # a vision x text matrix and an RMSNorm
    block = import_config(FIXTURES / "gemma-3-4b" / "config.json").spec.multimodal
    assert block is not None
    assert block["encoder_parameters"] == tower + projector == 419_816_304
    assert (block["modalities"], block["image_tokens"]) == (["image"], 256)
    assert (block["vision_num_hidden_layers"], block["vision_hidden_size"]) == (27, 1152)
    assert load_model("gemma-3-4b").multimodal == block  # the bundled spec carries it


@pytest.mark.parametrize(
    ("block", "problem"),
    [
        ({"modalities": ["smell"]}, "multimodal.modalities.0"),
        ({"image_tokens": 0}, "multimodal.image_tokens"),
        ({"image_tokens": "256"}, "multimodal.image_tokens"),
        ({"bogus": 1}, "multimodal.bogus: unknown key"),
    ],
)
def test_a_malformed_block_is_a_spec_error_naming_the_key(
    block: dict[str, Any], problem: str
) -> None:
    base = {"modalities": ["image"], "encoder_parameters": 5, "encoder_dtype": "bfloat16"}
    data = {
        "name": "x",
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "hidden_size": 64,
        "torch_dtype": "bfloat16",
        "multimodal": base | block,
    }
    with pytest.raises(SpecError, match=problem):
        parse_spec(data)


# --- --limit-mm-per-prompt as vLLM reads it -----------------------------------------------------


@pytest.mark.parametrize(
    ("text", "limits"),
    [
        ('{"image": 0}', {"image": 0}),
        ('{"image": 2, "video": 0}', {"image": 2, "video": 0}),
        ('{"video": {"count": 1}}', {"video": 1}),
    ],
)
def test_limits_are_read_as_vllm_takes_them(text: str, limits: dict[str, int]) -> None:
    assert parse_limits(text) == limits


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("[1]", "a JSON object of counts"),
        ("image=2", "a JSON object of counts"),
        ('{"smell": 1}', "'smell' is not a modality; allowed: image, video, audio"),
        ('{"image": -1}', "image: a whole number of items"),
        ('{"image": true}', "image: a whole number of items"),
        ('{"video": {"count": 1, "num_frames": 32}}', "only a count is modelled, not num_frames"),
    ],
)
def test_a_limit_vllm_would_not_take_is_refused_naming_the_flag(text: str, named: str) -> None:
    with pytest.raises(UnitError, match=r"^--limit-mm-per-prompt: ") as e:
        parse_limits(text)
    assert named in str(e.value)


# --- vLLM's profile -----------------------------------------------------------------------------

H100 = find_gpu("h100")


def _profile(spec: Any, length: int, **flags: Any) -> vllm.VllmResult:
    return vllm.profile(spec, H100, vllm.config(length, **flags))


def test_vllm_profiles_the_largest_item_and_holds_its_embeddings() -> None:
    spec = import_config(QWEN).spec
    # 32,768: a video of 2 groups (32,768 tokens) is the largest item; budget max(8,192,
    # 32,768) = 32,768 holds one; 32,768 x 2,048 x 2 B held during the profile
    encoder = _profile(spec, 32768).encoder
    assert encoder is not None
    assert (encoder.modality, encoder.tokens_per_item) == ("video", 32768)
    assert (encoder.budget_tokens, encoder.num_items) == (32768, 1)
    assert encoder.cache_bytes == 32768 * 2048 * 2 == 134_217_728
    # no video: an image of 16,384 tokens, budget 16,384, one image
    encoder = _profile(spec, 32768, limit_mm_per_prompt='{"video": 0}').encoder
    assert encoder is not None
    assert (encoder.modality, encoder.budget_tokens, encoder.num_items) == ("image", 16384, 1)
    assert encoder.cache_bytes == 16384 * 2048 * 2 == 67_108_864
    result = _profile(spec, 32768)
    log = result.to_engine_result().engine_log
    assert (log["encoder_cache_budget_tokens"], log["encoder_cache_bytes"]) == (32768, 134_217_728)
    assert result.log_lines()[0] == (
        "Encoder cache will be initialized with a budget of 32768 tokens, and profiled with"
        " 1 video items of the maximum feature size."
    )


def test_a_small_item_fills_the_budget_of_batched_tokens() -> None:
    # Gemma 3 4B at 8,192: 256 tokens an image; budget max(8,192, 256) = 8,192 holds 32; a
    # prompt holds min(999, 8,192 // 256) = 32, 1,024 sequences far more: 32 images of 256
    # tokens x 2,560 (hidden) x 2 B
    encoder = _profile(load_model("gemma-3-4b"), 8192).encoder
    assert encoder is not None
    assert (encoder.modality, encoder.budget_tokens, encoder.num_items) == ("image", 8192, 32)
    assert encoder.cache_bytes == 32 * 256 * 2560 * 2 == 41_943_040


def test_language_model_only_skips_the_towers_weights_and_its_profile() -> None:
    spec = import_config(QWEN).spec
    both = _profile(spec, 32768)
    text = _profile(spec, 32768, language_model_only=True)
    zeros = _profile(spec, 32768, limit_mm_per_prompt='{"image": 0, "video": 0}')
    assert text.encoder is not None
    assert not text.encoder.tower_loaded
    assert text.encoder.log_line() is None
    assert zeros.available_bytes == text.available_bytes  # the same text-only mode
    # the tower's 668,684,288 bfloat16 parameters and the one video's embeddings come back
    weights = both.stages[0].overhead.weights_bytes - text.stages[0].overhead.weights_bytes
    assert weights == TOWER * 2 == 1_337_368_576
    assert text.available_bytes - both.available_bytes == 1_337_368_576 + 134_217_728
    # with one image modality still on, the tower stays: only the video's share differs
    image = _profile(spec, 32768, limit_mm_per_prompt='{"video": 0}')
    assert image.available_bytes - both.available_bytes == 134_217_728 - 67_108_864
    # a page: 16 tokens x 2 heads x 128 x 2 (K, V) x 2 B = 16,384 B a layer, 36 layers a block
    assert text.num_gpu_blocks == text.available_bytes // (16384 * 36)


def test_a_text_model_is_unchanged_by_the_multimodal_flags() -> None:
    spec = load_model("llama-3.1-8b")
    plain = _profile(spec, 32768)
    assert plain.encoder is None
    for flags in ({"limit_mm_per_prompt": '{"image": 0}'}, {"language_model_only": True}):
        assert _profile(spec, 32768, **flags).num_gpu_blocks == plain.num_gpu_blocks


def test_what_vllm_does_not_model_here_is_refused() -> None:
    spec = import_config(QWEN).spec
    with pytest.raises(UnitError, match=r"audio: qwen2\.5-vl-3b takes image, video"):
        _profile(spec, 32768, limit_mm_per_prompt='{"audio": 1}')
    with pytest.raises(UnitError, match=r"modelled for: 0\.32"):
        _profile(spec, 32768, limit_mm_per_prompt='{"image": 1}', version="0.29")
    with pytest.raises(UnitError, match="-pp 2: vLLM's multimodal profile"):
        _profile(spec, 32768, pipeline_parallel_size=2)
    assert _profile(spec, 32768, pipeline_parallel_size=2, language_model_only=True).encoder


# --- one question, one answer: plan and the library agree ---------------------------------------


@pytest.mark.parametrize(
    "flags",
    [(), ("--limit-mm-per-prompt", '{"video": 0}'), ("--language-model-only",)],
    ids=["default", "no video", "text only"],
)
def test_plan_and_the_library_give_one_answer(flags: tuple[str, ...]) -> None:
    args = ["plan", str(QWEN), "--gpu", "h100", "-c", "32K", "-e", "vllm", "-f", "json", *flags]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    asked: dict[str, Any] = {}
    if "--language-model-only" in flags:
        asked["language_model_only"] = True
    if "--limit-mm-per-prompt" in flags:
        asked["limit_mm_per_prompt"] = flags[1]
    question = Question(engine="vllm", max_model_len=32768, **asked)
    found = answer(import_config(QWEN).spec, H100, question)
    assert doc["answer"]["max_concurrency"] == found.verdict.max_concurrency
    assert doc["num_blocks"] == found.result.result.num_gpu_blocks


@pytest.mark.parametrize("engine", ["ideal", "sglang", "trtllm", "llama.cpp"])
def test_an_engine_that_does_not_read_the_flags_refuses_them(engine: str) -> None:
    for flags in (("--language-model-only",), ("--limit-mm-per-prompt", '{"image": 0}')):
        args = ["plan", str(QWEN), "--gpu", "h100", "-c", "8K", "-e", engine, *flags]
        result = runner.invoke(app, args)
        assert result.exit_code == 2, result.output
        assert result.stderr.startswith(f"kvplan: error: {flags[0]}: not read by --engine")
        assert result.stderr.count("\n") == 1


def test_check_reads_the_flags_as_budget_keys_and_gives_plans_answer(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_bytes(QWEN.read_bytes())
    budget = tmp_path / "budget.yaml"
    rows = []
    for name, key in (
        ("no-video", "limit_mm_per_prompt: {video: 0}"),
        ("text", "language_model_only: true"),
    ):
        rows.append(
            f"  - name: {name}\n    model: config.json\n    gpu: h100\n    engine: vllm\n"
            f"    max_model_len: 32K\n    {key}\n    expect: {{min_concurrency: 1}}\n"
        )
    budget.write_text("deployments:\n" + "".join(rows), encoding="utf-8")
    result = runner.invoke(app, ["check", str(budget), "--format", "json"])
    assert result.exit_code == 0, result.stderr
    actual = [r["actual"] for r in json.loads(result.stdout)["results"]]
    spec = import_config(QWEN).spec
    asked = ({"limit_mm_per_prompt": '{"video": 0}'}, {"language_model_only": True})
    expected = [
        answer(
            spec, H100, Question(engine="vllm", max_model_len=32768, **a)
        ).verdict.max_concurrency
        for a in asked
    ]
    assert actual == expected
    sglang = budget.read_text(encoding="utf-8").replace("engine: vllm", "engine: sglang", 1)
    budget.write_text(sglang, encoding="utf-8")
    refused = runner.invoke(app, ["check", str(budget)])
    assert refused.exit_code == 2
    assert "--limit-mm-per-prompt: not read by --engine sglang" in refused.stderr


# --- Qwen3-VL: Qwen3 in text_config, Qwen3.5's tower with deepstack mergers ---------------------

QWEN3_VL = FIXTURES / "qwen3-vl-4b" / "config.json"


def _qwen3_vl_tower(h: int, inner: int, depth: int, out: int, levels: int) -> int:
    """A Qwen3-VL tower by hand: Conv3d patch embedding with bias (3 x 2 x 16 x 16 inputs),
    2,304 learned positions, blocks of two LayerNorms, biased qkv, proj, fc1 and fc2; the
    merger (LayerNorm of h, then 4h -> 4h -> out, biased) and one per deepstack level, whose
    LayerNorm is over the 4h merged values."""
    merged = 4 * h
    embed = 3 * 2 * 16 * 16 * h + h + 2304 * h
    block = 4 * h + (h * 3 * h + 3 * h) + (h * h + h) + (h * inner + inner) + (inner * h + h)
    mlp = (merged * merged + merged) + (merged * out + out)
    return embed + depth * block + (2 * h + mlp) + levels * (2 * merged + mlp)


def test_the_qwen3_vl_4b_tower_and_text_model_add_up() -> None:
    tower = _qwen3_vl_tower(1024, 4096, 24, 2560, 3)
    assert tower == 415_347_712
    # Qwen3 4B: tied embeddings; q 32 x 128 and o, k and v 8 x 128, q/k norms, MLP 9,728
    layer = 2 * 2560 * 4096 + 2 * 2560 * 1024 + 2 * 128 + 3 * 2560 * 9728 + 2 * 2560
    text = 151936 * 2560 + 36 * layer + 2560
    assert text == 4_022_468_096
    spec = import_config(QWEN3_VL).spec
    assert spec.num_parameters == text + tower == 4_437_815_808
    assert estimate(spec, 1).kv_cache_bytes == 2 * 36 * 8 * 128 * 2
    # 16,777,216 // (32 x 32) = 16,384; a group of 2 frames of 25,165,824 // 2 pixels: 12,288
    assert spec.multimodal == {
        "modalities": ["image", "video"],
        "encoder_parameters": tower,
        "encoder_dtype": "bfloat16",
        "image_tokens": 16_777_216 // (32 * 32),
        "video_frame_tokens": 25_165_824 // 2 // (32 * 32),
        "video_max_frame_groups": 1,
        "embedding_width": 2560 * (1 + 3),
        "vision_hidden_size": 1024,
    }


def test_vllm_profiles_one_qwen3_vl_image_with_its_deepstack_features() -> None:
    # image 16,384 > video 12,288 tokens: budget max(8,192, 16,384) = 16,384, one image (the
    # line vLLM prints for Qwen3-VL), each token 2,560 x 4 values of 2 B
    encoder = _profile(import_config(QWEN3_VL).spec, 32768).encoder
    assert encoder is not None
    assert (encoder.modality, encoder.budget_tokens, encoder.num_items) == ("image", 16384, 1)
    assert encoder.cache_bytes == 16384 * 2560 * 4 * 2 == 335_544_320


def test_qwen3_vl_moe_reads_its_text_model_and_tower() -> None:
    # the shapes of Qwen/Qwen3-VL-30B-A3B-Instruct's config.json (a public parser test
    # transcribes them from the release at commit 1fc78ad); the rest of the file left out
    text = {
        "model_type": "qwen3_vl_moe_text",
        "hidden_size": 2048,
        "intermediate_size": 6144,
        "head_dim": 128,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "num_hidden_layers": 48,
        "num_experts": 128,
        "num_experts_per_tok": 8,
        "moe_intermediate_size": 768,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "max_position_embeddings": 262144,
        "vocab_size": 151936,
        "dtype": "bfloat16",
    }
    vision = {
        "deepstack_visual_indexes": [8, 16, 24],
        "depth": 27,
        "hidden_size": 1152,
        "in_channels": 3,
        "intermediate_size": 4304,
        "num_position_embeddings": 2304,
        "out_hidden_size": 2048,
        "patch_size": 16,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
    }
    config = {
        "architectures": ["Qwen3VLMoeForConditionalGeneration"],
        "model_type": "qwen3_vl_moe",
        "text_config": text,
        "vision_config": vision,
        "tie_word_embeddings": False,
    }
    from kvplan.importers import parameters_from_config, spec_from_config

    data, _ = spec_from_config(config)
    assert (data["model_type"], data["num_key_value_heads"], data["head_dim"]) == (
        "qwen3_vl_moe_text",
        4,
        128,
    )
    tower = _qwen3_vl_tower(1152, 4304, 27, 2048, 3)
    assert tower == 538_631_408
    assert data["multimodal"]["encoder_parameters"] == tower
    assert data["multimodal"]["embedding_width"] == 2048 * 4
    # the tower is in the total: the text model alone is 30,532,122,624 (Qwen3-30B-A3B's)
    assert parameters_from_config(config).total == 30_532_122_624 + tower


# --- SGLang lowers its automatic share for a multimodal model -----------------------------------


def test_sglang_lowers_its_automatic_fraction_by_the_vision_towers_size() -> None:
    from kvplan.engines import sglang

    auto = sglang.mem_fraction_static_auto(H100.memory_bytes)
    # Gemma 3's SigLIP: 27 x 1,152^2 / (24 x 1,024^2) = 1.423828125; 1 - 0.1 x 0.423828125
    # = 0.9576171875 (within 0.8 and 1.05); the share x 0.95 x that
    gemma = sglang.kv_cache(load_model("gemma-3-4b"), H100)
    assert gemma.engine_log["mem_fraction_static"] == auto * (0.95 * (1.0 - 0.1 * 0.423828125))
    # Qwen2.5-VL's tower states depth, so SGLang takes 24 layers: 24 x 1,280^2 / (24 x 1,024^2)
    # = 1.5625 -> 0.94375
    qwen = sglang.kv_cache(import_config(QWEN).spec, H100)
    assert qwen.engine_log["mem_fraction_static"] == auto * (0.95 * (1.0 - 0.1 * 0.5625))
    # a text model keeps the automatic share, and a given share is SGLang's as given
    assert (
        sglang.kv_cache(load_model("llama-3.1-8b"), H100).engine_log["mem_fraction_static"] == auto
    )
    given = sglang.kv_cache(load_model("gemma-3-4b"), H100, mem_fraction_static=0.8)
    assert given.engine_log["mem_fraction_static"] == 0.8
