"""kvplan against the real llama.cpp: every buffer of every recorded case.

The recording (``tests/data/llamacpp_oracle_<commit>.json``) was made by
``scripts/llamacpp_oracle.py`` with llama-cpp-python 0.3.36 (llama.cpp commit 0c1e570) on an
x86 CPU with AVX2: each case's tiny GGUF file is rebuilt here by the same writer (the header
is all kvplan reads), imported, and every size llama.cpp printed (MiB with two decimals) is
compared with kvplan's exact bytes printed the same way: model, KV and output buffers and the
padded n_ctx exactly; the compute buffer (printed again with four decimals when the context is
freed) within the error ``compute_bytes_cpu`` states.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import pytest

from kvplan.engines import llamacpp
from kvplan.engines.llamacpp_budget import (
    buffer_mib,
    check_cache_types,
    compute_bytes_cpu,
    kv_buffers,
    model_buffers,
    output_bytes,
)
from kvplan.errors import UnitError
from kvplan.importers.gguf import import_gguf
from kvplan.units import MiB

ROOT = Path(__file__).resolve().parent.parent
#: a live recording to check instead of the kept one (.ci/run's llama.cpp step sets it)
LIVE = os.environ.get("KVPLAN_LLAMACPP_ORACLE")
RECORDINGS = (
    [Path(LIVE)] if LIVE else sorted((ROOT / "tests" / "data").glob("llamacpp_oracle_*.json"))
)
if not RECORDINGS:
    pytest.skip("no llama.cpp recording in tests/data yet", allow_module_level=True)
RECORDING = json.loads(RECORDINGS[-1].read_text())
CASES = RECORDING["cases"]


def _writer() -> Any:
    spec = importlib.util.spec_from_file_location("oracle", ROOT / "scripts" / "llamacpp_oracle.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ORACLE = _writer()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gguf")


def _imported(case: dict[str, Any], folder: Path) -> Any:
    path = folder / f"{case['name']}.gguf"
    if not path.exists():
        ORACLE.write_gguf(case, path)
    return import_gguf(path)


def _printed(result: dict[str, Any], kind: str) -> list[tuple[str, str]]:
    return sorted((b["device"], b["mib"]) for b in result["buffers"] if b["kind"] == kind)


def test_recording_names_its_build() -> None:
    assert RECORDING["llama_cpp_commit"] == "0c1e570"
    assert RECORDING["llama_cpp_python"] == "0.3.36"
    assert len(CASES) >= (4 if LIVE else 20)


@pytest.mark.parametrize("record", CASES, ids=[r["case"]["name"] for r in CASES])
def test_every_buffer_matches(record: dict[str, Any], files: Path) -> None:
    case, result = record["case"], record["result"]
    imported = _imported(case, files)
    if result["refused"]:
        with pytest.raises(UnitError, match="flash attention"):
            check_cache_types(case["type_k"], case["type_v"], flash_attn=case["flash_attn"])
        return
    check_cache_types(case["type_k"], case["type_v"], flash_attn=case["flash_attn"])
    kv = llamacpp.kv_cache(
        imported.spec,
        n_ctx=case["n_ctx"],
        n_seq_max=case["n_seq_max"],
        n_ubatch=case["n_ubatch"],
        cache_type_k=case["type_k"],
        cache_type_v=case["type_v"],
        swa_full=case["swa_full"],
        flash_attn=case["flash_attn"],
        kv_unified=case["kv_unified"],
    )
    ours_kv = sorted((b.device, buffer_mib(b.bytes)) for b in kv_buffers(kv))
    assert ours_kv == _printed(result, "kv")
    models = model_buffers(imported.weights.tensors, use_mmap=case["use_mmap"])
    assert sorted((b.device, buffer_mib(b.bytes)) for b in models) == _printed(result, "model")
    logits = output_bytes(ORACLE.VOCAB, case["n_seq_max"])
    assert [("CPU", buffer_mib(logits))] == _printed(result, "output")


@pytest.mark.skipif(bool(LIVE), reason="a live --quick recording has other cases")
def test_padded_context_is_printed() -> None:
    # n_ctx 1000 -> PAD(1000, 256) = 1024; 3000 -> 3072; 3 sequences x PAD(1000 // 3, 256) =
    # 3 x 512 = 1536.
    by_name = {r["case"]["name"]: r["result"]["n_ctx"] for r in CASES}
    assert by_name["llama-ctx1000"] == 1024
    assert by_name["llama-ctx3000-ub256"] == 3072
    assert by_name["llama-np3-ctx1000"] == 1536


def test_output_buffer_by_hand() -> None:
    # 320 tokens x 4 sequences x 4 bytes = 5,120 B, printed 0.00 MiB; 151,936 x 4 = 607,744 B.
    assert output_bytes(320, 4) == 5_120
    assert output_bytes(151_936) == 607_744
    assert buffer_mib(output_bytes(128_256)) == "0.49"  # 513,024 B / 1,048,576


def test_quantized_v_without_flash_attention_is_refused() -> None:
    with pytest.raises(UnitError, match="flash attention"):
        check_cache_types("f16", "q8_0", flash_attn=False)
    check_cache_types("q8_0", "f16", flash_attn=False)  # a quantized K alone is allowed


@pytest.mark.parametrize("record", CASES, ids=[r["case"]["name"] for r in CASES])
def test_compute_buffer_within_stated_error(record: dict[str, Any], files: Path) -> None:
    # The size printed when the context is freed has 4 decimals (2.1387 MiB): +-0.00005 MiB.
    case, result = record["case"], record["result"]
    if result["refused"]:
        return
    imported = _imported(case, files)
    printed = float(result["compute_freed_mib"]["CPU"]) * MiB
    kv = llamacpp.kv_cache(
        imported.spec,
        n_ctx=case["n_ctx"],
        n_seq_max=case["n_seq_max"],
        n_ubatch=case["n_ubatch"],
        cache_type_k=case["type_k"],
        cache_type_v=case["type_v"],
        swa_full=case["swa_full"],
        flash_attn=case["flash_attn"],
        kv_unified=case["kv_unified"],
    )
    ours = compute_bytes_cpu(
        imported.spec,
        n_ctx=result["n_ctx"],
        n_ubatch=case["n_ubatch"],
        n_seq_max=case["n_seq_max"],
        flash_attn=case["flash_attn"],
        kv=kv,
    )
    if case["arch"] == "qwen3moe" and case["flash_attn"]:
        # routed experts' graph not modelled: the rule's error on these cases is stated in
        # compute_bytes_cpu (-53.9 % with 4 of 8 experts of width 128, +13.2 % at -ub 128)
        assert -0.54 * printed <= ours - printed <= 0.14 * printed
        return
    assert abs(ours - printed) <= 0.04 * printed + 64
    if case["arch"] in ("llama", "qwen3") and case["flash_attn"] and case["n_seq_max"] != 3:
        assert abs(ours - printed) <= 0.00005 * MiB  # exact to the printed digits


@pytest.mark.skipif(bool(LIVE), reason="a live --quick recording has other cases")
def test_compute_buffer_by_hand() -> None:
    # llama-f16: 1,024 cells x 512 tokens x 2 (f16 mask) + 28 x 512 + 512 x (320 + 4 x 64) x 4
    # = 1,048,576 + 14,336 + 1,179,648 = 2,242,560 B = 2.1387 MiB, as printed
    case = next(r for r in CASES if r["case"]["name"] == "llama-f16")
    assert case["result"]["compute_freed_mib"]["CPU"] == "2.1387"
    assert f"{2_242_560 / MiB:.4f}" == "2.1387"
