from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

import kvplan
from kvplan.cli import app

runner = CliRunner()


def run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_tiny_prints_192_bytes(tiny_spec: Path) -> None:
    # 2 x 4 tokens x 2 heads x 3 dims x 4 B, in the float32 cache asked for
    code, out, err = run("calc", str(tiny_spec), "--context", "4", "--kv-dtype", "float32")
    assert code == 0, err
    assert "192 B" in out
    assert "192 bytes" in out


def test_tiny_float32_checkpoint_is_cached_in_bf16_and_says_why(tiny_spec: Path) -> None:
    # the same cache served as the engines serve a float32 checkpoint: 2 B a value, 96 B
    code, out, err = run("calc", str(tiny_spec), "--context", "4")
    assert code == 0, err
    assert "96 bytes" in out
    assert "float32 checkpoint served in bfloat16" in out


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
        "import kvplan.catalog.lookup as c\n"
        "heavy = [m for m in ('torch', 'transformers', 'numpy') if m in sys.modules]\n"
        "print('HEAVY', heavy, 'LOADED', c._load_bundled.cache_info().currsize)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert '"kv_cache_bytes": 524288' in result.stdout  # 4 x 131072
    assert "HEAVY [] LOADED 1" in result.stdout


# --- plan and gpus ---------------------------------------------------------------------------

PLAN_KEYS = {
    "gpu",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "num_gpus",
    "max_model_len",
    "total_memory_bytes",
    "weights_bytes",
    "overhead_bytes",
    "kv_cache_memory_bytes",
    "block_size",
    "num_blocks",
    "kv_cache_tokens",
    "max_concurrency",
    "max_context_tokens",
    "fits",
}


def test_plan_json_hand_checked() -> None:
    code, out, err = run(
        "plan",
        "llama-3.1-8b",
        "--gpu",
        "h100",
        "--max-model-len",
        "8K",
        "--overhead",
        "2GiB",
        "-f",
        "json",
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["schema_version"] == 1
    assert set(doc) >= PLAN_KEYS
    assert doc["kv_cache_memory_bytes"] == 85_029_027_840 * 9 // 10 - 16_060_522_496 - 2 * 2**30
    assert doc["num_blocks"] == 27_808
    assert doc["max_concurrency"] == 54
    assert doc["fits"] is True


def test_plan_table_and_tp_flag() -> None:
    code, out, err = run(
        "plan", "llama-3.1-70b", "--gpu", "h100", "-tp", "4", "--max-model-len", "32K"
    )
    assert code == 0, err
    assert "KV cache pool" in out
    assert "overhead (estimate)" in out
    assert "max concurrency" in out


def test_plan_that_does_not_fit_exits_1() -> None:
    code, out, _ = run(
        "plan", "llama-3.1-405b", "--gpu", "h100", "--max-model-len", "8K", "-f", "json"
    )
    assert code == 1
    doc = json.loads(out)
    assert doc["fits"] is False
    assert "add GPUs" in doc["message"]


def test_plan_smallest_deployment() -> None:
    code, out, _ = run(
        "plan",
        "llama-3.1-70b",
        "--gpu",
        "h100",
        "--max-model-len",
        "32K",
        "--concurrency",
        "64",
        "-f",
        "json",
    )
    assert code == 0
    doc = json.loads(out)
    assert doc["num_gpus"] == (
        doc["tensor_parallel_size"] * doc["pipeline_parallel_size"] * doc["replicas"]
    )
    assert doc["max_concurrency"] * doc["replicas"] >= 64


def test_plan_lengths_file(tmp_path: Path) -> None:
    jsonl = tmp_path / "requests.jsonl"
    jsonl.write_text(
        '{"prompt_tokens": 1000, "output_tokens": 200}\n'
        '{"prompt_tokens": 5000, "output_tokens": 800}\n'
        '{"prompt_tokens": 300, "output_tokens": 100}\n'
    )
    code, out, err = run(
        "plan",
        "llama-3.1-8b",
        "--gpu",
        "a100-80gb",
        "--lengths",
        str(jsonl),
        "--kv-cache-memory",
        "8GiB",
        "-f",
        "json",
    )
    assert code == 0, err
    mix = json.loads(out)["length_mix"]
    assert mix["num_requests"] == 3
    assert mix["expected_concurrency"] == 26  # 3 x 8 GiB / (463 blocks x 2 MiB)
    csv = tmp_path / "requests.csv"
    csv.write_text("prompt_tokens,output_tokens\n1000,200\n5000,800\n300,100\n")
    code, out2, _ = run(
        "plan",
        "llama-3.1-8b",
        "--gpu",
        "a100-80gb",
        "--lengths",
        str(csv),
        "--kv-cache-memory",
        "8GiB",
        "-f",
        "json",
    )
    assert json.loads(out2)["length_mix"] == mix


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["plan", "llama-3.1-8b", "--gpu", "h1000"], "unknown GPU 'h1000'; did you mean"),
        (["plan", "llama-3.1-8b"], "give --gpu NAME"),
        (["plan", "llama-3.1-8b", "--gpu-memory", "24G"], "--gpu-memory: ambiguous"),
        (
            ["plan", "llama-3.1-8b", "--gpu", "h100", "--gpu-memory-utilization", "1.2"],
            "--gpu-memory-utilization: gpu_memory_utilization: must be in (0, 1]",
        ),
        (["plan", "llama-3.1-8b", "--gpu", "h100", "-q", "q3"], "unknown quantization 'q3'"),
        (
            ["plan", "llama-3.1-8b", "--gpu", "h100", "--lengths", "nope.jsonl"],
            "nope.jsonl: cannot read",
        ),
    ],
)
def test_plan_errors_exit_2(args: list[str], message: str) -> None:
    code, out, err = run(*args)
    assert code == 2
    assert message in err
    assert "Traceback" not in out + err


def test_bad_lengths_line(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text('{"prompt_tokens": 10, "output_tokens": 2}\n{"prompt_tokens": -1}\n')
    code, _, err = run("plan", "llama-3.1-8b", "--gpu", "h100", "--lengths", str(path))
    assert code == 2
    assert f"{path}:2: prompt_tokens: must be a whole number >= 0, got -1" in err


def test_gpus() -> None:
    code, out, _ = run("gpus", "-f", "json")
    assert code == 0
    gpus = {g["name"]: g for g in json.loads(out)["gpus"]}
    assert len(gpus) >= 25
    assert gpus["h100-sxm"]["memory_bytes"] == 85_029_027_840
    code, out, _ = run("gpus")
    assert "79.19 GiB" in out


def test_plan_engine_vllm_prints_vllm_figures() -> None:
    code, out, err = run(
        "plan",
        "llama-3.1-8b",
        "-g",
        "h100",
        "-e",
        "vllm",
        "--max-model-len",
        "8192",
        "--kv-cache-memory",
        str(29751 * 2 * 1024 * 1024),
        "--engine-version",
        "0.19",
        "-f",
        "json",
    )
    assert code == 0, err
    doc = json.loads(out)
    # the logged available memory of a vLLM v0.19 run reproduces its printed figures
    assert doc["engine"] == "vllm"
    assert doc["engine_log"]["num_gpu_blocks"] == 29_751
    assert doc["log_lines"][1:] == [
        "GPU KV cache size: 476,016 tokens",
        "Maximum concurrency for 8,192 tokens per request: 58.11x",
    ]
    assert doc["max_concurrency"] == 58


def test_plan_unknown_engine() -> None:
    code, _, err = run("plan", "llama-3.1-8b", "-g", "h100", "-e", "mlc")
    assert code == 2
    assert "unknown engine 'mlc'" in err


def test_calc_engine_llamacpp_log_line() -> None:
    # llama.cpp b5781, Llama 3.1 8B, -c 16384 -ub 1024: 16,384 cells x 32 layers x 1,024 values
    # x 2 B = 1,024 MiB each for K and V (the reference log's line)
    code, out, err = run(
        "calc",
        "llama-3.1-8b",
        "-c",
        "16384",
        "-e",
        "llama.cpp",
        "--engine-version",
        "b5781",
        "-ub",
        "1024",
        "-f",
        "json",
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["kv_cache_bytes"] == 2 * 16384 * 32 * 1024 * 2
    assert doc["log_lines"] == [
        "llama_kv_cache_unified: size = 2048.00 MiB ( 16384 cells,  32 layers,  1 seqs),"
        " K (f16): 1024.00 MiB, V (f16): 1024.00 MiB"
    ]


def test_calc_engine_errors() -> None:
    code, _, err = run("calc", "llama-3.1-8b", "-c", "4", "-e", "vllm")
    assert code == 2
    assert "kvplan plan --engine vllm" in err
    code, _, err = run(
        "calc", "llama-3.1-8b", "-c", "4", "-e", "llama.cpp", "--engine-version", "latest"
    )
    assert code == 2
    assert "--engine-version: a llama.cpp build number" in err


def test_flags_hand_checked() -> None:
    code, out, err = run(
        "flags", "llama-3.1-8b", "-g", "h100", "--max-model-len", "32K", "-n", "12", "-f", "json"
    )
    assert code == 0, err
    engines = {e["engine"]: e for e in json.loads(out)["engines"]}
    # vLLM: 12 requests x 2,048 blocks + its null block, 2 MiB a block across 32 layers
    assert engines["vllm"]["kv_cache_bytes"] == (12 * 2048 + 1) * 16 * 131_072
    assert "--kv-cache-memory=51541704704" in engines["vllm"]["flags"]
    # SGLang: 12 x 32,768 tokens; fraction = (tokens x 131,072 B + weights) / total, to 3 places
    assert "--max-total-tokens=393216" in engines["sglang"]["flags"]
    weights = 8_030_261_248 * 2
    fraction = -(-(393_216 * 131_072 + weights) * 1000 // 85_029_027_840)
    assert f"--mem-fraction-static=0.{fraction}" in engines["sglang"]["flags"]
    assert engines["llama.cpp"]["flags"][:2] == ["-c 393216", "-np 12"]
    assert "--max-batch-total-tokens=393216" in engines["tgi"]["flags"]


def test_plan_engine_sglang_and_calc_engine_transformers() -> None:
    code, out, err = run(
        "plan",
        "qwen3-8b",
        "-g",
        "h100",
        "-e",
        "sglang",
        "--max-model-len",
        "32K",
        "--mem-fraction-static",
        "0.85",
        "-f",
        "json",
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["engine"] == "sglang"
    # 36 layers x 8 heads x (128 + 128) x 2 B = 147,456 B a token on one GPU
    assert doc["max_concurrency"] == doc["kv_cache_tokens"] // 32768
    assert doc["log_lines"][0].startswith(
        f"KV Cache is allocated. #tokens: {doc['kv_cache_tokens']}"
    )
    code, out, err = run(
        "calc", "deepseek-v3", "-c", "1000", "--batch", "2", "-e", "transformers", "-f", "json"
    )
    assert code == 0, err
    # transformers 5.24 caches DeepSeek V3's latent: 61 layers x (512 + 64) values x 2 B
    assert json.loads(out)["kv_cache_bytes"] == 61 * (512 + 64) * 2 * 1000 * 2


def test_plan_engine_trtllm() -> None:
    code, out, err = run(
        "plan", "llama-3.1-8b", "-g", "h100", "-e", "trtllm", "--max-model-len", "32K", "-f", "json"
    )
    assert code == 0, err
    doc = json.loads(out)
    # (total - weights) x 0.9 // 131,072 B a token, in 32-token blocks
    available = (85_029_027_840 - 8_030_261_248 * 2) * 9 // 10
    assert doc["kv_cache_tokens"] == available // 131_072 // 32 * 32
    assert doc["max_concurrency"] == doc["kv_cache_tokens"] // 32768


# --- CLI habits -------------------------------------------------------------------------------


def test_short_help_and_version() -> None:
    code, out, _ = run("-h")
    assert code == 0
    assert "Usage: kvplan" in out
    code, out, _ = run("plan", "-h")
    assert code == 0
    assert "-c, --max-model-len" in out
    assert "Exit codes: 0 the target fits; 1 it does not" in " ".join(out.split())
    code, out, _ = run("--version")
    assert code == 0
    assert out.strip() == f"kvplan {kvplan.__version__}"


def test_plan_c_is_max_model_len() -> None:
    code, out, err = run("plan", "llama-3.1-8b", "-g", "h100", "-c", "32K", "-f", "json")
    assert code == 0, err
    assert json.loads(out)["max_model_len"] == 32_768


def test_completion_of_models_and_gpus() -> None:
    from kvplan.cli import complete_gpu, complete_model

    assert complete_model("llama-3.1-") == [
        "llama-3.1-405b", "llama-3.1-70b", "llama-3.1-8b-stheno-v3.4", "llama-3.1-8b"
    ]  # fmt: skip (the shell sorts them; kvplan lists them as the catalog does)
    assert "h100-sxm" in complete_gpu("h1")
    assert all(n.lower().startswith("rtx-4") for n in complete_gpu("rtx-4"))
    result = runner.invoke(
        app,
        [],
        env={
            "_KVPLAN_COMPLETE": "complete_bash",
            "COMP_WORDS": "kvplan calc qwen3-0",
            "COMP_CWORD": "2",
        },
        prog_name="kvplan",
    )
    assert result.stdout.split() == ["qwen3-0.6b"]


def test_progress_line_only_on_a_terminal_and_not_quiet() -> None:
    import io

    from kvplan import progress as progress_module

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty = Tty()
    with progress_module.progress("slow work", delay_s=0.0, stream=tty):
        import time

        time.sleep(0.05)
    assert tty.getvalue().startswith("kvplan: slow work ...\nkvplan: slow work: done in ")
    piped = io.StringIO()
    with progress_module.progress("slow work", delay_s=0.0, stream=piped):
        time.sleep(0.05)
    assert piped.getvalue() == ""
    quiet = Tty()
    progress_module.set_quiet(True)
    try:
        with progress_module.progress("slow work", delay_s=0.0, stream=quiet):
            time.sleep(0.05)
    finally:
        progress_module.set_quiet(False)
    assert quiet.getvalue() == ""


def test_cli_modules_keep_real_annotations() -> None:
    """typer evaluates string annotations several times per command on every start (about
    20 ms): the CLI modules keep real annotation objects (bench/startup.py measures it)."""
    import __future__

    import importlib
    import pkgutil

    import kvplan.cli

    names = [m.name for m in pkgutil.iter_modules(kvplan.cli.__path__, "kvplan.cli.")]
    assert "kvplan.cli.common" in names
    for module in [kvplan.cli, *(importlib.import_module(name) for name in names)]:
        assert vars(module).get("annotations") is not __future__.annotations, module.__name__


# --- kvplan models: filters and order ----------------------------------------------------------


def _models(*args: str) -> dict[str, object]:
    code, out, err = run("models", *args, "-f", "json")
    assert code == 0, err
    return json.loads(out)  # type: ignore[no-any-return]


def _names(doc: dict[str, object]) -> list[str]:
    return [m["name"] for m in doc["models"]]  # type: ignore[attr-defined, index]


def test_models_text_filter_and_kv_sort() -> None:
    # the five Gemma 2 specs; KV/token 2 x layers x 4 K/V heads x 256 x 2 B (bf16):
    # 2B and its Japanese release, 26 layers = 106,496; 9B and its SimPO tune, 42 layers (8 K/V
    # heads) = 344,064; 27B 46 layers (16 K/V heads, head_dim 128) = 376,832
    doc = _models("gemma-2-", "--sort", "kv")
    nine = ["gemma-2-9b", "gemma-2-9b-it-simpo"]
    assert _names(doc) == ["gemma-2-2b", "gemma-2-2b-jpn", *nine, "gemma-2-27b"]
    per_token = [m["bytes_per_token"] for m in doc["models"]]  # type: ignore[attr-defined]
    small, mid = 2 * 26 * 4 * 256 * 2, 2 * 42 * 8 * 256 * 2
    assert per_token == [small, small, mid, mid, 2 * 46 * 16 * 128 * 2]
    assert doc["query"] == {
        "text": "gemma-2-",
        "kind": None,
        "family": None,
        "sort": "kv",
        "reverse": False,
    }
    assert _names(_models("GEMMA-2-", "--sort", "kv", "--reverse")) == [
        "gemma-2-27b",
        "gemma-2-9b-it-simpo",
        "gemma-2-9b",
        "gemma-2-2b-jpn",
        "gemma-2-2b",
    ]


def test_models_text_matches_hf_ids_and_aliases() -> None:
    # google/gemma-3-1b-pt is an alias of gemma-3-1b only; the owner prefix of an hf_id
    assert _names(_models("gemma-3-1b-pt")) == ["gemma-3-1b"]
    assert set(_names(_models("deepseek-ai/"))) >= {"deepseek-v2", "deepseek-v3", "deepseek-r1"}


def test_models_kind_filter_counts_the_spec_files() -> None:
    # --kind mla keeps exactly the specs stating an MLA latent (kv_lora_rank), counted from the
    # files; --kind mamba exactly the hybrids listing mamba layers, or a Mamba state size
    from kvplan.catalog.lookup import specs_dir

    texts = {p.stem: p.read_text(encoding="utf-8") for p in specs_dir().glob("*.yaml")}
    mla = {n for n, t in texts.items() if "\nkv_lora_rank:" in t}
    assert set(_names(_models("--kind", "mla"))) == mla
    assert {"deepseek-v3", "kimi-k2"} <= mla
    mamba = set(_names(_models("--kind", "mamba")))
    assert {"jamba-v0.1", "nemotron-h-8b", "granite-4.0-h-small"} <= mamba
    assert not mamba & mla
    assert set(_names(_models("--kind", "chunked"))) >= {"llama-4-scout", "llama-4-maverick"}
    assert "qwen3-8b" not in _names(_models("--kind", "sliding"))


def test_models_family_filter() -> None:
    # the importer family of model_type: gpt_oss holds exactly the two gpt-oss specs;
    # a model_type works too, any case
    assert _names(_models("--family", "gpt_oss")) == ["gpt-oss-120b", "gpt-oss-20b"]
    assert _names(_models("--family", "GEMMA2")) == [
        "gemma-2-27b",
        "gemma-2-2b",
        "gemma-2-2b-jpn",
        "gemma-2-9b",
        "gemma-2-9b-it-simpo",
    ]
    doc = _models("--family", "gemma")
    assert {m["family"] for m in doc["models"]} == {"gemma"}  # type: ignore[attr-defined]
    assert "gemma-3-27b" in _names(doc)


def test_models_params_sort_and_filters_combine() -> None:
    # gemma-3 and sliding: the five Gemma 3 specs, smallest first (270M < 1B < 4B < 12B < 27B)
    names = _names(_models("gemma-3-", "--kind", "sliding", "--sort", "params"))
    assert names == ["gemma-3-270m", "gemma-3-1b", "gemma-3-4b", "gemma-3-12b", "gemma-3-27b"]
    assert _names(_models("gemma-3-", "--kind", "mla")) == []


def test_models_unknown_family_lists_the_families() -> None:
    code, out, _ = run("models", "--family", "no-such-family")
    assert code == 0
    assert "0 of " in out
    assert "families: " in out
    assert "gemma" in out
    doc = _models()
    assert doc["num_bundled_models"] == len(doc["models"])  # type: ignore[arg-type]


def test_models_bad_kind_or_sort_is_a_usage_error() -> None:
    code, _, err = run("models", "--kind", "dense")
    assert code == 2
    assert "mla" in err
    code, _, err = run("models", "--sort", "size")
    assert code == 2
    assert "params" in err
