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
from kvplan.engines.ggml_alloc import Graph, graph_peak_bytes
from kvplan.engines.llamacpp_budget import (
    buffer_mib,
    check_cache_types,
    compute_bytes_cpu,
    kv_buffers,
    model_buffers,
    moe_from_gguf,
    output_bytes,
)
from kvplan.engines.llamacpp_compute import MoE, _rotations, cpu_graph_bytes
from kvplan.errors import UnitError
from kvplan.importers.gguf import import_gguf
from kvplan.importers.gguf_format import read_gguf_header
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
    ran = [r for r in CASES if not r["result"].get("crashed")]
    # the kept recording ran every case; a live run may lose some to a host's llama.cpp
    # aborting (a GGML_ASSERT), but not most of them
    if LIVE:
        assert 2 * len(ran) > len(CASES)
    else:
        assert len(ran) == len(CASES)


def _ran(result: dict[str, Any]) -> None:
    """Skip a case llama.cpp aborted on in a live run, with its assertion."""
    if result.get("crashed"):
        pytest.skip(f"llama.cpp aborted on this host: {result['crashed']}")


@pytest.mark.parametrize("record", CASES, ids=[r["case"]["name"] for r in CASES])
def test_every_buffer_matches(record: dict[str, Any], files: Path) -> None:
    case, result = record["case"], record["result"]
    _ran(result)
    imported = _imported(case, files)
    mla = case["arch"] == "deepseek2"
    types = (case["type_k"], case["type_v"])
    if result["refused"]:
        with pytest.raises(UnitError, match=r"flash attention|different K and V"):
            check_cache_types(*types, flash_attn=case["flash_attn"], mla=mla)
        return
    check_cache_types(*types, flash_attn=case["flash_attn"], mla=mla)
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
    logits = output_bytes(ORACLE.VOCAB, case["n_seq_max"])
    assert [("CPU", buffer_mib(logits))] == _printed(result, "output")
    if LIVE and any(device == "AMX" for device, _ in _printed(result, "model")):
        # a CPU with AMX: llama.cpp moves quantized matmul weights into its AMX buffer type,
        # which kvplan does not model (it models CPU_REPACK); the cache and output buffers
        # above still had to match
        pytest.skip("this host's llama.cpp put weights in its AMX buffer type, not modelled")
    models = model_buffers(imported.weights.tensors, use_mmap=case["use_mmap"])
    assert sorted((b.device, buffer_mib(b.bytes)) for b in models) == _printed(result, "model")


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


def test_mla_refuses_mixed_cache_types() -> None:
    # llama_init_from_model: an MLA model's V is a view of its K cache
    with pytest.raises(UnitError, match="different K and V"):
        check_cache_types("q8_0", "f16", flash_attn=True, mla=True)
    check_cache_types("q8_0", "q8_0", flash_attn=True, mla=True)
    check_cache_types("q8_0", "f16", flash_attn=True)  # without MLA a mixed cache runs


def test_rotations_by_hand() -> None:
    # attn_rot_k: the largest power of two from 64 dividing the head size; attn_rot_v: 64
    assert _rotations(("q8_0", "q8_0"), 128, 128) == (128, 64)
    assert _rotations(("q4_0", "f16"), 192, 192) == (64, 0)
    assert _rotations(("f16", "q8_0"), 256, 256) == (0, 64)
    assert _rotations(("q8_0", "q8_0"), 32, 32) == (0, 0)  # not a multiple of 64
    assert _rotations(("f32", "bf16"), 128, 128) == (0, 0)


@pytest.mark.skipif(bool(LIVE), reason="a live --quick recording has other cases")
def test_rotation_inputs_by_hand() -> None:
    # head size 64, q8_0 K and V: two 64 x 64 f32 matrices (16,384 B each) are inputs, never
    # freed; the rotated Q, K, V and output reuse freed blocks, so the buffer grows by them
    by_name = {
        r["case"]["name"]: r["result"]["compute_bytes"]["CPU"]
        for r in CASES
        if r["result"]["compute_bytes"]
    }
    assert by_name["llama-h8-kv4-d64-q8kv"] - by_name["llama-h8-kv4-d64"] == 2 * 64 * 64 * 4


def _moe(case: dict[str, Any], folder: Path) -> MoE | None:
    # what the case's GGUF file declares (deepseek2's files here: expert_count 0, all dense)
    _imported(case, folder)
    header = read_gguf_header(folder / f"{case['name']}.gguf")
    return moe_from_gguf(header.metadata, [t.name for t in header.tensors])


def test_moe_is_read_from_the_file(files: Path) -> None:
    case = next(r["case"] for r in CASES if r["case"]["name"] == "qwen3moe-ffexp128-used4")
    assert _moe(case, files) == MoE(8, 4, 128)
    case = next(r["case"] for r in CASES if r["case"]["arch"] == "deepseek2")
    assert _moe(case, files) == MoE(0, 0, 0)
    if LIVE:
        return
    case = next(r["case"] for r in CASES if r["case"]["name"] == "deepseek2-moe-v3")
    v3 = MoE(8, 2, 64, 1, 1, sigmoid=True, selection_bias=True, weights_scale=2.5, groups=(4, 2))
    assert _moe(case, files) == v3
    case = next(r["case"] for r in CASES if r["case"]["name"] == "deepseek2-moe-v2lite")
    assert _moe(case, files) == MoE(8, 4, 32, 2, 1, norm_weights=False, weights_scale=1.0)
    case = next(r["case"] for r in CASES if r["case"]["arch"] == "llama")
    assert _moe(case, files) is None


@pytest.mark.parametrize("record", CASES, ids=[r["case"]["name"] for r in CASES])
def test_compute_buffer_exact(record: dict[str, Any], files: Path) -> None:
    # The buffer's exact size as llama.cpp allocated it (ggml_backend_buffer_get_size), and the
    # size printed when the context is freed, 4 decimals (2.1387 MiB).
    case, result = record["case"], record["result"]
    _ran(result)
    if result["refused"]:
        return
    imported = _imported(case, files)
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
        moe=_moe(case, files),
    )
    assert f"{ours / MiB:.4f}" == result["compute_freed_mib"]["CPU"]
    assert [("CPU", buffer_mib(ours))] == _printed(result, "compute")
    if "compute_bytes" in result:
        assert ours == result["compute_bytes"]["CPU"]


def _graph_bytes(spec: Any, moe: MoE | None = None) -> int | None:
    # 1,024 cells, -ub 512, flash attention
    return cpu_graph_bytes(
        spec, cells={"full": 1024}, streams=1, n_tokens=512, flash_attn=True, moe=moe
    )


def test_graphs_not_modelled_fall_back_to_the_fit(files: Path) -> None:
    # an MoE without its experts' shapes: the fitted rule, 1,024 x 512 x 2 (f16 mask) +
    # 28 x 512 + 512 x (320 + 4 x 64) x 4 = 1,048,576 + 14,336 + 1,179,648 = 2,242,560 B
    record = next(r for r in CASES if r["case"]["arch"] == "qwen3moe")
    spec = _imported(record["case"], files).spec
    assert _graph_bytes(spec) is None
    assert compute_bytes_cpu(spec, n_ctx=1024, n_ubatch=512) == 2_242_560
    # a llama file declaring experts (Mixtral's layout): its MoE graph is not built here
    record = next(r for r in CASES if r["case"]["arch"] == "llama")
    spec = _imported(record["case"], files).spec
    assert _graph_bytes(spec) == 2_242_560  # dense: llama-f16's recorded buffer
    assert _graph_bytes(spec, MoE(8, 2, 64)) is None


@pytest.mark.skipif(bool(LIVE), reason="a live --quick recording has other cases")
def test_compute_buffer_by_hand() -> None:
    # llama-f16: 1,024 cells x 512 tokens x 2 (f16 mask) + 28 x 512 + 512 x (320 + 4 x 64) x 4
    # = 1,048,576 + 14,336 + 1,179,648 = 2,242,560 B = 2.1387 MiB, as printed
    case = next(r for r in CASES if r["case"]["name"] == "llama-f16")
    assert case["result"]["compute_freed_mib"]["CPU"] == "2.1387"
    assert f"{2_242_560 / MiB:.4f}" == "2.1387"
    assert case["result"]["compute_bytes"]["CPU"] == 2_242_560


@pytest.mark.skipif(bool(LIVE), reason="a live --quick recording has other cases")
def test_moe_compute_buffer_by_hand(files: Path) -> None:
    # qwen3moe-f16 (8 experts, 2 used, width 64, n_embd 64, -ub 512, 1,024 cells, fa): the
    # inputs first, 4 B tokens + 256 B inp_embd + 4 B positions + 8 + 8 B KV indices + 2,048 B
    # f16 mask + 4 B output ids a token = 2,332 x 512 = 1,193,984 B; at the peak (the first
    # layer's SwiGLU) four 128 KiB hidden-state slots (the FFN input norm, the router's slot,
    # the freed attention slot, the residual) then the experts' gate, up and SwiGLU, each
    # 2 used x 64 x 512 x 4 = 262,144 B: 1,193,984 + 4 x 131,072 + 3 x 262,144 = 2,504,704 B.
    record = next(r for r in CASES if r["case"]["name"] == "qwen3moe-f16")
    assert record["result"]["compute_bytes"]["CPU"] == 2_504_704
    spec = _imported(record["case"], files).spec
    moe = MoE(8, 2, 64)
    cells = {"full": 1024}
    assert (
        cpu_graph_bytes(spec, cells=cells, streams=1, n_tokens=512, flash_attn=True, moe=moe)
        == 2_504_704
    )
    # four used experts double the three expert tensors: + 3 x 262,144 = 3,291,136 B (e8-u4)
    moe4 = MoE(8, 4, 64)
    assert (
        cpu_graph_bytes(spec, cells=cells, streams=1, n_tokens=512, flash_attn=True, moe=moe4)
        == 3_291_136
    )


def test_allocator_by_hand() -> None:
    # ggml-alloc's rules on a four-tensor graph (f32, 32-byte blocks): the 64 B input first at
    # 0; a 16-value product at 64 frees the input (its only reader); an add takes the product's
    # place (in place, its last reader); a 32-value product (128 B) fits no freed block (64 B
    # at 0) and grows the buffer from 128: 256 B. An 8-value product (32 B) instead takes the
    # freed block at 0 and the buffer stays 128 B.
    for width, peak in ((32, 256), (8, 128)):
        g = Graph()
        x = g.leaf(64)
        a = g.op("mul_mat", (16,), x)
        b = g.op("add", (16,), a)
        g.op("mul_mat", (width,), b, output=True)
        assert graph_peak_bytes(g) == peak
