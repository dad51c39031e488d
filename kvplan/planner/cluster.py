"""Deployments as engineers build them: whole nodes, tensor parallelism inside the NVLink
domain, pipeline stages across nodes, replicas for load, and for MoE models data-parallel
attention with expert parallelism; ranked by an objective, with what each costs.

The shapes searched, on a system of ``g`` GPUs a node (``kvplan.hardware.systems``):

- ``TP x PP x replicas``: TP a power of two the model's heads allow, at most the scale-up
  domain (the node for PCIe-only cards); PP > 1 only with TP at its widest, each stage then a
  node (or more), since splitting layers inside an NVLink domain loses to TP there.
  Replicas of up to ``g`` GPUs pack ``g // (TP x PP)`` to a node; larger ones take whole nodes.
- ``DP-attention + EP`` (models with fewer active than total parameters): ``ep`` GPUs, each
  serving its own requests (attention and cache whole, so an MLA latent is stored once, not
  once per TP rank), the routed experts split ``ep`` ways (``pool.routed_expert_bytes``).
- ``P/D`` (prefill/decode disaggregation, when asked): a prefill pool holding the prompts in
  flight (``max_num_batched_tokens // prompt`` prompts, at least one) at the prompt length,
  and a decode pool holding the requests at the full length, each the best shape above for
  its role, each in whole nodes. kvplan models no prefill interference on decode, so the
  decode pool alone always holds the same requests on fewer GPUs: under every objective a
  P/D candidate ranks below it, and is listed because it was asked for.

Where the system rents by node, the answer fills its nodes: the GPUs paid for serve replicas.
Each candidate is a ``Plan`` of one replica solved exactly (``solve``): it holds its requests
and one more does not. Its ``concurrency`` is the ``n`` asked, so what a replica's pool has
left (``Plan.free_memory_bytes``) is after its share, ``ceil(n / replicas)`` requests: DeepSeek
V3 at 128K for 64 on 16 H200 DP ranks holds 4 a rank, not the 1 of ``max_concurrency / ranks``.

Under ``objective="cost"`` a system whose GPU has no price cannot be ranked: it is left out
(``ClusterPlan.left_out`` says which and why), and when no GPU has a price the search refuses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from fractions import Fraction

from kvplan.errors import UnitError
from kvplan.hardware.costs import Price, price_for, usd_per_million_tokens
from kvplan.hardware.systems import System
from kvplan.planner.deployment import Deployment
from kvplan.planner.result import Plan
from kvplan.planner.search import (
    DEFAULT_OBJECTIVE,
    DEFAULT_TOP,
    MAX_SEARCH_PP,
    MAX_SEARCH_TP,
    valid_tensor_parallel_sizes,
)
from kvplan.planner.solve import solve
from kvplan.planner.throughput import StepTime, decode_round
from kvplan.units import format_count, format_tokens

OBJECTIVES = ("gpus", "nodes", "cost", "throughput")
#: The most nodes a data-parallel-attention group is grown to.
MAX_EXPERT_PARALLEL_NODES = 16


@dataclass(frozen=True, slots=True)
class Candidate:
    """One deployment shape on one system, sized, priced and timed."""

    plan: Plan  # one replica (one DP rank for DP-attention), ``replicas`` set
    system: System
    num_nodes: int
    billed_gpus: int  # whole nodes where the system rents by node
    price: Price | None
    step: StepTime | None  # one decode round of one replica at its share of the requests
    loses_because: str = ""  # why it ranks below the first; empty for the first
    #: P/D: the prefill pool (its plan holds prompts at the prompt length); this candidate is
    #: then the decode pool, its nodes and GPUs counting both pools.
    prefill: Candidate | None = None
    prefill_prompts: int = 0  # P/D: the prompts in flight the prefill pool was sized for

    @property
    def shape(self) -> str:
        p = self.plan
        if self.prefill is not None:
            pre = self.prefill.billed_gpus
            return f"P/D: prefill {pre} GPUs + decode {self.billed_gpus - pre} GPUs"
        if p.expert_parallel_size > 1:
            return f"DP-attention {p.replicas} + EP {p.expert_parallel_size}"
        return (
            f"TP {p.tensor_parallel_size} x PP {p.pipeline_parallel_size}"
            f" x {p.replicas} replica{'s' if p.replicas > 1 else ''}"
        )

    @property
    def held_requests(self) -> int:
        """Requests of the planned length the whole deployment holds at once."""
        return (self.plan.max_concurrency or 0) * self.plan.replicas

    @property
    def requests_per_replica(self) -> int:
        """Requests of the planned length each replica (each DP rank) holds for the
        ``concurrency`` asked: ``ceil(n / replicas)``, at most what one holds."""
        p = self.plan
        n = p.concurrency if p.concurrency is not None else self.held_requests
        return min(-(-n // p.replicas), p.max_concurrency or 0)

    @property
    def usd_per_hour(self) -> Fraction | None:
        return None if self.price is None else self.price.usd_per_gpu_hour * self.billed_gpus

    @property
    def tokens_per_s(self) -> Fraction | None:
        """Output tokens a second of the whole deployment at the requests asked (estimate)."""
        if self.step is None:
            return None
        return self.step.tokens_per_second() * self.plan.replicas

    @property
    def usd_per_million_tokens(self) -> Fraction | None:
        cost, speed = self.usd_per_hour, self.tokens_per_s
        return None if cost is None or speed is None else usd_per_million_tokens(cost, speed)


@dataclass(frozen=True, slots=True)
class LeftOut:
    """A system the search did not rank, and why (``no list price for mi300x``)."""

    system: str
    gpu: str
    reason: str


@dataclass(frozen=True, slots=True)
class ClusterPlan:
    """The ranked candidates of a search; the first is the answer (``fits`` when any holds)."""

    model: str
    max_model_len: int
    concurrency: int
    objective: str
    candidates: tuple[Candidate, ...]
    message: str
    left_out: tuple[LeftOut, ...] = ()  # systems not ranked (cost: no price for their GPU)

    @property
    def fits(self) -> bool:
        return bool(self.candidates)

    @property
    def best(self) -> Candidate | None:
        return self.candidates[0] if self.candidates else None


def search_cluster(
    d: Deployment,
    systems: Sequence[System],
    length: int,
    n: int,
    *,
    objective: str = DEFAULT_OBJECTIVE,
    top: int = DEFAULT_TOP,
    prices: Sequence[Price] = (),
    max_nodes: int | None = None,
    shared_prefix: int = 0,
    disaggregate: int | None = None,
) -> ClusterPlan:
    """The best ``top`` deployments of ``d``'s model on ``systems`` holding ``n`` requests of
    ``length`` tokens, ranked by ``objective`` (``OBJECTIVES``), at most ``max_nodes`` nodes.
    ``disaggregate``: prompts of this many tokens; the best P/D candidate of each system is
    ranked too and the best of them always listed."""
    if objective not in OBJECTIVES:
        raise UnitError(f"objective {objective!r}; allowed: {', '.join(OBJECTIVES)}")
    if disaggregate is not None and not 1 <= disaggregate <= length:
        raise UnitError(f"disaggregate: a prompt of 1 to {length:,} tokens, not {disaggregate}")
    systems, left_out = _priced(systems, prices) if objective == "cost" else (list(systems), [])
    found: list[Candidate] = []
    split: list[Candidate] = []
    for system in systems:
        here = replace(d, gpu=system.gpu)
        own = [
            _candidate(p, system, length, n, prices, d)
            for p in _shapes(here, system, length, n, shared_prefix, max_nodes)
        ]
        found.extend(own)
        if disaggregate is not None and own:
            pd = _disaggregated(here, system, own, disaggregate, objective, prices, max_nodes)
            split.extend([] if pd is None else [pd])
    ranked = _distinct(sorted([*found, *split], key=lambda c: _key(c, objective)))
    kept = ranked[: max(1, top)]
    if split and not any(c.prefill is not None for c in kept):
        best_split = min(split, key=lambda c: _key(c, objective))
        kept = [*kept[: max(1, top) - 1], best_split] if len(kept) > 1 else [*kept, best_split]
    shown = _explained(kept, objective)
    names = ", ".join(s.name for s in systems)
    if not shown:
        message = (
            f"no deployment of up to {max_nodes or MAX_SEARCH_PP} nodes of {names} holds"
            f" {n} requests of {format_tokens(length)} tokens: lower --max-model-len, quantize"
            " (--quantization, --kv-cache-dtype fp8) or use a larger GPU"
        )
    else:
        b = shown[0]
        message = (
            f"{b.billed_gpus} x {b.system.gpu.name} in {b.num_nodes} node"
            f"{'s' if b.num_nodes > 1 else ''} of {b.system.name}: {b.shape}, holding"
            f" {b.held_requests} requests of {format_tokens(length)} tokens (>= {n})"
        )
    return ClusterPlan(d.spec.name, length, n, objective, tuple(shown), message, tuple(left_out))


def _priced(
    systems: Sequence[System], prices: Sequence[Price]
) -> tuple[list[System], list[LeftOut]]:
    """The systems whose GPU has a price, and the others as left out. Raises UnitError, one
    line naming ``--price GPU=DOLLARS``, when none has one: cost then ranks nothing."""
    kept = [s for s in systems if price_for(s.gpu, prices) is not None]
    unpriced = list(dict.fromkeys(s.gpu.name for s in systems if s not in kept))
    if not kept:
        example = " ".join(f"--price {g}=DOLLARS" for g in unpriced)
        raise UnitError(
            f"--objective cost: no price for {', '.join(unpriced)} (no list price in"
            f" gpu_specs/prices), so nothing can be ranked by cost; give a price per GPU-hour"
            f" with --price GPU=DOLLARS: {example}"
        )
    left_out = [
        LeftOut(
            s.name,
            s.gpu.name,
            f"no list price for {s.gpu.name}; --price {s.gpu.name}=DOLLARS ranks it",
        )
        for s in systems
        if s not in kept
    ]
    return kept, left_out


def _shapes(
    d: Deployment, system: System, length: int, n: int, shared_prefix: int, max_nodes: int | None
) -> list[Plan]:
    """Every shape of ``system`` that holds ``n`` requests, replicas counted, nodes filled."""
    found: list[Plan] = []
    spec = d.spec
    sizes = valid_tensor_parallel_sizes(spec, min(MAX_SEARCH_TP, system.max_tensor_parallel_size))
    widest = max(sizes)
    for tp in sizes:
        for pp in range(1, min(MAX_SEARCH_PP, spec.num_hidden_layers) + 1):
            if pp > 1 and tp < widest:
                break  # stages only once TP fills what it may
            one = solve(replace(d, tensor_parallel_size=tp, pipeline_parallel_size=pp),
                        length, None, shared_prefix, None)  # fmt: skip
            if (one.max_concurrency or 0) < 1:
                continue
            replicas = _replicas(system, tp * pp, -(-n // (one.max_concurrency or 1)))
            if max_nodes is None or _nodes(system, tp * pp, replicas) <= max_nodes:
                found.append(replace(one, replicas=replicas, concurrency=n))
            if tp < widest or replicas == 1:
                break  # narrower TP: one stage only; one replica: more stages only add GPUs
    if _is_moe(d):
        found.extend(_expert_parallel(d, system, length, n, shared_prefix, max_nodes))
    return found


def _expert_parallel(
    d: Deployment, system: System, length: int, n: int, shared_prefix: int, max_nodes: int | None
) -> list[Plan]:
    """The smallest DP-attention + EP group of ``system`` holding ``n`` requests."""
    g = system.gpus_per_node
    small = [] if system.rents_by_node else [e for e in (2, 4) if e < g]
    limit = max_nodes or MAX_EXPERT_PARALLEL_NODES
    # powers of two a node at a time, as expert counts (64, 128, 256) divide evenly
    whole = [g << i for i in range(limit.bit_length()) if 1 << i <= limit]
    for ep in [*small, *whole]:
        if ep < 2:
            continue
        one = solve(
            replace(d, tensor_parallel_size=1, pipeline_parallel_size=1, expert_parallel_size=ep),
            length,
            None,
            shared_prefix,
            None,
        )
        if (one.max_concurrency or 0) * ep >= n:
            return [replace(one, replicas=ep, concurrency=n)]
    return []


def _disaggregated(
    d: Deployment,
    system: System,
    decode: list[Candidate],
    prompt: int,
    objective: str,
    prices: Sequence[Price],
    max_nodes: int | None,
) -> Candidate | None:
    """The best decode pool of ``decode`` beside the best prefill pool for the prompts in
    flight (``max_num_batched_tokens // prompt``, at least one, of ``prompt`` tokens), each
    in whole nodes; None when no prefill shape holds them or the nodes exceed ``max_nodes``."""
    prompts = max(1, d.max_num_batched_tokens // prompt)
    pools = [
        replace(_candidate(p, system, prompt, prompts, prices, d), step=None)
        for p in _shapes(d, system, prompt, prompts, 0, max_nodes)
    ]
    if not pools:
        return None
    pre = min(pools, key=lambda c: _key(c, objective))
    dec = min(decode, key=lambda c: _key(c, objective))
    nodes = pre.num_nodes + dec.num_nodes
    if max_nodes is not None and nodes > max_nodes:
        return None
    g = system.gpus_per_node
    pre = replace(pre, billed_gpus=pre.num_nodes * g)
    return replace(
        dec, num_nodes=nodes, billed_gpus=nodes * g, prefill=pre, prefill_prompts=prompts
    )


def _is_moe(d: Deployment) -> bool:
    """Routed experts to split: counted (``num_expert_parameters``), or parameters a token
    skips (a folder's safetensors count gives the first without the second)."""
    if d.spec.num_expert_parameters:
        return True
    total, active = d.spec.num_parameters, d.spec.num_active_parameters
    return total is not None and active is not None and active < total


def _replicas(system: System, replica_gpus: int, needed: int) -> int:
    """Replicas to deploy: ``needed``, raised to fill the nodes paid for."""
    if not system.rents_by_node or replica_gpus > system.gpus_per_node:
        return needed
    per_node = system.gpus_per_node // replica_gpus
    return -(-needed // per_node) * per_node


def _nodes(system: System, replica_gpus: int, replicas: int) -> int:
    g = system.gpus_per_node
    if replica_gpus <= g:
        return -(-replicas // (g // replica_gpus))
    return replicas * -(-replica_gpus // g)


def _candidate(
    p: Plan, system: System, length: int, n: int, prices: Sequence[Price], d: Deployment
) -> Candidate:
    replica_gpus = p.tensor_parallel_size * p.pipeline_parallel_size
    if p.expert_parallel_size > 1:
        replica_gpus = 1
    nodes = _nodes(system, replica_gpus, p.replicas)
    billed = nodes * system.gpus_per_node if system.rents_by_node else p.num_gpus
    batch = min(-(-n // p.replicas), p.max_concurrency or 1)
    step = None
    if p.gpu.bandwidth_bytes_per_s and p.gpu.bf16_flops:
        step = decode_round(
            d.spec,
            p,
            system,
            batch,
            length,
            kv_cache_dtype=d.kv_cache_dtype,
            dtype=d.dtype,
            quantization=d.quantization,
        )
    return Candidate(p, system, nodes, billed, price_for(p.gpu, prices), step)


_NONE = Fraction(1 << 62)


def _key(c: Candidate, objective: str) -> tuple[Fraction | int, ...]:
    """Smaller ranks first. Ties: fewer GPUs, fewer stages, more requests held, smaller TP."""
    tie = (
        Fraction(c.billed_gpus),
        Fraction(c.plan.pipeline_parallel_size),
        -Fraction(c.held_requests),
        Fraction(c.plan.tensor_parallel_size),
    )
    per_gpu = (c.tokens_per_s or Fraction(0)) / c.billed_gpus
    match objective:
        case "nodes":
            return (Fraction(c.num_nodes), *tie)
        case "cost":
            return (c.usd_per_hour if c.usd_per_hour is not None else _NONE, *tie)
        case "throughput":
            return (-per_gpu, *tie)
        case _:
            return (Fraction(c.billed_gpus), Fraction(c.num_nodes), *tie[1:])


def _distinct(ranked: list[Candidate]) -> list[Candidate]:
    seen: set[tuple[str, str]] = set()
    kept = []
    for c in ranked:
        key = (c.system.name, c.shape)
        if key not in seen:
            seen.add(key)
            kept.append(c)
    return kept


def _explained(ranked: list[Candidate], objective: str) -> list[Candidate]:
    """Each candidate after the first with why it ranks below it, in words."""
    if not ranked:
        return []
    first = ranked[0]
    return [first, *(replace(c, loses_because=_why(c, first, objective)) for c in ranked[1:])]


def _why(c: Candidate, first: Candidate, objective: str) -> str:
    reasons = []
    cost, first_cost = c.usd_per_hour, first.usd_per_hour
    if objective == "cost" and cost is not None and first_cost is not None and cost > first_cost:
        reasons.append(f"${float(cost - first_cost):,.2f}/h more")
    if objective == "throughput" and c.tokens_per_s is not None and first.tokens_per_s:
        ratio = (c.tokens_per_s / c.billed_gpus) / (first.tokens_per_s / first.billed_gpus)
        reasons.append(f"{float(ratio):.0%} of the tokens/s per GPU")
    if c.billed_gpus > first.billed_gpus:
        reasons.append(format_count(c.billed_gpus - first.billed_gpus, "more GPU"))
    if c.num_nodes > first.num_nodes:
        reasons.append(format_count(c.num_nodes - first.num_nodes, "more node"))
    if c.plan.pipeline_parallel_size > first.plan.pipeline_parallel_size:
        reasons.append(f"{c.plan.pipeline_parallel_size} pipeline stages")
    if c.held_requests < first.held_requests:
        reasons.append(f"holds {c.held_requests} requests, not {first.held_requests}")
    return "; ".join(reasons) or "ties, ranked by tensor parallel size"
