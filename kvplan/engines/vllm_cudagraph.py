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

Fitted: ``estimate = graphs x layers x GRAPH_BYTES_PER_LAYER_ROOT_WIDTH x isqrt(hidden)``, plus
for models with routed experts a first-capture term of ``MOE_FIRST_CAPTURE_BYTES_PER_MPARAM``
per million expert parameters on the GPU. A PIECEWISE graph is one piece per layer, so what
each graph keeps grows with the layers; per layer it grows with the width, but less than in
proportion (its kernels' fixed state beside width-sized buffers); the largest size's
activations are shared by the pool. Fitted on the public logs that print the graph counts and
the estimate for a model of known depth and width without speculative decoding
(tests/data/vllm_cudagraph_logs.json): the constant per layer and root width is the lower
median over 12 models without experts (Qwen2.5 7B and 72B, Qwen3 0.6B and 8B, Qwen3.5 4B and
9B, Qwen3.6 27B four times, Gemma 4 E4B, LFM2.5 1.2B): 4,734 B, 0.289 MiB a graph and layer at
hidden 4096. Leave-one-out: median error 9%, worst -63% (Qwen3-8B on v0.19.1, 2.35 GiB, three
times its neighbours); ``graphs x layers`` alone erred by a median 24% and up to +153%. With
experts even one graph of size 1 costs 0.36 to 0.47 GiB (Qwen3.6 35B-A3B, Gemma 4 26B-A4B,
all NVFP4): the residual after the per-graph term, per expert parameter, lower median over 8
logs: 11,941 B per million (0.36 GiB for Qwen3.6 35B-A3B's 32.2 G); leave-one-out median 15%,
worst -59%, where the term left out errs by -27 to -97%. Llama 3.1 8B on an H100 with the
defaults: 102 graphs x 32 layers x 64 x 4,734 B = 0.92 GiB.

What no public log pins: the first capture's growth with ``max_num_batched_tokens`` seen on
gated-delta-net hybrids (vLLM issue 50780); how layer kinds (attention, gated delta net, Mamba,
experts) and tensor parallelism weigh; the drafter's own graphs; and the large-MoE
estimates reported as profiler defects (vLLM issues 45178, 53013). Give ``--kv-cache-memory``
(what vLLM prints as ``Available KV cache memory``) for exact figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import isqrt

__all__ = [
    "BLACKWELL_DATACENTER",
    "GRAPH_BYTES_PER_LAYER_ROOT_WIDTH",
    "MOE_FIRST_CAPTURE_BYTES_PER_MPARAM",
    "CudaGraphs",
    "capture_sizes",
    "cuda_graphs",
]

#: bytes of estimate per captured graph, decoder layer and unit of the hidden size's integer
#: square root: the lower median of the fitted logs without experts (Qwen2.5-72B at TP 4 on
#: v0.19.0, 2.73 GiB / (86 graphs x 80 layers x 90) = 4,734 B)
GRAPH_BYTES_PER_LAYER_ROOT_WIDTH = 4_734
#: bytes of the first capture per million routed-expert parameters on the GPU: the lower
#: median of the fitted logs with experts, after the per-graph term (Qwen3.6 35B-A3B on
#: v0.20.0, three PIECEWISE graphs and one FULL: 0.39 GiB)
MOE_FIRST_CAPTURE_BYTES_PER_MPARAM = 11_941
#: GPUs of compute capability 10.x, whose default largest capture size is 1024, not 512
BLACKWELL_DATACENTER = ("b200", "b300", "gb200", "gb300")


@dataclass(frozen=True, slots=True)
class CudaGraphs:
    """The graphs vLLM captures and the memory it estimates for them, per GPU."""

    num_piecewise: int
    num_full: int
    num_layers: int = 0  # the decoder layers each graph runs (a pipeline stage's)
    hidden_size: int = 0
    expert_parameters: int = 0  # the routed experts' parameters on this GPU

    @property
    def num_graphs(self) -> int:
        return self.num_piecewise + self.num_full

    @property
    def estimate_bytes(self) -> int:
        """What vLLM prints as ``Estimated CUDA graph memory``, modelled (bytes); 0 without
        graphs."""
        if not self.num_graphs:
            return 0
        per_graph = self.num_layers * isqrt(self.hidden_size) * GRAPH_BYTES_PER_LAYER_ROOT_WIDTH
        first = self.expert_parameters * MOE_FIRST_CAPTURE_BYTES_PER_MPARAM // 10**6
        return self.num_graphs * per_graph + first


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
    hidden_size: int = 0,
    expert_parameters: int = 0,
    decode_query_len: int = 1,
    v1_runner: bool = False,
) -> CudaGraphs:
    """The default FULL_AND_PIECEWISE capture for these flags, of graphs running
    ``num_layers`` decoder layers; none with ``enforce_eager``. A FULL decode graph is
    captured for each size from ``1 + k`` to ``(1 + k) x max_num_seqs``
    (``initialize_cudagraph_keys``). ``hidden_size`` and ``expert_parameters`` (the routed
    experts' on this GPU) size the estimate."""
    if enforce_eager:
        return CudaGraphs(0, 0, num_layers, hidden_size, expert_parameters)
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
    return CudaGraphs(len(sizes), full, num_layers, hidden_size, expert_parameters)
