"""``kvplan flags`` and ``kvplan.answers.flags``: verdicts that count weights, GPUs and overhead.

Every figure below is derived by hand from the bundled specs:

- Qwen3-32B: 32,762,123,264 parameters, 64 layers, 8 KV heads x 128 dims, vocab 151,936 x
  hidden 5,120 = 777,912,320 parameters in each of the embeddings and the (untied) head.
- Llama 3.1 70B: 70,553,706,496 parameters, 80 layers, 64 heads, 8 KV heads x 128 dims,
  vocab 128,256 x hidden 8,192 = 1,050,673,152 parameters in each of embeddings and head.
- Llama 3.1 8B: 8,030,261,248 parameters, 32 layers, 8 KV heads x 128 dims: 131,072 B a token.
- GPUs as torch reports them: H100 85,029,027,840 B; RTX 4090 25,756,172,288 B.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from typer.testing import CliRunner

from kvplan.answers.flags import ENGINES, layer_split, recommend
from kvplan.cli import app
from kvplan.errors import UnitError

runner = CliRunner()

H100 = 85_029_027_840
RTX_4090 = 25_756_172_288
GiB = 2**30


def run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def _plan_compute_bytes(model: str, gpu: str, *args: str) -> list[int]:
    """Each GPU's compute buffer as ``kvplan plan --engine llama.cpp`` lays the same setting
    out: flags' llama.cpp verdict is plan's, so it adds these and the 1 GiB --fit-target."""
    code, out, err = run("plan", model, "--gpu", gpu, "--engine", "llama.cpp", *args, "-f", "json")
    assert code in (0, 1), err
    return [d["compute_bytes"] for d in json.loads(out)["devices"] if d["device"] != "CPU"]


def flags_json(*args: str) -> tuple[int, dict[str, Any], dict[str, dict[str, Any]]]:
    code, out, err = run("flags", *args, "-f", "json")
    assert code in (0, 1), err
    doc = json.loads(out)
    return code, doc, {e["engine"]: e for e in doc["engines"]}


# --- weights count, for every engine ------------------------------------------------------


def test_qwen3_32b_does_not_fit_a_24_gib_card_in_any_engine() -> None:
    code, doc, engines = flags_json(
        "qwen3-32b", "-g", "rtx4090", "--max-model-len", "8K", "-n", "1"
    )
    assert code == 1  # none fits
    assert doc["fits"] is False
    assert not any(e["fits"] for e in engines.values())
    # llama.cpp keeps the token embeddings in host memory; the layers and the output head go
    # on the GPU: (32,762,123,264 - 777,912,320) x 2 B = 63,968,421,888 B (59.57 GiB)
    llama = engines["llama.cpp"]
    assert llama["weights_bytes"] == 63_968_421_888
    # its cache: 8,192 cells x 64 layers x 8 x 128 x 2 (K, V) x 2 B = 2 GiB
    assert llama["kv_cache_bytes"] == 8192 * 64 * 8 * 128 * 2 * 2
    (compute,) = _plan_compute_bytes("qwen3-32b", "rtx4090", "-c", "8K", "-np", "1", "-ngl", "65")
    assert llama["required_bytes"] == 63_968_421_888 + 2 * GiB + compute + GiB > RTX_4090
    # the engines that shard (one GPU here) hold every parameter: 65,524,246,528 B
    assert engines["sglang"]["weights_bytes"] == 32_762_123_264 * 2
    assert engines["tgi"]["weights_bytes"] == 32_762_123_264 * 2
    # no engine that does not fit prints a flag
    assert all(e["flags"] == [] for e in engines.values())


def test_qwen3_32b_on_a_24_gib_card_says_the_sglang_fraction_in_words() -> None:
    code, out, err = run("flags", "qwen3-32b", "-g", "rtx4090", "--max-model-len", "8K", "-n", "1")
    assert code == 1, err
    assert "--mem-fraction-static=" not in out
    # (8,192 tokens x 262,144 B + 65,524,246,528 B of weights) / 25,756,172,288 B = 2.6274...,
    # rounded up to thousandths: 2.628
    needed = -(-(8192 * 262_144 + 65_524_246_528) * 1000 // RTX_4090)
    assert needed == 2628
    assert "--mem-fraction-static of 2.628" in out


def test_llama_70b_on_four_h100_fits_vllm_with_tp_4() -> None:
    code, doc, engines = flags_json(
        "llama-3.1-70b", "-g", "h100", "-tp", "4", "--max-model-len", "32K", "-n", "8"
    )
    assert code == 0
    assert doc["tensor_parallel_size"] == 4
    v = engines["vllm"]
    assert v["fits"] is True
    assert v["num_gpus"] == 4
    # weights split over 4 ranks: 70,553,706,496 x 2 / 4 = 35,276,853,248 B, plus vLLM's
    # rotary cache of 131,072 positions x 128 dims x 2 B = 33,554,432 B
    assert v["weights_bytes"] == 70_553_706_496 * 2 // 4 + 131_072 * 128 * 2
    # a block: 16 tokens x 80 layers x 2 KV heads per rank x 128 x 2 (K, V) x 2 B = 1,310,720 B;
    # 8 requests x 2,048 blocks + the null block
    assert v["kv_cache_bytes"] == (8 * 2048 + 1) * 1_310_720 == 21_476_147_200
    assert "--kv-cache-memory=21476147200" in v["flags"]
    assert "--tensor-parallel-size=4" in v["flags"]
    assert v["required_bytes"] <= v["budget_bytes"] == H100 * 9 // 10


def test_llama_70b_on_four_h100_sglang_fraction_counts_the_rank_weights() -> None:
    _, _, engines = flags_json(
        "llama-3.1-70b", "-g", "h100", "-tp", "4", "--max-model-len", "32K", "-n", "8"
    )
    s = engines["sglang"]
    weights = 70_553_706_496 * 2 // 4  # 35,276,853,248 B per rank
    cell = 80 * 2 * (128 + 128) * 2  # 80 layers x 2 KV heads per rank x (K + V dims) x 2 B
    pool = 8 * 32_768 * cell  # 262,144 tokens: 20 GiB
    assert s["weights_bytes"] == weights
    assert s["kv_cache_bytes"] == pool == 20 * GiB
    thousandths = -(-(pool + weights) * 1000 // H100)  # 0.668
    assert f"--mem-fraction-static=0.{thousandths}" in s["flags"]
    assert "--tp=4" in s["flags"]


def test_llama_70b_on_four_gpus_llama_cpp_splits_layers() -> None:
    # llama.cpp does not shard: 80 layers + the output layer dealt to 4 GPUs by
    # il x 4 // 81: 21, 20, 20 and 19 layers, the output head on the last GPU
    _, _, engines = flags_json(
        "llama-3.1-70b", "-g", "h100", "-tp", "4", "--max-model-len", "32K", "-n", "8"
    )
    e = engines["llama.cpp"]
    layers_bytes = (70_553_706_496 - 2 * 1_050_673_152) * 2  # 136,904,720,384 B
    cache = 262_144 * 80 * 8 * 128 * 2 * 2  # 80 GiB in all
    first = -(-layers_bytes * 21 // 80) + cache * 21 // 80  # 35,937,489,101 + 22,548,578,304
    last = -(-layers_bytes * 19 // 80) + 1_050_673_152 * 2 + cache * 19 // 80
    assert first > last
    computes = _plan_compute_bytes(
        "llama-3.1-70b", "h100", "-tp", "4", "-c", "32K", "-np", "8", "-ngl", "81"
    )
    # plan places each layer's own bytes: the same to within a byte of rounding a layer
    assert abs(e["weights_bytes"] - -(-layers_bytes * 21 // 80)) <= 21
    assert e["required_bytes"] == e["weights_bytes"] + cache * 21 // 80 + computes[0] + GiB
    assert e["fits"] is True
    assert e["num_gpus"] == 4
    assert "-sm layer" in e["flags"]
    assert e["kv_cache_bytes"] == cache


@pytest.mark.parametrize(
    ("num_layers", "num_gpus", "expected"),
    [
        (80, 4, ((21, 20, 20, 19), 3)),  # il x 4 // 81: boundaries at 20.25, 40.5, 60.75
        (32, 3, ((11, 11, 10), 2)),  # il x 3 // 33: boundaries at 11, 22
        (32, 1, ((32,), 0)),
        (2, 4, ((1, 1, 0, 0), 2)),  # il x 4 // 3: 0 -> 0, 1 -> 1; the output 2 x 4 // 3 = 2
    ],
)
def test_layer_split(num_layers: int, num_gpus: int, expected: tuple[tuple[int, ...], int]) -> None:
    assert layer_split(num_layers, num_gpus) == expected
    assert sum(expected[0]) == num_layers


# --- TGI has a real verdict ----------------------------------------------------------------


def test_tgi_does_not_fit_when_its_blocks_do_not() -> None:
    # 15 requests of 32,768 tokens: 15 x 2,048 = 30,720 blocks of 2 MiB (32 layers x 16 x 8 x
    # 128 x 2 x 2 B). After 16,060,522,496 B of weights TGI keeps
    # (85,029,027,840 - 16,060,522,496 - 0.1 x 85,029,027,840) // 2,097,152 = 28,832 blocks
    code, doc, engines = flags_json(
        "llama-3.1-8b", "-g", "h100", "--max-model-len", "32K", "-n", "15"
    )
    t = engines["tgi"]
    weights = 8_030_261_248 * 2
    kept = (H100 - weights - H100 // 10) // 2_097_152
    assert kept == 28_832 < 30_720
    assert t["fits"] is False
    assert t["flags"] == []
    assert t["required_bytes"] == weights + 30_720 * 2_097_152
    # llama.cpp uses the whole card less its 1 GiB --fit-target and leaves the embeddings
    # (128,256 x 4,096) in host memory: (8,030,261,248 - 525,336,576) x 2 B + 15 x 32,768 x
    # 131,072 B = 15,009,849,344 + 64,424,509,440 = 79,434,358,784 B, plus its compute buffer
    llama = engines["llama.cpp"]
    (compute,) = _plan_compute_bytes("llama-3.1-8b", "h100", "-c", "32K", "-np", "15", "-ngl", "33")
    layers, cache = (8_030_261_248 - 128_256 * 4096) * 2, 15 * 32_768 * 131_072
    assert llama["required_bytes"] == layers + cache + compute + GiB <= H100
    assert llama["fits"] is True
    # one engine's miss does not fail the command
    assert code == 0
    assert doc["fits"] is True


def test_tgi_needs_kv_heads_that_divide_by_the_shards() -> None:
    # 8 KV heads over 16 shards: vLLM and SGLang replicate (16 % 8 == 0), TGI cannot
    _, _, engines = flags_json(
        "llama-3.1-8b", "-g", "h100", "-tp", "16", "--max-model-len", "8K", "-n", "1"
    )
    assert engines["tgi"]["fits"] is False
    assert "8 KV heads" in engines["tgi"]["reason"]
    assert engines["vllm"]["fits"] is True
    assert engines["sglang"]["fits"] is True


# --- tensor parallel sizes the heads do not allow -------------------------------------------


@pytest.mark.parametrize("tp", ["3", "64"])
def test_tp_that_does_not_divide_the_heads_never_fits_a_sharding_engine(tp: str) -> None:
    # Llama 3.1 8B has 32 attention heads: 32 % 3 and 32 % 64 are not 0
    code, _, engines = flags_json(
        "llama-3.1-8b", "-g", "h100", "-tp", tp, "--max-model-len", "8K", "-n", "1"
    )
    for name in ("vllm", "sglang", "tgi"):
        assert engines[name]["fits"] is False, name
        assert engines[name]["flags"] == [], name
        assert "32 attention heads" in engines[name]["reason"], name
    # llama.cpp splits layers, not heads: any number of GPUs up to GGML_CUDA_MAX_DEVICES, 16
    llama = engines["llama.cpp"]
    assert llama["fits"] is (tp == "3")
    if tp == "64":
        assert "llama.cpp splits over at most 16" in llama["reason"]
    assert code == (0 if tp == "3" else 1)


def test_tp_miss_for_the_one_engine_asked_exits_1() -> None:
    code, out, err = run(
        "flags",
        "llama-3.1-8b",
        "-g",
        "h100",
        "-tp",
        "3",
        "--max-model-len",
        "8K",
        "-n",
        "1",
        "--engine",
        "vllm",
    )
    assert code == 1, err
    assert out.startswith("llama-3.1-8b on 3 x h100")
    assert "vllm: does not fit: 32 attention heads do not split over 3 GPUs" in out
    assert "sglang" not in out


# --- exit codes -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        # everything fits: 12 x 32K of Llama 3.1 8B on an H100
        (["llama-3.1-8b", "-g", "h100", "--max-model-len", "32K", "-n", "12"], 0),
        # nothing fits: Qwen3-32B's 61 GiB of weights on a 24 GiB card
        (["qwen3-32b", "-g", "rtx4090", "--max-model-len", "8K", "-n", "1"], 1),
        # only llama.cpp fits (15 x 32K): exit 0, each verdict shown
        (["llama-3.1-8b", "-g", "h100", "--max-model-len", "32K", "-n", "15"], 0),
        # ... but the engine asked for alone decides
        (["llama-3.1-8b", "-g", "h100", "--max-model-len", "32K", "-n", "15", "-e", "tgi"], 1),
        (
            ["llama-3.1-8b", "-g", "h100", "--max-model-len", "32K", "-n", "15", "-e", "llama.cpp"],
            0,
        ),
    ],
    ids=["all-fit", "none-fit", "mixed", "one-engine-miss", "one-engine-fits"],
)
def test_exit_codes(args: list[str], expected: int) -> None:
    code, _, err = run("flags", *args)
    assert code == expected, err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-model-len", "0"], "--max-model-len: must be at least 1 token"),
        (["--max-model-len", "8K", "-q", "int3"], "--quantization: unknown format 'int3'"),
        (["--max-model-len", "8K", "-e", "exllama"], "--engine: unknown engine 'exllama'"),
        (["--max-model-len", "8K", "--kv-cache-dtype", "fp7"], "--kv-cache-dtype"),
        (["--max-model-len", "8K", "-tp", "100000"], "tensor_parallel_size: must be at most"),
    ],
    ids=["zero-length", "quantization", "engine", "kv-dtype", "huge-tp"],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    code, out, err = run("flags", "llama-3.1-8b", "-g", "h100", "-n", "1", *args)
    assert code == 2, out
    assert len(err.strip().splitlines()) == 1, err
    assert message in err
    assert "Traceback" not in err


# --- no invalid value is ever printed ------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["qwen3-32b", "-g", "rtx4090", "--max-model-len", "8K", "-n", "1"],
        ["llama-3.1-70b", "-g", "h100", "--max-model-len", "128K", "-n", "4"],
        ["llama-3.1-70b", "-g", "h100", "-tp", "8", "--max-model-len", "128K", "-n", "4"],
        ["llama-3.1-8b", "-g", "rtx4090", "--max-model-len", "32K", "-n", "2"],
        ["llama-3.1-8b", "-g", "h100", "--max-model-len", "1", "-n", "1"],
        ["deepseek-v3", "-g", "h100", "-tp", "8", "--max-model-len", "32K", "-n", "4"],
    ],
)
def test_mem_fraction_static_is_always_inside_0_1(args: list[str]) -> None:
    _, _, engines = flags_json(*args)
    for e in engines.values():
        for flag in e["flags"]:
            match = re.fullmatch(r"--mem-fraction-static=(\d+\.\d+)", flag)
            if match:
                assert 0 < float(match.group(1)) < 1, flag
        if not e["fits"]:
            assert e["flags"] == []
            assert e["reason"]


def test_llama_cpp_refuses_more_sequences_than_it_serves() -> None:
    # LLAMA_MAX_SEQ is 256: -np 300 would be refused at start-up
    _, _, engines = flags_json("llama-3.1-8b", "-g", "h100", "--max-model-len", "1K", "-n", "300")
    assert engines["llama.cpp"]["fits"] is False
    assert engines["llama.cpp"]["flags"] == []
    assert "256" in engines["llama.cpp"]["reason"]


# --- cache dtypes: each engine's own flag, and the dtype said with its reason ---------------


def test_fp8_cache_is_each_engines_own_flag() -> None:
    _, _, engines = flags_json(
        "llama-3.1-8b",
        "-g",
        "h100",
        "--max-model-len",
        "32K",
        "-n",
        "12",
        "--kv-cache-dtype",
        "fp8",
    )
    assert "--kv-cache-dtype=fp8" in engines["vllm"]["flags"]
    assert "--kv-cache-dtype=fp8_e4m3" in engines["sglang"]["flags"]
    assert "--kv-cache-dtype=fp8" in engines["tgi"]["flags"]
    assert engines["llama.cpp"]["flags"][2:5] == ["-ctk q8_0", "-ctv q8_0", "-fa on"]
    # fp8: 1 B a value, so half the bf16 cache: 12 x 2,048 blocks x 16 x 65,536 B + null block
    assert engines["vllm"]["kv_cache_bytes"] == (12 * 2048 + 1) * 16 * 65_536
    assert engines["vllm"]["kv_cache_dtype"] == "fp8_e4m3"
    assert engines["llama.cpp"]["kv_cache_dtype"] == "q8_0"
    assert "llama.cpp has no 8-bit float" in engines["llama.cpp"]["dtype_reason"]


def test_a_ggml_cache_type_only_llama_cpp_has() -> None:
    code, _, engines = flags_json(
        "llama-3.1-8b", "-g", "h100", "--max-model-len", "8K", "-n", "1", "--kv-cache-dtype", "q4_0"
    )
    assert code == 0
    for name in ("vllm", "sglang", "tgi"):
        assert engines[name]["fits"] is False
        assert "no q4_0 KV cache" in engines[name]["reason"]
    llama = engines["llama.cpp"]
    assert llama["fits"] is True
    assert "-ctk q4_0" in llama["flags"]
    # q4_0: 18 B per 32 values; 8,192 cells x 32 layers x (1,024 K + 1,024 V) values / 32 x 18
    assert llama["kv_cache_bytes"] == 8192 * 32 * 2 * (1024 // 32) * 18


def test_float32_checkpoint_is_sized_in_16_bits_and_says_why() -> None:
    # OLMo 2 7B is a float32 checkpoint: 32 layers x 32 KV heads x 128 x 2 (K, V) x 2 B
    # = 524,288 B a token when served in 16 bits (not 1,048,576 B in float32)
    code, out, err = run("flags", "olmo-2-7b", "-g", "h100", "--max-model-len", "4K", "-n", "2")
    assert code == 0, err
    assert "float32 checkpoint served in" in out
    _, _, engines = flags_json("olmo-2-7b", "-g", "h100", "--max-model-len", "4K", "-n", "2")
    assert engines["sglang"]["kv_cache_bytes"] == 2 * 4096 * 524_288
    assert engines["sglang"]["model_dtype"] == "float16"  # SGLang's --dtype auto for non-Gemma
    assert engines["vllm"]["model_dtype"] == "bfloat16"
    for e in engines.values():
        assert e["kv_cache_dtype"]
        assert e["dtype_reason"]


def test_calc_and_flags_agree_on_the_bytes_a_token() -> None:
    code, out, err = run("calc", "olmo-2-7b", "-c", "1", "-f", "json")
    assert code == 0, err
    _, _, engines = flags_json("olmo-2-7b", "-g", "h100", "--max-model-len", "1", "-n", "1")
    per_token = 2 * 32 * 32 * 128 * 2
    assert json.loads(out)["bytes_per_token"] == per_token
    assert engines["sglang"]["kv_cache_bytes"] == per_token


# --- --quantization ---------------------------------------------------------------------------


def test_int4_quantization_sizes_the_weights() -> None:
    # int4: 66 B per 128 weights for the linear layers, bf16 embeddings and head:
    # 68,452,360,192 / 128 x 66 + 2 x 1,050,673,152 x 2 = 35,295,748,224 + 4,202,692,608
    code, doc, engines = flags_json(
        "llama-3.1-70b", "-g", "h100", "--max-model-len", "8K", "-n", "4", "-q", "int4"
    )
    assert doc["quantization"] == "int4"
    assert engines["sglang"]["weights_bytes"] == 39_498_440_832
    assert engines["tgi"]["weights_bytes"] == 39_498_440_832
    # bf16, the 141 GB of weights would not fit one H100; int4 does
    assert engines["sglang"]["fits"] is True
    assert code == 0
    # a pre-quantized format has no on-the-fly flag: the checkpoint says it
    assert not any("quantiz" in f for e in engines.values() for f in e["flags"])


def test_fp8_quantization_is_flagged_where_engines_quantize_on_the_fly() -> None:
    _, _, engines = flags_json(
        "llama-3.1-8b", "-g", "h100", "--max-model-len", "8K", "-n", "1", "-q", "fp8"
    )
    assert "--quantization=fp8" in engines["vllm"]["flags"]
    assert "--quantization=fp8" in engines["sglang"]["flags"]
    assert "--quantize=fp8" in engines["tgi"]["flags"]
    # fp8: 1 B a linear weight, bf16 embeddings and head (2 x 525,336,576 x 2 B)
    linear = 8_030_261_248 - 2 * 128_256 * 4096
    assert engines["sglang"]["weights_bytes"] == linear + 2 * 128_256 * 4096 * 2


# --- the library --------------------------------------------------------------------------


def test_library_takes_names_and_answers_as_the_cli() -> None:
    results = recommend("llama-3.1-8b", "h100", max_model_len="32K", concurrency=12)
    assert tuple(r.engine for r in results) == ENGINES
    assert all(r.fits for r in results)
    assert results[0].kv_cache_bytes == (12 * 2048 + 1) * 16 * 131_072


def test_library_one_engine() -> None:
    (only,) = recommend("llama-3.1-8b", "h100", max_model_len=8192, concurrency=1, engines=["tgi"])
    assert only.engine == "tgi"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_model_len": 0, "concurrency": 1},
        {"max_model_len": 8192, "concurrency": 0},
        {"max_model_len": 8192, "concurrency": 1, "tensor_parallel_size": 0},
        {"max_model_len": 8192, "concurrency": 1, "engines": ["exllama"]},
        {"max_model_len": 8192, "concurrency": 1, "quantization": "int3"},
    ],
)
def test_library_refuses_bad_input(kwargs: dict[str, Any]) -> None:
    with pytest.raises(UnitError):
        recommend("llama-3.1-8b", "h100", **kwargs)
