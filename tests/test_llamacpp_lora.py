"""llama-server's --lora adapters in plan --engine llama.cpp: each adapter tensor on its
weight's device, checked against the real llama.cpp (tests/data/llamacpp_lora_0c1e570.json,
recorded by scripts/llamacpp_lora_oracle.py) and by hand for a GPU plan."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import pytest
from typer.testing import CliRunner

import kvplan
from kvplan.cli import app
from kvplan.engines.llamacpp_lora import alloc_bytes, lora_bytes, read_lora
from kvplan.engines.llamacpp_plan import LlamaCppAsk, budget
from kvplan.errors import SpecError

ROOT = Path(__file__).resolve().parent.parent
RECORDING = json.loads((ROOT / "tests" / "data" / "llamacpp_lora_0c1e570.json").read_text())
runner = CliRunner()


def _script(name: str = "llamacpp_lora_oracle") -> ModuleType:
    """A recording script of scripts/, loaded as a module (its writers build the files)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def adapters(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Each recorded case's adapter file, rebuilt by the recording's own writer."""
    script = _script()
    folder = tmp_path_factory.mktemp("lora")
    out = {}
    for case in script.CASES:
        path = folder / f"{case['name']}.gguf"
        script.write_adapter(case, path)
        out[case["name"]] = str(path)
    return out


@pytest.mark.parametrize("case", RECORDING["cases"], ids=lambda c: c["name"])
def test_the_cpu_lora_buffer_is_what_llama_cpp_printed(
    case: dict[str, object], adapters: dict[str, str]
) -> None:
    tensors = read_lora(adapters[str(case["name"])], n_layer=4)
    assert len(tensors) == len(case["tensors"])  # type: ignore[arg-type]
    # every layer on the host, as the CPU build runs them: one buffer
    (total,) = lora_bytes(tensors, [None] * 5, "cpu").values()
    (printed,) = case["buffers"]  # type: ignore[misc]
    assert printed["device"] == "CPU_Mapped"
    # llama.cpp prints size / 1024 / 1024 with %.2f
    assert f"{total / 2**20:.2f}" == printed["mib"]


def test_the_recorded_sizes_by_hand(adapters: dict[str, str]) -> None:
    # lora-attn-r64-f32: 4 layers x (attn_q: 64 x 64 + 64 x 128; attn_v: 64 x 64 + 64 x 64)
    # f32 values = 4 x 20,480 x 4 B = 327,680 B = 0.3125 MiB, printed 0.31
    tensors = read_lora(adapters["lora-attn-r64-f32"], n_layer=4)
    assert sum(t.num_bytes for t in tensors) == 4 * (64 * 64 + 64 * 128 + 64 * 64 + 64 * 64) * 4
    assert sum(lora_bytes(tensors, [None] * 5, "cpu").values()) == 327_680


def test_on_gpus_each_pair_follows_its_layer(adapters: dict[str, str]) -> None:
    """Layers 0-1 on GPU 0, 2-3 and the output on GPU 1: lora-embd-out-r32-f32 puts layer 0's
    attn_output pair (128 x 32 + 32 x 64 f32 = 24,576 B, a multiple of CUDA's 128 B) on GPU 0,
    the output pair (64 x 32 + 32 x 320 = 12,288 values, 49,152 B) on GPU 1 and the token
    embeddings' (32 x 320 + 32 x 64 = 12,288 values, 49,152 B) on the host."""
    tensors = read_lora(adapters["lora-embd-out-r32-f32"], n_layer=4)
    placed = lora_bytes(tensors, [0, 0, 1, 1, 1], "cuda")
    assert placed == {0: 24_576, 1: 49_152, None: 49_152}


def test_cuda_pads_each_tensor_to_128_bytes_and_quantized_rows_to_512_values() -> None:
    from kvplan.engines.llamacpp_lora import LoraTensor

    f32 = LoraTensor("blk.0.attn_q.weight", 0, "F32", (10, 3), 120)
    assert (alloc_bytes(f32, "cuda"), alloc_bytes(f32, "cpu")) == (128, 128)
    # q8_0, a row of 64 values (2 blocks of 34 B) x 16 rows = 1,088 B; CUDA pads each row by
    # 448 values = 14 blocks: 1,088 + 14 x 34 = 1,564 B, to 1,664 with the 128 B alignment
    q8 = LoraTensor("blk.0.attn_q.weight", 0, "Q8_0", (64, 16), 1_088)
    assert alloc_bytes(q8, "cuda") == 1_664
    assert alloc_bytes(q8, "cpu") == 1_088


def test_plan_adds_each_adapter_to_its_devices(adapters: dict[str, str]) -> None:
    spec = kvplan.load_model("llama-3.1-8b")
    gpu = kvplan.find_gpu("rtx-4090")
    ask = LlamaCppAsk(model="llama-3.1-8b", n_ctx=8192, n_gpu_layers=33)
    # the tiny adapter's layer indices exist in a 32-layer model too
    path = adapters["lora-all-r128-f16"]
    both = budget(spec, gpu, replace(ask, loras=(path,)))
    alone = budget(spec, gpu, ask)
    expected = sum(lora_bytes(read_lora(path, 32), both.layout.placement, "cuda").values())
    assert both.layout.gpus[0].lora_bytes == expected
    assert both.layout.gpus[0].total_bytes == alone.layout.gpus[0].total_bytes + expected
    assert both.command.endswith(f"--lora {path} --fit off")
    doc = json.loads(
        runner.invoke(
            app,
            ["plan", "llama-3.1-8b", "--gpu", "rtx-4090", "-e", "llama.cpp", "-c", "8K",
             "-ngl", "33", "--lora", path, "-f", "json"],
        ).stdout
    )  # fmt: skip
    assert doc["devices"][0]["lora_bytes"] == expected
    assert doc["settings"]["loras"] == [path]


def test_a_file_that_is_no_adapter_is_refused(tmp_path: Path, adapters: dict[str, str]) -> None:
    model = tmp_path / "model.gguf"
    writer = _script("llamacpp_oracle")
    writer.write_gguf(writer.CASES[0], model)
    with pytest.raises(SpecError, match="not a LoRA adapter"):
        read_lora(str(model), 4)
    # an adapter of a deeper model than the one planned: layer 3 of a 2-layer model
    with pytest.raises(SpecError, match="adapts no weight of a 2-layer model"):
        read_lora(adapters["lora-attn-r64-f32"], 2)
    result = runner.invoke(
        app,
        ["plan", "llama-3.1-8b", "--gpu", "rtx-4090", "-e", "llama.cpp", "-c", "8K",
         "--lora", str(model)],
    )  # fmt: skip
    assert result.exit_code == 2
    assert "not a LoRA adapter" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
