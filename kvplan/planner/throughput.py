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
from typing import TYPE_CHECKING

from kvplan.hardware.systems import System
from kvplan.model.spec import ModelSpec
from kvplan.planner.result import Plan
from kvplan.speed.roofline import Communication

if TYPE_CHECKING:
    from kvplan.speed.roofline import DecodeStep, RankModel

COMMUNICATION_NOT_MODELLED = (
    "communication is added to the step, never overlapped with compute; link latency, kernel"
    " launches, prefill interference and the scheduler are left out; all-to-all counts one"
    " expert a token"
)

_ACTIVATION_BYTES = 2  # bf16 hidden states on the wire


def communication(
    spec: ModelSpec, system: System | None, batch_size: int, tp: int, pp: int, ep: int
) -> Communication:
    """The communication of one decode step of ``batch_size`` requests (the module docstring
    says what is counted). None for a ``system`` or a bandwidth it lacks: not estimated, 0.

    Worked example (Llama 3.1 70B, TP 8 on HGX H100 at 450 GB/s, 10 requests): a message is
    10 x 8,192 x 2 B = 163,840 B; a ring moves 2 x 7/8 of it, 2 a layer, 80 layers:
    160 x 286,720 B / 450 GB/s = 0.102 ms."""
    if system is None:
        return Communication()
    message = batch_size * (spec.hidden_size or 0) * _ACTIVATION_BYTES
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
    return Communication(tp_time, pp_time, ep_time)


def expert_parallel_rank(m: RankModel, weights_per_gpu_bytes: int) -> RankModel:
    """``m`` as one data-parallel rank with expert parallelism: every GPU reads its own weights
    whole (its slice of the experts is hit by some token of the ranks' requests in flight) and
    does the active FLOPs of its own requests."""
    return replace(
        m,
        layers_bytes=max(0, weights_per_gpu_bytes - m.head_bytes),
        num_parameters=m.num_active_parameters,
    )


def round_seconds(step: DecodeStep, pp: int, *, estimated: bool) -> Fraction:
    """One decode round of a replica of ``pp`` stages, communication apart: with as many
    micro-batches in flight as stages, each GPU reads its weights once per micro-batch (the
    whole model's weights per round) but only 1/pp of the cache, and does 1/pp of the FLOPs.
    ``pp`` 1 gives the step's own bound (or estimate)."""
    bw = step.bandwidth_efficiency if estimated else Fraction(1)
    ce = step.compute_efficiency if estimated else Fraction(1)
    memory = step.memory_seconds
    if pp > 1 and step.bytes_moved:
        moved = step.weight_read_bytes + (step.kv_read_bytes + step.kv_write_bytes) // pp
        memory = memory * moved / step.bytes_moved
    return max(memory / bw, step.compute_seconds / pp / ce)


@dataclass(frozen=True, slots=True)
class StepTime:
    """One decode round of one replica (every request one token), in seconds."""

    batch_size: int
    compute_seconds: Fraction  # the roofline estimate of the GPUs' own work
    communication: Communication

    @property
    def communication_seconds(self) -> Fraction:
        return self.communication.seconds

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
    added. FLOPs run at the peak the weights allow (``kvplan.speed.roofline.matmul_peak``)."""
    from kvplan.speed.roofline import (
        DEFAULT_BANDWIDTH_EFFICIENCY,
        DEFAULT_COMPUTE_EFFICIENCY,
        decode_step,
        rank_model,
    )

    tp, pp, ep = p.tensor_parallel_size, p.pipeline_parallel_size, p.expert_parallel_size
    m = rank_model(spec, tp, kv_cache_dtype, dtype, quantization)
    if ep > 1:
        m = expert_parallel_rank(m, sum(s.weights_bytes for s in p.stages))
    step = decode_step(
        m,
        p.gpu,
        batch_size,
        context_tokens,
        DEFAULT_BANDWIDTH_EFFICIENCY,
        DEFAULT_COMPUTE_EFFICIENCY,
    )
    c = communication(spec, system, batch_size, tp, pp, ep)
    return StepTime(batch_size, round_seconds(step, pp, estimated=True), c)
