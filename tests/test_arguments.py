"""Library contracts: every public function takes what the CLI takes and refuses the rest with
a documented kvplan exception (docs/api.md)."""

from __future__ import annotations

import math
import time
from fractions import Fraction

import pytest

import kvplan
from kvplan.arguments import as_fraction, as_tokens
from kvplan.errors import KvplanError, ModelNotFoundError, UnitError
from kvplan.hardware.gpus import UnknownGPUError
from kvplan.model.stages import as_tensor_parallel_size


def test_estimate_takes_names_and_token_strings() -> None:
    # Qwen3-8B: 2 x 36 layers x 8 KV heads x 128 x 2 B = 147,456 B/token; x 32,768 tokens
    assert kvplan.estimate("qwen3-8b", "32K").kv_cache_bytes == 147_456 * 32_768 == 4_831_838_208
    assert kvplan.estimate("Qwen/Qwen3-8B", "32k").context_tokens == 32_000


@pytest.mark.parametrize(
    "tokens", [32768.0, True, 1.5, math.nan, math.inf, -1, "1.5", "32G", None, [1]]
)
def test_estimate_refuses_what_is_not_a_token_count(tokens: object) -> None:
    with pytest.raises(UnitError):
        kvplan.estimate("qwen3-8b", tokens)  # type: ignore[arg-type]


@pytest.mark.parametrize("batch", [0, True, 2.0, "2"])
def test_estimate_refuses_a_bad_batch(batch: object) -> None:
    with pytest.raises(UnitError):
        kvplan.estimate("qwen3-8b", 16, batch_size=batch)  # type: ignore[arg-type]


def test_plan_takes_names_and_strings_like_the_cli() -> None:
    by_name = kvplan.plan("qwen3-8b", "h100", max_model_len="32K")
    by_object = kvplan.plan(
        kvplan.load_model("qwen3-8b"), kvplan.find_gpu("h100"), max_model_len=32768
    )
    assert by_name.max_concurrency == by_object.max_concurrency == 11
    given = kvplan.plan("llama-3.1-8b", "h100", max_model_len="8K", kv_cache_memory_bytes="8GiB")
    # 8 GiB pool / (8,192 tokens x 131,072 B = 1 GiB a request) = 8 requests
    assert given.max_concurrency == 8


def test_unknown_names_are_lookup_errors() -> None:
    with pytest.raises(ModelNotFoundError):
        kvplan.plan("no-such-model", "h100", max_model_len=1024)
    with pytest.raises(UnknownGPUError):
        kvplan.plan("qwen3-8b", "h1000", max_model_len=1024)
    with pytest.raises(UnitError):
        kvplan.plan(42, "h100")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tensor_parallel_size": 3}, "valid sizes: 1, 2, 4, 8"),
        ({"tensor_parallel_size": 1000}, "at most 4,096|do not shard"),
        ({"tensor_parallel_size": 0}, "at least 1"),
        ({"tensor_parallel_size": True}, "expected an integer"),
        ({"pipeline_parallel_size": 37}, "more stages than the 36 layers"),
        ({"max_model_len": 0}, "at least 1"),
        ({"max_model_len": 1.5}, "expected an integer"),
        ({"concurrency": True}, "expected an integer"),
        ({"gpu_memory_utilization": "9e99999999"}, "decimal number"),
        ({"gpu_memory_utilization": math.nan}, "decimal number"),
        ({"gpu_memory_utilization": 1.5}, r"\(0, 1\]"),
        ({"kv_cache_memory_bytes": -1}, "at least 0"),
        ({"block_size": 0}, "at least 1"),
        ({"lengths": []}, "empty"),
        ({"lengths": [100, 1.5]}, r"lengths\[1\]"),
        ({"lengths": "100"}, "sequence"),
        ({"shared_prefix_tokens": -5}, "at least 0"),
    ],
)
def test_plan_refuses_bad_arguments(kwargs: dict[str, object], message: str) -> None:
    start = time.perf_counter()
    with pytest.raises(UnitError, match=message):
        kvplan.plan("qwen3-8b", "h100", **kwargs)  # type: ignore[arg-type]
    assert time.perf_counter() - start < 1.0


def test_tensor_parallel_rules() -> None:
    qwen = kvplan.load_model("qwen3-8b")  # 32 query heads, 8 KV heads
    assert [t for t in range(1, 33) if _ok(qwen, t)] == [1, 2, 4, 8, 16, 32]
    deepseek = kvplan.load_model("deepseek-v3")  # MLA: 128 query heads, one latent
    assert as_tensor_parallel_size(deepseek, 16) == 16


def _ok(spec: kvplan.ModelSpec, tp: int) -> bool:
    try:
        as_tensor_parallel_size(spec, tp)
    except UnitError:
        return False
    return True


def test_fraction_parsing_is_exact_and_bounded() -> None:
    assert as_fraction(0.9, "u") == Fraction(9, 10)
    assert as_fraction("0.95", "u") == Fraction(19, 20)
    for bad in ("1e-3", "-0.5", "inf", "0x1", "", "9" * 40):
        with pytest.raises(UnitError):
            as_fraction(bad, "u")


def test_every_failure_is_a_kvplan_error() -> None:
    assert issubclass(UnitError, KvplanError)
    assert as_tokens("4K", "x") == 4096
