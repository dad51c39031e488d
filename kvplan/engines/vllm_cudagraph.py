"""The CUDA-graph memory that vLLM subtracts from the KV cache budget (v0.21.0 onward).

Read from vLLM 0.32's source:

- ``vllm/v1/worker/gpu_worker.py``: after the profiling run the worker calls
  ``profile_cudagraph_memory()`` and sets ``available = requested - non-KV memory - estimate``;
  on by default since v0.21.0 (``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0`` turns it off), and
  0 when no graph is captured (``--enforce-eager``, ``cudagraph_mode`` NONE).
- ``vllm/v1/worker/gpu_model_runner.py``: per graph mode it captures the two largest sizes and
  extrapolates: ``max(first capture over modes) + sum over modes of (n - 1) x second capture``
  (at least 1 MiB a graph). The estimate is therefore about ``n x per-graph`` bytes.
- ``vllm/config/vllm.py`` (``_set_cudagraph_sizes``) and ``vllm/v1/cudagraph_dispatcher.py``:
  capture sizes ``1, 2, 4, 8..248 by 8, 256..max by 16`` with ``max = min(2 x max_num_seqs,
  512)`` (1024 on B200-class GPUs) and at most ``max_num_batched_tokens``, plus
  ``max_num_batched_tokens`` and ``max_num_seqs`` when they fit; the default mode
  FULL_AND_PIECEWISE captures a PIECEWISE graph for every size and a FULL decode graph for
  every size up to ``max_num_seqs``. H100, ``max_num_seqs`` 1024: 51 + 51 = 102 graphs.

Fitted: ``estimate = graphs x PER_GRAPH_BYTES``. PER_GRAPH_BYTES is the median, over the public
logs that print both the graph counts and the estimate (tests/data/vllm_cudagraph_logs.json,
7 cases), of estimate / graphs: 0.08 GiB / 4 graphs = 20.48 MiB (Qwen3.6-27B on one RTX 5090).
Leave-one-out (tests/test_vllm_cudagraph.py): median error 18%, worst +355% (a small model
whose 30 graphs took 0.14 GiB).

What no public log pins: how the per-graph figure scales with the model (layers, hidden size,
experts, tensor parallelism: five of the seven cases are 64-layer Qwen 27B hybrids at TP 1 to
4, the others name no model); the first capture's growth with ``max_num_batched_tokens`` seen on
gated-delta-net hybrids (vLLM issue 50780); speculative decoding's decode sizes; and the
large-MoE estimates reported as profiler defects (vLLM issues 45178, 53013). Give
``--kv-cache-memory`` (what vLLM prints as ``Available KV cache memory``) for exact figures.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "BLACKWELL_DATACENTER",
    "PER_GRAPH_BYTES",
    "CudaGraphs",
    "capture_sizes",
    "cuda_graphs",
]

#: bytes of estimate per captured graph: the median of the fitted logs (20.48 MiB)
PER_GRAPH_BYTES = 21_474_836
#: GPUs of compute capability 10.x, whose default largest capture size is 1024, not 512
BLACKWELL_DATACENTER = ("b200", "b300", "gb200", "gb300")


@dataclass(frozen=True, slots=True)
class CudaGraphs:
    """The graphs vLLM captures and the memory it estimates for them, per GPU."""

    num_piecewise: int
    num_full: int

    @property
    def num_graphs(self) -> int:
        return self.num_piecewise + self.num_full

    @property
    def estimate_bytes(self) -> int:
        """What vLLM prints as ``Estimated CUDA graph memory``, modelled (bytes)."""
        return self.num_graphs * PER_GRAPH_BYTES


def capture_sizes(
    max_num_seqs: int, max_num_batched_tokens: int, *, largest_default: int = 512
) -> tuple[int, ...]:
    """vLLM's default CUDA-graph capture sizes in tokens (no speculative decoding).

    max_num_seqs 1024, 8192 batched tokens: 1, 2, 4, 8..248 and 256..512 = 51 sizes."""
    largest = min(2 * max_num_seqs, largest_default, max_num_batched_tokens)
    sizes = {n for n in (1, 2, 4) if n <= largest}
    sizes.update(range(8, min(largest + 1, 256), 8))
    sizes.update(range(256, largest + 1, 16))
    for extra in (max_num_batched_tokens, max_num_seqs):
        if extra <= largest:
            sizes.add(extra)
    return tuple(sorted(sizes))


def cuda_graphs(
    max_num_seqs: int, max_num_batched_tokens: int, *, gpu_name: str, enforce_eager: bool
) -> CudaGraphs:
    """The default FULL_AND_PIECEWISE capture for these flags; none with ``enforce_eager``."""
    if enforce_eager:
        return CudaGraphs(0, 0)
    largest = 1024 if gpu_name.lower() in BLACKWELL_DATACENTER else 512
    sizes = capture_sizes(max_num_seqs, max_num_batched_tokens, largest_default=largest)
    return CudaGraphs(len(sizes), sum(1 for n in sizes if n <= max_num_seqs))
