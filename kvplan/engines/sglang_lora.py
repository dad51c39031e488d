"""SGLang's LoRA slots: the GPU buffers ``LoRAMemoryPool`` preallocates for
``--max-loras-per-batch`` adapters of rank ``--max-lora-rank`` on ``--lora-target-modules``.

Read for v0.5.9 (``python/sglang/srt/lora/mem_pool.py``, ``lora/utils.py``,
``model_executor/model_runner.py``). The LoRA manager is built after the weights load and
before the KV pool is profiled, so its buffers lower the post-load free memory: they come out
of ``rest`` byte for byte, inside ``mem_fraction_static``.

Per decoder layer and target module, in the model dtype: A ``(slots, rank x stacked, in)``,
B ``(slots, out, rank)``; ``qkv_proj`` stacks 3 (q, k, v) and ``gate_up_proj`` 2. With TP,
the row-parallel modules (``o_proj``, ``down_proj``) split their input, the others their
output. q/k/v_proj name ``qkv_proj``, gate/up_proj ``gate_up_proj``; ``all`` is the four.
"""

from __future__ import annotations

from collections.abc import Iterable

from kvplan.arguments import as_int
from kvplan.errors import UnitError
from kvplan.model.dtypes import cache_dtypes
from kvplan.model.layers import MLALatent
from kvplan.model.spec import ModelSpec

__all__ = ["LORA_TARGET_MODULES", "lora_bytes", "module_shape", "packed_modules"]

_NORMALIZED = {
    "q_proj": "qkv_proj",
    "k_proj": "qkv_proj",
    "v_proj": "qkv_proj",
    "qkv_proj": "qkv_proj",
    "o_proj": "o_proj",
    "gate_proj": "gate_up_proj",
    "up_proj": "gate_up_proj",
    "gate_up_proj": "gate_up_proj",
    "down_proj": "down_proj",
}
LORA_TARGET_MODULES = (*sorted(_NORMALIZED), "all")
_ROW_PARALLEL = ("o_proj", "down_proj")


def packed_modules(target_modules: Iterable[str]) -> set[str]:
    """The packed modules (``qkv_proj``, ``o_proj``, ``gate_up_proj``, ``down_proj``) named."""
    names = [target_modules] if isinstance(target_modules, str) else list(target_modules)
    if "all" in names:
        return {"qkv_proj", "o_proj", "gate_up_proj", "down_proj"}
    wrong = [str(name)[:40] for name in names if name not in _NORMALIZED]
    if wrong or not names:
        raise UnitError(
            f"lora_target_modules {', '.join(wrong) or '(none)'}: the SGLang profile models "
            + ", ".join(LORA_TARGET_MODULES)
        )
    return {_NORMALIZED[name] for name in names}


def module_shape(spec: ModelSpec, module: str) -> tuple[int, int, int]:
    """``(in, out, stacked)`` of one target module, as SGLang's default hidden dims read them."""
    head_dim = spec.head_dim or (spec.hidden_size or 0) // spec.num_attention_heads
    hidden = spec.hidden_size or 0
    inter = spec.intermediate_size
    if module in ("gate_up_proj", "down_proj") and not inter:
        raise UnitError(f"lora_target_modules {module}: {spec.name} states no intermediate_size")
    kv_heads = spec.num_key_value_heads or spec.num_attention_heads
    match module:
        case "qkv_proj":
            return hidden, head_dim * (spec.num_attention_heads + 2 * kv_heads), 3
        case "o_proj":
            return head_dim * spec.num_attention_heads, hidden, 1
        case "gate_up_proj":
            return hidden, 2 * (inter or 0), 2
        case _:
            return inter or 0, hidden, 1


def lora_bytes(
    spec: ModelSpec,
    *,
    max_loras_per_batch: int,
    max_lora_rank: int,
    target_modules: Iterable[str],
    tp: int = 1,
) -> int:
    """Bytes of the LoRA slots on one rank.

    Llama 3.1 8B (bf16, 32 layers), 8 slots, rank 16, all modules, TP 1, per layer:
    qkv 8 x 48 x 4,096 + 8 x 6,144 x 16; o 8 x 16 x 4,096 + 8 x 4,096 x 16; gate_up
    8 x 32 x 4,096 + 8 x 28,672 x 16; down 8 x 16 x 14,336 + 8 x 4,096 x 16 values, x 2 B.
    """
    as_int(max_loras_per_batch, "max_loras_per_batch", minimum=1)
    as_int(max_lora_rank, "max_lora_rank", minimum=1)
    if any(isinstance(layer, MLALatent) for layer in spec.layers) or spec.num_expert_parameters:
        raise UnitError(
            "enable_lora: the SGLang profile models LoRA slots for dense attention models only"
            " (MLA and MoE models size theirs with their own hidden dims)"
        )
    if not spec.hidden_size:
        raise UnitError(f"enable_lora: {spec.name} states no hidden_size")
    dtype_bytes = cache_dtypes(spec, "sglang").k.block_bytes  # the model dtype
    values = 0
    for module in sorted(packed_modules(target_modules)):
        in_dim, out_dim, stacked = module_shape(spec, module)
        in_dim, out_dim = _split(module, in_dim, out_dim, tp)
        values += max_lora_rank * stacked * in_dim + out_dim * max_lora_rank
    return values * max_loras_per_batch * spec.num_hidden_layers * dtype_bytes


def _split(module: str, in_dim: int, out_dim: int, tp: int) -> tuple[int, int]:
    """A TP rank's share: row-parallel modules split their input, the others their output."""
    dim = in_dim if module in _ROW_PARALLEL else out_dim
    if dim % tp:
        raise UnitError(f"lora_target_modules {module}: {dim} does not divide across tp {tp}")
    return (in_dim // tp, out_dim) if module in _ROW_PARALLEL else (in_dim, out_dim // tp)
