"""SGLang's LoRA slots (lora/mem_pool.py), derived by hand, and their place in the budget."""

import pytest

from kvplan.catalog.lookup import as_spec
from kvplan.engines.sglang import kv_cache
from kvplan.engines.sglang_lora import lora_bytes
from kvplan.errors import UnitError

LLAMA = as_spec("llama-3.1-8b")


def test_llama_all_modules() -> None:
    # per layer: qkv 8x48x4096 + 8x6144x16; o 8x16x4096 + 8x4096x16;
    # gate_up 8x32x4096 + 8x28672x16; down 8x16x14336 + 8x4096x16; x 32 layers x 2 B
    per_layer = (
        8 * 48 * 4096 + 8 * 6144 * 16 + 8 * 16 * 4096 + 8 * 4096 * 16
        + 8 * 32 * 4096 + 8 * 28672 * 16 + 8 * 16 * 14336 + 8 * 4096 * 16
    )  # fmt: skip
    got = lora_bytes(LLAMA, max_loras_per_batch=8, max_lora_rank=16,
                     target_modules=["all"])  # fmt: skip
    assert got == per_layer * 32 * 2 == 671_088_640


def test_lora_lowers_rest_byte_for_byte() -> None:
    base = kv_cache("llama-3.1-8b", "h100", mem_fraction_static=0.8)
    lora = kv_cache(
        "llama-3.1-8b", "h100", mem_fraction_static=0.8, enable_lora=True, max_lora_rank=16,
        lora_target_modules=["all"],
    )  # fmt: skip
    assert base.engine_log["rest_bytes"] - lora.engine_log["rest_bytes"] == 671_088_640


def test_unknown_module_refused() -> None:
    with pytest.raises(UnitError, match="lora_target_modules"):
        lora_bytes(LLAMA, max_loras_per_batch=1, max_lora_rank=8, target_modules=["lm_head"])
