"""``kvplan plan`` asked of one engine by name: the planner (``ideal``), vLLM's start-up, or
SGLang's and TensorRT-LLM's token pools, with the figures derived from each answer.

``plan_with(spec, gpu, engine, PlanRequest)``: ``ideal`` -> ``planner.Plan``; ``vllm`` ->
``VllmPlan``; ``sglang``, ``trtllm`` -> ``TokenPoolPlan``; ``llama.cpp`` -> ``LlamaCppPlan``
(every buffer per device, the ``-ngl`` or context it solved, its llama-server line). Each
answer has ``fits``.
A new engine flag is one field of the request and one argument where the engine is called.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

from kvplan.errors import UnknownEngineError

if TYPE_CHECKING:
    from kvplan.engines.base import EngineResult
    from kvplan.engines.llamacpp_plan import LlamaCppAsk, LlamaCppPlan
    from kvplan.engines.vllm import StageResult, VllmResult
    from kvplan.hardware import GPU
    from kvplan.planner import Plan
    from kvplan.spec import ModelSpec

#: the engines ``plan_with`` models
PLAN_ENGINES = ("ideal", "vllm", "sglang", "trtllm", "llama.cpp")


@dataclass(frozen=True, slots=True)
class PlanRequest:
    """What ``kvplan plan`` asks; each engine reads the fields it has.

    ``max_model_len`` None: the planner's default, or for an engine the model's
    ``max_position_embeddings``. ``gpu_memory_utilization`` is TensorRT-LLM's
    ``free_gpu_memory_fraction``.
    """

    max_model_len: int | None = None
    concurrency: int | None = None
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    gpu_memory_utilization: Fraction = Fraction(9, 10)
    kv_cache_dtype: str | None = None
    dtype: str | None = None
    quantization: str | None = None
    overhead_bytes: int | None = None
    kv_cache_memory_bytes: int | None = None
    block_size: int = 16
    shared_prefix_tokens: int = 0
    lengths: Sequence[int] | None = None
    mean_length: int | None = None
    p99_length: int | None = None
    max_num_batched_tokens: int = 8192
    max_num_seqs: int = 1024
    mamba_ssm_cache_dtype: str | None = None
    enable_prefix_caching: bool | None = None
    async_scheduling: bool | None = None
    mamba_cache_mode: str | None = None
    num_gpu_blocks_override: int | None = None
    enforce_eager: bool | None = None  # vLLM --enforce-eager: no CUDA graphs (None: off)
    mem_fraction_static: Fraction | None = None
    max_total_tokens: int | None = None
    page_size: int = 1
    version: str | None = None
    llamacpp: LlamaCppAsk | None = None  # llama.cpp's own settings (None: its defaults)

    def engine_max_model_len(self, spec: ModelSpec) -> int:
        return self.max_model_len or spec.max_position_embeddings or 0


@dataclass(frozen=True, slots=True)
class VllmPlan:
    """vLLM's start-up for a deployment, with the figures ``kvplan plan`` adds to it.

    ``max_context_tokens``: the longest request that fits, as vLLM estimates it.
    """

    model: str
    gpu: GPU
    result: VllmResult
    max_context_tokens: int
    version_asked: str = ""
    version_note: str = ""

    @property
    def num_gpus(self) -> int:
        cfg = self.result.config
        return cfg.tensor_parallel_size * cfg.pipeline_parallel_size

    @property
    def tightest_stage(self) -> StageResult:
        """The (first) stage with the fewest blocks: it sets the pool."""
        return min(self.result.stages, key=lambda s: s.num_blocks)

    @property
    def overhead_bytes(self) -> int:
        """Peak activation, non-torch memory and (from vLLM v0.21.0) the CUDA-graph estimate
        of the tightest stage."""
        o = self.tightest_stage.overhead
        return o.activation_bytes + o.non_torch_bytes + o.cuda_graph_bytes

    @property
    def max_concurrency(self) -> int:
        return self.result.max_requests

    @property
    def fits(self) -> bool:
        r = self.result
        return r.fit_blocks >= r.blocks_per_request and r.fit_blocks > 0


@dataclass(frozen=True, slots=True)
class TokenPoolPlan:
    """SGLang's or TensorRT-LLM's token pool, and how many requests of ``max_model_len`` it
    holds. ``free_gpu_memory_fraction``: TensorRT-LLM's, with its dry run's peak taken as the
    weights; None for SGLang."""

    result: EngineResult
    gpu: GPU
    tensor_parallel_size: int
    pipeline_parallel_size: int
    max_model_len: int
    free_gpu_memory_fraction: float | None = None

    @property
    def kv_cache_tokens(self) -> int:
        return self.result.kv_cache_tokens or 0

    @property
    def max_concurrency(self) -> int:
        return self.kv_cache_tokens // self.max_model_len if self.max_model_len else 0

    @property
    def fits(self) -> bool:
        return self.kv_cache_tokens >= self.max_model_len


def plan_with(
    spec: ModelSpec, gpu: GPU, engine: str, request: PlanRequest
) -> Plan | VllmPlan | TokenPoolPlan | LlamaCppPlan:
    """The plan of ``request`` under ``engine`` (see the module docstring)."""
    match engine:
        case "ideal":
            return _ideal(spec, gpu, request)
        case "vllm":
            return _vllm(spec, gpu, request)
        case "sglang" | "trtllm":
            return _token_pool(spec, gpu, engine, request)
        case "llama.cpp":
            from kvplan.engines import llamacpp_plan

            ask = request.llamacpp or llamacpp_plan.LlamaCppAsk(n_ctx=request.max_model_len)
            return llamacpp_plan.plan(spec, gpu, ask)
    modelled = ", ".join(PLAN_ENGINES)
    from kvplan.engines.base import ENGINE_NAMES

    if engine in ENGINE_NAMES:
        raise UnknownEngineError(
            f"--engine {engine}: its plan profile is not modelled yet; modelled: {modelled}"
        )
    raise UnknownEngineError(f"--engine: unknown engine {engine!r}; modelled: {modelled}")


def _ideal(spec: ModelSpec, gpu: GPU, r: PlanRequest) -> Plan:
    from kvplan.planner import plan

    return plan(
        spec,
        gpu,
        tensor_parallel_size=r.tensor_parallel_size,
        pipeline_parallel_size=r.pipeline_parallel_size,
        max_model_len=r.max_model_len,
        concurrency=r.concurrency,
        gpu_memory_utilization=r.gpu_memory_utilization,
        kv_cache_dtype=r.kv_cache_dtype,
        dtype=r.dtype,
        quantization=r.quantization,
        overhead_bytes=r.overhead_bytes,
        kv_cache_memory_bytes=r.kv_cache_memory_bytes,
        block_size=r.block_size,
        shared_prefix_tokens=r.shared_prefix_tokens,
        lengths=r.lengths,
        mean_length=r.mean_length,
        p99_length=r.p99_length,
        max_num_batched_tokens=r.max_num_batched_tokens,
    )


def _vllm(spec: ModelSpec, gpu: GPU, r: PlanRequest) -> VllmPlan:
    from kvplan.engines import vllm

    choice = vllm.resolve_version(r.version)
    cfg = vllm.VllmConfig(
        max_model_len=r.engine_max_model_len(spec),
        gpu_memory_utilization=r.gpu_memory_utilization,
        max_num_batched_tokens=r.max_num_batched_tokens,
        max_num_seqs=r.max_num_seqs,
        mamba_ssm_cache_dtype=r.mamba_ssm_cache_dtype,
        enable_prefix_caching=r.enable_prefix_caching,
        async_scheduling=r.async_scheduling,
        mamba_cache_mode=r.mamba_cache_mode,
        num_gpu_blocks_override=r.num_gpu_blocks_override,
        enforce_eager=bool(r.enforce_eager),
        block_size=r.block_size,
        kv_cache_dtype=r.kv_cache_dtype,
        kv_cache_memory_bytes=r.kv_cache_memory_bytes,
        tensor_parallel_size=r.tensor_parallel_size or 1,
        pipeline_parallel_size=r.pipeline_parallel_size or 1,
        dtype=r.dtype,
        quantization=r.quantization,
        version=choice.line,
    )
    result = vllm.profile(spec, gpu, cfg)
    return VllmPlan(
        spec.name, gpu, result, vllm.estimated_max_model_len(result), choice.asked, choice.note
    )


def _token_pool(spec: ModelSpec, gpu: GPU, engine: str, r: PlanRequest) -> TokenPoolPlan:
    tp, pp = r.tensor_parallel_size or 1, r.pipeline_parallel_size or 1
    max_model_len = r.engine_max_model_len(spec)
    fraction = None
    if engine == "trtllm":
        from kvplan.engines import trtllm

        fraction = float(r.gpu_memory_utilization)
        result = trtllm.kv_cache(
            spec,
            gpu,
            tp=tp,
            pp=pp,
            free_gpu_memory_fraction=fraction,
            kv_cache_dtype=r.kv_cache_dtype,
            max_seq_len=max_model_len or None,
        )
    else:
        from kvplan.engines import sglang

        static = r.mem_fraction_static
        result = sglang.kv_cache(
            spec,
            gpu,
            tp=tp,
            pp=pp,
            mem_fraction_static=None if static is None else float(static),
            kv_cache_dtype=r.kv_cache_dtype,
            page_size=r.page_size,
            max_total_tokens=r.max_total_tokens,
        )
    return TokenPoolPlan(result, gpu, tp, pp, max_model_len, fraction)
