"""The torch probe: real transformers caches measured against kvplan's estimates.

Runs on the CPU at small sizes when the probe extra is installed, skips cleanly without it;
the CUDA test is marked ``gpu`` and skips without a device.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.probe import INSTALL_HINT
from kvplan.spec import ModelSpec, parse_spec

runner = CliRunner()

BASE: dict[str, Any] = {
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "torch_dtype": "float32",
    "max_position_embeddings": 4096,
}
FAMILIES: dict[str, dict[str, Any]] = {
    "llama": {"model_type": "llama", "num_hidden_layers": 2},
    "mistral-past-window": {"model_type": "mistral", "num_hidden_layers": 2, "sliding_window": 8},
    "qwen2": {"model_type": "qwen2", "num_hidden_layers": 2},
    "qwen3": {"model_type": "qwen3", "num_hidden_layers": 2},
    "gemma2": {
        "model_type": "gemma2",
        "num_hidden_layers": 4,
        "sliding_window": 8,
        "layer_types_pattern": ["sliding_attention", "full_attention"],
    },
    "gemma3": {
        "model_type": "gemma3_text",
        "num_hidden_layers": 6,
        "sliding_window": 8,
        "layer_types_pattern": ["sliding_attention"] * 5 + ["full_attention"],
    },
    "gpt-oss": {
        "model_type": "gpt_oss",
        "num_hidden_layers": 4,
        "sliding_window": 8,
        "layer_types_pattern": ["sliding_attention", "full_attention"],
    },
    "deepseek-v3-mla": {
        "model_type": "deepseek_v3",
        "num_hidden_layers": 2,
        "kv_lora_rank": 32,
        "qk_rope_head_dim": 8,
        "qk_nope_head_dim": 16,
        "v_head_dim": 16,
        "num_key_value_heads": 4,
    },
    "jamba-hybrid": {
        "model_type": "jamba",
        "num_hidden_layers": 4,
        "hidden_size": 64,
        "layer_types_pattern": ["mamba", "full_attention"],
        "mamba_d_state": 4,
        "mamba_d_conv": 4,
        "mamba_expand": 2,
    },
}


def spec_for(name: str) -> ModelSpec:
    return parse_spec({"name": name, **BASE, **FAMILIES[name]})


def test_missing_extra_message_and_exit_3(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now fails
    result = runner.invoke(app, ["probe", "llama-3.1-8b", "--context", "16"])
    assert result.exit_code == 3
    assert result.stderr == (
        "kvplan: error: kvplan probe needs PyTorch and transformers, which kvplan does not"
        " install by default: pip install 'kvplan[probe]'\n"
    )
    assert INSTALL_HINT in result.stderr


def test_import_kvplan_and_every_command_stay_torch_free() -> None:
    code = (
        "import sys, kvplan, kvplan.cli\n"
        "from typer.testing import CliRunner\n"
        "spec = kvplan.load_model('gemma-3-27b')\n"
        "kvplan.estimate(spec, 1000)\n"
        "kvplan.plan(spec, kvplan.find_gpu('h100'), max_model_len=8192)\n"
        "r = CliRunner()\n"
        "for args in (['calc', 'qwen3-8b', '-c', '8'], ['models'], ['show', 'jamba-v0.1'],\n"
        "             ['gpus'], ['plan', 'llama-3.1-8b', '-g', 'h100', '-e', 'vllm'],\n"
        "             ['calc', 'gpt-oss-20b', '-c', '64', '-e', 'llama.cpp'], ['--help']):\n"
        "    assert r.invoke(kvplan.cli.app, args).exit_code == 0, args\n"
        "print(sorted(m for m in ('torch', 'transformers', 'numpy') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_unsupported_family_names_the_supported_ones() -> None:
    result = runner.invoke(app, ["probe", "phi-2", "--context", "8"])
    assert result.exit_code == 2
    assert "cannot build model_type 'phi'" in result.stderr
    assert "deepseek_v3, gemma2" in result.stderr


torch = pytest.importorskip("torch", reason="the probe extra is not installed")
pytest.importorskip("transformers", reason="the probe extra is not installed")

from kvplan.probe import run_probe  # noqa: E402


@pytest.mark.parametrize("name", list(FAMILIES))
def test_measured_cache_equals_the_transformers_estimate(name: str) -> None:
    result = run_probe(spec_for(name), context_tokens=20, batch_size=2, decode_steps=3)
    assert result.tensor_bytes == result.transformers_estimate_bytes
    assert result.by_kind == result.estimate_by_kind


def test_hand_worked_sizes() -> None:
    # Llama-like, 2 layers x (K + V) x 2 sequences x 2 KV heads x 23 tokens x 16 dims x 4 B
    llama = run_probe(spec_for("llama"), context_tokens=20, batch_size=2, decode_steps=3)
    assert llama.tensor_bytes == 2 * 2 * 2 * 2 * 23 * 16 * 4 == 23_552
    # past the window of 8: DynamicSlidingWindowLayer keeps window - 1 = 7 tokens
    mistral = run_probe(
        spec_for("mistral-past-window"), context_tokens=20, batch_size=2, decode_steps=3
    )
    assert mistral.tensor_bytes == 2 * 2 * 2 * 2 * 7 * 16 * 4 == 7_168
    # ...while its storage still holds the window's 8 tokens (a slice of the last concat)
    assert mistral.storage_bytes == 2 * 2 * 2 * 2 * 8 * 16 * 4
    # MLA: transformers caches the latent: 2 layers x 2 seqs x 23 tokens x (32 + 8) x 4 B
    mla = run_probe(spec_for("deepseek-v3-mla"), context_tokens=20, batch_size=2, decode_steps=3)
    assert mla.tensor_bytes == 2 * 2 * 23 * (32 + 8) * 4 == 14_720
    # Mamba state: d_inner 2 x 64 = 128; conv 128 x 4 (whole kernel) + ssm 128 x 4 (state),
    # float32, 2 layers x 2 sequences
    jamba = run_probe(spec_for("jamba-hybrid"), context_tokens=20, batch_size=2, decode_steps=3)
    assert jamba.by_kind["recurrent_state"] == 2 * 2 * (128 * 4 + 128 * 4) * 4 == 16_384


def test_bundled_spec_on_the_cli() -> None:
    # Gemma 3 1B, bf16: 22 sliding layers (window 512) keep 511 tokens, 4 full layers 602
    result = runner.invoke(
        app, ["probe", "gemma-3-1b", "-c", "600", "--decode-steps", "2", "-f", "json"]
    )
    assert result.exit_code == 0, result.stderr
    import json

    doc = json.loads(result.stdout)
    assert doc["schema_version"] == 1
    per_token = 1 * 256 * 2 * 2  # 1 KV head x 256 dims x (K + V) x 2 B
    assert doc["by_kind"] == {
        "sliding_attention": 22 * 511 * per_token,
        "full_attention": 4 * 602 * per_token,
    }
    assert doc["within_tolerance"] is True


def test_paged_pool_on_cpu_matches_the_plan() -> None:
    # Llama-like uniform model: one tensor per layer of 64 blocks x 16 tokens x 2 x 2 x 16 x 4 B
    result = run_probe(spec_for("llama"), context_tokens=4, paged_blocks=64)
    assert result.paged["planned_bytes"] == result.paged["tensor_bytes"] == 2 * 64 * 16 * 256


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_allocator_view() -> None:
    result = run_probe(
        spec_for("llama"), context_tokens=256, batch_size=2, device="cuda", paged_blocks=128
    )
    assert result.tensor_bytes == result.transformers_estimate_bytes
    assert result.allocator["memory_allocated_delta"] >= result.storage_bytes
    assert result.paged["memory_allocated_delta"] >= result.paged["planned_bytes"]
