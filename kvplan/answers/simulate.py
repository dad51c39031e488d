"""``kvplan simulate TRACE``: a request trace replayed through vLLM's prefix cache on the pool
vLLM gives a deployment (kvplan.cache_sim.prefix), each request held for the time the roofline
gives its prefill and its decode (kvplan.answers.performance, as ``kvplan perf`` estimates).

The service model, one request at a time: the input tokens not found in the cache at the
prefill rate of the trace's mean prompt, then each output token at the decode step of one
sequence of that length. Batching would share those steps; the model keeps requests in the
pool as long as a lone request would stay, so it errs toward more waiting, not fewer hits.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING

from kvplan.cache_sim.prefix import PrefixCacheResult, simulate_prefix_cache
from kvplan.cache_sim.trace import TraceRequest, read_mooncake

if TYPE_CHECKING:
    from kvplan.hardware.gpus import GPU
    from kvplan.model.spec import ModelSpec

__all__ = ["TraceReplay", "replay_trace"]


@dataclass(frozen=True, slots=True)
class TraceReplay:
    """A replay: the deployment's pool (blocks of ``block_tokens``), the service rates (seconds
    a prefilled token, seconds a decode step, prefill FLOPs a token) and the totals."""

    model: str
    gpu: str
    num_blocks: int
    block_tokens: int
    prefill_seconds_per_token: Fraction
    decode_seconds_per_token: Fraction
    prefill_flops_per_token: int
    result: PrefixCacheResult

    @property
    def saved_flops(self) -> int:
        """Prefill FLOPs the hits spare, at the mean prompt's FLOPs a token."""
        return self.result.hit_tokens * self.prefill_flops_per_token


def _mean_prompt(path: str | Path) -> tuple[int, int]:
    """The trace's mean input and its longest request (input and output), in tokens."""
    count = total = longest = 0
    for request in read_mooncake(path):
        count += 1
        total += request.input_tokens
        longest = max(longest, request.input_tokens + request.output_tokens)
    return (total // count if count else 1), max(longest, 1)


def replay_trace(
    spec: ModelSpec,
    gpu: GPU,
    path: str | Path,
    *,
    gpu_memory_utilization: Fraction = Fraction(9, 10),
    kv_cache_dtype: str | None = None,
    version: str | None = None,
) -> TraceReplay:
    """Replay the Mooncake trace ``path`` through vLLM's prefix cache of ``spec`` on ``gpu``
    (one GPU, its pool as ``vllm.profile`` gives it for the trace's longest request, at most
    the model's trained length). Raises SpecError naming the trace's line for a bad trace."""
    from kvplan.answers.performance import perf
    from kvplan.engines import vllm

    mean, longest = _mean_prompt(path)
    trained = spec.max_position_embeddings or longest
    cfg = vllm.config(
        min(longest, trained),
        gpu_memory_utilization=gpu_memory_utilization,
        kv_cache_dtype=kv_cache_dtype,
        version=vllm.resolve_version(version).line,
    )
    pool = vllm.profile(spec, gpu, cfg)
    speed = perf(spec, gpu, context_tokens=mean, prompt_tokens=mean, engine="vllm")
    prefill = speed.prefill.estimate_seconds / mean
    decode = speed.decode.estimate_seconds
    flops = speed.prefill.flops // mean

    def service_ms(request: TraceRequest, computed: int) -> int:
        seconds = computed * prefill + request.output_tokens * decode
        return -(-seconds.numerator * 1000 // seconds.denominator)

    result = simulate_prefix_cache(
        read_mooncake(path),
        num_blocks=pool.num_gpu_blocks,
        block_tokens=cfg.block_size,
        service_ms=service_ms,
    )
    return TraceReplay(
        spec.name, gpu.name, pool.num_gpu_blocks, cfg.block_size, prefill, decode, flops, result
    )
