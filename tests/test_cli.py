from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner()


def run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_tiny_prints_192_bytes(tiny_spec: Path) -> None:
    code, out, err = run("calc", str(tiny_spec), "--context", "4")
    assert code == 0, err
    assert "192 B" in out
    assert "192 bytes" in out


def test_calc_json_keys_and_numbers() -> None:
    code, out, err = run(
        "calc",
        "llama-3.1-8b",
        "--context",
        "32K",
        "--batch",
        "8",
        "--kv-dtype",
        "fp8",
        "--format",
        "json",
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["schema_version"] == 1
    assert {
        "model",
        "context_tokens",
        "batch_size",
        "kv_dtype",
        "kv_cache_bytes",
        "bytes_per_token",
        "breakdown",
    } <= set(doc)
    # 2 x 32 x 8 x 128 x 1 B x 32768 x 8 = 16 GiB
    assert doc["context_tokens"] == 32768
    assert doc["kv_cache_bytes"] == 17_179_869_184
    assert doc["bytes_per_token"] == 65_536
    assert doc["kv_dtype"] == "fp8_e4m3"
    row = doc["breakdown"][0]
    assert {"kind", "num_layers", "tokens_retained", "k_bytes", "v_bytes", "bytes"} <= set(row)
    assert row["k_bytes"] == row["v_bytes"] == 8 * 2**30


def test_calc_shows_resolved_tokens_for_decimal_suffix() -> None:
    code, out, _ = run("calc", "llama-3.1-8b", "--context", "32k")
    assert code == 0
    assert "32,000 tokens" in out


def test_calc_hf_id_and_explain() -> None:
    code, out, err = run("calc", "meta-llama/Llama-3.1-8B", "--context", "131072", "--explain")
    assert code == 0, err
    assert "2 (K,V) x 8 heads x 128 dims x 2 B (bfloat16) x 131,072 tokens" in out
    assert "16.00 GiB" in out  # 131072 x 128 KiB


def test_calc_json_explain() -> None:
    code, out, _ = run("calc", "qwen3-8b", "-c", "4", "-f", "json", "--explain")
    assert code == 0
    assert json.loads(out)["explain"][-1] == "total: 589,824 = 589,824 B"  # 4 x 147456


def test_calc_defaults_to_max_position_embeddings() -> None:
    code, out, _ = run("calc", "qwen3-8b", "-f", "json")
    assert code == 0
    assert json.loads(out)["context_tokens"] == 40960


def test_calc_k_v_dtypes() -> None:
    code, out, _ = run(
        "calc", "llama-3.1-8b", "-c", "1", "--k-dtype", "q8_0", "--v-dtype", "q4_0", "-f", "json"
    )
    assert code == 0
    assert json.loads(out)["kv_cache_bytes"] == 32 * (32 * 34 + 32 * 18)


def test_models_lists_catalog() -> None:
    code, out, _ = run("models", "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["schema_version"] == 1
    names = {m["name"]: m for m in doc["models"]}
    assert len(names) >= 50
    assert names["llama-3.1-8b"]["bytes_per_token"] == 131_072
    code, out, _ = run("models")
    assert code == 0
    assert "gemma-3-27b" in out


def test_show_prints_resolved_schedule() -> None:
    code, out, _ = run("show", "gemma-3-27b")
    assert code == 0
    assert "60-61" in out  # the last run of sliding layers
    assert "52 sliding_attention, 10 full_attention" in out
    code, out, _ = run("show", "gemma-3-27b", "-f", "json")
    doc = json.loads(out)
    assert doc["schedule"][1] == {
        "first_layer": 5,
        "last_layer": 5,
        "kind": "full_attention",
        "layer": "16 KV heads, head_dim 128",
    }
    assert doc["spec"]["num_hidden_layers"] == 62


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["calc", "llama-3.1-7b"], "unknown model 'llama-3.1-7b'; did you mean"),
        (["calc", "llama-3.1-8b", "-c", "32G"], "--context: cannot read token count '32G'"),
        (
            ["calc", "llama-3.1-8b", "-c", "4", "--kv-dtype", "fp9"],
            "--kv-dtype: unknown dtype 'fp9'; allowed:",
        ),
        (["calc", "llama-3.1-8b", "-c", "4", "--v-dtype", "q3"], "--v-dtype: unknown dtype"),
        (["show", "no/such/model.yaml"], "no/such/model.yaml: cannot read"),
    ],
)
def test_errors_are_one_line_exit_2(args: list[str], message: str) -> None:
    code, out, err = run(*args)
    assert code == 2
    assert message in err
    assert "Traceback" not in err + out
    assert len(err.strip().splitlines()) == 1


def test_bad_spec_file_exit_2(write_spec: Callable[[str, str], Path]) -> None:
    path = write_spec(
        "name: b\nnum_hidden_layers: 1\nnum_attention_heads: 1\nhead_dim: 4\n"
        "torch_dtype: bf16\nnum_kv_head: 1\n",
        "b.yaml",
    )
    code, _, err = run("calc", str(path), "-c", "4")
    assert code == 2
    assert err.strip() == (
        f"kvplan: error: {path}:6: num_kv_head: unknown key; did you mean 'num_key_value_heads'?"
    )


def test_usage_errors_exit_2() -> None:
    code, _, _ = run("calc", "llama-3.1-8b", "--batch", "0")
    assert code == 2
    code, _, _ = run("calc", "llama-3.1-8b", "--format", "xml")
    assert code == 2


def test_help_documents_exit_codes_and_commands() -> None:
    code, out, _ = run("--help")
    assert code == 0
    assert "Exit codes" in out
    for command in ("calc", "models", "show"):
        assert command in out


def test_version() -> None:
    code, out, _ = run("--version")
    assert code == 0
    assert out.startswith("kvplan ")


def test_python_dash_m_and_no_heavy_imports(tmp_path: Path) -> None:
    # The CLI path must not import torch or transformers, nor parse the whole catalog.
    probe = (
        "import sys, runpy\n"
        "sys.argv = ['kvplan', 'calc', 'llama-3.1-8b', '-c', '4', '-f', 'json']\n"
        "try:\n    runpy.run_module('kvplan', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "import kvplan.catalog as c\n"
        "heavy = [m for m in ('torch', 'transformers', 'numpy') if m in sys.modules]\n"
        "print('HEAVY', heavy, 'LOADED', c._load_bundled.cache_info().currsize)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert '"kv_cache_bytes": 524288' in result.stdout  # 4 x 131072
    assert "HEAVY [] LOADED 1" in result.stdout
