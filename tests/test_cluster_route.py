"""When a plan question is a cluster question: one rule (kvplan.planner.cluster_route), asked
by the library and by ``kvplan plan`` alike, so both give the same answer to the same inputs."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from kvplan.catalog.lookup import load_model
from kvplan.cli import app
from kvplan.errors import UnitError
from kvplan.hardware.gpus import custom_gpu
from kvplan.hardware.lookup import find_gpu
from kvplan.planner.cluster import ClusterPlan
from kvplan.planner.cluster_route import is_cluster_question, plan_deployment
from kvplan.planner.result import Plan
from kvplan.views.plan import cluster_to_dict, plan_result_to_dict

MODEL = "llama-3.1-8b"
GB = 10**9

# (the command line after `kvplan plan llama-3.1-8b`, the same question as library keywords,
# whether it is a cluster question: the rule of the module docstring, applied by hand)
CASES: list[tuple[str, list[str], dict[str, Any], bool]] = [
    (
        "fewest GPUs on a GPU HGX H100 is built of: cluster",
        ["--gpu", "h100", "-c", "8K", "-n", "64"],
        {"gpu": "h100", "max_model_len": "8K", "concurrency": 64},
        True,
    ),
    (
        "a length alone: one deployment",
        ["--gpu", "h100", "-c", "8K"],
        {"gpu": "h100", "max_model_len": "8K"},
        False,
    ),
    (
        "a concurrency alone: one deployment",
        ["--gpu", "h100", "-n", "64"],
        {"gpu": "h100", "concurrency": 64},
        False,
    ),
    (
        "-tp given: that deployment",
        ["--gpu", "h100", "-c", "8K", "-n", "64", "-tp", "2"],
        {"gpu": "h100", "max_model_len": "8K", "concurrency": 64, "tensor_parallel_size": 2},
        False,
    ),
    (
        "-pp given: that deployment",
        ["--gpu", "h100", "-c", "8K", "-n", "64", "-pp", "2"],
        {"gpu": "h100", "max_model_len": "8K", "concurrency": 64, "pipeline_parallel_size": 2},
        False,
    ),
    (
        "a pool given: that device",
        ["--gpu", "h100", "-c", "8K", "-n", "64", "--kv-cache-memory", "40GiB"],
        {
            "gpu": "h100",
            "max_model_len": "8K",
            "concurrency": 64,
            "kv_cache_memory_bytes": "40GiB",
        },
        False,
    ),
    (
        "a length mix as mean and p99 (as --lengths): one deployment, the mix planned",
        ["--gpu", "h100", "-c", "32K", "-n", "64", "--mean-length", "2K", "--p99-length", "16K"],
        {
            "gpu": "h100",
            "max_model_len": "32K",
            "concurrency": 64,
            "mean_length": "2K",
            "p99_length": "16K",
        },
        False,
    ),
    (
        "a GPU of no catalog system: the fewest loose GPUs",
        ["--gpu", "m4-max-128gb", "-c", "8K", "-n", "4"],
        {"gpu": "m4-max-128gb", "max_model_len": "8K", "concurrency": 4},
        False,
    ),
    (
        "--top given, even with -tp: cluster",
        ["--gpu", "h100", "-c", "8K", "-n", "4", "--top", "2", "-tp", "2"],
        {
            "gpu": "h100",
            "max_model_len": "8K",
            "concurrency": 4,
            "top": 2,
            "tensor_parallel_size": 2,
        },
        True,
    ),
    (
        "several GPUs: cluster",
        ["--gpu", "h100,h200", "-c", "8K", "-n", "64"],
        {"gpu": "h100,h200", "max_model_len": "8K", "concurrency": 64},
        True,
    ),
    (
        "a system and no GPU: cluster",
        ["--system", "hgx-h200", "-c", "8K", "-n", "64"],
        {"gpu": None, "system": "hgx-h200", "max_model_len": "8K", "concurrency": 64},
        True,
    ),
    (
        "a price given with -c 32K and -n 8: cluster",
        ["--gpu", "h100", "-c", "32K", "-n", "8", "--price", "h100=2"],
        {"gpu": "h100", "max_model_len": "32K", "concurrency": 8, "prices": ["h100=2"]},
        True,
    ),
    (
        "--objective given: cluster",
        ["--gpu", "h100", "-c", "8K", "-n", "64", "--objective", "cost"],
        {"gpu": "h100", "max_model_len": "8K", "concurrency": 64, "objective": "cost"},
        True,
    ),
]


def _cli(args: list[str]) -> dict[str, Any]:
    result = CliRunner().invoke(app, ["plan", MODEL, *args, "--format", "json"])
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(result.stdout)
    # the question and the verdict every engine gives alike (tests/test_questions.py)
    assert document.pop("answer")["fits"] == document["fits"]
    assert "engine" in document.pop("question")
    return document


def _library(keywords: dict[str, Any]) -> dict[str, Any]:
    found = plan_deployment(MODEL, **keywords)
    if isinstance(found, ClusterPlan):
        return cluster_to_dict(found)
    return plan_result_to_dict(found, load_model(MODEL))


@pytest.mark.parametrize(
    ("args", "keywords", "cluster"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_library_and_command_line_route_alike(
    args: list[str], keywords: dict[str, Any], cluster: bool
) -> None:
    assert is_cluster_question(**keywords) is cluster
    cli = _cli(args)
    assert ("candidates" in cli) is cluster
    assert _library(keywords) == cli


def test_memory_given_is_a_question_about_that_device() -> None:
    # --gpu-memory on the command line; a GPU whose memory custom_gpu replaced in the library
    cli = _cli(["--gpu", "h100", "--gpu-memory", "70GB", "-c", "8K", "-n", "64"])
    device = custom_gpu(70 * GB, find_gpu("h100"))
    found = plan_deployment(MODEL, device, max_model_len="8K", concurrency=64)
    assert isinstance(found, Plan)
    assert "candidates" not in cli
    assert plan_result_to_dict(found, load_model(MODEL)) == cli
    assert cli["total_memory_bytes"] == 70 * GB
    assert not is_cluster_question("h100", max_model_len=8192, concurrency=64, gpu_memory_bytes=1)


@pytest.mark.parametrize(
    ("engine", "keywords", "cluster"),
    [
        ("vllm", {}, False),  # the fewest-GPU search is kvplan's own planner's
        ("vllm", {"top": 2}, True),  # a cluster keyword routes any engine but llama.cpp
        ("sglang", {"system": "hgx-h100"}, True),
        ("llama.cpp", {"top": 2}, False),  # llama.cpp plans one machine
    ],
)
def test_engines(engine: str, keywords: dict[str, Any], cluster: bool) -> None:
    asked = {"max_model_len": 8192, "concurrency": 64, "engine": engine, **keywords}
    assert is_cluster_question("h100", **asked) is cluster


def test_command_line_engine_routes_by_the_same_rule() -> None:
    cli = _cli(["--gpu", "h100", "-c", "8K", "-n", "64", "-e", "vllm"])
    assert "candidates" not in cli
    assert not is_cluster_question("h100", max_model_len="8K", concurrency=64, engine="vllm")


def test_unknown_gpu_is_the_planners_error() -> None:
    assert not is_cluster_question("h10", max_model_len=8192, concurrency=64)


def test_a_cluster_question_needs_length_and_concurrency() -> None:
    with pytest.raises(UnitError, match="needs both max_model_len and concurrency"):
        plan_deployment(MODEL, "h100", max_model_len="8K", top=2)
    result = CliRunner().invoke(app, ["plan", MODEL, "--gpu", "h100", "-c", "8K", "--top", "2"])
    assert result.exit_code == 2
    assert "needs both --max-model-len and --concurrency" in result.stderr
