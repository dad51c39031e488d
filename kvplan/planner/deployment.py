"""What the planner is given: a deployment (model, GPU, settings) and its overhead estimate."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from kvplan.arguments import as_fraction, as_parallel, check_ints
from kvplan.catalog.lookup import as_spec
from kvplan.hardware.gpus import GPU
from kvplan.model import dtypes
from kvplan.model.spec import ModelSpec
from kvplan.units import MiB, fraction_of

DEFAULT_UTILIZATION = Fraction(9, 10)
DEFAULT_BLOCK_SIZE = 16
DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192
DEFAULT_MAX_NUM_SEQS = 1024


@dataclass(frozen=True, slots=True)
class Overhead:
    """Memory a serving engine needs besides weights and KV cache, per GPU.

    The estimate (``source="estimate"``), read off vLLM v0.19 profiles on H100:

    - activation peak of a profiling run of ``max_num_batched_tokens`` (T, default 8,192)
      tokens and ``max_num_seqs`` (S, 1,024) sampled sequences:
      ``T x (4 x hidden + 2 x intermediate / tp) x 2 B + S x vocab x 8 B`` (hidden states,
      the MLP's gate and up projections, fp32 logits and their sampling copy). Llama 3.1 8B:
      0.69 GiB + 0.98 GiB = 1.67 GiB (vLLM measures 1.89 GiB).
    - non-torch memory (CUDA context, cuBLAS workspaces): 256 MiB, plus 1,792 MiB of NCCL and
      all-reduce buffers when tensor-parallel (vLLM: 0.25 GiB at TP 1, 2.07 GiB at TP 2).
    - CUDA graphs: 0 here, since vLLM up to v0.19 captures them after sizing the KV cache, out
      of the ``1 - utilization`` headroom.

    Engine profiles replace this with each engine's own rules; ``overhead=`` replaces it whole.
    """

    activation_bytes: int
    non_torch_bytes: int
    cuda_graph_bytes: int
    source: str

    @property
    def total_bytes(self) -> int:
        return self.activation_bytes + self.non_torch_bytes + self.cuda_graph_bytes


def estimate_overhead(
    spec: ModelSpec | str,
    tensor_parallel_size: int = 1,
    max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS,
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS,
    ranks: int | None = None,
) -> Overhead:
    """The documented overhead estimate (see ``Overhead``) for one GPU; ``ranks``: the GPUs
    of its collective group when not ``tensor_parallel_size`` (expert parallelism). ``spec``
    may be a model's name. Raises UnitError for a count out of range, ArgumentTypeError (a
    TypeError) for an argument of the wrong type."""
    spec = as_spec(spec)
    as_parallel(tensor_parallel_size, "tensor_parallel_size")
    check_ints(minimum=1, max_num_batched_tokens=max_num_batched_tokens, max_num_seqs=max_num_seqs)
    if ranks is not None:
        as_parallel(ranks, "ranks")
    hidden = spec.hidden_size or 4096
    intermediate = spec.intermediate_size or 4 * hidden
    hidden_bytes = max_num_batched_tokens * (4 * hidden + 2 * intermediate // tensor_parallel_size)
    logits_bytes = max_num_seqs * (spec.vocab_size or 32000) * 8
    group = tensor_parallel_size if ranks is None else ranks
    non_torch = 256 * MiB + (1792 * MiB if group > 1 else 0)
    return Overhead(hidden_bytes * 2 + logits_bytes, non_torch, 0, "estimate")


def given_overhead(overhead_bytes: int) -> Overhead:
    """An overhead the user measured (``--overhead 3GiB``), in place of the estimate."""
    return Overhead(overhead_bytes, 0, 0, "given")


def usable_bytes(total_bytes: int, utilization: Fraction) -> int:
    """``floor(total x utilization)``: what the engine may allocate on one GPU."""
    return fraction_of(total_bytes, utilization)


def parse_utilization(value: float | str | Fraction) -> Fraction:
    """``0.9`` -> 9/10 exactly (via its decimal text, never binary float error), in (0, 1]."""
    return as_fraction(value, "gpu_memory_utilization")


@dataclass(frozen=True, slots=True)
class Deployment:
    """Everything but the question: the model, where it runs and how it is configured."""

    spec: ModelSpec
    gpu: GPU
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    gpu_memory_utilization: Fraction = DEFAULT_UTILIZATION
    kv_cache_dtype: str | None = None
    dtype: str | None = None
    quantization: str | None = None
    overhead_bytes: int | None = None
    kv_cache_memory_bytes: int | None = None
    block_size: int = DEFAULT_BLOCK_SIZE
    max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS
    #: Data-parallel attention with expert parallelism (vLLM, SGLang): each of this many GPUs
    #: serves its own requests (attention and cache whole on each, tensor parallel 1) and holds
    #: 1/expert_parallel_size of the routed experts. 1: no expert parallelism.
    expert_parallel_size: int = 1

    def overhead(self) -> Overhead:
        """The given overhead, or the documented estimate for this deployment (with the
        collective buffers of a tensor- or expert-parallel group)."""
        if self.overhead_bytes is not None:
            return given_overhead(self.overhead_bytes)
        ranks = max(self.tensor_parallel_size, self.expert_parallel_size)
        return estimate_overhead(
            self.spec, self.tensor_parallel_size, self.max_num_batched_tokens, ranks=ranks
        )

    @property
    def served_dtype(self) -> str:
        """The dtype the model runs in (``kvplan.model.dtypes``: a float32 checkpoint is served in
        bfloat16, as the engines' ``--dtype auto`` does)."""
        return dtypes.served_dtype(self.spec, dtype=self.dtype)[0].name

    def cache_dtypes(self) -> dtypes.CacheDTypes:
        """The run and cache dtypes of this deployment, with the reason."""
        return dtypes.cache_dtypes(self.spec, kv_cache_dtype=self.kv_cache_dtype, dtype=self.dtype)
