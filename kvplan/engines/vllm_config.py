"""The vLLM flags that size the KV cache, as one value: what ``kvplan.engines.vllm`` sizes a
pool for, ``vllm_flags`` resolves per release line and ``vllm_layout`` lays out in pages.

Two defaults depend on the GPU, as ``EngineArgs.get_batch_defaults`` (vllm/engine/arg_utils.py,
the online server's usage context) sets them from v0.9 on: a device of at least 70 GiB whose name
does not say A100 gets ``--max-num-seqs 1024`` and ``--max-num-batched-tokens 8192``, any other
256 and 2048 (an H100 80GB reports 79.19 GiB: 1024; an A100 80GB, an L40S or an RTX 4090: 256).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction
from typing import TYPE_CHECKING

from kvplan.arguments import (
    as_flag,
    as_fraction,
    as_instance,
    as_int,
    as_parallel,
    as_str,
    check_ints,
    check_strs,
)
from kvplan.engines.vllm_calibration import Calibration
from kvplan.engines.vllm_lora import VllmLora
from kvplan.engines.vllm_speculative import Speculative
from kvplan.engines.vllm_versions import DEFAULT_VERSION
from kvplan.units import GiB

if TYPE_CHECKING:
    from kvplan.hardware.gpus import GPU

#: (max_num_seqs, max_num_batched_tokens) of the online server on a large GPU and on others
LARGE_GPU_DEFAULTS = (1024, 8192)
SMALL_GPU_DEFAULTS = (256, 2048)
#: Device memory from which vLLM takes the large defaults (``70 * GiB_bytes``)
LARGE_GPU_BYTES = 70 * GiB
#: The largest --block-size taken (vLLM's own choices are 1 to 256 tokens).
MAX_BLOCK_SIZE = 1 << 20


@dataclass(frozen=True, slots=True)
class VllmConfig:
    """The vLLM flags that size the KV cache, with vLLM's defaults (online serving).
    ``max_num_batched_tokens`` and ``max_num_seqs`` left None take the GPU's defaults when a
    pool is sized (``with_batch_defaults``)."""

    max_model_len: int
    gpu_memory_utilization: Fraction = Fraction(9, 10)
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
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
    # multimodal models (kvplan.engines.vllm_multimodal): the JSON of --limit-mm-per-prompt,
    # and --language-model-only (every limit 0, the tower's weights skipped)
    limit_mm_per_prompt: str | None = None
    language_model_only: bool = False
    # --speculative-config, resolved (kvplan.engines.vllm_speculative); None: no drafter
    speculative: Speculative | None = None
    # --enable-lora with --max-loras, --max-lora-rank, ... (kvplan.engines.vllm_lora)
    lora: VllmLora | None = None
    # a site's corrections fitted from its logs (kvplan.engines.vllm_calibration)
    calibration: Calibration | None = None

    def __post_init__(self) -> None:
        # Every flag checked once, here, so no profile meets a None length or a str block
        # size deep inside; the utilization is kept exact (0.9 is 9/10).
        utilization = as_fraction(self.gpu_memory_utilization, "gpu_memory_utilization")
        object.__setattr__(self, "gpu_memory_utilization", utilization)
        as_int(self.max_model_len, "max_model_len", minimum=1)
        as_int(self.block_size, "block_size", minimum=1, maximum=MAX_BLOCK_SIZE)
        check_ints(
            minimum=1,
            optional=True,
            max_num_batched_tokens=self.max_num_batched_tokens,
            max_num_seqs=self.max_num_seqs,
        )
        check_ints(
            optional=True,
            kv_cache_memory_bytes=self.kv_cache_memory_bytes,
            num_gpu_blocks_override=self.num_gpu_blocks_override,
        )
        as_parallel(self.tensor_parallel_size, "tensor_parallel_size")
        as_parallel(self.pipeline_parallel_size, "pipeline_parallel_size")
        check_strs(
            optional=True,
            kv_cache_dtype=self.kv_cache_dtype,
            mamba_ssm_cache_dtype=self.mamba_ssm_cache_dtype,
            dtype=self.dtype,
            quantization=self.quantization,
            mamba_cache_mode=self.mamba_cache_mode,
            limit_mm_per_prompt=self.limit_mm_per_prompt,
        )
        as_str(self.version, "version", "a vLLM release line such as '0.32'")
        for name in ("enable_prefix_caching", "async_scheduling"):
            if getattr(self, name) is not None:
                as_flag(getattr(self, name), name)
        as_flag(self.enforce_eager, "enforce_eager")
        as_flag(self.language_model_only, "language_model_only")
        if self.speculative is not None:
            as_instance(
                self.speculative,
                Speculative,
                "speculative",
                "a Speculative (parse_speculative_config)",
            )
        if self.lora is not None:
            as_instance(self.lora, VllmLora, "lora", "a VllmLora")
        if self.calibration is not None:
            as_instance(self.calibration, Calibration, "calibration", "a Calibration")

    @property
    def batched_tokens(self) -> int:
        """``max_num_batched_tokens``, once ``with_batch_defaults`` has set it."""
        return _resolved(self.max_num_batched_tokens, "max_num_batched_tokens")

    @property
    def num_seqs(self) -> int:
        """``max_num_seqs``, once ``with_batch_defaults`` has set it."""
        return _resolved(self.max_num_seqs, "max_num_seqs")


def _resolved(value: int | None, name: str) -> int:
    if value is None:  # a bug of kvplan's, not the user's: every pool resolves them first
        raise RuntimeError(f"VllmConfig.{name} read before with_batch_defaults")
    return value


def batch_defaults(gpu: GPU | None) -> tuple[int, int]:
    """vLLM's ``(max_num_seqs, max_num_batched_tokens)`` for ``gpu`` (see the module
    docstring); None, a device the caller does not know: the large GPU's."""
    if gpu is None:
        return LARGE_GPU_DEFAULTS
    named = f"{gpu.name} {gpu.display_name}".lower()
    if gpu.memory_bytes >= LARGE_GPU_BYTES and "a100" not in named:
        return LARGE_GPU_DEFAULTS
    return SMALL_GPU_DEFAULTS


def with_batch_defaults(cfg: VllmConfig, gpu: GPU | None) -> VllmConfig:
    """``cfg`` with an unset ``max_num_seqs`` or ``max_num_batched_tokens`` set as vLLM sets it
    on ``gpu``; vLLM 0.8, before the GPU rule, took 1024 and 8192 everywhere."""
    if cfg.max_num_seqs is not None and cfg.max_num_batched_tokens is not None:
        return cfg
    seqs, batched = batch_defaults(None if cfg.version == "0.8" else gpu)
    return replace(
        cfg,
        max_num_seqs=seqs if cfg.max_num_seqs is None else cfg.max_num_seqs,
        max_num_batched_tokens=(
            batched if cfg.max_num_batched_tokens is None else cfg.max_num_batched_tokens
        ),
    )
