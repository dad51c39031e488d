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

Fitted: ``estimate = graphs x layers x PER_LAYER_GRAPH_BYTES``. A captured graph's memory is
mostly what the graph holds per kernel it launches, and the kernels grow with the layers (a
PIECEWISE graph is one piece per layer); the activations of the largest size are shared by
the pool. PER_LAYER_GRAPH_BYTES is the lower median, over the public logs that print the graph
counts and the estimate for a model of known depth (tests/data/vllm_cudagraph_logs.json, 6
cases: four 64-layer Qwen3.6-27B hybrids with 4 to 7 graphs at TP 1 to 4, a 28-layer dense
Qwen2.5-7B with 54 and a 16-layer LFM2.5 with 136), of estimate / (graphs x layers): 0.09 GiB /
(5 x 64) = 0.288 MiB (Qwen3.6-27B at TP 2). Leave-one-out (tests/test_vllm_cudagraph.py):
median error 22%, worst -31%; a constant per graph, fitted the same way, erred by +192% on the
dense model and +369% on LFM2.5. Llama 3.1 8B on an H100 with the defaults: 102 graphs x 32
layers = 0.92 GiB.

What no public log pins: the first capture's growth with ``max_num_batched_tokens`` seen on
gated-delta-net hybrids (vLLM issue 50780); how layer kinds (attention, gated delta net, Mamba,
experts) and tensor parallelism weigh; the drafter's own graphs; and the large-MoE
estimates reported as profiler defects (vLLM issues 45178, 53013). Give ``--kv-cache-memory``
(what vLLM prints as ``Available KV cache memory``) for exact figures.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "BLACKWELL_DATACENTER",
    "PER_LAYER_GRAPH_BYTES",
    "CudaGraphs",
    "capture_sizes",
    "cuda_graphs",
]

#: bytes of estimate per captured graph and decoder layer: the lower median of the fitted logs
#: (0.09 GiB / (5 graphs x 64 layers) = 301,989 B, 0.288 MiB)
PER_LAYER_GRAPH_BYTES = 301_989
#: GPUs of compute capability 10.x, whose default largest capture size is 1024, not 512
BLACKWELL_DATACENTER = ("b200", "b300", "gb200", "gb300")


@dataclass(frozen=True, slots=True)
class CudaGraphs:
    """The graphs vLLM captures and the memory it estimates for them, per GPU."""

    num_piecewise: int
    num_full: int
    num_layers: int = 0  # the decoder layers each graph runs (a pipeline stage's)

    @property
    def num_graphs(self) -> int:
        return self.num_piecewise + self.num_full

    @property
    def estimate_bytes(self) -> int:
        """What vLLM prints as ``Estimated CUDA graph memory``, modelled (bytes)."""
        return self.num_graphs * self.num_layers * PER_LAYER_GRAPH_BYTES


def _request_counts(max_reqs: int, largest_default: int) -> list[int]:
    """The request-count grid speculative decode sizes are scaled from (``request_counts``)."""
    top = min(max_reqs, largest_default)
    counts = {n for n in (1, 2, 4) if n <= top} | {top}
    counts.update(range(8, min(top + 1, 256), 8))
    counts.update(range(256, top + 1, 16))
    return sorted(counts)


def capture_sizes(
    max_num_seqs: int,
    max_num_batched_tokens: int,
    *,
    largest_default: int = 512,
    decode_query_len: int = 1,
    round_to_decode: bool = False,
) -> tuple[int, ...]:
    """vLLM's default CUDA-graph capture sizes in tokens (``_set_cudagraph_sizes``).

    max_num_seqs 1024, 8192 batched tokens: 1, 2, 4, 8..248 and 256..512 = 51 sizes. With
    speculative decoding (``decode_query_len`` = 1 + k) the ceiling is ``2 x max_num_seqs x
    (1 + k)`` and the uniform decode batches ``n x (1 + k)`` of the request-count grid are
    added; the V1 model runner then rounds every size up to a multiple of ``1 + k``
    (``round_to_decode``: ``adjust_cudagraph_sizes_for_spec_decode``)."""
    q = decode_query_len
    ceiling = min(2 * max_num_seqs * q, largest_default)
    if q > 1:
        counts = _request_counts(max_num_seqs, largest_default)
        decode = [n * q for n in counts if n * q <= ceiling]
    else:
        decode = [max_num_seqs] if max_num_seqs <= ceiling else []
    largest = min(ceiling, max_num_batched_tokens)
    sizes = {n for n in (1, 2, 4) if n <= largest}
    sizes.update(range(8, min(largest + 1, 256), 8))
    sizes.update(range(256, largest + 1, 16))
    if max_num_batched_tokens <= largest:
        sizes.add(max_num_batched_tokens)
    sizes.update(n for n in decode if n <= max_num_batched_tokens)
    if round_to_decode and q > 1:
        top = max(sizes)
        sizes = {n for n in {-(-n // q) * q for n in sizes} if n <= top}
        sizes = sizes or ({q} if q <= top else set())
    return tuple(sorted(sizes))


def cuda_graphs(
    max_num_seqs: int,
    max_num_batched_tokens: int,
    *,
    gpu_name: str,
    enforce_eager: bool,
    num_layers: int = 0,
    decode_query_len: int = 1,
    v1_runner: bool = False,
) -> CudaGraphs:
    """The default FULL_AND_PIECEWISE capture for these flags, of graphs running
    ``num_layers`` decoder layers; none with ``enforce_eager``. A FULL decode graph is
    captured for each size from ``1 + k`` to ``(1 + k) x max_num_seqs``
    (``initialize_cudagraph_keys``)."""
    if enforce_eager:
        return CudaGraphs(0, 0, num_layers)
    largest = 1024 if gpu_name.lower() in BLACKWELL_DATACENTER else 512
    q = decode_query_len
    sizes = capture_sizes(
        max_num_seqs,
        max_num_batched_tokens,
        largest_default=largest,
        decode_query_len=q,
        round_to_decode=v1_runner,
    )
    full = sum(1 for n in sizes if q <= n <= q * max_num_seqs and n % q == 0)
    return CudaGraphs(len(sizes), full, num_layers)
