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
from kvplan.model.spec import ModelSpec, parse_spec
from kvplan.probe.measure import INSTALL_HINT

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
# The cache kinds of the state-space and hybrid families, each small. Mamba1: d_inner =
# expand x hidden = 128. Mamba2: 8 heads x 16 = 128 wide, 2 groups of state 4, kernel 4.
# Gated delta net: 2 K heads of 8, 4 V heads of 16, kernel 4.
MAMBA1: dict[str, Any] = {
    "hidden_size": 64,
    "layer_types_pattern": ["mamba"],
    "mamba_d_state": 4,
    "mamba_d_conv": 4,
    "mamba_expand": 2,
}
MAMBA2: dict[str, Any] = {
    "mamba_n_heads": 8,
    "mamba_d_head": 16,
    "mamba_n_groups": 2,
    "mamba_d_state": 4,
    "mamba_d_conv": 4,
}
DELTA_NET: dict[str, Any] = {
    "num_hidden_layers": 4,
    "layer_types_pattern": ["linear_attention"] * 3 + ["full_attention"],
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
    "linear_key_head_dim": 8,
    "linear_value_head_dim": 16,
    "linear_conv_kernel_dim": 4,
}
SHORT_CONV: dict[str, Any] = {
    "num_hidden_layers": 4,
    "hidden_size": 64,
    "layer_types": ["short_conv", "full_attention", "short_conv", "short_conv"],
    "conv_L_cache": 3,
}
SHARED_KV: dict[str, Any] = {
    "num_hidden_layers": 6,
    "sliding_window": 8,
    "layer_types_pattern": ["sliding_attention", "full_attention"],
    "num_kv_shared_layers": 2,
}
DSA: dict[str, Any] = {
    "num_hidden_layers": 2,
    "kv_lora_rank": 32,
    "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 16,
    "v_head_dim": 16,
    "num_key_value_heads": 4,
    "index_head_dim": 128,
}
FAMILIES |= {
    "deepseek-v3.2-dsa": {"model_type": "deepseek_v32", **DSA},
    "glm-5-dsa": {"model_type": "glm_moe_dsa", **DSA},
    "mamba": {"model_type": "mamba", "num_hidden_layers": 2, **MAMBA1},
    "falcon-mamba": {"model_type": "falcon_mamba", "num_hidden_layers": 2, **MAMBA1},
    "mamba2": {
        "model_type": "mamba2",
        "num_hidden_layers": 2,
        "layer_types_pattern": ["mamba"],
        **MAMBA2,
    },
    "falcon-h1": {
        "model_type": "falcon_h1",
        "num_hidden_layers": 2,
        "layer_types_pattern": ["attention_mamba"],
        **MAMBA2,
    },
    "zamba2": {
        "model_type": "zamba2",
        "num_hidden_layers": 4,
        "hidden_size": 32,
        "num_key_value_heads": 4,
        "layer_types_pattern": ["mamba", "attention_mamba"],
        **MAMBA2,
        "mamba_n_heads": 4,
        "mamba_n_groups": 1,
    },
    "nemotron-h": {
        "model_type": "nemotron_h",
        "num_hidden_layers": 4,
        "layer_types": ["mamba", "no_cache", "full_attention", "no_cache"],
        **MAMBA2,
    },
    "granite-4-hybrid": {
        "model_type": "granitemoehybrid",
        "num_hidden_layers": 4,
        "layer_types": ["mamba", "full_attention", "mamba", "mamba"],
        **MAMBA2,
    },
    "lfm2": {"model_type": "lfm2", **SHORT_CONV},
    "lfm2-moe": {"model_type": "lfm2_moe", **SHORT_CONV},
    "qwen3-next": {"model_type": "qwen3_next", **DELTA_NET},
    "qwen3.5": {"model_type": "qwen3_5_text", **DELTA_NET},
    "olmo-hybrid": {"model_type": "olmo_hybrid", **DELTA_NET},
    "gemma3n": {"model_type": "gemma3n_text", **SHARED_KV},
    "gemma4": {
        "model_type": "gemma4_text",
        **SHARED_KV,
        "global_head_dim": 32,
        "num_global_key_value_heads": 1,
    },
}


def spec_for(name: str, **changes: Any) -> ModelSpec:
    return parse_spec({"name": name, **BASE, **FAMILIES[name], **changes})


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
    assert "deepseek_v3, deepseek_v32, falcon_h1, falcon_mamba, gemma2" in result.stderr


torch = pytest.importorskip("torch", reason="the probe extra is not installed")
pytest.importorskip("transformers", reason="the probe extra is not installed")

from kvplan.probe.measure import run_probe  # noqa: E402


@pytest.mark.parametrize("name", list(FAMILIES))
def test_measured_cache_equals_the_transformers_estimate(name: str) -> None:
    # DSA models included: the indexer's keys, one [batch, tokens, index_head_dim] tensor a
    # layer in the cache dtype beside the latent, are in the estimate
    result = run_probe(spec_for(name), context_tokens=20, batch_size=2, decode_steps=3)
    assert result.tensor_bytes == result.transformers_estimate_bytes
    assert result.by_kind == dict(result.estimate_by_kind)


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


def probe(name: str, **changes: Any) -> Any:
    """20 prefill tokens for 2 sequences and 3 decode steps: 23 tokens kept by full layers."""
    return run_probe(spec_for(name, **changes), context_tokens=20, batch_size=2, decode_steps=3)


def test_state_space_sizes_by_hand() -> None:
    # transformers keeps the whole conv kernel (4 columns), the engines and kvplan's ideal
    # cache kernel - 1 = 3. Mamba1: d_inner 128; per layer and sequence a conv of 128 x 4 and
    # an SSM state of 128 x 4, float32; 2 layers x 2 sequences
    for name in ("mamba", "falcon-mamba"):
        assert probe(name).tensor_bytes == 2 * 2 * (128 * 4 + 128 * 4) * 4 == 16_384
    # Mamba2: conv over x, B and C = 128 + 2 groups x 2 x 4 = 144 channels x 4 columns, SSM
    # 8 heads x 16 x 4 = 512 values: (576 + 512) x 4 B = 4,352 B per layer and sequence
    mamba2 = probe("mamba2")
    assert mamba2.tensor_bytes == 2 * 2 * (144 * 4 + 512) * 4 == 17_408
    # against the ideal cache: one conv column (144 values x 4 B) per layer and sequence more
    assert mamba2.tensor_bytes - mamba2.ideal_bytes == 2 * 2 * 144 * 4 == 2_304
    # Falcon-H1: the same Mamba2 state beside attention in each layer, 2 KV heads x 16 x 23
    falcon_h1 = probe("falcon-h1")
    assert falcon_h1.by_kind == {
        "full_attention": 2 * 2 * 2 * 2 * 23 * 16 * 4,  # layers x seqs x (K, V) x heads
        "recurrent_state": 2 * 2 * (144 * 4 + 512) * 4,
    }
    # Zamba2: the shared attention block caches K and V in each of the 2 hybrid layers, every
    # one of 4 heads a KV head of 2 x 32 / 4 = 16 dims; Mamba2 of 64 = 4 heads x 16, 1 group:
    # conv (64 + 2 x 4) x 4 columns, SSM 4 x 16 x 4 = 256 values, in all 4 layers
    assert probe("zamba2").by_kind == {
        "full_attention": 2 * 2 * 2 * 4 * 23 * 16 * 4,  # 47,104 B
        "recurrent_state": 4 * 2 * (72 * 4 + 256) * 4,  # 17,408 B
    }
    # Nemotron-H: one Mamba2 layer, one attention layer, two MLP layers keeping nothing
    assert probe("nemotron-h").by_kind == {
        "recurrent_state": 2 * (144 * 4 + 512) * 4,
        "full_attention": 2 * 2 * 2 * 23 * 16 * 4,
    }


def test_sparse_attention_indexer_by_hand() -> None:
    # DeepSeek-V3.2 and GLM-5 cache, per layer and token, the latent (K 32 values, V the rope
    # part, 8) and the indexer's key of 128 values, all float32 here: 2 layers x 2 seqs x 23
    for name in ("deepseek-v3.2-dsa", "glm-5-dsa"):
        result = probe(name)
        assert result.tensor_bytes == 2 * 2 * 23 * (32 + 8 + 128) * 4 == 61_824
        # vLLM keeps the indexer key in fp8 with one fp32 scale per 128 values (kvplan's ideal
        # cache): 128 + 4 = 132 B a token beside the latent's (32 + 8) x 4 B
        assert result.ideal_bytes == 2 * 2 * 23 * ((32 + 8) * 4 + 132) == 26_864


def test_short_conv_delta_net_and_shared_kv_by_hand() -> None:
    # LFM2: each of 3 conv layers keeps conv_L_cache = 3 columns of its 64 channels (the
    # engines keep 2), in the model dtype, float32 here; 2 sequences
    for name in ("lfm2", "lfm2-moe"):
        result = probe(name)
        assert result.by_kind["recurrent_state"] == 3 * 2 * 64 * 3 * 4 == 4_608
        assert result.tensor_bytes - result.ideal_bytes == 3 * 2 * 64 * 1 * 4
    # gated delta net: conv over q, k, v = 2 x 2 x 8 + 4 x 16 = 96 channels x 4 columns and a
    # recurrent state of 4 V heads x 8 x 16 = 512 values, float32: 3 layers x 2 sequences
    for name in ("qwen3-next", "qwen3.5", "olmo-hybrid"):
        assert probe(name).by_kind["recurrent_state"] == 3 * 2 * (96 * 4 + 512) * 4 == 21_504
    # Gemma 3n: 6 layers, the last 2 read layers 2 and 3's K and V and hold nothing (a
    # DummyLayer, not a full-length copy): 2 sliding layers keep window - 1 = 7 tokens, 2 full
    # layers 23
    gemma3n = probe("gemma3n")
    assert gemma3n.by_kind == {
        "sliding_attention": 2 * 2 * 2 * 2 * 7 * 16 * 4,
        "full_attention": 2 * 2 * 2 * 2 * 23 * 16 * 4,
    }
    # Gemma 4: per-layer geometry too: the full layers have 1 KV head of 32 dims
    assert probe("gemma4").by_kind["full_attention"] == 2 * 2 * 2 * 1 * 23 * 32 * 4


def test_state_dtypes_transformers_keeps() -> None:
    # bfloat16 model, state_dtype bfloat16 as the importers write for vLLM: transformers keeps
    # the conv state in bfloat16 but the SSM (and delta net) state in float32, and its
    # estimate says so: 2 sequences x (144 conv values x 4 columns x 2 B + 512 SSM values x 4 B)
    mamba2 = probe("mamba2", torch_dtype="bfloat16", state_dtype="bfloat16")
    assert mamba2.tensor_bytes == 2 * 2 * (144 * 4 * 2 + 512 * 4) == 12_800
    assert mamba2.difference_bytes == 0
    olmo = probe("olmo-hybrid", torch_dtype="bfloat16", state_dtype="bfloat16")
    assert olmo.difference_bytes == 0
    assert probe("mamba2", torch_dtype="bfloat16").difference_bytes == 0


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
