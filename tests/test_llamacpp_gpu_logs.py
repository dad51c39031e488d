"""kvplan's GPU compute buffers against public llama.cpp logs on CUDA.

Each log in ``tests/data/llamacpp_gpu_compute_logs.yaml`` (read from public issue threads,
with its settings and the model's geometry) is recomputed with ``gpu_compute_bytes`` and
``host_compute_bytes``; the printed MiB (two decimals) minus kvplan's must stay within the
error the module docstring and docs/engines.md state for that graph and case.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml

from kvplan.catalog.lookup import load_model
from kvplan.engines import llamacpp_compute
from kvplan.engines.llamacpp_compute import gpu_compute_bytes, host_compute_bytes
from kvplan.model.spec import ModelSpec
from kvplan.units import MiB

ROOT = Path(__file__).resolve().parent.parent
LOGS: list[dict[str, Any]] = yaml.safe_load(
    (ROOT / "tests/data/llamacpp_gpu_compute_logs.yaml").read_text(encoding="utf-8")
)["logs"]

#: the stated error (printed MiB minus kvplan's), per graph and case: (GPU, host); the host
#: figures carry llama.cpp's 0.01 MiB of small inputs (tokens, positions, output ids)
STATED: dict[tuple[str, str, bool], tuple[Fraction, Fraction | None]] = {
    ("llama", "full", False): (Fraction(0), Fraction(1, 100)),
    ("llama", "partial", False): (Fraction(89), Fraction(1, 100)),
    ("qwen3", "full", False): (Fraction(0), Fraction(1, 100)),
    # a February 2025 build kept the mask in f32 under flash attention: 512 x 16,384 x 2 more
    ("qwen2", "full", True): (Fraction(0), Fraction(1601, 100)),
    ("gemma", "full", False): (Fraction(1, 4), None),
    ("phi3", "partial", False): (Fraction(10606, 100), None),
}
#: what two-decimal printing and rounding allow on top of a stated error
ROUNDING = Fraction(1, 200)


def _case(log: dict[str, Any]) -> tuple[str, str, bool]:
    s = log["settings"]
    return (log["architecture"], s["offload"], bool(s["flash_attn"]))


def _error(printed_mib: float, kvplan_bytes: int) -> Fraction:
    return Fraction(round(printed_mib * 100), 100) - Fraction(kvplan_bytes, MiB)


def test_the_data_covers_several_graphs() -> None:
    assert len(LOGS) >= 8
    assert len({log["architecture"] for log in LOGS}) >= 5
    assert all(_case(log) in STATED for log in LOGS)


def _spec(log: dict[str, Any]) -> ModelSpec:
    """The model as the log describes it: only the shapes the rule reads."""
    shapes = log["shapes"]
    return ModelSpec.model_validate(
        {
            "name": log["id"],
            "torch_dtype": "float16",
            "num_hidden_layers": shapes["n_layer"],
            "hidden_size": shapes["n_embd"],
            "num_attention_heads": shapes["n_head"],
            "head_dim": shapes["head_dim"],
            "intermediate_size": shapes["n_ff"],
            "vocab_size": shapes["n_vocab"],
        }
    )


CATALOGUED = [log for log in LOGS if "catalog" in log]


@pytest.mark.parametrize("log", CATALOGUED, ids=[log["id"] for log in CATALOGUED])
def test_geometry_matches_the_bundled_spec(log: dict[str, Any]) -> None:
    spec = load_model(log["catalog"])
    shapes = log["shapes"]
    heads = spec.num_attention_heads or 1
    assert spec.num_hidden_layers == shapes["n_layer"]
    assert spec.hidden_size == shapes["n_embd"]
    assert heads == shapes["n_head"]
    assert (spec.head_dim or shapes["n_embd"] // heads) == shapes["head_dim"]
    assert spec.intermediate_size == shapes["n_ff"]
    assert spec.vocab_size == shapes["n_vocab"]


def _kvplan(log: dict[str, Any]) -> tuple[int, int]:
    s = log["settings"]
    spec = _spec(log)
    t = min(s["n_ubatch"], s["n_batch"])
    gpu = gpu_compute_bytes(
        spec,
        cells=s["n_ctx"],
        n_ubatch=t,
        flash_attn=s["flash_attn"],
        holds_output=s["offload"] == "full",
    )
    host = host_compute_bytes(spec, cells=s["n_ctx"], n_ubatch=t, flash_attn=s["flash_attn"])
    return gpu, host


@pytest.mark.parametrize("log", LOGS, ids=[log["id"] for log in LOGS])
def test_within_the_stated_error(log: dict[str, Any]) -> None:
    gpu_error, host_error = STATED[_case(log)]
    gpu, host = _kvplan(log)
    printed = log["printed_mib"]
    assert abs(_error(printed["CUDA0"], gpu) - gpu_error) <= ROUNDING
    if "CUDA_Host" in printed:  # some excerpts cut the host line off
        assert host_error is not None
        assert abs(_error(printed["CUDA_Host"], host) - host_error) <= ROUNDING


@pytest.mark.parametrize(
    ("log_id", "gpu_bytes", "host_bytes"),
    [
        # 512 x 2,048 x 33 x 4 + 512 x (2 x 4,096 + 2 x 4,096) x 4 = 132 + 32 = 164 MiB;
        # host 512 x 4,096 x 4 + 512 x 2,048 x 4 = 8 + 4 = 12 MiB
        ("mistral7b-c2048", 164 * MiB, 12 * MiB),
        # 512 x 32,768 x 33 x 4 + 32 MiB = 2,112 + 32 = 2,144 MiB; host 8 + 64 = 72 MiB
        ("mistral7b-c32768", 2144 * MiB, 72 * MiB),
        # the output layer on the host: 512 x 24,576 x 33 x 4 + 32 MiB = 1,584 + 32 = 1,616
        # MiB (printed 1,705); host 8 + 48 = 56 MiB
        ("llama3-8b-c24576-partial", 1616 * MiB, 56 * MiB),
        # q = 64 x 128 = 8,192: 512 x 8,192 x 65 x 4 + 512 x (2 x 8,192 + 2 x 5,120) x 4 =
        # 1,040 + 52 = 1,092 MiB; host 512 x 5,120 x 4 + 512 x 8,192 x 4 = 10 + 16 = 26 MiB
        ("qwen3-32b-c8192", 1092 * MiB, 26 * MiB),
        # logits 512 x (152,064 + 5,120) x 4 = 307 MiB above the MLP's 182; host with the
        # f16 mask 10 + 512 x 16,384 x 2 = 10 + 16 = 26 MiB (printed 42.01: an f32 mask)
        ("r1-distill-qwen-32b-c16384-fa", 307 * MiB, 26 * MiB),
        # logits 512 x (256,000 + 2,048) x 4 = 504 MiB (printed 504.25)
        ("gemma-2b-c2048", 504 * MiB, 8 * MiB),
        # logits 512 x (50,688 + 3,072) x 4 = 105 MiB above the MLP's 512 x (27,648 + 6,144)
        # x 4 = 66 MiB; host 512 x 3,072 x 4 + 512 x 512 x 4 = 6 + 1 = 7 MiB
        ("trilm-3.9b-c512", 105 * MiB, 7 * MiB),
        # the output layer on the host; the MLP 512 x (3 x 17,920 + 2 x 5,120) x 4 = 125 MiB
        # above the attention's 512 x 512 x 41 x 4 + 512 x 20,480 x 4 = 41 + 40 = 81 MiB
        # (printed 231.06); host 10 + 1 = 11 MiB
        ("phi3-medium-c512-partial", 125 * MiB, 11 * MiB),
    ],
)
def test_by_hand(log_id: str, gpu_bytes: int, host_bytes: int) -> None:
    log = next(log for log in LOGS if log["id"] == log_id)
    assert _kvplan(log) == (gpu_bytes, host_bytes)


def test_the_docs_state_the_same_errors() -> None:
    docs = (ROOT / "docs/engines.md").read_text(encoding="utf-8")
    docstring = llamacpp_compute.__doc__ or ""
    for text in (docs, docstring):
        assert "llamacpp_gpu_compute_logs.yaml" in text
        for figure in ("+89 MiB (5.2 %)", "+16.01 MiB", "+0.25 MiB", "+0.01 MiB"):
            assert figure in text
