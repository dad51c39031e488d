"""vLLM's --speculative-config: the drafter's layers, the state's extra blocks and longer conv
tail, the sliding layers' retained tokens and the drafter's weights, each derived by hand from
the rules read in vLLM's source (kvplan/engines/vllm_speculative.py). The real engine's runs
are in tests/data/vllm_oracle_0.32.0.json (spec-* cases, checked by tests/test_vllm_oracle.py).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

import kvplan
from kvplan.cli import app
from kvplan.engines import vllm
from kvplan.engines.vllm_cudagraph import GRAPH_BYTES_PER_LAYER_ROOT_WIDTH
from kvplan.engines.vllm_speculative import parse_speculative_config
from kvplan.errors import ModelNotFoundError, UnitError
from kvplan.model.weights import model_weights

GiB = 1 << 30
MTP3 = '{"method": "mtp", "num_speculative_tokens": 3}'
runner = CliRunner()


def _pool(model: str | kvplan.ModelSpec, given: str | None, **flags: object) -> vllm.VllmResult:
    speculative = parse_speculative_config(given) if given else None
    cfg = vllm.config(8192, speculative=speculative, **flags)
    spec = kvplan.load_model(model) if isinstance(model, str) else model
    return vllm.from_available(spec, 20 * GiB, cfg)


def test_qwen3_5_27b_with_three_mtp_tokens() -> None:
    # the gated delta net's conv tail: (2 x 16 x 128 + 48 x 128) channels x (4 - 1 + 3) in
    # bf16 = 122,880 B; its state 48 x 128 x 128 fp32 = 3,145,728 B: 3,268,608 B a layer
    state = 10_240 * 6 * 2 + 48 * 128 * 128 * 4
    assert state == 3_268_608
    # attention 4 heads x 256 x 2 (K, V) x 2 B = 4,096 B a token; the block grows in 16s until
    # its page holds the state: 16 x ceil(3,268,608 / 65,536) = 800 tokens, 3,276,800 B
    r = _pool("qwen3.5-27b", MTP3)
    assert (r.block_size, r.page_bytes) == (800, 800 * 4096)
    # 16 + 1 (the MTP layer) full layers and 48 GDN layers: groups of 17, 4 of them
    assert (r.num_groups, r.group_size) == (4, 17)
    blocks = 20 * GiB // (800 * 4096) // 17
    assert r.num_gpu_blocks == blocks == 385
    # a request: ceil(8,192 / 800) = 11 attention blocks; each of the 3 GDN groups holds 2
    # (the align mode of prefix caching) + 3 (the draft tokens) state blocks
    assert r.blocks_per_request == 11 + 3 * (2 + 3) == 26
    assert r.gpu_kv_cache_tokens == 385 * 8192 // 26 == 121_304
    assert f"{float(r.max_concurrency):.2f}" == "14.81"


def test_without_a_drafter_nothing_changes() -> None:
    r = _pool("qwen3.5-27b", None)
    # conv tail (kernel - 1 = 3 positions): 61,440 B + 3,145,728 B -> 16 x 49 = 784 tokens
    assert r.block_size == 784
    assert r.group_size == 16
    assert r.blocks_per_request == -(-8192 // 784) + 3 * 2 == 17


def test_deepseek_v3_mtp_adds_an_mla_layer() -> None:
    # 61 + 1 MLA layers of 16 x (512 + 64) x 2 B = 18,432 B a page
    plain = _pool("deepseek-v3", None, tensor_parallel_size=8)
    mtp = _pool(
        "deepseek-v3",
        '{"method": "deepseek_mtp", "num_speculative_tokens": 1}',
        tensor_parallel_size=8,
    )
    assert plain.num_gpu_blocks == 20 * GiB // 18_432 // 61 == 19_099
    assert mtp.num_gpu_blocks == 20 * GiB // 18_432 // 62 == 18_791


def test_ngram_drafts_add_no_layer_but_state_blocks() -> None:
    dense = _pool("llama-3.1-8b", '{"method": "ngram", "num_speculative_tokens": 3}')
    assert dense.num_gpu_blocks == _pool("llama-3.1-8b", None).num_gpu_blocks


def test_several_mtp_modules_keep_more_sliding_tokens_from_0_29() -> None:
    # Gemma 2 9B given two MTP modules: 21 sliding, 21 + 2 full layers; k 3 runs both, so
    # from v0.29 the sliding layers keep k - 1 = 2 tokens more below the 4,096-token window
    spec = replace(kvplan.load_model("gemma-2-9b"), mtp_layers=2)
    flags = {"max_num_batched_tokens": 2048, "async_scheduling": False}
    full = 8192 // 16
    before = _pool(spec, MTP3, version="0.28", **flags)
    after = _pool(spec, MTP3, version="0.29", **flags)
    assert before.blocks_per_request == full + -(-(4096 - 1 + 2048) // 16) + 1 == 897
    assert after.blocks_per_request == full + -(-(4096 - 1 + 2 + 2048) // 16) + 1 == 898


def test_the_mtp_module_weights_come_out_of_the_budget() -> None:
    spec = kvplan.load_model("qwen3.5-27b")
    layers = model_weights(spec, "bfloat16").layers_bytes
    # one decoder layer of the 64 and its 2 x 5,120 -> 5,120 projection in bf16
    module = layers // 64 + 2 * 5120 * 5120 * 2
    plain = vllm.profile(spec, "h100", vllm.config(8192))
    mtp = vllm.profile(spec, "h100", vllm.config(8192, speculative=parse_speculative_config(MTP3)))
    # and with a decode step of 1 + 3 tokens no FULL decode graph of 1 or 2 tokens is
    # captured: 2 graphs of its 64 layers fewer, at hidden 5120 (isqrt 71;
    # kvplan.engines.vllm_cudagraph)
    graphs = 2 * 64 * 71 * GRAPH_BYTES_PER_LAYER_ROOT_WIDTH
    assert plain.available_bytes - mtp.available_bytes == module - graphs


@pytest.mark.parametrize(
    ("given", "words"),
    [
        ("not json", "not JSON"),
        ("[1]", "a JSON object"),
        ('{"method": "medusa", "num_speculative_tokens": 2}', "method medusa: not modelled"),
        ('{"method": "lookahead", "num_speculative_tokens": 2}', "vLLM takes mtp, eagle"),
        ('{"method": "ngram", "num_speculative_tokens": 0}', "from 1 to 64"),
        ('{"method": "ngram"}', "needs num_speculative_tokens"),
        ('{"method": "eagle", "num_speculative_tokens": 2}', "needs model"),
        ('{"method": "mtp", "draft_tensor_parallel_size": 1}', "not modelled"),
        ('{"method": "mtp", "speed": 1}', "unknown key 'speed'"),
    ],
)
def test_a_config_vllm_would_not_take_is_refused_by_name(given: str, words: str) -> None:
    with pytest.raises(UnitError, match=words):
        parse_speculative_config(given)


def test_a_drafter_named_inside_an_input_file_is_never_a_path() -> None:
    given = json.dumps(
        {"method": "draft_model", "model": "/etc/hostname", "num_speculative_tokens": 2}
    )
    with pytest.raises(ModelNotFoundError, match="not in the catalog"):
        parse_speculative_config(given, paths=False)


def test_mtp_needs_mtp_layers_and_defaults_k_to_them() -> None:
    with pytest.raises(UnitError, match="names no multi-token-prediction layers"):
        _pool("llama-3.1-8b", MTP3)
    once = _pool("qwen3.5-27b", '{"method": "mtp"}')
    # k = mtp_layers = 1: the conv tail 4 - 1 + 1 positions, one extra state block a group
    assert once.blocks_per_request - _pool("qwen3.5-27b", None).blocks_per_request in (3, 4)


@pytest.mark.parametrize("line", ["0.19", "0.20"])
def test_lines_not_read_refuse_it(line: str) -> None:
    with pytest.raises(UnitError, match="not modelled for vLLM's"):
        _pool("qwen3.5-27b", MTP3, version=line)


def test_plan_takes_the_flag_and_other_engines_refuse_it() -> None:
    args = ["plan", "qwen3.5-27b", "--gpu", "h100", "-c", "8K", "--kv-cache-memory", "20GiB"]
    result = runner.invoke(
        app, [*args, "--engine", "vllm", "--speculative-config", MTP3, "--format", "json"]
    )
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["answer"]["max_concurrency"] == 385 // 26
    refused = runner.invoke(app, [*args[:6], "--engine", "sglang", "--speculative-config", MTP3])
    assert refused.exit_code == 2
    assert "--speculative-config" in refused.stderr


def test_a_budget_file_takes_it_and_refuses_a_path_for_the_drafter(tmp_path: Path) -> None:
    budget = tmp_path / "budget.yaml"
    common = (
        "    model: qwen3.5-27b\n    gpu: h100\n    engine: vllm\n    max_model_len: 8192\n"
        "    kv_cache_memory: 20GiB\n"
    )
    budget.write_text(
        "deployments:\n  - name: mtp\n"
        + common
        + "    speculative_config: {method: mtp, num_speculative_tokens: 3}\n"
        + "    expect: {min_concurrency: 14}\n",
        encoding="utf-8",
    )
    assert runner.invoke(app, ["check", str(budget)]).exit_code == 0  # 385 // 26 = 14
    budget.write_text(
        "deployments:\n  - name: drafter\n"
        + common
        + "    speculative_config: {method: draft_model, model: /etc/hostname,"
        + " num_speculative_tokens: 3}\n    expect: {min_concurrency: 1}\n",
        encoding="utf-8",
    )
    result = runner.invoke(app, ["check", str(budget)])
    assert result.exit_code == 2
    assert "deployment drafter: speculative_config: model '/etc/hostname'" in result.stderr
