"""``plan --engine llama.cpp``: layer placement, buffers per device, the solver, the CLI.

Every figure is derived by hand in the test's comment or id, from llama.cpp's rules as the
module docstrings of ``kvplan.engines.llamacpp_layout`` and ``llamacpp_compute`` state them.
"""

from __future__ import annotations

import json
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.catalog.lookup import load_model
from kvplan.cli import app
from kvplan.engines.llamacpp_compute import gpu_compute_bytes, host_compute_bytes
from kvplan.engines.llamacpp_layout import layer_devices
from kvplan.engines.llamacpp_plan import LlamaCppAsk, budget, plan
from kvplan.errors import UnitError
from kvplan.hardware.gpus import custom_gpu
from kvplan.hardware.lookup import find_gpu
from kvplan.model.spec import ModelSpec
from kvplan.units import GiB, MiB

ONE = (Fraction(1),)
TWO = (Fraction(1), Fraction(1))
runner = CliRunner()


@pytest.mark.parametrize(
    ("ngl", "split", "expected"),
    [
        # 32 layers, -ngl 33 -ts 1,1: il/33 < 1/2 for il <= 16 -> 17 layers on 0, 15 + output on 1
        (33, TWO, [0] * 17 + [1] * 16),
        # -ngl 20 -ts 3,1: i_gpu_start 12; (il-12)/20 < 3/4 for il <= 26 -> 15 on 0, 5 on 1
        (20, (Fraction(3), Fraction(1)), [None] * 12 + [0] * 15 + [1] * 5 + [None]),
        # -ngl 32: every repeating layer, the output layer (il 32: 32 - 0 >= 32) on the host
        (32, ONE, [0] * 32 + [None]),
        (0, ONE, [None] * 33),
        (99, ONE, [0] * 33),  # more than n_layer + 1: all of them
    ],
)
def test_layer_devices(ngl: int, split: tuple[Fraction, ...], expected: list[int | None]) -> None:
    assert layer_devices(32, ngl, split) == expected


def test_row_split_keeps_layers_on_the_main_gpu() -> None:
    assert layer_devices(4, 5, TWO, "row") == [0] * 5


def test_compute_by_hand() -> None:
    # Llama 3 8B, -c 512 -ub 512 -fa off, all on CUDA0: logits 512 x (128,256 + 4,096) x 4 =
    # 271,056,896 B = 258.50 MiB as its log printed; the attention 512 x 512 x 33 x 4 and the
    # MLP 512 x (3 x 14,336 + 8,192) x 4 = 104,857,600 are smaller.
    spec = load_model("llama-3.1-8b")
    gpu = gpu_compute_bytes(spec, cells=512, n_ubatch=512, flash_attn=False, holds_output=True)
    assert gpu == 271_056_896
    assert f"{gpu / MiB:.2f}" == "258.50"
    # the host side: 512 x 4,096 x 4 + 512 x 512 x 4 = 9 MiB (printed 9.01 MiB)
    assert host_compute_bytes(spec, cells=512, n_ubatch=512, flash_attn=False) == 9 * MiB
    # -c 8192 (printed 560.00 and 24.01 MiB): 512 x 8,192 x 33 x 4 + 4 x 512 x 4,096 x 4 =
    # 553,648,128 + 33,554,432 = 587,202,560 B = 560 MiB; host 8 MiB + 8,192 x 512 x 4 = 24 MiB
    long = gpu_compute_bytes(spec, cells=8192, n_ubatch=512, flash_attn=False, holds_output=True)
    assert long == 587_202_560 == 560 * MiB
    assert host_compute_bytes(spec, cells=8192, n_ubatch=512, flash_attn=False) == 24 * MiB
    # a GPU without the output layer: the MLP term, 104,857,600 B
    mlp = gpu_compute_bytes(spec, cells=512, n_ubatch=512, flash_attn=True, holds_output=False)
    assert mlp == 104_857_600


def test_budget_full_offload_by_hand() -> None:
    # Llama 3.1 8B, -c 8192 -ngl 33: KV 8,192 cells x 32 layers x 2 x 8 x 128 x 2 B = 1 GiB on
    # CUDA0; the logits 128,256 x 1 x 4 = 513,024 B in CUDA0_Host.
    spec = load_model("llama-3.1-8b")
    p = budget(spec, find_gpu("h100"), LlamaCppAsk(n_ctx=8192, n_gpu_layers=33))
    cuda0, host = p.layout.devices
    assert (cuda0.name, cuda0.num_layers, cuda0.kv_bytes) == ("CUDA0", 32, 1 * GiB)
    assert host.kv_bytes == 0
    assert ("CUDA0_Host", "output", 513_024) in [(b.device, b.kind, b.bytes) for b in p.buffers]
    assert p.n_ctx == 8192
    assert p.fits


def test_partial_offload_splits_kv_by_layer() -> None:
    # -ngl 24: layers 8-31 on CUDA0; each layer's KV at 8,192 cells is 32 MiB, so 24 x 32 MiB
    # = 768 MiB on the GPU and 8 x 32 = 256 MiB on the host.
    spec = load_model("llama-3.1-8b")
    p = budget(spec, find_gpu("h100"), LlamaCppAsk(n_ctx=8192, n_gpu_layers=24))
    cuda0, host = p.layout.devices
    assert (cuda0.kv_bytes, host.kv_bytes) == (768 * MiB, 256 * MiB)
    assert (cuda0.num_layers, host.num_layers) == (24, 8)
    off = budget(
        spec, find_gpu("h100"), LlamaCppAsk(n_ctx=8192, n_gpu_layers=33, no_kv_offload=True)
    )
    assert (off.layout.devices[0].kv_bytes, off.layout.devices[1].kv_bytes) == (0, 1 * GiB)


def test_tied_head_is_copied_to_the_gpu() -> None:
    # A file with embedding 100 B, layers 10 B each, output side 3 B and a tied head: -ngl 17
    # puts 16 x 10 + 3 + 100 (the copy) = 263 B on the GPU; the host keeps the 100 B embedding.
    data = load_model("llama-3.2-1b").model_dump(exclude_none=True)
    data["stored_weight_bytes"] = {
        "embedding_bytes": 100,
        "layers_bytes": [10] * 16,
        "output_bytes": 3,
        "format": "Q8_0",
    }
    spec = ModelSpec.model_validate(data)
    gpu = find_gpu("h100")
    full = budget(spec, gpu, LlamaCppAsk(n_ctx=4096, n_gpu_layers=17))
    assert (full.layout.devices[0].model_bytes, full.layout.host.model_bytes) == (263, 100)
    part = budget(spec, gpu, LlamaCppAsk(n_ctx=4096, n_gpu_layers=16))
    assert (part.layout.devices[0].model_bytes, part.layout.host.model_bytes) == (160, 103)


def test_largest_ngl_fits_and_one_more_does_not() -> None:
    spec = load_model("llama-3.1-8b")
    gpu = custom_gpu(12 * GiB, None)
    p = plan(spec, gpu, LlamaCppAsk(n_ctx=32768))
    assert p.solved == "n_gpu_layers"
    assert p.fits
    assert 0 < p.n_gpu_layers < 33
    assert not budget(spec, gpu, replace(p.ask, n_gpu_layers=p.n_gpu_layers + 1)).fits


def test_longest_context_fits_and_256_more_do_not() -> None:
    spec = load_model("llama-3.1-8b")
    gpu = find_gpu("rtx-4090")
    p = plan(spec, gpu, LlamaCppAsk(n_gpu_layers=33))
    assert p.solved == "n_ctx"
    assert p.fits
    assert p.n_ctx % 256 == 0
    assert not budget(spec, gpu, replace(p.ask, n_ctx=p.n_ctx + 256)).fits


def test_fit_reduces_layers_when_4096_tokens_do_not_fit() -> None:
    # 8 GiB less 1 GiB headroom cannot hold the 8B model's ~15 GiB of bf16 weights
    spec = load_model("llama-3.1-8b")
    p = plan(spec, custom_gpu(8 * GiB, None), LlamaCppAsk())
    assert (p.solved, p.n_ctx) == ("fit", 4096)
    assert 0 < p.n_gpu_layers < 32


def test_two_gpus_and_the_command_line() -> None:
    spec = load_model("llama-3.1-8b")
    ask = LlamaCppAsk(model="m.gguf", n_ctx=8192, n_gpu_layers=33, num_gpus=2, type_k="q8_0")
    p = budget(spec, find_gpu("h100"), replace(ask, type_v="q8_0", flash_attn="on"))
    cuda0, cuda1, _ = p.layout.devices
    # 17 and 15 layers; q8_0 KV: 8,192 x 2 x 1,024 values x 34/32 B = 17 MiB per layer
    assert (cuda0.kv_bytes, cuda1.kv_bytes) == (17 * 17 * MiB, 15 * 17 * MiB)
    assert p.command == (
        "llama-server -m m.gguf -c 8192 -ngl 33 -fa on -ub 512 -b 2048 -np 1"
        " -ctk q8_0 -ctv q8_0 -sm layer -ts 1,1 --fit off"
    )


def test_metal_wired_limit_is_the_capacity() -> None:
    spec = load_model("llama-3.1-8b")
    ask = LlamaCppAsk(n_ctx=8192, backend="metal", wired_limit_bytes=114_688 * MiB)
    p = plan(spec, find_gpu("m4-max-128gb"), ask)
    assert p.capacity_bytes == 112 * GiB  # 114,688 MiB
    assert p.layout.devices[0].name == "MTL0"
    kinds = {(b.device, b.kind) for b in p.buffers}
    assert {("MTL0_Mapped", "model"), ("MTL0", "kv"), ("CPU", "compute")} <= kinds


def test_refusals() -> None:
    spec = load_model("llama-3.1-8b")
    gpu = find_gpu("h100")
    with pytest.raises(UnitError, match="flash attention"):
        budget(spec, gpu, LlamaCppAsk(n_ctx=4096, type_v="q8_0", flash_attn="off"))
    with pytest.raises(UnitError, match="tensor-split"):
        budget(spec, gpu, LlamaCppAsk(n_ctx=4096, tensor_split=TWO))
    with pytest.raises(UnitError, match="split-mode"):
        budget(spec, gpu, LlamaCppAsk(n_ctx=4096, split_mode="column"))


def test_cli_json_and_errors() -> None:
    args = ["plan", "llama-3.1-8b", "--gpu", "h100", "--engine", "llama.cpp", "-c", "8192"]
    result = runner.invoke(app, [*args, "-ngl", "33", "-np", "1", "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["devices"][0]["kv_bytes"] == 1 * GiB
    # a catalog name is no file: a placeholder, and the note says where a GGUF comes from
    assert doc["command"].startswith("llama-server -m MODEL.gguf -c 8192 -ngl 33")
    assert "convert_hf_to_gguf.py" in doc["command_note"]
    bad = runner.invoke(app, [*args, "-ctv", "q8_0", "-fa", "off"])
    assert bad.exit_code == 2
    assert "flash attention" in bad.stderr
    table = runner.invoke(app, [*args, "-tp", "2", "-sm", "row"])
    assert table.exit_code == 0, table.output
    assert "CUDA1" in table.stdout


@pytest.mark.parametrize(
    "name",
    ["deepseek-v2-lite", "gemma-3-27b", "gpt-oss-20b", "jamba-v0.1", "llama-4-scout"],
)
@pytest.mark.parametrize(
    "settings",
    [{}, {"n_seq_max": 3}, {"n_seq_max": 2, "kv_unified": True}, {"swa_full": True}],
    ids=["one", "three-streams", "unified", "swa-full"],
)
def test_kv_split_by_layer_sums_to_the_cache(name: str, settings: dict[str, object]) -> None:
    # MLA, sliding windows, sinks, Mamba and chunked layers: each device's share is exact
    from kvplan.engines.llamacpp import kv_cache
    from kvplan.engines.llamacpp_layout import layer_kv_bytes

    spec = load_model(name)
    kv = kv_cache(spec, n_ctx=8192, **settings)  # type: ignore[arg-type]
    assert sum(layer_kv_bytes(spec, kv)) == kv.kv_cache_bytes


def test_swa_full_is_off_by_default_as_llama_server_has_it() -> None:
    # llama.cpp 0c1e570 common/common.h: common_params.swa_full = false, and arg.cpp has only
    # --swa-full (no --no-swa-full). gemma-3-27b: 10 full + 52 sliding layers (window 1,024),
    # 16 KV heads x 128, f16: 2 x 16 x 128 x 2 B = 8 KiB per layer per cell.
    # off: 10 x 8,192 x 8 KiB + 52 x PAD(1,024 + 512, 256) = 1,536 cells x 8 KiB = 640 + 624 MiB
    # on: 62 x 8,192 x 8 KiB = 3,968 MiB
    spec = load_model("gemma-3-27b")
    ask = LlamaCppAsk(model="g.gguf", n_ctx=8192, n_gpu_layers=63)
    off = budget(spec, find_gpu("h200"), ask)
    on = budget(spec, find_gpu("h200"), replace(ask, swa_full=True))
    assert sum(d.kv_bytes for d in off.layout.devices) == 1264 * MiB
    assert sum(d.kv_bytes for d in on.layout.devices) == 3968 * MiB
    assert "swa-full" not in off.command
    assert on.command.endswith(" -np 1 --swa-full --fit off")
    calc = ["calc", "gemma-3-27b", "-c", "8192", "--engine", "llama.cpp", "--format", "json"]
    default, full = runner.invoke(app, calc), runner.invoke(app, [*calc, "--swa-full"])
    assert (default.exit_code, full.exit_code) == (0, 0), default.output + full.output
    assert json.loads(default.stdout)["engine_log"]["swa_cells"] == 1536
    assert json.loads(full.stdout)["engine_log"]["swa_cells"] == 8192


def _recorded_case_file(name: str, folder: Path) -> str:
    """The GGUF file of the recorded case ``name`` (scripts/llamacpp_oracle.py's writer)."""
    import importlib.util

    script = Path(__file__).resolve().parent.parent / "scripts" / "llamacpp_oracle.py"
    loaded = importlib.util.spec_from_file_location("oracle_writer", script)
    assert loaded is not None
    assert loaded.loader is not None
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)
    case = next(c for c in module.CASES if c["name"] == name)
    path = folder / f"{name}.gguf"
    module.write_gguf(case, path)
    return str(path)


@pytest.fixture(scope="module")
def moe_gguf(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The recorded qwen3moe case's file: 4 layers of 247,552 B, each holding three f16
    expert tensors of 64 x 64 x 8 x 2 B = 65,536 B (196,608 B of experts); token_embd 40,960 B;
    output.weight 40,960 B + output_norm 256 B = 41,216 B on the output layer."""
    return _recorded_case_file("qwen3moe-f16", tmp_path_factory.mktemp("moe"))


@pytest.mark.parametrize(
    ("ngl", "settings", "gpu_bytes", "host_bytes"),
    [
        # all on the GPU: 4 x 247,552 + 41,216 = 1,031,424; host: the embedding
        (5, {}, 1_031_424, 40_960),
        # --n-cpu-moe 2: 2 x 196,608 = 393,216 B of experts of layers 0 and 1 to the host
        (5, {"n_cpu_moe": 2}, 1_031_424 - 393_216, 40_960 + 393_216),
        # --cpu-moe: 4 x 196,608 = 786,432 B
        (5, {"cpu_moe": True}, 1_031_424 - 786_432, 40_960 + 786_432),
        # -ot exps=CPU: the same tensors as --cpu-moe
        (5, {"tensor_overrides": ("exps=CPU",)}, 1_031_424 - 786_432, 40_960 + 786_432),
        # one tensor: blk.3.ffn_up_exps, 65,536 B
        (5, {"tensor_overrides": (r"blk\.3\.ffn_up_exps=CPU",)}, 965_888, 106_496),
        # -ngl 2: layers 2, 3 on the GPU (2 x 247,552 = 495,104), the rest on the host
        # (2 x 247,552 + 41,216 + 40,960 = 577,280); --n-cpu-moe 3 moves layer 2's experts
        (2, {"n_cpu_moe": 3}, 495_104 - 196_608, 577_280 + 196_608),
    ],
    ids=["none", "n-cpu-moe-2", "cpu-moe", "ot-exps", "ot-one-tensor", "ngl2-n-cpu-moe-3"],
)
def test_expert_tensors_on_the_host_from_the_tensor_table(
    moe_gguf: str, ngl: int, settings: dict[str, object], gpu_bytes: int, host_bytes: int
) -> None:
    from kvplan.importers.gguf import import_gguf

    spec = import_gguf(moe_gguf).spec
    ask = replace(LlamaCppAsk(model=moe_gguf, n_ctx=1024, n_gpu_layers=ngl), **settings)
    p = budget(spec, find_gpu("h100"), ask)
    cuda0, host = p.layout.devices
    assert (cuda0.model_bytes, host.model_bytes) == (gpu_bytes, host_bytes)


def test_expert_flags_on_the_command_line_and_refusals() -> None:
    spec = load_model("qwen3-30b-a3b")
    ask = LlamaCppAsk(model="m.gguf", n_ctx=4096, n_gpu_layers=49, n_cpu_moe=10)
    p = budget(spec, find_gpu("h100"), replace(ask, tensor_overrides=(r"blk\.1[0-9]\.=CPU",)))
    assert p.command.endswith(r" --n-cpu-moe 10 -ot 'blk\.1[0-9]\.=CPU' --fit off")
    with pytest.raises(UnitError, match="allowed CPU, CUDA0"):
        budget(spec, find_gpu("h100"), replace(ask, tensor_overrides=("exps=CUDA1",)))
    with pytest.raises(UnitError, match="PATTERN=DEVICE"):
        budget(spec, find_gpu("h100"), replace(ask, tensor_overrides=("exps",)))
    with pytest.raises(UnitError, match="regular expression"):
        budget(spec, find_gpu("h100"), replace(ask, tensor_overrides=("ffn_(=CPU",)))


def test_expert_share_without_a_file_is_the_inactive_parameters() -> None:
    # qwen3-30b-a3b, bf16: 30,532,122,624 - 3,353,032,704 active = 27,179,089,920 expert
    # parameters a token skips, x 2 B = 54,358,179,840 B; each of the 48 layers rounds down
    # (< 1 B each). The routed experts are 128/120 of that (8 of 128 active): a lower bound.
    spec = load_model("qwen3-30b-a3b")
    ask = LlamaCppAsk(model="m.gguf", n_ctx=4096, n_gpu_layers=49)
    plain = budget(spec, find_gpu("h200"), ask)
    moe = budget(spec, find_gpu("h200"), replace(ask, cpu_moe=True))
    moved = moe.layout.host.model_bytes - plain.layout.host.model_bytes
    assert 54_358_179_840 - 48 < moved <= 54_358_179_840
    assert plain.layout.gpus[0].model_bytes - moe.layout.gpus[0].model_bytes == moved


def test_cpu_plan_of_a_gguf_file_has_the_mapped_span_and_the_repacked_weights(
    tmp_path: Path,
) -> None:
    # qwen3moe-q4_0-ub256 as recorded: llama.cpp printed CPU_Mapped 0.24 MiB, CPU_REPACK 0.28.
    # Repacked Q4_0 (2 x 18 B per 64 values): per layer attn_q 4,608 + attn_k 2,304 + attn_v
    # 2,304 + attn_output 4,608 + ffn_gate_inp 288 + three 3-D experts 3 x 18,432 = 69,408;
    # x 4 layers = 277,632, + output.weight 2 x 18 x 320 = 11,520 -> 289,152 B
    from kvplan.engines.llamacpp_budget import buffer_mib
    from kvplan.importers.gguf import import_gguf

    path = _recorded_case_file("qwen3moe-q4_0-ub256", tmp_path)
    spec = import_gguf(path).spec
    ask = LlamaCppAsk(model=path, n_ctx=1024, n_ubatch=256, n_batch=256, backend="cpu")
    p = plan(spec, find_gpu("h100"), ask)
    model = {b.device: b.bytes for b in p.buffers if b.kind == "model"}
    assert model["CPU_REPACK"] == 289_152
    assert {d: buffer_mib(n) for d, n in model.items()} == {
        "CPU_REPACK": "0.28",
        "CPU_Mapped": "0.24",
    }
    assert p.layout.host.model_bytes == sum(model.values())


def test_cpu_plan_of_a_moe_gguf_file_has_the_recorded_compute_buffer(tmp_path: Path) -> None:
    # qwen3moe-q4_0-ub256 as recorded: llama.cpp's CPU compute buffer was 1,252,352 B; the plan
    # reads the routed experts from the file's header to rebuild the graph that allocates it
    path = _recorded_case_file("qwen3moe-q4_0-ub256", tmp_path)
    from kvplan.importers.gguf import import_gguf

    spec = import_gguf(path).spec
    ask = LlamaCppAsk(model=path, n_ctx=1024, n_ubatch=256, n_batch=256, backend="cpu")
    p = plan(spec, find_gpu("h100"), ask)
    compute = {b.device: b.bytes for b in p.buffers if b.kind == "compute"}
    assert compute == {"CPU": 1_252_352}


def test_plan_cli_takes_the_moe_offload_flags() -> None:
    """plan's --cpu-moe, --n-cpu-moe and -ot reach the layout and the llama-server line."""
    from typer.testing import CliRunner

    from kvplan.cli import app

    base = ["plan", "qwen3-30b-a3b", "--engine", "llama.cpp", "--gpu", "rtx-4090", "-c", "16K"]
    for flags, expected in (
        (["--cpu-moe"], "--cpu-moe"),
        (["--n-cpu-moe", "10"], "--n-cpu-moe 10"),
        (["-ot", "exps=CPU"], "-ot"),
    ):
        result = CliRunner().invoke(app, [*base, *flags])
        assert result.exit_code in (0, 1), result.output
        (command,) = [ln for ln in result.output.splitlines() if ln.startswith("llama-server ")]
        assert expected in command


def test_partial_offload_says_its_compute_buffers_are_lower_bounds() -> None:
    """llama.cpp's GPU also runs the host layers' large-batch work, so with layers left on the
    host its printed compute buffer is above the full-offload rule (public logs: +5% and +46%,
    tests/data/llamacpp_gpu_compute_logs.yaml): the view says so."""
    from typer.testing import CliRunner

    from kvplan.cli import app

    base = ["plan", "llama-3.1-70b", "--engine", "llama.cpp", "--gpu", "rtx-4090", "-c", "8K"]
    partial = CliRunner().invoke(app, base)
    # without -ngl, "fits" is every layer on the GPU; the line llama.cpp would run is printed
    assert partial.exit_code == 1, partial.output
    assert "lower bounds while layers stay on the host" in partial.stdout
    assert "only 13 of 81 layers fit on the GPU" in partial.stdout
    assert CliRunner().invoke(app, [*base, "-ngl", "13"]).exit_code == 0
    whole = CliRunner().invoke(app, [base[0], "llama-3.2-1b", *base[2:]])  # every layer fits
    assert whole.exit_code == 0, whole.output
    assert "-ngl 17 of 17" in whole.stdout
    assert "lower bounds" not in whole.stdout


# --- what the command line loads: one decision for plan and flags ----------------------------

_HUB_GGUF = "bartowski/Meta-Llama-3.1-8B-Instruct-GGUF"


@pytest.mark.parametrize(
    ("typed", "args", "note"),
    [
        # a .gguf path: -m, as typed (quoted for the shell when it needs it)
        ("models/Llama-3.1-8B-Q4_K_M.gguf", ("-m", "models/Llama-3.1-8B-Q4_K_M.gguf"), ""),
        ("my models/x.gguf", ("-m", "'my models/x.gguf'"), ""),
        # a split model: its first part, which llama.cpp loads the others from
        ("m-00002-of-00003.gguf", ("-m", "m-00001-of-00003.gguf"), ""),
        # a Hub GGUF repository: -hf REPO[:QUANT], the Hub address dropped
        (f"{_HUB_GGUF}:Q4_K_M", ("-hf", f"{_HUB_GGUF}:Q4_K_M"), ""),
        (f"hf.co/{_HUB_GGUF}:Q8_0", ("-hf", f"{_HUB_GGUF}:Q8_0"), ""),
        ("unsloth/Qwen3-8B-GGUF", ("-hf", "unsloth/Qwen3-8B-GGUF"), "Q4_K_M"),
        # neither: a placeholder and what to do
        ("meta-llama/Llama-3.1-8B", ("-m", "MODEL.gguf"), "convert_hf_to_gguf.py"),
        ("qwen3:8b", ("-m", "MODEL.gguf"), "ollama show --modelfile qwen3:8b"),
        ("llama3.1:8b-instruct-q8_0", ("-m", "MODEL.gguf"), "blobs/sha256-<digest>"),
        ("Qwen/Qwen3-32B-AWQ", ("-m", "MODEL.gguf"), "download a GGUF of it"),
    ],
)
def test_model_source(typed: str, args: tuple[str, str], note: str) -> None:
    from kvplan.engines.llamacpp_plan import model_source

    source = model_source(typed)
    assert source.args == args
    assert note in source.note
    assert bool(source.note) is bool(note)
    # a placeholder's note never names a GGUF repository kvplan was not given
    if source.placeholder:
        assert "-hf" not in source.note


def test_catalog_name_note_names_its_checkpoint() -> None:
    from kvplan.engines.llamacpp_plan import model_source

    source = model_source("llama-3.1-8b", load_model("llama-3.1-8b"))
    assert source.placeholder
    assert "convert meta-llama/Llama-3.1-8B with" in source.note


def test_ollama_blob_is_a_gguf_file(tmp_path: Path) -> None:
    from kvplan.engines.llamacpp_plan import model_source

    # Ollama names its blobs sha256-<hex>, no suffix: the GGUF magic says what it is
    path = tmp_path / ("sha256-" + "ab" * 32)
    path.write_bytes(b"GGUF" + bytes(28))
    assert model_source(str(path)).args == ("-m", str(path))


_TYPED = [f"{_HUB_GGUF}:Q4_K_M", "qwen3:8b", "meta-llama/Llama-3.1-8B", "llama-3.1-8b"]


@pytest.mark.parametrize("typed", _TYPED)
def test_plan_and_flags_load_the_same_model(typed: str) -> None:
    import shlex

    args = ["--gpu", "h100", "-c", "8192"]
    result = runner.invoke(app, ["plan", typed, *args, "--engine", "llama.cpp", "-f", "json"])
    assert result.exit_code in (0, 1), result.output
    doc = json.loads(result.stdout)
    words = shlex.split(doc["command"])
    flags = runner.invoke(
        app, ["flags", typed, *args, "-n", "1", "--engine", "llama.cpp", "-f", "json"]
    )
    assert flags.exit_code in (0, 1), flags.output
    (engine,) = json.loads(flags.stdout)["engines"]
    loads = shlex.split(engine["flags"][-1])
    assert loads == words[1:3]  # -m X or -hf X, right after llama-server
    # an HF id or an Ollama tag is never passed to -m, which takes a file
    assert words[1:3] != ["-m", typed]
    if loads[0] == "-m":
        assert loads[1] == "MODEL.gguf"
        assert doc["command_note"].startswith("MODEL.gguf: ")
        assert doc["command_note"] in engine["note"]
    else:
        assert doc["command_note"] == ""


def test_plan_of_a_local_gguf_passes_its_path(tmp_path: Path) -> None:
    path = _recorded_case_file("qwen3moe-q4_0-ub256", tmp_path)
    args = ["plan", path, "--gpu", "h100", "--engine", "llama.cpp", "-c", "1024", "-np", "1"]
    result = runner.invoke(app, [*args, "-f", "json"])
    assert result.exit_code in (0, 1), result.output
    doc = json.loads(result.stdout)
    assert doc["command"].startswith(f"llama-server -m {path} -c 1024 ")
    assert doc["command_note"] == ""
    table = runner.invoke(app, args)
    assert f"llama-server -m {path} -c 1024 " in table.stdout
    assert "MODEL.gguf" not in table.stdout


def test_plan_table_prints_the_note_below_the_command() -> None:
    args = ["plan", "qwen3:8b", "--gpu", "h100", "--engine", "llama.cpp", "-c", "8192"]
    result = runner.invoke(app, args)
    assert result.exit_code in (0, 1), result.output
    lines = result.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("llama-server "))
    assert lines[at].startswith("llama-server -m MODEL.gguf ")
    assert lines[at + 1].startswith("  MODEL.gguf: llama-server reads a GGUF file, not an Ollama")
