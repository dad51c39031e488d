"""Systems as data, and the search over whole nodes: TP inside the node, PP across nodes,
replicas, data-parallel attention with expert parallelism."""

from __future__ import annotations

import json
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.catalog.lookup import load_model
from kvplan.cli import app
from kvplan.errors import SpecError, UnitError
from kvplan.hardware.systems import UnknownSystemError, find_system, list_systems, load_systems
from kvplan.planner.api import plan_cluster
from kvplan.planner.cluster import Candidate, search_cluster
from kvplan.planner.deployment import Deployment
from kvplan.planner.pool import fits, shared_blocks
from kvplan.planner.throughput import decode_round

GB = 10**9


@pytest.mark.parametrize(
    ("name", "gpus_per_node", "scale_up_gpus", "scale_up_bytes_per_s"),
    [
        # NVIDIA H100 datasheet: NVLink 900 GB/s both directions = 450 GB/s each way
        ("hgx-h100", 8, 8, 450 * GB),
        # H800: NVLink 400 GB/s both directions = 200 GB/s each way
        ("hgx-h800", 8, 8, 200 * GB),
        # DGX B200: NVLink 5, 1.8 TB/s both directions = 900 GB/s each way
        ("dgx-b200", 8, 8, 900 * GB),
        # GB200 NVL72: 72 GPUs in one NVLink domain, 18 trays of 4
        ("nvl72", 4, 72, 900 * GB),
        # MI355X: 7 Infinity Fabric links x 153.6 GB/s / 2 = 537.6 GB/s each way
        ("mi355x-platform", 8, 8, 537_600_000_000),
        # L40S: no NVLink; PCIe Gen4 x16 = 64 GB/s both ways = 32 GB/s each way
        ("l40s-server", 8, 1, 32 * GB),
    ],
)
def test_system_figures(
    name: str, gpus_per_node: int, scale_up_gpus: int, scale_up_bytes_per_s: int
) -> None:
    s = find_system(name)
    assert (s.gpus_per_node, s.scale_up_gpus, s.scale_up_bytes_per_s) == (
        gpus_per_node,
        scale_up_gpus,
        scale_up_bytes_per_s,
    )
    assert "http" in s.source or "servers" in s.source


def test_every_system_cites_each_figure() -> None:
    for s in list_systems():
        assert all(f"{key}: " in s.source for key in ("gpus", "scale_up", "scale_out")), s.name


def test_unknown_system_suggests() -> None:
    with pytest.raises(UnknownSystemError, match="hgx-h100"):
        find_system("hgx-h10")


_ENTRY = """systems:
  - name: x
    display_name: X
    gpu: {gpu}
    gpus_per_node: 8
    scale_up_gpus: 8
    scale_up_bytes_per_s: 1
    scale_out_bytes_per_s: 1
    rents_by_node: true
    sources: {sources}
"""
_SOURCES = "{gpus: a, scale_up: b, scale_out: c}"


@pytest.mark.parametrize(
    ("gpu", "sources", "problem"),
    [
        ("h100", "{gpus: a, scale_up: b}", "no source for scale_out"),
        ("h100", "{gpus: a, scale_up: b, scale_out: c, speed: d}", "'speed' names no figure"),
        ("h1000", _SOURCES, "systems.0.gpu: unknown GPU"),
    ],
)
def test_invalid_system_file(tmp_path: Path, gpu: str, sources: str, problem: str) -> None:
    (tmp_path / "x.yaml").write_text(_ENTRY.format(gpu=gpu, sources=sources))
    with pytest.raises(SpecError, match=problem):
        load_systems(tmp_path)


def test_duplicate_system_name(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(_ENTRY.format(gpu="h100", sources=_SOURCES))
    (tmp_path / "b.yaml").write_text(_ENTRY.format(gpu="h200", sources=_SOURCES))
    with pytest.raises(SpecError, match="already a name of x"):
        load_systems(tmp_path)


CASES = [
    ("deepseek-v3", "h100", "32K", 64),
    ("llama-3.1-405b", "h100", "128K", 32),
    ("llama-3.1-70b", "h100", "128K", 8),
    ("gpt-oss-120b", "h100,h200,l40s,mi300x", "128K", 16),
    ("qwen3-30b-a3b", "l40s", "32K", 40),
]


@pytest.mark.parametrize(("model", "gpu", "length", "n"), CASES)
def test_every_candidate_holds_its_requests_and_one_more_does_not(
    model: str, gpu: str, length: str, n: int
) -> None:
    found = plan_cluster(model, gpu, max_model_len=length, concurrency=n, top=10)
    assert found.fits
    for c in found.candidates:
        p = c.plan
        tokens = p.max_model_len or 0
        shared = shared_blocks(0, tokens, p.block_size)
        per_replica = p.max_concurrency or 0
        assert fits(p.stages, tokens, per_replica, shared, p.block_size)
        assert not fits(p.stages, tokens, per_replica + 1, shared, p.block_size)
        assert c.held_requests >= n
        # shapes an engineer signs: TP inside the scale-up domain or node, and stages only
        # once TP is at its widest
        assert p.tensor_parallel_size <= c.system.max_tensor_parallel_size
        if p.pipeline_parallel_size > 1:
            assert p.tensor_parallel_size == min(8, c.system.max_tensor_parallel_size)
        if c.system.rents_by_node:
            assert c.billed_gpus % c.system.gpus_per_node == 0
    ranks = [c.loses_because for c in found.candidates]
    assert ranks[0] == ""
    assert all(ranks[1:])


def test_llama_70b_128k_for_8_users_is_one_node_of_tp_8() -> None:
    # Per GPU at 128K (131,072 tokens): 80 layers x 2 (K, V) x 128 dims x 2 B x 8 KV heads / TP.
    # TP 2: weights 141 GB / 2 = 70.5 GB of 76.5 usable (0.9 x 85.0 GB): no room for 21.5 GB.
    # TP 4: pool ~ 76.5 - 35.3 - 3.8 = 37.4 GB, a request 10.7 GB -> 3 a replica, 6 a node < 8.
    # TP 8: pool ~ 76.5 - 17.6 - 3.7 = 55 GB, a request 5.4 GB -> 10 >= 8: one node.
    found = plan_cluster("llama-3.1-70b", "h100", max_model_len="128K", concurrency=8)
    best = found.best
    assert best is not None
    assert (best.plan.tensor_parallel_size, best.plan.pipeline_parallel_size) == (8, 1)
    assert (best.billed_gpus, best.num_nodes, best.held_requests) == (8, 1, 10)


def test_deepseek_v3_uses_data_parallel_attention_and_stores_each_latent_once() -> None:
    found = plan_cluster("deepseek-v3", "h100", max_model_len="32K", concurrency=64, top=10)
    best = found.best
    assert best is not None
    assert best.plan.expert_parallel_size > 1
    assert best.plan.tensor_parallel_size == 1
    # MLA: 61 layers x (512 latent + 64 rope) x 2 B (bf16) x 32,768 tokens, whole on one GPU
    assert best.plan.request_bytes == 61 * 576 * 2 * 32768
    tp = [c for c in found.candidates if c.plan.expert_parallel_size == 1]
    # EP 16 on 2 nodes against TP 8 x PP 4 on 32 GPUs: each DP rank's cache serves its own
    # requests, while TP ranks each keep the whole latent of every request
    assert tp
    assert best.billed_gpus <= min(c.billed_gpus for c in tp)
    same = [c for c in tp if c.billed_gpus == best.billed_gpus]
    assert all(best.held_requests > c.held_requests for c in same)


def test_objective_cost_follows_given_prices() -> None:
    # Llama 3.1 70B at 128K for 8: one node of 8 H100 (above) at $1 = $8/h; MI300X rents by
    # node, so at least 8 x $100 = $800/h.
    found = plan_cluster(
        "llama-3.1-70b",
        "h100,mi300x",
        max_model_len="128K",
        concurrency=8,
        objective="cost",
        prices=["h100=1,mi300x=100"],
    )
    best = found.best
    assert best is not None
    assert best.system.name == "hgx-h100"
    assert best.usd_per_hour == 8
    amd = [c for c in found.candidates if c.system.name == "mi300x-platform"]
    assert amd
    assert all((c.usd_per_hour or 0) >= 800 for c in amd)
    assert all("/h more" in c.loses_because for c in found.candidates[1:])


def test_nodes_cap_and_bad_objective() -> None:
    found = plan_cluster("llama-3.1-405b", "h100", max_model_len="128K", concurrency=32, nodes=2)
    assert not found.fits
    assert "no deployment" in found.message
    with pytest.raises(UnitError, match="objective 'speed'"):
        plan_cluster("llama-3.1-8b", "h100", max_model_len="8K", concurrency=1, objective="speed")


def test_tensor_parallel_all_reduce_time() -> None:
    # Llama 3.1 70B, TP 8 on HGX H100, 10 requests: a step all-reduces twice a layer
    # 10 x 8,192 hidden x 2 B = 163,840 B; a ring moves 2 x 7/8 of it: 286,720 B a GPU;
    # 80 layers x 2 x 286,720 = 45,875,200 B over 450 GB/s.
    found = plan_cluster("llama-3.1-70b", "h100", max_model_len="128K", concurrency=8)
    best = found.best
    assert best is not None
    step = decode_round(load_model("llama-3.1-70b"), best.plan, best.system, 10, 131072)
    assert step.communication.tensor_parallel_seconds == Fraction(45_875_200, 450 * GB)
    assert step.communication.pipeline_seconds == step.communication.expert_parallel_seconds == 0
    slower = decode_round(load_model("llama-3.1-70b"), best.plan, find_system("l40s-server"), 10, 1)
    assert slower.communication.tensor_parallel_seconds == Fraction(45_875_200, 32 * GB)


def test_gpus_per_node_override() -> None:
    found = plan_cluster(
        "llama-3.1-8b", None, system="hgx-h100", gpus_per_node=4, max_model_len="8K", concurrency=1
    )
    best = found.best
    assert best is not None
    assert best.system.gpus_per_node == 4
    assert best.billed_gpus == 4  # rents by node: a node of 4


def test_tp_plan_keeps_its_replica_fields() -> None:
    found = plan_cluster("llama-3.1-8b", "l4", max_model_len="8K", concurrency=1)
    best = found.best
    assert best is not None
    assert replace(best.plan, replicas=1).num_gpus == best.plan.tensor_parallel_size


# -- prefill/decode disaggregation ------------------------------------------------------------


def _pd_search(model: str, length: int, n: int, prompt: int, top: int = 5) -> list[Candidate]:
    system = find_system("hgx-h100")
    d = Deployment(load_model(model), system.gpu)
    return list(search_cluster(d, [system], length, n, disaggregate=prompt, top=top).candidates)


def test_disaggregated_llama_70b_is_a_prefill_node_beside_the_decode_node() -> None:
    # Decode pool: 8 requests of 128K = one node of TP 8 holding 10 (the case above).
    # Prefill pool: 8,192 batched tokens // 8,192-token prompts = 1 prompt in flight: one
    # 8K prompt is 80 x 2 x 128 x 2 B x 8 heads x 8,192 = 2.7 GB of cache, held by one node
    # (HGX H100 rents by node). Together 2 nodes, 16 GPUs: 8 more than the decode pool alone.
    found = _pd_search("llama-3.1-70b", 131072, 8, 8192)
    (pd,) = [c for c in found if c.prefill is not None]
    assert pd.prefill is not None
    assert pd.shape == "P/D: prefill 8 GPUs + decode 8 GPUs"
    assert (pd.billed_gpus, pd.num_nodes, pd.held_requests) == (16, 2, 10)
    assert pd.prefill_prompts == 1
    assert pd.prefill.plan.max_model_len == 8192
    assert pd.loses_because == "8 more GPUs; 1 more node"
    assert found[0].prefill is None
    assert found[0].billed_gpus == 8


@pytest.mark.parametrize(
    ("model", "length", "n", "prompt", "prompts"),
    [
        ("llama-3.1-70b", 131072, 8, 2048, 4),  # 8,192 // 2,048 = 4 prompts in flight
        ("llama-3.1-8b", 32768, 64, 1024, 8),  # 8,192 // 1,024 = 8
        ("deepseek-v3", 32768, 64, 32768, 1),  # a prompt above the batch: 1, chunked
    ],
)
def test_each_pool_holds_its_share_and_one_more_does_not(
    model: str, length: int, n: int, prompt: int, prompts: int
) -> None:
    found = _pd_search(model, length, n, prompt, top=1)  # listed although it ranks below
    (pd,) = [c for c in found if c.prefill is not None]
    assert pd.prefill is not None
    assert pd.prefill_prompts == prompts
    for pool, tokens, needed in ((pd, length, n), (pd.prefill, prompt, prompts)):
        p = pool.plan
        assert p.max_model_len == tokens
        shared = shared_blocks(0, tokens, p.block_size)
        held = p.max_concurrency or 0
        assert fits(p.stages, tokens, held, shared, p.block_size)
        assert not fits(p.stages, tokens, held + 1, shared, p.block_size)
        assert pool.held_requests >= needed
    # each pool in whole nodes of 8
    assert pd.prefill.billed_gpus % 8 == 0
    assert (pd.billed_gpus - pd.prefill.billed_gpus) % 8 == 0


def test_disaggregate_needs_a_prompt_within_the_length() -> None:
    system = find_system("hgx-h100")
    d = Deployment(load_model("llama-3.1-8b"), system.gpu)
    with pytest.raises(UnitError, match="disaggregate: a prompt of 1 to 8,192 tokens"):
        search_cluster(d, [system], 8192, 1, disaggregate=16384)


def test_disaggregate_option_needs_length_and_concurrency() -> None:
    result = CliRunner().invoke(app, ["plan", "llama-3.1-8b", "-g", "h100", "--disaggregate", "4K"])
    assert result.exit_code == 2
    assert "--disaggregate" in result.output


def test_disaggregate_option_lists_the_prefill_pool() -> None:
    # As test_disaggregated_llama_70b_is_a_prefill_node_beside_the_decode_node: 1 prompt of
    # 8K in one node beside the decode node of TP 8: 16 GPUs, 2 nodes.
    args = ["plan", "llama-3.1-70b", "-g", "h100", "--max-model-len", "128K"]
    args += ["--concurrency", "8", "--disaggregate", "8K", "-f", "json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["candidates"][0]["prefill_pool"] is None
    (pd,) = [c for c in doc["candidates"] if c["prefill_pool"] is not None]
    assert pd["shape"] == "P/D: prefill 8 GPUs + decode 8 GPUs"
    assert (pd["billed_gpus"], pd["num_nodes"]) == (16, 2)
    assert pd["prefill_pool"]["prompts_in_flight"] == 1
    assert pd["prefill_pool"]["prompt_tokens"] == 8192


# -- what a replica holds, per replica and per DP rank ----------------------------------------


def test_dp_rank_free_memory_is_after_its_share_of_the_requests() -> None:
    # DeepSeek V3 at 128K for 64 on H200: DP attention over 16 ranks (one GPU each); a rank
    # holds ceil(64 / 16) = 4 requests, not the whole pool and not one.
    # MLA: 61 layers x (512 + 64) x 2 B x 131,072 tokens = 9,210,691,584 B a request (8.58 GiB)
    found = plan_cluster("deepseek-v3", "h200", max_model_len="128K", concurrency=64)
    best = found.best
    assert best is not None
    p = best.plan
    assert (p.expert_parallel_size, p.replicas, p.concurrency) == (16, 16, 64)
    assert best.requests_per_replica == 4
    request = 61 * 576 * 2 * 131_072
    assert p.request_bytes == request == 9_210_691_584
    assert p.free_memory_bytes == (
        p.usable_memory_bytes - p.weights_bytes - p.overhead_bytes - 4 * request
    )
    assert p.free_memory_bytes < p.kv_cache_memory_bytes - request  # not the pool less one


def test_replica_free_memory_is_after_the_requests_asked() -> None:
    # Llama 3.1 8B at 32K for 64 on H100, no -tp: TP 8, one replica holding 64; a request is
    # 32 layers x 2 (K, V) x 8 KV heads / 8 ranks x 128 x 2 B x 32,768 = 536,870,912 B a GPU
    found = plan_cluster("llama-3.1-8b", "h100", max_model_len="32K", concurrency=64, top=10)
    best = found.best
    assert best is not None
    p = best.plan
    assert (p.tensor_parallel_size, p.replicas, best.requests_per_replica) == (8, 1, 64)
    request = 32 * 2 * 1 * 128 * 2 * 32_768
    assert p.request_bytes == request == 536_870_912
    assert p.free_memory_bytes == (
        p.usable_memory_bytes - p.weights_bytes - p.overhead_bytes - 64 * request
    )
    for c in found.candidates:  # each replica holds its share: ceil(64 / replicas), at most max
        share = min(-(-64 // c.plan.replicas), c.plan.max_concurrency or 0)
        assert c.requests_per_replica == share, c.shape


def test_cluster_view_labels_figures_per_dp_rank() -> None:
    result = CliRunner().invoke(
        app, ["plan", "deepseek-v3", "--gpu", "h200", "-c", "128K", "-n", "64"]
    )
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert "max concurrency per DP rank 7" in out
    assert "requests per DP rank 4 of the 64 asked, over 16 DP ranks" in out
    assert "held in all 112 (16 x 7)" in out
    assert "the pool less the 4 requests of 131,072 tokens one DP rank holds" in out


def test_cluster_json_gives_per_replica_keys() -> None:
    result = CliRunner().invoke(
        app,
        ["plan", "deepseek-v3", "--gpu", "h200", "-c", "128K", "-n", "64", "--format", "json"],
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    cluster = doc["cluster"]
    assert (cluster["replica_kind"], cluster["requests_per_replica"]) == ("dp_rank", 4)
    assert cluster["available_memory_bytes_per_gpu"] == doc["available_memory_bytes"]
    assert doc["left_out"] == []


# -- the cost objective and GPUs without a price ------------------------------------------------


def test_cost_leaves_out_unpriced_systems_and_says_so() -> None:
    found = plan_cluster(
        "llama-3.1-8b", "h100,rtx-a6000", max_model_len="32K", concurrency=64, objective="cost"
    )
    assert [(o.system, o.gpu) for o in found.left_out] == [("rtx-a6000-x8", "rtx-a6000")]
    assert "no list price for rtx-a6000" in found.left_out[0].reason
    assert found.candidates
    assert all(c.price is not None for c in found.candidates)
    # under another objective the unpriced system is ranked, and nothing is left out
    assert not plan_cluster(
        "llama-3.1-8b", "h100,rtx-a6000", max_model_len="32K", concurrency=64
    ).left_out


def test_cost_table_and_json_name_what_was_left_out() -> None:
    args = ["plan", "llama-3.1-8b", "-c", "32K", "-n", "64", "--gpu", "h100,rtx-a6000"]
    shown = CliRunner().invoke(app, [*args, "--objective", "cost"])
    assert shown.exit_code == 0, shown.output
    out = " ".join(shown.output.split())
    assert "left out of the ranking by cost: rtx-a6000-x8 (no list price for rtx-a6000;" in out
    doc = json.loads(
        CliRunner().invoke(app, [*args, "--objective", "cost", "--format", "json"]).stdout
    )
    assert doc["left_out"] == [
        {
            "system": "rtx-a6000-x8",
            "gpu": "rtx-a6000",
            "reason": "no list price for rtx-a6000; --price rtx-a6000=DOLLARS ranks it",
        }
    ]
    assert doc["objective"] == "cost"
    assert doc["candidates"]


def test_cost_with_no_price_at_all_is_refused_in_one_line() -> None:
    with pytest.raises(UnitError, match=r"--price GPU=DOLLARS: --price rtx-a6000=DOLLARS"):
        plan_cluster(
            "llama-3.1-8b", "rtx-a6000", max_model_len="8K", concurrency=1, objective="cost"
        )
    result = CliRunner().invoke(
        app,
        [
            "plan",
            "llama-3.1-8b",
            "-c",
            "8K",
            "-n",
            "1",
            "--gpu",
            "rtx-a6000,a40",
            "--objective",
            "cost",
        ],
    )
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert result.stderr.strip().count("\n") == 0
    assert "--price rtx-a6000=DOLLARS --price a40=DOLLARS" in result.stderr


def test_the_brief_cost_question_ranks_all_four() -> None:
    # H100, H200, B200 and MI300X each have a list price now: none is left out
    found = plan_cluster(
        "llama-3.1-8b", "h100,h200,b200,mi300x", max_model_len="32K", concurrency=64,
        objective="cost", top=10,
    )  # fmt: skip
    assert not found.left_out
    assert {c.system.gpu.name for c in found.candidates} >= {"mi300x", "h100-sxm"}
