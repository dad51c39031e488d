"""The planner's answers: ``Plan`` for one deployment, ``LengthMix`` for a mix of lengths."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from kvplan.hardware.gpus import GPU
from kvplan.planner.deployment import Overhead, usable_bytes
from kvplan.planner.pool import StagePlan, shared_blocks, shared_bytes
from kvplan.units import DType, format_tokens, kv_dtype_name


@dataclass(frozen=True, slots=True)
class LengthMix:
    """Concurrency for a real mix of request lengths (prompt + output tokens each)."""

    num_requests: int
    mean_tokens: int
    p50_tokens: int
    p99_tokens: int
    max_tokens: int
    expected_concurrency: int
    worst_case_concurrency: int
    paged_bytes: int
    ideal_bytes: int

    @property
    def paged_waste_bytes(self) -> int:
        return self.paged_bytes - self.ideal_bytes


@dataclass(frozen=True, slots=True)
class Plan:
    """The answer for one deployment: per-GPU memory, the pool, and what it holds.

    Per-GPU figures are those of the tightest pipeline stage; ``stages`` holds them all.
    ``max_concurrency`` is at ``max_model_len`` (every request reaching it);
    ``max_context_tokens`` is the longest context ``concurrency`` requests can each reach.
    """

    model: str
    gpu: GPU
    tensor_parallel_size: int
    pipeline_parallel_size: int
    replicas: int
    max_model_len: int | None
    concurrency: int | None
    gpu_memory_utilization: Fraction
    k_dtype: DType
    v_dtype: DType
    block_size: int
    shared_prefix_tokens: int
    overhead: Overhead
    weights_model_dtype: str
    weights_format: str
    quantization: str | None
    stages: tuple[StagePlan, ...]
    max_concurrency: int | None
    max_context_tokens: int | None
    fits: bool
    message: str
    request_bytes: int | None
    ideal_request_bytes: int | None
    length_mix: LengthMix | None = None
    searched: bool = False
    dtype_reason: str = ""
    kv_cache_memory_given: bool = False
    #: > 1: data-parallel attention with expert parallelism over this many GPUs, each GPU one
    #: replica of the attention with its own requests (``replicas`` = this, TP and PP 1).
    expert_parallel_size: int = 1

    @property
    def num_gpus(self) -> int:
        return self.tensor_parallel_size * self.pipeline_parallel_size * self.replicas

    @property
    def tightest(self) -> StagePlan:
        """The stage that sets the answers: least concurrency, then fewest blocks."""
        return min(
            self.stages,
            key=lambda s: (
                s.max_concurrency if s.max_concurrency is not None else 1 << 62,
                s.num_blocks,
            ),
        )

    @property
    def total_memory_bytes(self) -> int:
        return self.gpu.memory_bytes

    @property
    def usable_memory_bytes(self) -> int:
        return usable_bytes(self.gpu.memory_bytes, self.gpu_memory_utilization)

    @property
    def weights_bytes(self) -> int:
        return self.tightest.weights_bytes

    @property
    def overhead_bytes(self) -> int:
        return self.tightest.overhead_bytes

    @property
    def kv_cache_memory_bytes(self) -> int:
        return self.tightest.kv_cache_memory_bytes

    @property
    def unallocated_memory_bytes(self) -> int:
        """The GPU's memory less weights, overhead and pool on the tightest stage: the headroom
        above utilization included (the JSON ``free_memory_bytes`` of schema 1)."""
        t = self.tightest
        return self.gpu.memory_bytes - t.weights_bytes - t.overhead_bytes - t.kv_cache_memory_bytes

    @property
    def headroom_bytes(self) -> int:
        """What ``gpu_memory_utilization`` holds back from the engine: total - usable. The
        engine never allocates it (CUDA graphs, fragmentation and other processes use it)."""
        return self.gpu.memory_bytes - self.usable_memory_bytes

    @property
    def free_memory_bytes(self) -> int:
        """Memory a deployment could still use for more work, per GPU (the tightest stage):
        the usable memory (``total x utilization``, or the whole GPU when the KV cache memory is
        given) less weights, overhead and the KV cache the question's requests hold.

        The requests held: ``concurrency`` requests (or, when only ``max_model_len`` is asked,
        the ``max_concurrency`` that fit) of ``max_model_len`` tokens, or ``concurrency``
        requests at ``max_context_tokens``; with neither, the whole pool counts as used. The
        headroom above utilization (``headroom_bytes``) is never free: the engine does not
        allocate it. Negative when the given KV cache memory oversubscribes the GPU.
        """
        return min(self.stage_free_bytes(s) for s in self.stages)

    def stage_free_bytes(self, s: StagePlan) -> int:
        """``free_memory_bytes`` of one stage."""
        budget = self.gpu.memory_bytes if self.kv_cache_memory_given else self.usable_memory_bytes
        return budget - s.weights_bytes - s.overhead_bytes - self._held_kv_bytes(s)

    def _held_kv_bytes(self, s: StagePlan) -> int:
        """KV bytes the question's requests hold on stage ``s`` (the pool if none is asked)."""
        tokens = self.max_model_len
        n = self.concurrency if self.concurrency is not None else self.max_concurrency
        if tokens is None and self.concurrency is not None:
            tokens = self.max_context_tokens
        if tokens is None or n is None or self.length_mix is not None or not self.fits:
            return s.kv_cache_memory_bytes
        n = -(-n // self.replicas)  # requests on one replica
        if self.max_concurrency is not None:
            n = min(n, self.max_concurrency)
        shared = shared_blocks(self.shared_prefix_tokens, tokens, self.block_size)
        held = n * s.private_bytes(tokens, shared, self.block_size)
        return min(s.kv_cache_memory_bytes, held + shared_bytes(s, shared))

    def pool_note(self) -> str:
        """Why a request can outgrow the pool's token count, for models whose sliding,
        chunked or recurrent layers keep less than every token: the pool's tokens count every
        layer, a request's bounded layers hold only their window. Empty for other models.

        gpt-oss-120b on one H100 at 131,072 tokens: the pool holds 123,104 tokens of every
        layer, yet one request fits, since its 18 sliding layers keep 144 tokens each (window
        128 in 16-token blocks, +1 block) and only the 18 full layers keep all 131,072.
        """
        if self.max_model_len is None or self.request_bytes is None:
            return ""
        tokens = self.max_model_len
        t = self.tightest
        bounded = [  # a layer that caches nothing (no_cache) keeps nothing to explain
            g
            for g in t.groups
            if (g.page_bytes or g.state_bytes)
            and (g.layer.max_tokens is not None or not g.page_bytes)
        ]
        if not bounded or not t.block_bytes:
            return ""
        parts = []
        for g in bounded:
            if g.page_bytes:
                kept = g.layer.max_blocks(tokens, self.block_size) * self.block_size
                parts.append(
                    f"{g.num_layers} {g.layer.kind} layers keep at most {format_tokens(kept)}"
                    " tokens"
                )
            else:
                parts.append(f"{g.num_layers} {g.layer.kind} layers keep a fixed state")
        equivalent = self.request_bytes * self.block_size // t.block_bytes
        return (
            f"the pool's {format_tokens(self.kv_cache_tokens)} tokens count every layer; a request"
            f" of {format_tokens(tokens)} tokens takes the room of {format_tokens(equivalent)}"
            f" of them, since its {'; '.join(parts)}"
        )

    @property
    def num_blocks(self) -> int:
        return min(s.num_blocks for s in self.stages)

    @property
    def kv_cache_tokens(self) -> int:
        return self.num_blocks * self.block_size

    @property
    def kv_dtype(self) -> str:
        """The cache dtype, ``k/v`` when K and V differ."""
        return kv_dtype_name(self.k_dtype, self.v_dtype)

    @property
    def paged_waste_bytes(self) -> int | None:
        if self.request_bytes is None or self.ideal_request_bytes is None:
            return None
        return self.request_bytes - self.ideal_request_bytes
