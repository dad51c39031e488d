"""kvplan's vLLM activation and non-torch terms on public start-ups they were not read from
(tests/data/vllm_profile_logs.json): each error pinned, so a better rule must say what it
changed. The rules are read from vLLM's source (kvplan.engines.vllm_overhead), none fitted
to these logs."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from kvplan.engines import vllm
from kvplan.units import GiB, MiB

LOGS = json.loads((Path(__file__).parent / "data" / "vllm_profile_logs.json").read_text())
CASES = {c["id"]: c for c in LOGS["cases"]}


def _gib(text: str) -> int:
    return round(Fraction(text) * GiB)


def _profile(case: dict[str, Any]) -> vllm.VllmResult:
    settings = dict(case["settings"])
    length = settings.pop("max_model_len")
    cfg = vllm.config(length, version=case["line"], **settings)
    return vllm.profile(case["spec"], case["gpu"], cfg)


def test_every_case_names_its_source() -> None:
    assert len(CASES) >= 7
    for case in CASES.values():
        assert case["source"]
        assert case["non_torch_gib"] or case.get("activation_gib")


@pytest.mark.parametrize(
    ("name", "modelled", "error"),
    [
        # V1 runner: 2,048 tokens x 2 x 8,192 x 2 B + 256 sequences x 128,256 x 12 B
        # = 67,108,864 + 394,002,432; logged 0.45 GiB
        ("llama-3.2-1b-v0.10-dev", 461_111_296, -0.046),
        # V1 (a hybrid on 0.26): 1,024 x 2 x 8,192 x 2 + 256 x 65,536 x 12; logged 0.26
        ("lfm2.5-1.2b-v0.26", 234_881_024, -0.159),
    ],
)
def test_v1_activation_held_out(name: str, modelled: int, error: float) -> None:
    case = CASES[name]
    overhead = _profile(case).stages[-1].overhead
    assert overhead.activation_bytes == modelled
    logged = _gib(case["activation_gib"])
    assert abs((modelled - logged) / logged - error) < 0.001


def test_a_current_line_end_to_end_held_out() -> None:
    """vLLM 0.31.0 on an A100 80GB with the defaults (256 sequences, 2,048 batched tokens
    there): on the 0.32 line the printed peak activation holds the CUDA-graph estimate. kvplan's
    V2 forward 2,048 x (3 x 14,336 + 3 x 4,096) x 2 B = 0.21 GiB plus 86 graphs x 32 layers x
    64 x 4,734 B = 0.78 GiB is 0.99 GiB against 1.44 logged (-31%); non-torch 0.25 against
    0.26 (consumed 15.26 less the 15.0 loaded); the pool is 0.38 GiB (0.7%) too large, and the
    tokens 463,600 against 460,496 printed."""
    case = CASES["llama-3.1-8b-v0.31-a100"]
    result = _profile(case)
    overhead = result.stages[-1].overhead
    assert overhead.activation_bytes == 2048 * (3 * 14336 + 3 * 4096) * 2
    assert overhead.cuda_graph_bytes == 86 * 32 * 64 * 4_734
    peak = overhead.activation_bytes + overhead.cuda_graph_bytes
    logged = _gib(case["peak_with_graphs_gib"])
    assert -0.32 < (peak - logged) / logged < -0.30
    pool = (result.available_bytes - _gib(case["available_gib"])) / _gib(case["available_gib"])
    assert 0.006 < pool < 0.007
    # the tokens follow the pool: 0.6% to 0.8% above the 460,496 printed
    tokens = (result.gpu_kv_cache_tokens - case["kv_tokens"]) / case["kv_tokens"]
    assert 0.006 < tokens < 0.008


def test_single_gpu_non_torch_held_out() -> None:
    """kvplan's 256 MiB (read off vLLM v0.19 H100 profiles, which print 0.25 GiB) against
    seven single-GPU logs of other releases and GPUs: 0.02 to 0.26 GiB. The absolute error is
    at most 0.23 GiB; in share it is large on the small logged figures."""
    logged = sorted(_gib(c["non_torch_gib"]) for c in CASES.values())
    assert [round(x / GiB, 2) for x in logged] == [0.02, 0.02, 0.02, 0.07, 0.07, 0.16, 0.26]
    errors = [(256 * MiB - x) / x for x in logged]
    assert max(abs(256 * MiB - x) for x in logged) < 0.24 * GiB
    assert 11.0 < max(errors) < 12.0  # 0.02 GiB logged: +1,150%
    assert -0.04 < min(errors) < -0.03  # 0.26 GiB logged: -3.8%
