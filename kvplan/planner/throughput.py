"""Decode throughput of a planned shape: the roofline step plus the communication that tensor,
pipeline and expert parallelism add, from the system's interconnect bandwidths.

Per decode step (one token for every request of a replica):

- TP all-reduce: 2 a layer (after attention, after the MLP) of ``batch x hidden x 2 B``; a
  ring moves ``2 (tp - 1) / tp`` of it through each GPU, over the scale-up links (the node's
  PCIe for PCIe-only systems).
- PP: each stage boundary sends ``batch x hidden x 2 B`` over the network; with as many
  micro-batches in flight as stages, every stage reads its weights once per micro-batch, so a
  round reads the whole model's weights and 1/pp of the cache per GPU.
- EP all-to-all (data-parallel attention): per MoE layer each token's hidden state goes to
  its expert's GPU and back (dispatch + combine), ``(ep - 1) / ep`` of it leaving the GPU,
  over scale-up inside the domain, the network beyond it. One expert a token is counted: a
  lower bound (DeepSeek V3 routes to 8).

What it leaves out: overlap of communication with compute, link latency, kernel launch gaps,
prefill interference and the scheduler (``COMMUNICATION_NOT_MODELLED``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction

from kvplan.planner.result import Plan
from kvplan.spec import ModelSpec
from kvplan.systems import System

COMMUNICATION_NOT_MODELLED = (
    "communication is added to the step, never overlapped with compute; link latency, kernel"
    " launches, prefill interference and the scheduler are left out; all-to-all counts one"
    " expert a token"
)

_ACTIVATION_BYTES = 2  # bf16 hidden states on the wire


@dataclass(frozen=True, slots=True)
class StepTime:
    """One decode round of one replica (every request one token), in seconds."""

    batch_size: int
    compute_seconds: Fraction  # the roofline estimate of the GPUs' own work
    tensor_parallel_seconds: Fraction
    pipeline_seconds: Fraction
    expert_parallel_seconds: Fraction

    @property
    def communication_seconds(self) -> Fraction:
        return self.tensor_parallel_seconds + self.pipeline_seconds + self.expert_parallel_seconds

    @property
    def seconds(self) -> Fraction:
        return self.compute_seconds + self.communication_seconds

    def tokens_per_second(self) -> Fraction:
        return Fraction(self.batch_size) / self.seconds if self.seconds else Fraction(0)


def decode_round(
    spec: ModelSpec,
    p: Plan,
    system: System,
    batch_size: int,
    context_tokens: int,
    *,
    kv_cache_dtype: str | None = None,
    dtype: str | None = None,
    quantization: str | None = None,
) -> StepTime:
    """The decode round of one replica of ``p`` holding ``batch_size`` requests at
    ``context_tokens`` each (the estimate at the default achieved fractions), communication
    added. FP8 weights run at the GPU's fp8 peak when it has one."""
    from kvplan.performance import DEFAULT_BANDWIDTH_EFFICIENCY, DEFAULT_COMPUTE_EFFICIENCY
    from kvplan.roofline import decode_step, rank_model

    tp, pp, ep = p.tensor_parallel_size, p.pipeline_parallel_size, p.expert_parallel_size
    m = rank_model(spec, tp, kv_cache_dtype, dtype, quantization)
    if ep > 1:
        # every GPU reads its own weights whole (its slice of the experts is hit by some token
        # of the ep x batch in flight) and does its share of the active FLOPs
        weights = sum(s.weights_bytes for s in p.stages)
        m = replace(
            m,
            layers_bytes=max(0, weights - m.head_bytes),
            num_parameters=m.num_active_parameters,
        )
    gpu = p.gpu
    if p.weights_format.startswith("fp8") and gpu.fp8_flops:
        gpu = replace(gpu, bf16_flops=gpu.fp8_flops)  # fp8 GEMMs run at the fp8 peak
    step = decode_step(
        m, gpu, batch_size, context_tokens, DEFAULT_BANDWIDTH_EFFICIENCY, DEFAULT_COMPUTE_EFFICIENCY
    )
    compute = step.estimate_seconds
    if pp > 1:  # a round reads all weights once per GPU but only 1/pp of the cache
        moved = step.weight_read_bytes + (step.kv_read_bytes + step.kv_write_bytes) // pp
        memory = Fraction(moved, gpu.bandwidth_bytes_per_s) / DEFAULT_BANDWIDTH_EFFICIENCY
        compute = max(memory, step.compute_seconds / pp / DEFAULT_COMPUTE_EFFICIENCY)
    hidden = spec.hidden_size or 0
    message = batch_size * hidden * _ACTIVATION_BYTES
    layers = spec.num_hidden_layers
    tp_time = pp_time = ep_time = Fraction(0)
    if tp > 1 and system.scale_up_bytes_per_s:
        ring = Fraction(2 * (tp - 1), tp) * message
        tp_time = 2 * layers * ring / system.scale_up_bytes_per_s
    if pp > 1 and system.scale_out_bytes_per_s:
        pp_time = Fraction((pp - 1) * message, system.scale_out_bytes_per_s)
    if ep > 1:
        within = ep <= system.scale_up_gpus
        link = system.scale_up_bytes_per_s if within else system.scale_out_bytes_per_s
        if link:
            ep_time = Fraction(2 * layers * (ep - 1) * message, ep * link)
    return StepTime(batch_size, compute, tp_time, pp_time, ep_time)
