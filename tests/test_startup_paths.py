"""What lets `kvplan calc` and `kvplan plan` start without pydantic: bundled specs and GPU files
are built without the file check, which is only sound while that check passes on every one of
them, so this file runs it; and `ModelSpec(...)` in code still gets the file check."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kvplan import estimate
from kvplan.catalog.lookup import bundled_names, list_models, specs_dir
from kvplan.errors import SpecError
from kvplan.hardware.gpus import gpu_specs_dir, list_gpus, load_gpu_specs
from kvplan.model.spec import SPEC_KEYS, ModelSpec, StoredWeights, load_spec


def test_every_bundled_spec_built_unchecked_equals_the_checked_file() -> None:
    built = {spec.name: spec for spec in list_models()}
    assert set(built) == set(bundled_names())
    for name in bundled_names():
        checked = load_spec(specs_dir() / f"{name}.yaml")
        assert built[name] == checked, name
        assert built[name].layer_groups == checked.layer_groups, name


def test_bundled_gpus_built_unchecked_equal_the_checked_files() -> None:
    assert list_gpus() == load_gpu_specs(gpu_specs_dir())


@pytest.mark.parametrize(
    "argv",
    [
        ["calc", "llama-3.1-8b", "-c", "4", "-f", "json"],
        ["plan", "llama-3.1-8b", "--gpu", "h100", "--max-model-len", "32K", "-f", "json"],
    ],
)
def test_calc_and_plan_on_bundled_files_never_build_a_pydantic_model(
    argv: list[str], tmp_path: Path
) -> None:
    probe = (
        "import sys, runpy\n"
        f"sys.argv = ['kvplan', *{argv!r}]\n"
        "try:\n    runpy.run_module('kvplan', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print('PYDANTIC', sorted(m for m in ('pydantic.main', 'pydantic.type_adapter')"
        " if m in sys.modules))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert "PYDANTIC []" in result.stdout, result.stdout[-300:]


GEOMETRY = {"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64}


def test_a_spec_built_in_code_is_checked_as_a_file() -> None:
    with pytest.raises(SpecError, match="num_hidden_layers: input should be a valid integer"):
        ModelSpec(name="m", **{**GEOMETRY, "num_hidden_layers": True}, torch_dtype="bf16")
    with pytest.raises(SpecError, match="num_key_value_heads: 3 does not divide"):
        ModelSpec(name="m", **GEOMETRY, num_key_value_heads=3, torch_dtype="bf16")
    spec = ModelSpec(name="m", **GEOMETRY, aliases=["a"], torch_dtype="bf16")  # type: ignore[arg-type]
    assert spec.aliases == ("a",)  # read as the file check reads it: hashable
    assert spec.torch_dtype == "bfloat16"
    # 2 layers x 2 (K, V) x 4 heads x 16 dims x 2 B = 512 B a token
    assert estimate(spec, 0).bytes_per_token == 512
    assert hash(spec) == hash(ModelSpec(name="m", **GEOMETRY, aliases=("a",), torch_dtype="bf16"))


def test_dump_and_copy_keep_their_pydantic_era_meaning() -> None:
    stored = StoredWeights(embedding_bytes=1, layers_bytes=(2, 3), output_bytes=4, format="Q8_0")
    spec = ModelSpec(name="m", **GEOMETRY, torch_dtype="bf16", stored_weight_bytes=stored)
    dumped = spec.model_dump(mode="json", exclude_none=True)
    assert list(dumped) == [k for k in SPEC_KEYS if dumped.get(k) is not None]
    assert dumped["aliases"] == []
    assert dumped["stored_weight_bytes"] == {
        "embedding_bytes": 1,
        "layers_bytes": [2, 3],
        "output_bytes": 4,
        "format": "Q8_0",
    }
    assert spec.model_dump(exclude_defaults=True) == {
        "name": "m",
        **GEOMETRY,
        "torch_dtype": "bfloat16",
        "stored_weight_bytes": {
            "embedding_bytes": 1,
            "layers_bytes": (2, 3),
            "output_bytes": 4,
            "format": "Q8_0",
        },
    }
    noted = spec.with_provenance("read as m")
    copy = noted.model_copy(update={"weight_dtype": "awq"})  # as given, unchecked
    assert (copy.weight_dtype, copy.provenance, copy.layers) == ("awq", ("read as m",), spec.layers)
    with pytest.raises(AttributeError):
        copy.num_hidden_layers = 3  # type: ignore[misc]
