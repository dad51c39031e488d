"""vLLM's 0.33 line, read from its wheel's source (no CPU build of 0.33 exists to run): what
changed from 0.32 for the models kvplan sizes, each figure derived by hand."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

import kvplan
from kvplan.cli import app
from kvplan.engines import vllm
from kvplan.engines.vllm import layout

runner = CliRunner()


def _attention(spec_name: str, version: str, gpu: str) -> tuple[int, int]:
    """The attention block size and page of ``spec_name`` on ``gpu`` under ``version``."""
    spec = kvplan.load_model(spec_name)
    pages, _, _, _ = layout(spec, vllm.config(8192, version=version), kvplan.find_gpu(gpu))
    attention = next(p for p in pages if p is not None and p.kind != "mamba")
    return attention.block_size, attention.page_bytes


@pytest.mark.parametrize(
    ("version", "gpu", "block", "page"),
    [
        # 0.32: 16 x cdiv(1,097,728, 16 x 2,048) = 16 x 34 = 544 tokens, 544 x 2,048 B
        ("0.32", "h100", 544, 1_114_112),
        # 0.33 on Hopper (FlashInfer's GDN prefill): 64 x cdiv(1,097,728, 64 x 2,048) = 576
        ("0.33", "h100", 576, 1_179_648),
        # Blackwell with Qwen3-Next's 128-wide keys: FlashInfer too
        ("0.33", "b200", 576, 1_179_648),
        # Ampere runs the Triton kernel: 0.32's rule
        ("0.33", "a100-80gb", 544, 1_114_112),
    ],
)
def test_qwen_gated_delta_net_blocks_grow_in_steps_of_64(
    version: str, gpu: str, block: int, page: int
) -> None:
    # Qwen3-Next at TP 1 in bf16: an attention token is 2 x 2 x 256 x 2 = 2,048 B and a
    # gated-delta-net state 1,097,728 B (a conv tail of 49,152 B and 1,048,576 B of state)
    assert _attention("qwen3-next-80b-a3b", version, gpu) == (block, page)


def test_the_checkpoint_block_and_the_fewer_blocks_it_leaves() -> None:
    spec = kvplan.load_model("qwen3-next-80b-a3b")
    pool = 40 * 2**30
    results = {
        v: vllm.profile(spec, "b200", vllm.config(8192, version=v, kv_cache_memory_bytes=pool))
        for v in ("0.32", "0.33")
    }
    # 48 layers, 12 full attention + 36 gated delta net: groups of 12, one attention group and
    # three state groups, 12 pages a block; a request of 8,192 tokens holds
    # 0.32: cdiv(8,192, 544) + 3 x 2 = 16 + 6 = 22 blocks;
    # 0.33: cdiv(8,192, 576) + 3 x (2 + the checkpoint) = 15 + 9 = 24 blocks
    assert results["0.32"].blocks_per_request == 22
    assert results["0.33"].blocks_per_request == 24
    assert results["0.32"].num_gpu_blocks == pool // (12 * 1_114_112) == 3_212
    assert results["0.33"].num_gpu_blocks == pool // (12 * 1_179_648) == 3_034


def test_a_dense_model_keeps_its_blocks_for_the_same_pool() -> None:
    spec = kvplan.load_model("llama-3.1-8b")
    pool = 50 * 2**30
    for_line = {
        v: vllm.profile(spec, "h100", vllm.config(8192, version=v, kv_cache_memory_bytes=pool))
        for v in ("0.32", "0.33")
    }
    # 32 layers x 8 KV heads x 128 x 2 (K and V) x 2 B x 16 tokens = 2 MiB a block
    assert for_line["0.32"].num_gpu_blocks == for_line["0.33"].num_gpu_blocks == 25_600


def test_the_v2_sampler_warm_up_pass_sets_the_activation() -> None:
    spec = kvplan.load_model("llama-3.1-8b")
    activation = {
        v: vllm.profile(spec, "h100", vllm.config(8192, version=v)).stages[-1].overhead
        for v in ("0.32", "0.33")
    }
    # 0.32: the forward, 8,192 x (3 x 14,336 + 3 x 4,096) x 2 B, above the logits
    # 1,024 x 128,256 x 2 B
    assert activation["0.32"].activation_bytes == 8192 * (3 * 14336 + 3 * 4096) * 2
    # 0.33: the logits beside three float32 copies, 1,024 x 128,256 x (2 + 12) B
    assert activation["0.33"].activation_bytes == 1024 * 128256 * 14 == 1_838_678_016
    # the other terms are 0.32's
    assert activation["0.33"].cuda_graph_bytes == activation["0.32"].cuda_graph_bytes
    assert activation["0.33"].non_torch_bytes == activation["0.32"].non_torch_bytes


def test_the_command_line_takes_0_33_and_refuses_its_ignored_flag() -> None:
    args = ["plan", "llama-3.1-8b", "--gpu", "h100", "-e", "vllm", "-c", "8K"]
    result = runner.invoke(app, [*args, "--engine-version", "0.33.0", "-f", "json"])
    assert result.exit_code == 0, result.stderr
    assert '"engine_version": "0.33"' in result.stdout
    refused = runner.invoke(app, [*args, "--engine-version", "0.33", "--mamba-cache-mode", "align"])
    assert refused.exit_code == 2
    assert "--mamba-cache-mode: not modelled for vLLM's 0.33 release line" in refused.stderr
