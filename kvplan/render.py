"""Results -> rich tables for a terminal, or JSON-ready dicts with stable keys. No arithmetic.

Every JSON document carries ``schema_version``: keys are only ever added within a version;
a removed or renamed key bumps it. docs/json.md describes each document.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kvplan.dtypes import served_dtype
from kvplan.estimator import Estimate, explain
from kvplan.spec import ModelSpec
from kvplan.units import format_bytes, format_tokens

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.table import Table

    from kvplan.budget import AssertionResult
    from kvplan.diffing import Diff
    from kvplan.engines.base import EngineResult
    from kvplan.engines.vllm import VllmResult
    from kvplan.hardware import GPU
    from kvplan.planner import Plan, StagePlan
    from kvplan.probe import ProbeResult
    from kvplan.recommend import EngineFlags
    from kvplan.reconcile import Reconciliation

SCHEMA_VERSION = 1


def estimate_to_dict(est: Estimate, spec: ModelSpec, *, dtype_reason: str = "") -> dict[str, Any]:
    """The ``kvplan calc --format json`` document."""
    return {
        "schema_version": SCHEMA_VERSION,
        "model": est.model,
        "hf_id": spec.hf_id,
        "context_tokens": est.context_tokens,
        "batch_size": est.batch_size,
        "kv_dtype": est.kv_dtype,
        "kv_dtype_reason": dtype_reason,
        "k_dtype": est.k_dtype.name,
        "v_dtype": est.v_dtype.name,
        "kv_cache_bytes": est.kv_cache_bytes,
        "bytes_per_token": est.bytes_per_token,
        "breakdown": [
            {
                "kind": row.kind,
                "num_layers": row.num_layers,
                "tokens_retained": row.tokens_retained,
                "k_bytes": row.k_bytes,
                "v_bytes": row.v_bytes,
                "state_bytes": row.state_bytes,
                "bytes": row.bytes,
                "layer": row.layer.describe(),
            }
            for row in est.breakdown
        ],
    }


def estimate_view(
    est: Estimate, spec: ModelSpec, *, with_explain: bool, dtype_reason: str = ""
) -> list[RenderableType]:
    """The ``kvplan calc`` table, headed by what was asked and footed by the totals."""
    from rich import box
    from rich.table import Table

    name = f"{est.model}" + (f" ({spec.hf_id})" if spec.hf_id else "")
    heading = (
        f"[bold]{name}[/bold]: {format_tokens(est.context_tokens)} tokens x {est.batch_size}"
        f" sequence{'s' if est.batch_size != 1 else ''}, KV dtype {est.kv_dtype}"
        + (f" ({dtype_reason})" if dtype_reason else "")
    )
    table = Table(box=box.SIMPLE_HEAD)
    with_state = any(row.state_bytes for row in est.breakdown)
    table.add_column("layer kind", no_wrap=True)
    table.add_column("layers", justify="right", no_wrap=True)
    table.add_column("tokens kept", justify="right", no_wrap=True)
    table.add_column("K", justify="right", no_wrap=True)
    table.add_column("V", justify="right", no_wrap=True)
    if with_state:
        table.add_column("state", justify="right", no_wrap=True)
    table.add_column("total", justify="right", no_wrap=True)
    for row in est.breakdown:
        cells = [
            row.kind,
            str(row.num_layers),
            format_tokens(row.tokens_retained),
            format_bytes(row.k_bytes),
            format_bytes(row.v_bytes),
        ]
        if with_state:
            cells.append(format_bytes(row.state_bytes))
        table.add_row(*cells, format_bytes(row.bytes))
    out: list[RenderableType] = [heading, table]
    out.append(
        f"KV cache: [bold]{format_bytes(est.kv_cache_bytes)}[/bold] ({est.kv_cache_bytes:,} bytes)"
    )
    out.append(
        f"Per token: {format_bytes(est.bytes_per_token)} ({est.bytes_per_token:,} bytes)"
        " per sequence at this context"
    )
    if with_explain:
        out.append("")
        out.extend(explain(est))
    return out


def models_to_dict(rows: list[tuple[ModelSpec, int]]) -> dict[str, Any]:
    """The ``kvplan models --format json`` document: each spec with its bytes per token."""
    return {
        "schema_version": SCHEMA_VERSION,
        "models": [
            {
                "name": spec.name,
                "hf_id": spec.hf_id,
                "aliases": list(spec.aliases),
                "model_type": spec.model_type,
                "num_hidden_layers": spec.num_hidden_layers,
                "layer_kinds": _kind_counts(spec),
                "max_position_embeddings": spec.max_position_embeddings,
                "num_parameters": spec.num_parameters,
                "num_active_parameters": spec.num_active_parameters,
                "bytes_per_token": per_token,
                "torch_dtype": spec.torch_dtype,
                "kv_dtype": served_dtype(spec)[0].name,
            }
            for spec, per_token in rows
        ],
    }


def models_view(rows: list[tuple[ModelSpec, int]]) -> list[RenderableType]:
    """The ``kvplan models`` table."""
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD)
    for name, justify in (
        ("name", "left"),
        ("layers", "left"),
        ("params (active)", "right"),
        ("max ctx", "right"),
        ("KV dtype", "left"),
        ("KV/token", "right"),
    ):
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for spec, per_token in rows:
        table.add_row(
            spec.name,
            ", ".join(f"{n} {_SHORT_KIND.get(k, k)}" for k, n in _kind_counts(spec).items()),
            _params(spec),
            format_tokens(spec.max_position_embeddings) if spec.max_position_embeddings else "",
            served_dtype(spec)[0].name,
            format_bytes(per_token),
        )
    return [
        f"{len(rows)} bundled models; KV/token at a short context in the dtype the model is"
        " served in (a float32 checkpoint in bfloat16, as the engines' --dtype auto);"
        " `kvplan show NAME` for the rest",
        table,
    ]


_SHORT_KIND = {
    "full_attention": "full",
    "sliding_attention": "sliding",
    "chunked_attention": "chunked",
    "mla_latent": "mla",
    "linear_attention": "linear",
    "no_cache": "none",
}


def spec_to_dict(spec: ModelSpec) -> dict[str, Any]:
    """The ``kvplan show --format json`` document: the spec as given, and its schedule."""
    return {
        "schema_version": SCHEMA_VERSION,
        "spec": spec.model_dump(mode="json", exclude_none=True),
        "schedule": [
            {
                "first_layer": first,
                "last_layer": last,
                "kind": layer.kind,
                "layer": layer.describe(),
            }
            for first, last, layer in spec.layer_runs()
        ],
    }


def spec_view(spec: ModelSpec) -> list[RenderableType]:
    """The ``kvplan show`` view: the spec's fields, then its resolved per-layer schedule."""
    from rich.table import Table

    fields = Table(title=spec.name, title_justify="left", show_header=False)
    fields.add_column("key", style="bold")
    fields.add_column("value")
    for key, value in spec.model_dump(exclude_none=True).items():
        if key in ("layer_types", "layer_types_pattern"):
            value = ", ".join(value)
        elif isinstance(value, tuple):
            value = ", ".join(map(str, value))
        fields.add_row(key, str(value))
    schedule = Table(title="per-layer cache schedule", title_justify="left")
    schedule.add_column("layers", justify="right")
    schedule.add_column("kind")
    schedule.add_column("what it keeps")
    for first, last, layer in spec.layer_runs():
        span = str(first) if first == last else f"{first}-{last}"
        schedule.add_row(span, layer.kind, layer.describe())
    counts = ", ".join(f"{n} {k}" for k, n in _kind_counts(spec).items())
    return [fields, schedule, f"{spec.num_hidden_layers} layers: {counts}"]


def _kind_counts(spec: ModelSpec) -> dict[str, int]:
    counts: dict[str, int] = {}
    for layer, num_layers in spec.layer_groups:
        counts[layer.kind] = counts.get(layer.kind, 0) + num_layers
    return counts


def _params(spec: ModelSpec) -> str:
    if spec.num_parameters is None:
        return ""
    total = f"{spec.num_parameters / 1e9:.1f}B"
    if spec.num_active_parameters:
        return f"{total} ({spec.num_active_parameters / 1e9:.1f}B)"
    return total


def plan_to_dict(p: Plan) -> dict[str, Any]:
    """The ``kvplan plan --format json`` document. Byte figures are per GPU."""
    mix = p.length_mix
    return {
        "schema_version": SCHEMA_VERSION,
        "model": p.model,
        "gpu": p.gpu.name,
        "tensor_parallel_size": p.tensor_parallel_size,
        "pipeline_parallel_size": p.pipeline_parallel_size,
        "replicas": p.replicas,
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
        "length_mix": None
        if mix is None
        else {
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
        },
        "stages": [
            {
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
            for s in p.stages
        ],
    }


def plan_view(p: Plan) -> list[RenderableType]:
    """The ``kvplan plan`` view: memory per GPU, then the answers."""
    from rich import box
    from rich.table import Table

    layout = f"TP {p.tensor_parallel_size} x PP {p.pipeline_parallel_size}"
    if p.replicas > 1:
        layout += f" x {p.replicas} replicas"
    heading = (
        f"[bold]{p.model}[/bold] on {p.num_gpus} x {p.gpu.display_name} ({layout}),"
        f" KV dtype {p.kv_dtype}" + (f" ({p.dtype_reason})" if p.dtype_reason else "") + ","
        f" weights {p.weights_format},"
        f" utilization {float(p.gpu_memory_utilization):g}"
    )
    memory = _memory_table(p)
    out: list[RenderableType] = [heading, memory]
    if p.overhead.source == "estimate":
        o = p.overhead
        out.append(
            f"overhead estimate: activation {format_bytes(o.activation_bytes)} + non-torch"
            f" {format_bytes(o.non_torch_bytes)} + CUDA graphs {format_bytes(o.cuda_graph_bytes)}"
            " (replace with --overhead)"
        )
    answers = Table(box=box.SIMPLE_HEAD, show_header=False)
    answers.add_column("", style="bold")
    answers.add_column("")
    if p.max_model_len is not None:
        answers.add_row("max model len", f"{format_tokens(p.max_model_len)} tokens")
        if p.request_bytes is not None:
            waste = p.paged_waste_bytes or 0
            answers.add_row(
                "one request",
                f"{format_bytes(p.request_bytes)} per GPU in blocks"
                f" ({format_bytes(waste)} of it paging waste)",
            )
        answers.add_row("max concurrency", f"{p.max_concurrency}")
    if p.shared_prefix_tokens:
        answers.add_row(
            "shared prefix", f"{format_tokens(p.shared_prefix_tokens)} tokens, stored once"
        )
    if p.concurrency is not None and not p.searched:
        answers.add_row("concurrency", str(p.concurrency))
    if p.max_context_tokens is not None and not p.searched:
        answers.add_row("max context", f"{format_tokens(p.max_context_tokens)} tokens")
    if p.length_mix is not None:
        m = p.length_mix
        answers.add_row(
            "length mix",
            f"{m.num_requests:,} requests, mean {format_tokens(m.mean_tokens)}, p50"
            f" {format_tokens(m.p50_tokens)}, p99 {format_tokens(m.p99_tokens)}, max"
            f" {format_tokens(m.max_tokens)} tokens",
        )
        answers.add_row(
            "expected concurrency",
            f"{m.expected_concurrency} (worst case, all at max: {m.worst_case_concurrency})",
        )
        waste_share = 100 * m.paged_waste_bytes / m.paged_bytes if m.paged_bytes else 0.0
        answers.add_row("paging waste", f"{waste_share:.1f}% of the mix's blocks")
    answers.add_row("fits", "yes" if p.fits else "[red]no[/red]")
    out.append(answers)
    note = p.pool_note()
    if note:
        out.append(note)
    if p.message:
        out.append(p.message)
    return out


def _memory_table(p: Plan) -> Table:
    """Memory per GPU: one column for a single stage, one row per stage for a pipeline."""
    from rich import box
    from rich.table import Table

    usable = p.usable_memory_bytes
    columns: list[tuple[str, Callable[[StagePlan], str]]] = [
        ("weights", lambda s: format_bytes(s.weights_bytes)),
        (f"overhead ({p.overhead.source})", lambda s: format_bytes(s.overhead_bytes)),
        ("KV cache pool", lambda s: format_bytes(s.kv_cache_memory_bytes)),
        ("free for more work", lambda s: format_bytes(p.stage_free_bytes(s))),
        (
            f"held back ({1 - float(p.gpu_memory_utilization):g} of the GPU)",
            lambda s: format_bytes(p.headroom_bytes),
        ),
        (
            f"blocks of {p.block_size} tokens",
            lambda s: f"{s.num_blocks:,} ({format_tokens(s.kv_cache_tokens)} tokens)",
        ),
    ]
    title = (
        f"memory per GPU: {format_bytes(p.total_memory_bytes)} total,"
        f" {format_bytes(usable)} usable at {float(p.gpu_memory_utilization):g}"
    )
    table = Table(box=box.SIMPLE_HEAD, title=title, title_justify="left")
    if len(p.stages) == 1:
        (stage,) = p.stages
        table.add_column("")
        table.add_column("per GPU", justify="right", no_wrap=True)
        for label, cell in columns:
            table.add_row(label, cell(stage))
        return table
    table.add_column("stage (layers)", no_wrap=True)
    for label, _ in columns:
        table.add_column(label, justify="right", no_wrap=True)
    for s in p.stages:
        table.add_row(
            f"{s.index} ({s.first_layer}-{s.last_layer})", *(cell(s) for _, cell in columns)
        )
    return table


def gpus_to_dict(gpus: tuple[GPU, ...]) -> dict[str, Any]:
    """The ``kvplan gpus --format json`` document."""
    return {
        "schema_version": SCHEMA_VERSION,
        "gpus": [
            {
                "name": g.name,
                "display_name": g.display_name,
                "vendor": g.vendor,
                "aliases": list(g.aliases),
                "memory_bytes": g.memory_bytes,
                "bandwidth_bytes_per_s": g.bandwidth_bytes_per_s,
                "bf16_flops": g.bf16_flops,
                "fp8_flops": g.fp8_flops,
                "unified_memory": g.unified_memory,
                "source": g.source,
            }
            for g in gpus
        ],
    }


def gpus_view(gpus: tuple[GPU, ...]) -> list[RenderableType]:
    """The ``kvplan gpus`` table."""
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD)
    for name, justify in (
        ("name", "left"),
        ("memory", "right"),
        ("TB/s", "right"),
        ("bf16 TFLOP/s", "right"),
        ("fp8 TFLOP/s", "right"),
        ("aliases", "left"),
    ):
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for g in gpus:
        table.add_row(
            g.name,
            format_bytes(g.memory_bytes),
            f"{g.bandwidth_bytes_per_s / 1e12:.2f}",
            f"{g.bf16_flops / 1e12:,.0f}",
            f"{g.fp8_flops / 1e12:,.0f}" if g.fp8_flops else "",
            ", ".join(g.aliases),
        )
    return [
        f"{len(gpus)} accelerators; memory is the total the runtime reports (binary units);"
        " rates are dense peaks (bandwidth decimal); `--format json` adds sources",
        table,
    ]


def vllm_to_dict(
    r: VllmResult, spec: ModelSpec, gpu: GPU, max_model_len_fit: int
) -> dict[str, Any]:
    """``kvplan plan --engine vllm --format json``: the plan keys, plus vLLM's own figures."""
    cfg = r.config
    last = r.stages[-1].overhead
    tight = min(r.stages, key=lambda s: s.num_blocks)
    fits = r.num_gpu_blocks >= r.blocks_per_request and r.num_gpu_blocks > 0
    return {
        "schema_version": SCHEMA_VERSION,
        "engine": "vllm",
        "engine_version": cfg.version,
        "model": spec.name,
        "gpu": gpu.name,
        "tensor_parallel_size": cfg.tensor_parallel_size,
        "pipeline_parallel_size": cfg.pipeline_parallel_size,
        "num_gpus": cfg.tensor_parallel_size * cfg.pipeline_parallel_size,
        "max_model_len": cfg.max_model_len,
        "gpu_memory_utilization": str(float(cfg.gpu_memory_utilization)),
        "max_num_batched_tokens": cfg.max_num_batched_tokens,
        "max_num_seqs": cfg.max_num_seqs,
        "total_memory_bytes": gpu.memory_bytes,
        "weights_bytes": tight.overhead.weights_bytes,
        "overhead_bytes": tight.overhead.activation_bytes + tight.overhead.non_torch_bytes,
        "overhead": {
            "source": "vllm profile",
            "activation_bytes": last.activation_bytes,
            "non_torch_bytes": last.non_torch_bytes,
            "cuda_graph_bytes": last.cuda_graph_bytes,
        },
        "kv_cache_memory_bytes": tight.available_bytes,
        "block_size": cfg.block_size,
        "num_blocks": r.num_gpu_blocks,
        "kv_cache_tokens": r.gpu_kv_cache_tokens,
        "kv_cache_groups": r.num_groups,
        "padding_layers": r.padding_layers,
        "blocks_per_request": r.blocks_per_request,
        "max_concurrency": r.num_gpu_blocks // r.blocks_per_request,
        "max_context_tokens": max_model_len_fit,
        "fits": fits,
        "engine_log": dict(r.to_engine_result().engine_log),
        "log_lines": list(r.log_lines()),
        "stages": [
            {
                "index": s.index,
                "first_layer": s.first_layer,
                "last_layer": s.last_layer,
                "weights_bytes": s.overhead.weights_bytes,
                "activation_bytes": s.overhead.activation_bytes,
                "non_torch_bytes": s.overhead.non_torch_bytes,
                "kv_cache_memory_bytes": s.available_bytes,
                "num_blocks": s.num_blocks,
            }
            for s in r.stages
        ],
    }


def vllm_view(doc: dict[str, Any]) -> list[RenderableType]:
    """The ``kvplan plan --engine vllm`` view, from its JSON document (no arithmetic)."""
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, show_header=False)
    table.add_column("", style="bold")
    table.add_column("", justify="right")
    overhead = doc["overhead"]
    for label, value in (
        ("total", format_bytes(doc["total_memory_bytes"])),
        ("weights", format_bytes(doc["weights_bytes"])),
        ("peak activation", format_bytes(overhead["activation_bytes"])),
        ("non-torch memory", format_bytes(overhead["non_torch_bytes"])),
        ("available KV cache memory", format_bytes(doc["kv_cache_memory_bytes"])),
        ("KV cache groups", f"{doc['kv_cache_groups']} ({doc['padding_layers']} padding layers)"),
        ("blocks per request", f"{doc['blocks_per_request']:,}"),
    ):
        table.add_row(label, value)
    return [
        f"[bold]{doc['model']}[/bold] on vLLM {doc['engine_version']} (V1),"
        f" {doc['num_gpus']} x {doc['gpu']} (TP {doc['tensor_parallel_size']} x PP"
        f" {doc['pipeline_parallel_size']}), utilization {doc['gpu_memory_utilization']}",
        table,
        "what vLLM prints:",
        *(f"  {line}" for line in doc["log_lines"]),
        f"fits: {'yes' if doc['fits'] else 'no'}; one request of"
        f" {format_tokens(doc['max_model_len'])} tokens needs {doc['blocks_per_request']:,}"
        f" blocks; the longest that fits is {format_tokens(doc['max_context_tokens'])} tokens",
    ]


def engine_result_to_dict(
    result: EngineResult, spec: ModelSpec, *, context_tokens: int, batch_size: int
) -> dict[str, Any]:
    """``kvplan calc --engine NAME --format json``: the engine's allocation and its log."""
    return {
        "schema_version": SCHEMA_VERSION,
        "model": spec.name,
        "engine": result.engine,
        "engine_version": result.engine_version,
        "context_tokens": context_tokens,
        "batch_size": batch_size,
        "kv_cache_bytes": result.kv_cache_bytes,
        "num_blocks": result.num_blocks,
        "block_size": result.block_size,
        "kv_cache_tokens": result.kv_cache_tokens,
        "engine_log": dict(result.engine_log),
        "log_lines": list(result.log_lines),
    }


def engine_result_view(doc: dict[str, Any]) -> list[RenderableType]:
    """The ``kvplan calc --engine NAME`` view: what the engine allocates and prints."""
    prints = doc["engine"] in ("llama.cpp", "ik_llama.cpp")
    context = "n_ctx" if prints else "context"
    return [
        f"[bold]{doc['model']}[/bold] on {doc['engine']} {doc['engine_version']}:"
        f" {context} {format_tokens(doc['context_tokens'])}, {doc['batch_size']} sequence"
        f"{'s' if doc['batch_size'] != 1 else ''}",
        f"KV cache: [bold]{format_bytes(doc['kv_cache_bytes'])}[/bold]"
        f" ({doc['kv_cache_bytes']:,} bytes)",
        f"what {doc['engine']} prints:" if prints else "the cache:",
        *(f"  {line}" for line in doc["log_lines"]),
    ]


def reconciliation_to_dict(r: Reconciliation) -> dict[str, Any]:
    """``kvplan reconcile --format json``."""
    return {
        "schema_version": SCHEMA_VERSION,
        "engine": r.engine,
        "engine_version": r.engine_version,
        "model": r.model,
        "settings": r.settings,
        "reproduced": r.reproduced,
        "rows": [
            {
                "component": row.component,
                "printed": row.printed,
                "kvplan": row.kvplan,
                "residual": row.residual,
                "reproduced": row.reproduced,
            }
            for row in r.rows
        ],
        "notes": list(r.notes),
    }


def reconciliation_view(doc: dict[str, Any]) -> list[RenderableType]:
    """The ``kvplan reconcile`` table: each figure as printed, as recomputed, and the verdict."""
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD)
    for name in ("component", "printed", "kvplan", "residual", "rule"):
        table.add_column(name, overflow="fold")
    verdicts = {True: "reproduced", False: "[red]NOT reproduced[/red]", None: "estimate"}
    for row in doc["rows"]:
        table.add_row(
            row["component"],
            row["printed"],
            row["kvplan"],
            row["residual"],
            verdicts[row["reproduced"]],
        )
    settings = ", ".join(f"{k}={v}" for k, v in doc["settings"].items() if v is not None)
    return [
        f"[bold]{doc['engine']} {doc['engine_version']}[/bold], model {doc['model']}: {settings}",
        table,
        *doc["notes"],
        "every rule reproduced" if doc["reproduced"] else "[red]some rules did not reproduce[/red]",
    ]


def flags_to_dict(
    model: str,
    gpu: str,
    max_model_len: int,
    concurrency: int,
    results: tuple[EngineFlags, ...],
    *,
    tensor_parallel_size: int = 1,
    quantization: str | None = None,
) -> dict[str, Any]:
    """``kvplan flags --format json``."""
    return {
        "schema_version": SCHEMA_VERSION,
        "model": model,
        "gpu": gpu,
        "max_model_len": max_model_len,
        "concurrency": concurrency,
        "tensor_parallel_size": tensor_parallel_size,
        "quantization": quantization.strip().lower() if quantization else None,
        "fits": any(r.fits for r in results),
        "engines": [
            {
                "engine": r.engine,
                "flags": list(r.flags),
                "kv_cache_bytes": r.kv_cache_bytes,
                "fits": r.fits,
                "note": r.note,
                "reason": r.reason,
                "model_dtype": r.model_dtype,
                "kv_cache_dtype": r.kv_cache_dtype,
                "dtype_reason": r.dtype_reason,
                "num_gpus": r.num_gpus,
                "weights_bytes": r.weights_bytes,
                "required_bytes": r.required_bytes,
                "budget_bytes": r.budget_bytes,
            }
            for r in results
        ],
    }


def flags_view(doc: dict[str, Any]) -> list[RenderableType]:
    """The ``kvplan flags`` view: one block per engine, its flags ready to paste, its verdict
    and the dtypes it was sized in."""
    from rich.markup import escape

    n = doc["concurrency"]
    tp = doc.get("tensor_parallel_size", 1)
    where = f"{tp} x {doc['gpu']}" if tp > 1 else doc["gpu"]
    weights = f"; {doc['quantization']} weights" if doc.get("quantization") else ""
    out: list[RenderableType] = [
        f"[bold]{escape(doc['model'])}[/bold] on {escape(where)}: {n} request{'s' if n > 1 else ''}"
        f" of {format_tokens(doc['max_model_len'])} tokens{weights}"
    ]
    for e in doc["engines"]:
        if e["fits"]:
            out.append(escape(f"{e['engine']}: {' '.join(e['flags'])}"))
            out.append(f"  fits; {escape(e['note'])}")
        else:
            out.append(f"{escape(e['engine'])}: [red]does not fit[/red]: {escape(e['reason'])}")
            if e["note"]:
                out.append(f"  {escape(e['note'])}")
        if e.get("kv_cache_dtype"):
            out.append(
                escape(
                    f"  runs in {e['model_dtype']}, caches in {e['kv_cache_dtype']}:"
                    f" {e['dtype_reason']}"
                )
            )
    return out


def check_to_dict(checked: list[tuple[str, list[AssertionResult]]]) -> dict[str, Any]:
    """``kvplan check --format json``: every assertion of every file, flat."""
    results = [(path, r) for path, rs in checked for r in rs]
    return {
        "schema_version": SCHEMA_VERSION,
        "files": [path for path, _ in checked],
        "passed": all(r.passed for _, r in results),
        "num_assertions": len(results),
        "num_failed": sum(not r.passed for _, r in results),
        "results": [
            {
                "file": path,
                "line": r.line,
                "deployment": r.deployment,
                "assertion": r.assertion,
                "required": r.required,
                "actual": r.actual,
                "unit": r.unit,
                "margin": r.margin,
                "passed": r.passed,
            }
            for path, r in results
        ],
    }


def check_view(path: str, results: list[AssertionResult]) -> list[RenderableType]:
    """The ``kvplan check`` table: deployment, assertion, required, actual, margin, verdict."""
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD)
    for name, justify in (
        ("deployment", "left"),
        ("assertion", "left"),
        ("required", "right"),
        ("actual", "right"),
        ("margin", "right"),
        ("verdict", "left"),
    ):
        table.add_column(name, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for r in results:
        table.add_row(
            r.deployment,
            r.assertion,
            r.show(r.required),
            r.show(r.actual),
            r.margin,
            "pass" if r.passed else "[red]FAIL[/red]",
        )
    failed = sum(not r.passed for r in results)
    summary = (
        f"{len(results)} assertions passed"
        if not failed
        else f"[red]{failed} of {len(results)} assertions failed[/red]"
    )
    return [f"[bold]kvplan check[/bold] {path}", table, summary]


def junit_xml(checked: list[tuple[str, list[AssertionResult]]]) -> str:
    """A JUnit XML report: a test suite per deployment, a test case per assertion."""
    import xml.etree.ElementTree as ET

    every = [r for _, rs in checked for r in rs]
    root = ET.Element(
        "testsuites",
        name="kvplan check " + " ".join(path for path, _ in checked),
        tests=str(len(every)),
        failures=str(sum(not r.passed for r in every)),
    )
    for path, results in checked:
        suites: dict[str, ET.Element] = {}
        for r in results:
            suite = suites.get(r.deployment)
            if suite is None:
                suite = suites[r.deployment] = ET.SubElement(
                    root, "testsuite", name=r.deployment, file=path, tests="0", failures="0"
                )
            suite.set("tests", str(int(suite.get("tests", "0")) + 1))
            case = ET.SubElement(
                suite,
                "testcase",
                classname=f"kvplan.{r.deployment}",
                name=r.assertion,
                file=path,
                line=str(r.line or 0),
            )
            if not r.passed:
                suite.set("failures", str(int(suite.get("failures", "0")) + 1))
                failure = ET.SubElement(
                    case,
                    "failure",
                    message=f"{r.assertion}: required {r.show(r.required)},"
                    f" actual {r.show(r.actual)}",
                    type="BudgetAssertion",
                )
                failure.text = (
                    f"{r.deployment}: {r.assertion} required {r.required!r}"
                    f" ({r.show(r.required)}), actual {r.actual!r} ({r.show(r.actual)}),"
                    f" margin {r.margin}"
                )
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def github_annotations(path: str, results: list[AssertionResult]) -> list[str]:
    """``::error`` workflow commands pointing at each failed assertion's line."""
    lines = []
    for r in results:
        if r.passed:
            continue
        where = f"file={path}" + (f",line={r.line}" if r.line else "")
        lines.append(
            f"::error {where},title=kvplan check::{r.deployment}: {r.assertion} requires"
            f" {r.show(r.required)}, got {r.show(r.actual)}; margin {r.margin}"
        )
    return lines


def github_summary(path: str, results: list[AssertionResult]) -> str:
    """A markdown table for ``$GITHUB_STEP_SUMMARY``."""
    failed = sum(not r.passed for r in results)
    head = f"### kvplan check `{path}`: " + (
        f"{len(results)} assertions passed" if not failed else f"{failed} failed"
    )
    rows = [
        "| deployment | assertion | required | actual | margin | verdict |",
        "|---|---|---:|---:|---:|---|",
        *(
            f"| {r.deployment} | {r.assertion} | {r.show(r.required)} | {r.show(r.actual)} |"
            f" {r.margin} | {'pass' if r.passed else '**FAIL**'} |"
            for r in results
        ),
    ]
    return "\n".join([head, "", *rows, ""]) + "\n"


def _metric_value(value: int | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "bytes":
        return format_bytes(value)
    if unit == "tokens":
        return format_tokens(value)
    return f"{value:,}"


def diff_to_dict(d: Diff) -> dict[str, Any]:
    """``kvplan diff --format json``."""
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": d.kind,
        "old": d.old,
        "new": d.new,
        "changes": [
            {"scope": c.scope, "field": c.field, "old": c.old, "new": c.new} for c in d.changes
        ],
        "metrics": [
            {
                "scope": m.scope,
                "name": m.name,
                "old": m.old,
                "new": m.new,
                "unit": m.unit,
                "change": m.change,
            }
            for m in d.metrics
        ],
    }


def diff_view(d: Diff) -> list[RenderableType]:
    """The ``kvplan diff`` view: the changed fields, then each answer ``old -> new (change)``."""
    out: list[RenderableType] = [f"[bold]kvplan diff[/bold] {d.old} -> {d.new} ({d.kind})"]
    if d.changes:
        out.append("changed:")
        for c in d.changes:
            scope = "" if c.scope == "spec" else f"{c.scope}: "
            out.append(f"  {scope}{c.field}: {c.old!r} -> {c.new!r}")
    else:
        out.append("no field changed")
    out.append("effect:")
    for m in d.metrics:
        if m.change == "unchanged":
            continue
        scope = "" if m.scope == "spec" else f"{m.scope}: "
        out.append(
            f"  {scope}{m.name.replace('_', ' ')} {_metric_value(m.old, m.unit)} ->"
            f" {_metric_value(m.new, m.unit)} ({m.change})"
        )
    if all(m.change == "unchanged" for m in d.metrics):
        out.append("  none of the answers changes")
    return out


def probe_to_dict(p: ProbeResult, within: bool, tolerance_bytes: int) -> dict[str, Any]:
    """``kvplan probe --format json``."""
    return {
        "schema_version": SCHEMA_VERSION,
        "model": p.model,
        "family": p.family,
        "device": p.device,
        "dtype": p.dtype,
        "context_tokens": p.context_tokens,
        "batch_size": p.batch_size,
        "decode_steps": p.decode_steps,
        "tensor_bytes": p.tensor_bytes,
        "storage_bytes": p.storage_bytes,
        "num_tensors": p.num_tensors,
        "by_kind": p.by_kind,
        "transformers_estimate_bytes": p.transformers_estimate_bytes,
        "estimate_by_kind": p.estimate_by_kind,
        "ideal_bytes": p.ideal_bytes,
        "difference_bytes": p.difference_bytes,
        "tolerance_bytes": tolerance_bytes,
        "within_tolerance": within,
        "allocator": p.allocator,
        "paged": p.paged,
    }


def probe_view(p: ProbeResult, within: bool, tolerance_bytes: int) -> list[RenderableType]:
    """The ``kvplan probe`` view: measured next to estimated, per layer kind."""
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD)
    for name in ("layer kind", "measured", "transformers estimate", "difference"):
        table.add_column(name, justify="left" if name == "layer kind" else "right", no_wrap=True)
    for kind in dict.fromkeys([*p.by_kind, *p.estimate_by_kind]):
        measured, est = p.by_kind.get(kind, 0), p.estimate_by_kind.get(kind, 0)
        table.add_row(kind, f"{measured:,} B", f"{est:,} B", f"{measured - est:+,} B")
    share = (
        100 * p.difference_bytes / p.transformers_estimate_bytes
        if p.transformers_estimate_bytes
        else 0.0
    )
    table.add_row(
        "total",
        f"{p.tensor_bytes:,} B",
        f"{p.transformers_estimate_bytes:,} B",
        f"{p.difference_bytes:+,} B ({share:+.2f}%)",
    )
    out: list[RenderableType] = [
        f"[bold]{p.model}[/bold] ({p.family}) on {p.device}, {p.dtype}:"
        f" {format_tokens(p.context_tokens)} tokens x {p.batch_size} + {p.decode_steps} decode"
        f" steps; {p.num_tensors} cache tensors",
        table,
        f"storage held (de-duplicated): {p.storage_bytes:,} B"
        f" ({format_bytes(p.storage_bytes)}); kvplan's ideal cache: {p.ideal_bytes:,} B",
    ]
    if p.allocator:
        out.append(
            "CUDA allocator: " + ", ".join(f"{k} {format_bytes(v)}" for k, v in p.allocator.items())
        )
    if p.paged:
        out.append(
            f"paged pool: {p.paged['num_blocks']} blocks, planned {p.paged['planned_bytes']:,} B,"
            f" allocated {p.paged['tensor_bytes']:,} B"
            + (
                f", allocator delta {p.paged['memory_allocated_delta']:,} B"
                if "memory_allocated_delta" in p.paged
                else ""
            )
        )
    out.append(
        "within tolerance"
        if within
        else f"[red]differs by more than the tolerance ({tolerance_bytes:,} B)[/red]"
    )
    return out
