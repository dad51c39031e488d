"""Parameter counts from a config's shapes (kvplan.importers.parameters and the family
counts): every fixture config with a bundled spec against the spec's count (the checkpoint's
safetensors total, or the published figure), exact hand-worked totals, config-only folders
planned through the CLI, and --kv-cache-memory plans that never size the weights."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from kvplan import plan
from kvplan.catalog.lookup import specs_dir
from kvplan.cli import app
from kvplan.errors import SpecError
from kvplan.importers import import_config
from kvplan.importers.config import parameters_from_config
from kvplan.importers.parameters import Count, quantized_format
from kvplan.model.spec import parse_spec

FIXTURES = Path(__file__).parent / "fixtures" / "hf"
runner = CliRunner()

#: Folders with a bundled spec of the same name.
BUNDLED = sorted(
    d.name for d in FIXTURES.iterdir() if d.is_dir() and (specs_dir() / f"{d.name}.yaml").is_file()
)

#: Relative error allowed: 0.5%, except where the spec holds a rounded model-card figure that
#: counts more than the served model. GLM-4.5's card says 355B; its 92 layers count
#: 352,797,829,024 (-0.62%), the card's figure including the multi-token-prediction layer.
TOLERANCE = {"glm-4.5": 0.01}


def _config(name: str) -> dict[str, object]:
    return json.loads((FIXTURES / name / "config.json").read_text())  # type: ignore[no-any-return]


def _spec(name: str) -> dict[str, object]:
    return yaml.safe_load((specs_dir() / f"{name}.yaml").read_text())  # type: ignore[no-any-return]


@pytest.mark.parametrize("name", BUNDLED)
def test_count_matches_the_bundled_spec(name: str) -> None:
    want = _spec(name)["num_parameters"]
    assert isinstance(want, int)
    got = parameters_from_config(_config(name)).total
    assert abs(got - want) <= want * TOLERANCE.get(name, 0.005), (got, want)


def test_most_counts_are_exact() -> None:
    """The safetensors totals in the specs are met to the parameter for most models; the rest
    differ by rounded card figures or by the rotary inv_freq buffers Llama 2 checkpoints
    store (64 a layer: 32 x 64 = 2,048 for Llama 2 7B)."""
    exact = [
        n for n in BUNDLED if parameters_from_config(_config(n)).total == _spec(n)["num_parameters"]
    ]
    assert len(exact) >= 55, len(exact)
    assert 6_738_417_664 - parameters_from_config(_config("llama-2-7b")).total == 32 * 64


@pytest.mark.parametrize(
    ("name", "quantized"),
    [
        # the specs' own worked sums of the fp8 Linear weights / the mxfp4 expert weights
        ("deepseek-v3", 669_065_609_216),
        ("kimi-k2", 1_023_893_241_856),
        ("gpt-oss-20b", 24 * 32 * (2880 * 2 * 2880 + 2880 * 2880)),
        ("gpt-oss-120b", 36 * 128 * (2880 * 2 * 2880 + 2880 * 2880)),
    ],
)
def test_quantization_config_sets_the_weight_format(name: str, quantized: int) -> None:
    spec = import_config(FIXTURES / name / "config.json").spec
    assert spec.num_quantized_parameters == quantized
    assert spec.weight_dtype in ("fp8_e4m3", "mxfp4")


@pytest.mark.parametrize(
    ("name", "total"),
    [
        pytest.param(
            "llama-3.2-1b",
            128256 * 2048
            + 16 * (2 * 2048 * 2048 + 2 * 2048 * 512 + 3 * 2048 * 8192 + 2 * 2048)
            + 2048,
            id="llama-3.2-1b: 128256*2048 + 16*(2*2048^2 + 2*2048*512 + 3*2048*8192 + 2*2048)"
            " + 2048 = 1,235,814,400",
        ),
        pytest.param(
            "gpt2",
            50257 * 768
            + 1024 * 768
            + 12 * (4 * 768 + 768 * 2304 + 2304 + 768 * 768 + 768 + 2 * 768 * 3072 + 3072 + 768)
            + 2 * 768,
            id="gpt2: wte 50257*768 + wpe 1024*768 + 12*(2 LN + c_attn + c_proj + MLP, biased)"
            " + ln_f = 124,439,808",
        ),
        pytest.param(
            "phi-2",
            2 * 51200 * 2560
            + 51200
            + 32 * (2 * 2560 + 4 * (2560 * 2560 + 2560) + 2 * 2560 * 10240 + 10240 + 2560)
            + 2 * 2560,
            id="phi-2: embed + head 2*51200*2560 + head bias 51200 + 32*(LN + 4 biased"
            " projections + fc1/fc2) + final LN = 2,779,683,840",
        ),
    ],
)
def test_hand_worked_totals(name: str, total: int) -> None:
    assert parameters_from_config(_config(name)).total == total
    assert total == {"llama-3.2-1b": 1_235_814_400, "gpt2": 124_439_808}.get(name, total)


def test_moe_active_parameters() -> None:
    """Mixtral 8x7B: 2 of 8 experts a token; 6 idle experts of 3*4096*14336 in 32 layers."""
    count = parameters_from_config(_config("mixtral-8x7b"))
    assert count.total - count.inactive == 46_702_792_704 - 32 * 6 * 3 * 4096 * 14336


def test_quantized_format_by_method() -> None:
    count = Count(total=10, linear=8, experts=6)
    assert quantized_format({"quant_method": "fp8"}, count) == ("fp8_e4m3", 8)
    assert quantized_format({"quant_method": "mxfp4"}, count) == ("mxfp4", 6)
    assert quantized_format({"quant_method": "awq", "bits": 4}, count) == ("int4", 8)
    assert quantized_format({"quant_method": "gptq", "bits": 8}, count) == ("int8", 8)
    assert quantized_format({"quant_method": "bitsandbytes"}, count) is None


def test_a_config_missing_a_size_is_not_counted() -> None:
    config = _config("qwen3-8b")
    del config["intermediate_size"]
    with pytest.raises(SpecError, match="intermediate_size: required to count"):
        parameters_from_config(config)


def _one_per_architecture() -> list[str]:
    seen: dict[str, str] = {}
    for d in sorted(FIXTURES.iterdir()):
        if d.is_dir():
            seen.setdefault(str(_config(d.name)["model_type"]), d.name)
    return sorted(seen.values())


@pytest.mark.parametrize("name", _one_per_architecture())
def test_a_config_only_folder_plans(name: str, tmp_path: Path) -> None:
    folder = tmp_path / name
    folder.mkdir()
    shutil.copy(FIXTURES / name / "config.json", folder / "config.json")
    args = ["plan", str(folder), "--gpu", "h200", "--max-model-len", "4096", "--concurrency", "1"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    imported = runner.invoke(app, ["import", str(folder)])
    assert imported.exit_code == 0, imported.output
    assert "num_parameters computed from the config's shapes" in imported.output
    line = import_config(folder).spec.provenance[0]
    assert "(no weights in the folder)" in line or "active per token" in line


NO_WEIGHTS = {
    "name": "no-weights",
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "torch_dtype": "bfloat16",
    "max_position_embeddings": 8192,
}


def test_kv_cache_memory_plans_without_num_parameters() -> None:
    """A 40 GiB pool of 16-token blocks of 32 layers x 2 x 8 heads x 128 x 2 B = 2 MiB
    each: 20,480 blocks, whatever the weights."""
    spec = parse_spec(NO_WEIGHTS)
    result = plan(spec, "h100", max_model_len=8192, kv_cache_memory_bytes="40GiB")
    assert result.tightest.num_blocks == 40 * 2**30 // (16 * 32 * 2 * 8 * 128 * 2) == 20480
    assert result.weights_bytes == 0
    with pytest.raises(SpecError, match="num_parameters: required"):
        plan(spec, "h100", max_model_len=8192)


def test_kv_cache_memory_vllm_profile_without_num_parameters() -> None:
    """The same spec through vLLM's profile: 40 GiB / 2 MiB blocks = 20,480 blocks, printed by
    0.19 as 20,480 x 16 = 327,680 tokens; no parameter count is asked for."""
    from kvplan.engines import vllm
    from kvplan.hardware.lookup import find_gpu

    spec = parse_spec(NO_WEIGHTS)
    config = vllm.VllmConfig(max_model_len=8192, kv_cache_memory_bytes=40 * 2**30)
    result = vllm.profile(spec, find_gpu("h100"), config)
    assert result.num_gpu_blocks == 20480
    assert result.gpu_kv_cache_tokens == 327_680
