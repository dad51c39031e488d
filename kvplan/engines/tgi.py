"""Text Generation Inference (TGI): how many KV blocks its warm-up leaves room for.

Rules read for TGI 2.x and 3.x (server/text_generation_server/models/flash_causal_lm.py
``FlashCausalLM.warmup``, models/globals.py, utils/import_utils.py ``get_free_memory``):

- After a warm-up prefill of ``--max-batch-prefill-tokens``, with its blocks still allocated,
  ``get_free_memory(device, fraction)`` returns ``max(0, free - (1 - fraction) x total)``.
- Block bytes (``total_cache_size``): ``layers x block_size x kv_heads_per_rank x head_dim x
  2 (K, V) x dtype bytes``; DeepSeek V3 (MLA) stores ``block_size x (kv_lora_rank +
  qk_rope_head_dim)`` per layer, no factor 2. Every layer counts, sliding ones included.
- 3.x: ``num_blocks = int(get_free_memory(fraction x TGI_WIGGLE_ROOM) // block_bytes) +
  warmup_blocks``: the wiggle room (``TGI_WIGGLE_ROOM``, 0.90) scales the memory fraction.
  2.x: ``int(get_free_memory(fraction) x wiggle // block_bytes) + warmup_blocks`` (wiggle 0.95
  in early 2.x, then ``TGI_WIGGLE_ROOM``).
- Block size (``BLOCK_SIZE``): 16 with paged attention, 256 with flashdecoding, 1 with
  flashinfer. ``max_batch_total_tokens = num_blocks x block_size``.
- Printed by the shard: ``KV-cache blocks: {num_blocks}, size: {BLOCK_SIZE}``.

Worked example (Llama 3.1 8B, bf16, paged, 80 GiB total, 60 GiB free after warm-up, fraction
1.0, 3.x): a block is 32 x 16 x 8 x 128 x 2 x 2 B = 2 MiB; free = 60 GiB - 0.1 x 80 GiB =
52 GiB -> 26,624 blocks + warm-up blocks.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Literal

from kvplan.arguments import (
    as_bytes,
    as_fraction,
    as_int,
    as_optional_str,
    as_parallel,
    as_str,
)
from kvplan.catalog.lookup import as_spec
from kvplan.engines.base import EngineResult, refuse_unread_kinds
from kvplan.errors import UnitError, UnknownEngineError
from kvplan.hardware.gpus import GPU
from kvplan.hardware.lookup import as_gpu
from kvplan.model.dtypes import cache_dtypes
from kvplan.model.layers import FullAttention, MLALatent, NoCache, RecurrentState
from kvplan.model.spec import ModelSpec
from kvplan.units import DType

__all__ = ["BLOCK_SIZES", "DEFAULT_VERSION", "VERSIONS", "block_bytes", "free_memory", "kv_cache"]

Attention = Literal["paged", "flashdecoding", "flashinfer"]

#: ``BLOCK_SIZE`` by ``ATTENTION`` (models/globals.py).
BLOCK_SIZES: dict[str, int] = {"paged": 16, "flashdecoding": 256, "flashinfer": 1}

VERSIONS = ("2", "3")
DEFAULT_VERSION = "3"
#: ``TGI_WIGGLE_ROOM`` default.
WIGGLE_ROOM = Fraction(9, 10)


def free_memory(free_bytes: int, total_bytes: int, memory_fraction: Fraction) -> Fraction:
    """``get_free_memory``: ``max(0, free - (1 - fraction) x total)``."""
    return max(Fraction(0), free_bytes - (1 - memory_fraction) * total_bytes)


def block_bytes(spec: ModelSpec, *, block_size: int, dtype: DType, tp: int = 1) -> int:
    """``total_cache_size``: one block of ``block_size`` tokens across all layers, one rank.

    Llama 3.1 8B, bf16, paged: 32 layers x 16 x 8 x 128 x 2 x 2 B = 2,097,152 B.
    """
    refuse_unread_kinds(spec.layers, "TGI profile")
    total = 0
    for layer in spec.layers:
        match layer:
            case MLALatent():
                total += block_size * dtype.row_bytes(layer.kv_lora_rank + layer.qk_rope_head_dim)
            case FullAttention():
                if layer.num_kv_heads > 1 and layer.num_kv_heads % tp:
                    # flash_llama_modeling.py: num_key_value_heads // shards, no replication
                    # (multi-query models keep their one head on every shard)
                    raise UnitError(
                        f"TGI shards {layer.num_kv_heads} KV heads over {tp} GPUs only when"
                        " they divide evenly"
                    )
                heads = max(1, layer.num_kv_heads // tp)
                total += block_size * dtype.row_bytes(heads * layer.head_dim) * 2
            case NoCache():
                pass
            case RecurrentState():
                raise UnitError("TGI profile: recurrent (Mamba) layers are not modelled")
    if total == 0:
        raise UnitError(f"{spec.name} keeps no KV cache: nothing for TGI to page")
    return total


def kv_cache(
    spec: ModelSpec | str,
    gpu: GPU | str,
    *,
    free_bytes_after_warmup: int | str,
    cuda_memory_fraction: float | Fraction | str = 1.0,
    attention: Attention = "paged",
    warmup_blocks: int = 0,
    kv_cache_dtype: str | None = None,
    tp: int = 1,
    version: str | None = None,
    wiggle_room: float | Fraction | str | None = None,
) -> EngineResult:
    """The KV blocks TGI allocates on one GPU after its warm-up, and ``max_batch_total_tokens``.

    ``free_bytes_after_warmup``: what ``torch.cuda.mem_get_info()`` reports free after the
    warm-up prefill (weights, activations and the warm-up batch's ``warmup_blocks`` blocks
    taken). ``cuda_memory_fraction``: ``--cuda-memory-fraction``. ``wiggle_room``:
    ``TGI_WIGGLE_ROOM`` (0.90 unless set). ``spec`` and ``gpu`` may be names, the free bytes
    a size string (``"60GiB"``). Raises UnknownEngineError for a version not in ``VERSIONS``,
    UnitError for a bad setting or a model TGI cannot page.
    """
    model, device = as_spec(spec), as_gpu(gpu)
    version = as_optional_str(version, "version") or DEFAULT_VERSION
    if version not in VERSIONS:
        raise UnknownEngineError(f"TGI {version} is not modelled; modelled: {', '.join(VERSIONS)}")
    if as_str(attention, "attention", "an attention kind such as 'paged'") not in BLOCK_SIZES:
        raise UnitError(f"attention {attention!r}: choose one of {', '.join(BLOCK_SIZES)}")
    tp = as_parallel(tp, "tp")
    warmup_blocks = as_int(warmup_blocks, "warmup_blocks")
    free_bytes = as_bytes(free_bytes_after_warmup, "free_bytes_after_warmup")
    fraction = as_fraction(cuda_memory_fraction, "cuda_memory_fraction")
    wiggle = WIGGLE_ROOM if wiggle_room is None else as_fraction(wiggle_room, "wiggle_room")
    size = BLOCK_SIZES[attention]
    dtype = cache_dtypes(model, "tgi", kv_cache_dtype=kv_cache_dtype).k
    per_block = block_bytes(model, block_size=size, dtype=dtype, tp=tp)
    total = device.memory_bytes
    if version == "3":
        kv_memory = free_memory(free_bytes, total, fraction * wiggle)
    else:
        kv_memory = free_memory(free_bytes, total, fraction) * wiggle
    num_blocks = math.floor(kv_memory / per_block) + warmup_blocks
    tokens = num_blocks * size
    return EngineResult(
        engine="tgi",
        engine_version=version,
        kv_cache_bytes=num_blocks * per_block,
        num_blocks=num_blocks,
        block_size=size,
        kv_cache_tokens=tokens,
        engine_log={
            "num_blocks": num_blocks,
            "block_size": size,
            "max_batch_total_tokens": tokens,
            "total_cache_size": per_block,
            "free_memory_bytes": math.floor(kv_memory),
        },
        log_lines=(f"KV-cache blocks: {num_blocks}, size: {size}",),
    )
