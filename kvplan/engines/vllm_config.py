"""The vLLM flags that size the KV cache, as one value: what ``kvplan.engines.vllm`` sizes a
pool for, ``vllm_flags`` resolves per release line and ``vllm_layout`` lays out in pages.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from kvplan.engines.vllm_versions import DEFAULT_VERSION


@dataclass(frozen=True, slots=True)
class VllmConfig:
    """The vLLM flags that size the KV cache, with vLLM's defaults (H100-class, online serving)."""

    max_model_len: int
    gpu_memory_utilization: Fraction = Fraction(9, 10)
    max_num_batched_tokens: int = 8192
    max_num_seqs: int = 1024
    block_size: int = 16
    kv_cache_dtype: str | None = None
    kv_cache_memory_bytes: int | None = None
    mamba_ssm_cache_dtype: str | None = None
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    dtype: str | None = None
    quantization: str | None = None
    version: str = DEFAULT_VERSION
    # vLLM's own cache flags; None: the line's default (kvplan.engines.vllm_flags)
    enable_prefix_caching: bool | None = None
    async_scheduling: bool | None = None
    mamba_cache_mode: str | None = None
    num_gpu_blocks_override: int | None = None
    # no CUDA graphs: nothing captured, nothing subtracted (--enforce-eager)
    enforce_eager: bool = False
