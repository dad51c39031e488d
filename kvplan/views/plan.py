"""``kvplan plan``: memory per GPU, then the answers (max concurrency, max context, layout)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Literal

from kvplan.units import format_bytes, format_tokens
from kvplan.views import SCHEMA_VERSION
from kvplan.views.engines import token_pool_to_dict, token_pool_view, vllm_to_dict, vllm_view
from kvplan.views.table import table

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.table import Table

    from kvplan.answers.plans import TokenPoolPlan, Verdict, VllmPlan
    from kvplan.answers.question import Question
    from kvplan.model.spec import ModelSpec
    from kvplan.planner import LengthMix, Plan, StagePlan
    from kvplan.planner.cluster import Candidate, ClusterPlan


def plan_to_dict(p: Plan) -> dict[str, Any]:
    """The ``kvplan plan --format json`` document. Byte figures are per GPU."""
    return {
        "schema_version": SCHEMA_VERSION,
        "model": p.model,
        "gpu": p.gpu.name,
        "tensor_parallel_size": p.tensor_parallel_size,
        "pipeline_parallel_size": p.pipeline_parallel_size,
        "replicas": p.replicas,
        "expert_parallel_size": p.expert_parallel_size,
        "num_gpus": p.num_gpus,
        "max_model_len": p.max_model_len,
        "concurrency": p.concurrency,
        "gpu_memory_utilization": str(float(p.gpu_memory_utilization)),
        "kv_cache_dtype": p.kv_dtype,
        "weights_dtype": p.weights_model_dtype,
        "weights_format": p.weights_format,
        "quantization": p.quantization,
        "total_memory_bytes": p.total_memory_bytes,
        "usable_memory_bytes": p.usable_memory_bytes,
        "weights_bytes": p.weights_bytes,
        "overhead_bytes": p.overhead_bytes,
        "overhead": {
            "source": p.overhead.source,
            "activation_bytes": p.overhead.activation_bytes,
            "non_torch_bytes": p.overhead.non_torch_bytes,
            "cuda_graph_bytes": p.overhead.cuda_graph_bytes,
        },
        "kv_cache_memory_bytes": p.kv_cache_memory_bytes,
        "free_memory_bytes": p.unallocated_memory_bytes,
        "available_memory_bytes": p.free_memory_bytes,
        "headroom_bytes": p.headroom_bytes,
        "kv_cache_dtype_reason": p.dtype_reason,
        "pool_note": p.pool_note(),
        "block_size": p.block_size,
        "num_blocks": p.num_blocks,
        "kv_cache_tokens": p.kv_cache_tokens,
        "shared_prefix_tokens": p.shared_prefix_tokens,
        "request_bytes": p.request_bytes,
        "ideal_request_bytes": p.ideal_request_bytes,
        "paged_waste_bytes": p.paged_waste_bytes,
        "max_concurrency": p.max_concurrency,
        "max_context_tokens": p.max_context_tokens,
        "fits": p.fits,
        "message": p.message,
        "length_mix": None if p.length_mix is None else _length_mix_to_dict(p.length_mix),
        "stages": [_stage_to_dict(s) for s in p.stages],
    }


def _length_mix_to_dict(mix: LengthMix) -> dict[str, Any]:
    return {
        "num_requests": mix.num_requests,
        "mean_tokens": mix.mean_tokens,
        "p50_tokens": mix.p50_tokens,
        "p99_tokens": mix.p99_tokens,
        "max_tokens": mix.max_tokens,
        "expected_concurrency": mix.expected_concurrency,
        "worst_case_concurrency": mix.worst_case_concurrency,
        "paged_bytes": mix.paged_bytes,
        "ideal_bytes": mix.ideal_bytes,
        "paged_waste_bytes": mix.paged_waste_bytes,
    }


def _stage_to_dict(s: StagePlan) -> dict[str, Any]:
    return {
        "index": s.index,
        "first_layer": s.first_layer,
        "last_layer": s.last_layer,
        "weights_bytes": s.weights_bytes,
        "kv_cache_memory_bytes": s.kv_cache_memory_bytes,
        "num_blocks": s.num_blocks,
        "kv_cache_tokens": s.kv_cache_tokens,
        "block_bytes": s.block_bytes,
        "request_bytes": s.request_bytes,
        "max_concurrency": s.max_concurrency,
    }


def plan_view(p: Plan) -> list[RenderableType]:
    """The ``kvplan plan`` view: memory per GPU, then the answers."""
    layout = f"TP {p.tensor_parallel_size} x PP {p.pipeline_parallel_size}"
    if p.expert_parallel_size > 1:
        layout = f"DP-attention {p.replicas} + EP {p.expert_parallel_size}"
    elif p.replicas > 1:
        layout += f" x {p.replicas} replicas"
    heading = (
        f"[bold]{p.model}[/bold] on {p.num_gpus} x {p.gpu.display_name} ({layout}),"
        f" KV dtype {p.kv_dtype}" + (f" ({p.dtype_reason})" if p.dtype_reason else "") + ","
        f" weights {p.weights_format},"
        f" utilization {float(p.gpu_memory_utilization):g}"
    )
    out: list[RenderableType] = [heading, _memory_table(p)]
    if p.overhead.source == "estimate":
        o = p.overhead
        out.append(
            f"overhead estimate: activation {format_bytes(o.activation_bytes)} + non-torch"
            f" {format_bytes(o.non_torch_bytes)} + CUDA graphs {format_bytes(o.cuda_graph_bytes)}"
            " (replace with --overhead)"
        )
    answers = table([("", "left"), ("", "left")], _answers(p), show_header=False, key_style="bold")
    out.append(answers)
    note = p.pool_note()
    if note:
        out.append(note)
    if p.message:
        out.append(p.message)
    return out


def _answers(p: Plan) -> list[tuple[str, str]]:
    """The answers under the memory table: one (label, value) row each."""
    rows: list[tuple[str, str]] = []
    if p.max_model_len is not None:
        rows.append(("max model len", f"{format_tokens(p.max_model_len)} tokens"))
        if p.request_bytes is not None:
            waste = p.paged_waste_bytes or 0
            rows.append(
                (
                    "one request",
                    f"{format_bytes(p.request_bytes)} per GPU in blocks"
                    f" ({format_bytes(waste)} of it paging waste)",
                )
            )
        rows.append(("max concurrency", f"{p.max_concurrency}"))
    if p.shared_prefix_tokens:
        rows.append(
            ("shared prefix", f"{format_tokens(p.shared_prefix_tokens)} tokens, stored once")
        )
    if p.concurrency is not None and not p.searched:
        rows.append(("concurrency", str(p.concurrency)))
    if p.max_context_tokens is not None and not p.searched:
        rows.append(("max context", f"{format_tokens(p.max_context_tokens)} tokens"))
    if p.length_mix is not None:
        rows.extend(_mix_rows(p.length_mix))
    rows.append(("fits", "yes" if p.fits else "[red]no[/red]"))
    return rows


def _mix_rows(m: LengthMix) -> list[tuple[str, str]]:
    waste_share = 100 * m.paged_waste_bytes / m.paged_bytes if m.paged_bytes else 0.0
    # a mix given as --mean-length/--p99-length has no requests of its own to count
    counted = f"{m.num_requests:,} requests, " if m.num_requests else "as given: "
    return [
        (
            "length mix",
            f"{counted}mean {format_tokens(m.mean_tokens)}, p50"
            f" {format_tokens(m.p50_tokens)}, p99 {format_tokens(m.p99_tokens)}, max"
            f" {format_tokens(m.max_tokens)} tokens",
        ),
        (
            "expected concurrency",
            f"{m.expected_concurrency} (worst case, all at max: {m.worst_case_concurrency})",
        ),
        ("paging waste", f"{waste_share:.1f}% of the mix's blocks"),
    ]


def _memory_table(p: Plan) -> Table:
    """Memory per GPU: one column for a single stage, one row per stage for a pipeline. The
    rows not indented add up to the GPU's memory; free memory is a part of the pool's."""

    def free(s: StagePlan) -> str:
        left = p.stage_free_bytes(s)
        return format_bytes(left) if left >= 0 else f"none ({format_bytes(-left)} short)"

    columns: list[tuple[str, Callable[[StagePlan], str]]] = [
        ("weights", lambda s: format_bytes(s.weights_bytes)),
        (f"overhead ({p.overhead.source})", lambda s: format_bytes(s.overhead_bytes)),
        ("KV cache pool", lambda s: format_bytes(s.kv_cache_memory_bytes)),
        *(
            [("not allocated", lambda s: format_bytes(max(0, _unallocated(p, s))))]
            if any(_unallocated(p, s) > 0 for s in p.stages)
            else []
        ),
        ("  free for more work (within the above)", free),
        *(
            []
            if p.kv_cache_memory_given  # the pool is given: nothing is held back for it
            else [
                (
                    f"held back ({1 - float(p.gpu_memory_utilization):g} of the GPU)",
                    lambda s: format_bytes(p.headroom_bytes),
                )
            ]
        ),
        (
            f"blocks of {p.block_size} tokens",
            lambda s: f"{s.num_blocks:,} ({format_tokens(s.kv_cache_tokens)} tokens)",
        ),
    ]
    title = (
        f"memory per GPU: {format_bytes(p.total_memory_bytes)} total,"
        f" {format_bytes(p.usable_memory_bytes)} usable at {float(p.gpu_memory_utilization):g}"
    )
    if len(p.stages) == 1:
        (stage,) = p.stages
        return _titled(
            [("", "left"), ("per GPU", "right")],
            [(label, cell(stage)) for label, cell in columns],
            title,
        )
    return _titled(
        [("stage (layers)", "left"), *((label, "right") for label, _ in columns)],
        [
            (f"{s.index} ({s.first_layer}-{s.last_layer})", *(cell(s) for _, cell in columns))
            for s in p.stages
        ],
        title,
    )


def _unallocated(p: Plan, s: StagePlan) -> int:
    """Usable memory of stage ``s`` that neither weights, overhead nor the pool take (a pool
    given with --kv-cache-memory can leave some): the rows above it then add up to the GPU."""
    used = s.weights_bytes + s.overhead_bytes + s.kv_cache_memory_bytes
    held_back = 0 if p.kv_cache_memory_given else p.headroom_bytes
    return p.total_memory_bytes - held_back - used


def _titled(columns: Any, rows: Any, title: str) -> Table:
    return table(columns, rows, title=title, title_justify="left", no_wrap=True)


def plan_result_to_dict(result: Plan | VllmPlan | TokenPoolPlan, spec: ModelSpec) -> dict[str, Any]:
    """``kvplan plan --format json``: the planner's document, or the engine's."""
    from kvplan.answers.plans import TokenPoolPlan, VllmPlan
    from kvplan.views.provenance import resolution_to_dict

    match result:
        case VllmPlan():
            doc = vllm_to_dict(result)
        case TokenPoolPlan():
            doc = token_pool_to_dict(result, spec)
        case _:
            doc = plan_to_dict(result)
    return {**doc, **resolution_to_dict(spec)}


def plan_result_view(
    result: Plan | VllmPlan | TokenPoolPlan, spec: ModelSpec
) -> list[RenderableType]:
    """The ``kvplan plan`` view: the planner's, or the engine's."""
    from kvplan.answers.plans import TokenPoolPlan, VllmPlan
    from kvplan.views.provenance import resolution_line

    match result:
        case VllmPlan():
            view = vllm_view(vllm_to_dict(result))
        case TokenPoolPlan():
            view = token_pool_view(result, token_pool_to_dict(result, spec))
        case _:
            view = plan_view(result)
    return [*resolution_line(spec), *view]


def verdict_to_dict(v: Verdict) -> dict[str, Any]:
    """The ``answer`` key of ``kvplan plan --format json``: the same for every engine."""
    return {
        "engine": v.engine,
        "kind": v.kind,
        "fits": v.fits,
        "max_model_len": v.max_model_len,
        "concurrency": v.concurrency,
        "max_concurrency": v.max_concurrency,
        "max_context_tokens": v.max_context_tokens,
        "tensor_parallel_size": v.tensor_parallel_size,
        "pipeline_parallel_size": v.pipeline_parallel_size,
        "replicas": v.replicas,
        "num_gpus": v.num_gpus,
        "limit": v.limit or None,
        "warnings": list(v.warnings),
        "sentence": v.sentence(),
    }


def with_answer(doc: dict[str, Any], q: Question, v: Verdict) -> dict[str, Any]:
    """An engine's JSON document with the question as asked and the verdict; its ``fits`` is
    the verdict's (the question's answer, not only whether one request fits)."""
    from kvplan.answers.question import question_to_dict

    return {**doc, "fits": v.fits, "question": question_to_dict(q), "answer": verdict_to_dict(v)}


def verdict_lines(result: object, v: Verdict) -> list[str]:
    """The verdict under an engine's view: its sentence (kvplan's own planner prints its own
    message) and every warning."""
    own = type(result).__name__ in ("Plan", "ClusterPlan")
    sentence = (
        [] if own else [("" if v.fits else "[red]") + v.sentence() + ("" if v.fits else "[/red]")]
    )
    return [*sentence, *(f"[yellow]warning:[/yellow] {w}" for w in v.warnings)]


# --- the cluster search: ranked candidates with nodes, cost and speed ---------------------------


def _money(value: Fraction | None) -> str | None:
    """Dollars as a decimal string with 4 places (JSON), or None when unknown."""
    return None if value is None else f"{float(value):.4f}"


def candidate_to_dict(c: Candidate) -> dict[str, Any]:
    """One candidate of ``kvplan plan`` with nodes: shape, nodes, cost, speed, why it loses."""
    price = c.price
    return {
        "system": c.system.name,
        "gpu": c.system.gpu.name,
        "shape": c.shape,
        "tensor_parallel_size": c.plan.tensor_parallel_size,
        "pipeline_parallel_size": c.plan.pipeline_parallel_size,
        "replicas": c.plan.replicas,
        "expert_parallel_size": c.plan.expert_parallel_size,
        "data_parallel_attention": c.plan.expert_parallel_size > 1,
        "num_gpus": c.plan.num_gpus,
        "num_nodes": c.num_nodes,
        "billed_gpus": c.billed_gpus,
        "held_requests": c.held_requests,
        "max_concurrency_per_replica": c.plan.max_concurrency,
        "weights_bytes": c.plan.weights_bytes,
        "kv_cache_memory_bytes": c.plan.kv_cache_memory_bytes,
        "price": None
        if price is None
        else {
            "usd_per_gpu_hour": _money(price.usd_per_gpu_hour),
            "provider": price.provider,
            "offer": price.offer,
            "as_of": price.as_of,
            "source": price.source,
        },
        "usd_per_hour": _money(c.usd_per_hour),
        "output_tokens_per_s": None if c.tokens_per_s is None else f"{float(c.tokens_per_s):.1f}",
        "communication_seconds_per_step": None
        if c.step is None
        else f"{float(c.step.communication_seconds):.6f}",
        "usd_per_million_output_tokens": _money(c.usd_per_million_tokens),
        "loses_because": c.loses_because,
        "prefill_pool": _prefill_pool(c),
        # per replica: one DP rank (one GPU) for DP attention, TP x PP GPUs otherwise
        "replica_kind": "dp_rank" if c.plan.expert_parallel_size > 1 else "replica",
        "requests_per_replica": c.requests_per_replica,
        "available_memory_bytes_per_gpu": c.plan.free_memory_bytes,
    }


def _prefill_pool(c: Candidate) -> dict[str, Any] | None:
    """P/D: the prefill pool of ``c`` (the rest of the candidate is its decode pool)."""
    pre = c.prefill
    if pre is None:
        return None
    return {
        "prompt_tokens": pre.plan.max_model_len,
        "prompts_in_flight": c.prefill_prompts,
        "tensor_parallel_size": pre.plan.tensor_parallel_size,
        "pipeline_parallel_size": pre.plan.pipeline_parallel_size,
        "replicas": pre.plan.replicas,
        "num_gpus": pre.plan.num_gpus,
        "num_nodes": pre.num_nodes,
        "billed_gpus": pre.billed_gpus,
        "held_prompts": pre.held_requests,
        "max_concurrency_per_replica": pre.plan.max_concurrency,
    }


def cluster_to_dict(cp: ClusterPlan) -> dict[str, Any]:
    """``kvplan plan`` with nodes, as JSON: the first candidate's plan document (every key of
    ``plan_to_dict``), its node, cost and speed keys, and the ranked ``candidates``."""
    from kvplan.planner.throughput import COMMUNICATION_NOT_MODELLED

    best = cp.best
    head: dict[str, Any] = (
        plan_to_dict(best.plan)
        if best is not None
        else {"schema_version": SCHEMA_VERSION, "model": cp.model, "fits": False}
    )
    head.update(
        {
            "message": cp.message,
            "fits": cp.fits,
            "concurrency": cp.concurrency,
            "max_model_len": cp.max_model_len,
            "objective": cp.objective,
            "searched": True,
            "cluster": None if best is None else candidate_to_dict(best),
            "candidates": [candidate_to_dict(c) for c in cp.candidates],
            "prices_note": "list prices as dated in gpu_specs/prices, never live",
            "throughput_not_modelled": COMMUNICATION_NOT_MODELLED,
            "left_out": [
                {"system": o.system, "gpu": o.gpu, "reason": o.reason} for o in cp.left_out
            ],
        }
    )
    return head


def cluster_view(cp: ClusterPlan) -> list[RenderableType]:
    """The ranked candidates, the first one's plan, and what the prices are."""
    out: list[RenderableType] = []
    best = cp.best
    if best is not None:
        out.extend(_replica_view(best))
    rows = [
        (
            str(i + 1),
            c.system.name,
            c.shape,
            str(c.billed_gpus),
            str(c.num_nodes),
            str(c.held_requests),
            "-" if c.usd_per_hour is None else f"${float(c.usd_per_hour):,.2f}",
            "-" if c.tokens_per_s is None else f"{float(c.tokens_per_s):,.0f}",
            "-" if c.usd_per_million_tokens is None else f"${float(c.usd_per_million_tokens):,.2f}",
            c.loses_because or "best",
        )
        for i, c in enumerate(cp.candidates)
    ]
    columns: list[tuple[str, Literal["left", "right"]]] = [
        ("#", "right"),
        ("system", "left"),
        ("shape", "left"),
        ("GPUs", "right"),
        ("nodes", "right"),
        ("holds", "right"),
        ("$/hour", "right"),
        ("out tok/s", "right"),
        ("$/M out", "right"),
        ("vs #1", "left"),
    ]
    out.append(table(columns, rows, title=f"ranked by {cp.objective}", title_justify="left"))
    if cp.left_out:
        reasons = "; ".join(f"{o.system} ({o.reason})" for o in cp.left_out)
        out.append(f"[yellow]left out of the ranking by {cp.objective}:[/yellow] {reasons}")
    if best is not None and best.price is not None:
        out.append(f"price: {best.price.describe()}; --price GPU=DOLLARS replaces it")
    out.append(cp.message)
    return out


def _replica_view(c: Candidate) -> list[RenderableType]:
    """The first candidate's replica as ``plan_view`` shows a plan, its answers labelled per
    replica (per DP rank for DP attention), with the requests each holds of those asked."""
    from rich.table import Table

    p = c.plan
    unit = "DP rank" if p.expert_parallel_size > 1 else "replica"
    view = plan_view(replace(p, message=""))
    rows: list[tuple[str, str]] = []
    for label, value in _answers(p):
        if label == "max concurrency":
            rows.append((f"max concurrency per {unit}", value))
            rows.append(
                (
                    f"requests per {unit}",
                    f"{c.requests_per_replica} of the {p.concurrency} asked, over"
                    f" {p.replicas} {unit}{'s' if p.replicas > 1 else ''}",
                )
            )
            rows.append(("held in all", f"{c.held_requests} ({p.replicas} x {value})"))
        elif label != "concurrency":  # said per replica above
            rows.append((label, value))
    answers = max(i for i, part in enumerate(view) if isinstance(part, Table))
    view[answers] = table([("", "left"), ("", "left")], rows, show_header=False, key_style="bold")
    tokens = format_tokens(p.max_model_len or 0)
    view.insert(
        answers,
        f"free for more work (per GPU): the pool less the {c.requests_per_replica} requests"
        f" of {tokens} tokens one {unit} holds",
    )
    return view
