"""vLLM's profiled memory besides the KV cache, per GPU: weights, the activation peak of the
profiling run, non-torch memory and (from v0.21.0) the CUDA-graph estimate.

kvplan.engines.vllm subtracts these from ``total x gpu_memory_utilization`` to size the pool.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvplan.engines.vllm_calibration import PPM, Calibration
from kvplan.engines.vllm_config import VllmConfig
from kvplan.engines.vllm_cudagraph import cuda_graphs
from kvplan.engines.vllm_lora import LORA_CUDA_GRAPH_CASES
from kvplan.engines.vllm_speculative import with_default_tokens
from kvplan.engines.vllm_versions import (
    CUDA_GRAPH_BUDGET,
    SAMPLER_WARMUP_LINES,
    V1_ONLY_SPECULATIVE,
    V2_RUNNER,
    V2_RUNNER_HYBRIDS,
)
from kvplan.model.dtypes import served_dtype
from kvplan.model.spec import ModelSpec
from kvplan.units import GiB, MiB, resolve_dtype

__all__ = ["PCIE_TP_NON_TORCH_BYTES", "Overhead", "calibrated", "estimate_overhead", "v2_runner"]


#: non-torch memory per GPU with tensor parallelism over PCIe: the mean of the two public
#: logs (0.09 GiB on 4 A30s, 0.21 GiB on 4 L40S): 0.15 GiB
PCIE_TP_NON_TORCH_BYTES = 15 * GiB // 100


@dataclass(frozen=True, slots=True)
class Overhead:
    """vLLM's profiled memory besides the weights, per GPU, as modelled here.

    - ``weights``: parameters in their formats (kvplan.model.weights), plus the rotary cos/sin cache
      of ``max_position_embeddings x head_dim`` values in the model dtype.
    - ``peak_activation`` of the profiling run. The V1 model runner: the MLP's gate and up
      projections for ``max_num_batched_tokens`` tokens (``T x 2 x intermediate x dtype
      bytes``) and, on the stage that samples, ``max_num_seqs x vocab x 12 B`` (fp32 logits
      and two fp32 working copies in the sampler). Llama 3.1 8B: 0.44 + 1.47 = 1.90 GiB
      (logged 1.89). The V2 model runner (``v2_runner``): the larger of the forward, the gate
      and up output with its activation and three hidden states, ``T x (3 x intermediate +
      3 x hidden) x dtype bytes``, and the dummy sampler's logits in the model dtype,
      ``min(T, max_num_seqs) x vocab x dtype bytes`` (its dummy requests skip top-k, top-p
      and the fp32 copy). Qwen2.5-1.5B, T 8192: 0.48 GiB (logged 0.5, where V1's rule
      gives 2.01). From v0.33 the dummy sampler runs twice, the second time with every
      sampling parameter on: the logits in the model dtype beside three float32 copies,
      ``min(T, max_num_seqs) x vocab x (dtype bytes + 12)`` (read in
      vllm/v1/worker/gpu/sample/sampler.py; not measured on a GPU): Llama 3.1 8B at the H100
      defaults 1,024 x 128,256 x 14 = 1.71 GiB, above its forward's 0.84.
    - ``non_torch``: CUDA context and library workspaces: 256 MiB; with tensor parallelism the
      NCCL and custom all-reduce buffers make it 2.07 GiB at TP 2, plus 32 MiB per further rank
      pair (logged 2.07 at TP 2 and 2.13 at TP 4); 72 MiB on pipeline stages without TP (0.07
      GiB logged). On GPUs that share no NVLink (a PCIe-only system in the catalog: L40S, L4,
      RTX cards) vLLM's custom all-reduce and its symmetric-memory buffers stay off and TP
      takes ``PCIE_TP_NON_TORCH_BYTES``, 0.15 GiB: the middle of the two public PCIe logs
      (tests/data/vllm_non_torch_logs.json: 0.09 GiB on 4 A30s, 0.21 on 4 L40S).
    - ``cuda_graph``: from v0.21.0 the estimate vLLM subtracts for its CUDA graphs
      (kvplan.engines.vllm_cudagraph: graphs x layers x 4,734 B x the hidden size's root,
      and a first capture per expert parameter, fitted to public logs; 102 graphs of Llama
      3.1 8B's 32 layers = 0.92 GiB with the defaults on an H100); 0 before, and with
      ``enforce_eager``.
    These constants are read off vLLM v0.19 profiles on H100 (shared reference logs).
    """

    weights_bytes: int
    activation_bytes: int
    non_torch_bytes: int
    cuda_graph_bytes: int = 0

    @property
    def total_bytes(self) -> int:
        """What the budget takes before the KV cache: the sum of the four terms."""
        return (
            self.weights_bytes
            + self.activation_bytes
            + self.non_torch_bytes
            + self.cuda_graph_bytes
        )


def calibrated(overhead: Overhead, c: Calibration) -> Overhead:
    """``overhead`` with a site's fitted terms (kvplan.engines.vllm_calibration): activation
    and CUDA graphs scaled, non-torch memory replaced by the logged figure (when the logs print
    one) and the remainder added to it."""
    non_torch = overhead.non_torch_bytes if c.non_torch_bytes is None else c.non_torch_bytes
    return replace(
        overhead,
        activation_bytes=overhead.activation_bytes * c.activation_ppm // PPM,
        cuda_graph_bytes=overhead.cuda_graph_bytes * c.cuda_graph_ppm // PPM,
        non_torch_bytes=non_torch + c.other_bytes,
    )


def v2_runner(spec: ModelSpec, cfg: VllmConfig) -> bool:
    """Whether vLLM runs ``spec`` on its V2 model runner by default on ``cfg``'s line."""
    method = cfg.speculative.method if cfg.speculative is not None else ""
    if method in V1_ONLY_SPECULATIVE:
        return False
    recurrent = any(layer.state_bytes for layer in spec.layers)
    return cfg.version in (V2_RUNNER_HYBRIDS if recurrent else V2_RUNNER)


def _decode_query_len(spec: ModelSpec, cfg: VllmConfig) -> int:
    """Tokens a request decodes in one step: 1 + the speculative tokens."""
    if cfg.speculative is None:
        return 1
    return with_default_tokens(cfg.speculative, spec).decode_query_len


def estimate_overhead(
    spec: ModelSpec,
    cfg: VllmConfig,
    *,
    samples: bool,
    weights_bytes: int,
    gpu_name: str = "",
    num_layers: int = 0,
    pcie_only: bool = False,
) -> Overhead:
    """The modelled profile of one GPU (see ``Overhead``); ``gpu_name`` picks the default
    largest CUDA-graph capture size (1024 on B200-class GPUs, else 512); ``num_layers`` the
    decoder layers its graphs run (a pipeline stage's; all by default); ``pcie_only`` that the
    GPUs share no NVLink (their tensor parallelism takes the PCIe non-torch figure)."""
    dtype = resolve_dtype(served_dtype(spec, "vllm", dtype=cfg.dtype)[0].name)
    head_dim = spec.head_dim or (spec.hidden_size or 0) // spec.num_attention_heads
    rotary = (spec.max_position_embeddings or 0) * head_dim * dtype.block_bytes
    intermediate = spec.intermediate_size or 4 * (spec.hidden_size or 4096)
    tokens, vocab = cfg.batched_tokens, spec.vocab_size or 32000
    if v2_runner(spec, cfg):
        hidden = spec.hidden_size or 4096
        activation = tokens * (3 * intermediate + 3 * hidden) * dtype.block_bytes
        if samples:
            requests = min(tokens, cfg.num_seqs)
            logits = requests * vocab * dtype.block_bytes
            if cfg.version in SAMPLER_WARMUP_LINES:
                # v0.33: a second pass with every sampling parameter: the logits stay, and
                # three float32 copies (the processed logits, the sampling probabilities,
                # the log-probabilities) live beside them
                logits += requests * vocab * 3 * 4
            activation = max(activation, logits)
    else:
        activation = tokens * 2 * intermediate * dtype.block_bytes
        if samples:
            activation += cfg.num_seqs * vocab * 12
    tp, pp = cfg.tensor_parallel_size, cfg.pipeline_parallel_size
    if tp > 1 and pcie_only:
        non_torch = PCIE_TP_NON_TORCH_BYTES
    elif tp > 1:
        non_torch = 2070 * GiB // 1000 + (tp - 2) // 2 * 32 * MiB
    elif pp > 1:
        non_torch = 72 * MiB
    else:
        non_torch = 256 * MiB
    cuda_graph = 0
    if cfg.version in CUDA_GRAPH_BUDGET:
        layers = num_layers or spec.num_hidden_layers
        experts = int(spec.num_expert_parameters or 0) * layers // spec.num_hidden_layers // tp
        graphs = cuda_graphs(
            cfg.num_seqs,
            cfg.batched_tokens,
            gpu_name=gpu_name,
            enforce_eager=cfg.enforce_eager,
            num_layers=layers,
            hidden_size=spec.hidden_size or 4096,
            expert_parameters=experts,
            decode_query_len=_decode_query_len(spec, cfg),
            v1_runner=not v2_runner(spec, cfg),
        )
        # with LoRA, every size is captured twice: no adapter and max_loras + 1 of them
        cuda_graph = graphs.estimate_bytes * (1 if cfg.lora is None else LORA_CUDA_GRAPH_CASES)
    return Overhead(weights_bytes + rotary, activation, non_torch, cuda_graph)
