"""Engines: ``kvplan plan --engine NAME`` (vLLM's figures, a token pool), ``kvplan calc --engine
NAME`` (what the engine allocates and prints), ``kvplan reconcile`` and ``kvplan flags``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvplan.units import format_bytes, format_tokens
from kvplan.views import SCHEMA_VERSION
from kvplan.views.table import Column, table

if TYPE_CHECKING:
    from rich.console import RenderableType

    from kvplan.answers.flags import EngineFlags
    from kvplan.answers.plans import TokenPoolPlan, VllmPlan
    from kvplan.engines.base import EngineResult
    from kvplan.engines.llamacpp_plan import LlamaCppAsk, LlamaCppPlan
    from kvplan.engines.vllm import VllmResult
    from kvplan.logs.reconcile import Difference, Reconciliation
    from kvplan.model.spec import ModelSpec

#: how each token-pool engine is named in "what ... prints"
_PRINTED_NAME = {"sglang": "sglang", "trtllm": "TensorRT-LLM"}


def _vllm_settings(r: VllmResult) -> dict[str, Any]:
    """vLLM's own cache flags as the chosen release line resolves them."""
    cfg, resolved = r.config, r.settings
    return {
        "enable_prefix_caching": resolved.enable_prefix_caching if resolved else None,
        "async_scheduling": resolved.async_scheduling if resolved else None,
        "mamba_cache_mode": resolved.mamba_cache_mode if resolved else None,
        "in_flight_tokens": resolved.in_flight_tokens if resolved else None,
        "num_gpu_blocks_override": cfg.num_gpu_blocks_override,
        "enforce_eager": cfg.enforce_eager,
        "calibration": None if cfg.calibration is None else cfg.calibration.site,
    }


def vllm_to_dict(p: VllmPlan) -> dict[str, Any]:
    """``kvplan plan --engine vllm --format json``: the plan keys, plus vLLM's own figures."""
    r = p.result
    cfg, last, tight = r.config, r.stages[-1].overhead, p.tightest_stage
    return {
        "schema_version": SCHEMA_VERSION,
        "engine": "vllm",
        "engine_version": cfg.version,
        "engine_version_requested": p.version_asked,
        "engine_version_note": p.version_note,
        "model": p.model,
        "gpu": p.gpu.name,
        "tensor_parallel_size": cfg.tensor_parallel_size,
        "pipeline_parallel_size": cfg.pipeline_parallel_size,
        "num_gpus": p.num_gpus,
        "max_model_len": cfg.max_model_len,
        "gpu_memory_utilization": str(float(cfg.gpu_memory_utilization)),
        "max_num_batched_tokens": cfg.max_num_batched_tokens,
        "max_num_seqs": cfg.max_num_seqs,
        "kv_cache_dtype": p.kv_cache_dtype,
        "total_memory_bytes": p.gpu.memory_bytes,
        "weights_bytes": tight.overhead.weights_bytes,
        "overhead_bytes": p.overhead_bytes,
        "overhead": {
            "source": "vllm profile",
            "activation_bytes": last.activation_bytes,
            "non_torch_bytes": last.non_torch_bytes,
            "cuda_graph_bytes": last.cuda_graph_bytes,
        },
        "kv_cache_memory_bytes": tight.available_bytes,
        "block_size": r.block_size,
        "requested_block_size": cfg.block_size,
        "num_blocks": r.num_gpu_blocks,
        "kv_cache_tokens": r.gpu_kv_cache_tokens,
        "kv_cache_groups": r.num_groups,
        "padding_layers": r.padding_layers,
        "blocks_per_request": r.blocks_per_request,
        "max_concurrency": p.max_concurrency,
        "max_context_tokens": p.max_context_tokens,
        "fits": p.fits,
        "engine_log": dict(r.to_engine_result().engine_log),
        "log_lines": list(r.log_lines()),
        "vllm_settings": _vllm_settings(r),
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
    overhead = doc["overhead"]
    rows = [
        ("total", format_bytes(doc["total_memory_bytes"])),
        ("weights", format_bytes(doc["weights_bytes"])),
        ("peak activation", format_bytes(overhead["activation_bytes"])),
        ("non-torch memory", format_bytes(overhead["non_torch_bytes"])),
        ("CUDA graphs", format_bytes(overhead["cuda_graph_bytes"])),
        ("available KV cache memory", format_bytes(doc["kv_cache_memory_bytes"])),
        ("KV cache groups", f"{doc['kv_cache_groups']} ({doc['padding_layers']} padding layers)"),
        ("blocks per request", f"{doc['blocks_per_request']:,}"),
    ]
    return [
        f"[bold]{doc['model']}[/bold] on vLLM {doc['engine_version']} (V1),"
        f" {doc['num_gpus']} x {doc['gpu']} (TP {doc['tensor_parallel_size']} x PP"
        f" {doc['pipeline_parallel_size']}), KV dtype {doc.get('kv_cache_dtype', 'auto')},"
        f" utilization {doc['gpu_memory_utilization']}",
        *([doc["engine_version_note"]] if doc["engine_version_note"] else []),
        table([("", "left"), ("", "right")], rows, show_header=False, key_style="bold"),
        *_calibrated(doc),
        "what vLLM prints:",
        *(f"  {line}" for line in doc["log_lines"]),
        f"one request of {format_tokens(doc['max_model_len'])} tokens needs"
        f" {doc['blocks_per_request']:,} blocks; {doc['max_concurrency']:,} such requests"
        f" fit in the pool; one request alone reaches"
        f" {format_tokens(doc['max_context_tokens'])} tokens",
        *_vllm_advice(doc),
    ]


def _calibrated(doc: dict[str, Any]) -> list[str]:
    """Where the activation, CUDA-graph and non-torch terms come from, when calibrated."""
    site = doc["vllm_settings"].get("calibration")
    if not site:
        return []
    return [f"activation, CUDA graphs and non-torch memory as calibrated on {site}"]


def _vllm_advice(doc: dict[str, Any]) -> list[str]:
    """What to change when not even one request fits, from the settings vLLM takes."""
    if doc["max_concurrency"] >= 1:
        return []
    longest = format_tokens(doc["max_context_tokens"])
    return [
        f"to fit: --max-model-len {longest} or less, --kv-cache-dtype fp8, a higher"
        " --gpu-memory-utilization, or more GPUs (-tp)"
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
        "engine_log": _engine_log(result),
        "log_lines": list(result.log_lines),
    }


def _engine_log(result: EngineResult) -> dict[str, Any]:
    """The engine's printed figures; for llama.cpp read from a GGUF file, ``buffers`` too."""
    from kvplan.engines.llamacpp_budget import LlamaCppResult

    log: dict[str, Any] = dict(result.engine_log)
    if isinstance(result, LlamaCppResult):
        log["buffers"] = [buffer.to_dict() for buffer in result.buffers]
    return log


def engine_result_view(doc: dict[str, Any]) -> list[RenderableType]:
    """The ``kvplan calc --engine NAME`` view: what the engine allocates and prints."""
    prints = doc["engine"] in ("llama.cpp", "ik_llama.cpp")
    n = doc["batch_size"]
    asked = f"{n} sequence{'s' if n != 1 else ''} of {format_tokens(doc['context_tokens'])} tokens"
    if "n_ctx" in doc:
        asked += f" (-c {doc['n_ctx']} -np {n})"
    return [
        f"[bold]{doc['model']}[/bold] on {doc['engine']} {doc['engine_version']}: {asked}",
        f"KV cache: [bold]{format_bytes(doc['kv_cache_bytes'])}[/bold]"
        f" ({doc['kv_cache_bytes']:,} bytes)",
        f"what {doc['engine']} prints:" if prints else "the cache:",
        *(f"  {line}" for line in doc["log_lines"]),
        *(
            f"  {b['device']} {b['kind']} buffer size = {b['bytes'] / 1048576:8.2f} MiB"
            f" ({b['bytes']:,} bytes)"
            for b in doc["engine_log"].get("buffers", ())
        ),
    ]


def token_pool_to_dict(p: TokenPoolPlan, spec: ModelSpec) -> dict[str, Any]:
    """``kvplan plan --engine sglang|trtllm --format json``: the engine's allocation, and how
    many requests of ``max_model_len`` its pool holds."""
    doc = engine_result_to_dict(p.result, spec, context_tokens=p.max_model_len, batch_size=1)
    doc.update(
        {
            "gpu": p.gpu.name,
            "tensor_parallel_size": p.tensor_parallel_size,
            "pipeline_parallel_size": p.pipeline_parallel_size,
            "max_model_len": p.max_model_len,
            "max_concurrency": p.max_concurrency,
            "fits": p.fits,
        }
    )
    return doc


def token_pool_view(p: TokenPoolPlan, doc: dict[str, Any]) -> list[RenderableType]:
    """The ``kvplan plan --engine sglang|trtllm`` view: the pool, the requests it holds, and
    the engine's log lines."""
    detail = ""
    if p.free_gpu_memory_fraction is not None:
        detail = (
            f" (free_gpu_memory_fraction {p.free_gpu_memory_fraction:g}, the dry run's peak"
            " taken as the weights)"
        )
    engine = _PRINTED_NAME.get(p.result.engine, p.result.engine)
    return [
        f"[bold]{doc['model']}[/bold] on {engine} {doc['engine_version']},"
        f" {p.tensor_parallel_size * p.pipeline_parallel_size} x {doc['gpu']} (TP"
        f" {p.tensor_parallel_size} x PP {p.pipeline_parallel_size}): requests of"
        f" {format_tokens(p.max_model_len)} tokens",
        engine_result_view(doc)[1],
        f"token pool: {p.kv_cache_tokens:,} tokens in {p.num_blocks:,} pages of"
        f" {p.block_size}; {doc['max_concurrency']} requests of {p.max_model_len:,}"
        f" tokens{detail}",
        f"what {engine} prints:",
        *(f"  {line}" for line in doc["log_lines"]),
        *(
            f"  {b['device']} {b['kind']} buffer size = {b['bytes'] / 1048576:8.2f} MiB"
            f" ({b['bytes']:,} bytes)"
            for b in doc["engine_log"].get("buffers", ())
        ),
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
        "status": r.status,
        "checked_nothing": r.checked_nothing or None,
        "num_checked": r.num_checked,
        "num_differ": r.num_differ,
        "num_not_read": r.num_not_read,
        "rows": [
            {
                "component": row.component,
                "printed": row.printed,
                "kvplan": row.kvplan,
                "residual": row.residual,
                "reproduced": row.reproduced,
                "status": row.status,
                "reason": row.not_read or None,
                "difference": _difference_to_dict(row.difference),
            }
            for row in r.rows
        ],
        "notes": list(r.notes),
    }


def _difference_to_dict(d: Difference | None) -> dict[str, Any] | None:
    """A differing figure's ``amount`` (printed - kvplan: an integer for tokens, blocks and
    cells, else two decimals), its ``unit`` and ``percent`` of kvplan's value."""
    if d is None:
        return None
    amount: int | float = int(d.amount) if d.amount.denominator == 1 else round(float(d.amount), 2)
    percent = None if d.percent is None else round(float(d.percent), 4)
    return {"amount": amount, "unit": d.unit, "percent": percent}


def reconciliation_view(doc: dict[str, Any]) -> list[RenderableType]:
    """The ``kvplan reconcile`` table: each figure as printed, as recomputed, and the verdict."""
    shown = {
        "reproduced": "reproduced",
        "differs": "[red]differs[/red]",
        "not read": "[yellow]not read[/yellow]",
        "estimate": "estimate",
    }
    rows = [
        (r["component"], r["printed"], r["kvplan"], r["residual"], shown[r["status"]])
        for r in doc["rows"]
    ]
    names = ("component", "printed", "kvplan", "residual", "status")
    columns: list[Column] = [(name, "left") for name in names]
    settings = ", ".join(f"{k}={v}" for k, v in doc["settings"].items() if v is not None)
    checked, unread = doc["num_checked"], doc["num_not_read"]
    counts = f"{checked} printed figure{'s' if checked != 1 else ''} checked" + (
        f", {unread} not read" if unread else ""
    )
    match doc["status"]:
        case "checked nothing":
            verdict = f"[red]checked nothing: {doc['checked_nothing']}[/red]"
        case "differs":
            differ = doc["num_differ"]
            verdict = f"[red]{differ} printed figure{' differs' if differ == 1 else 's differ'}"
            verdict += f" ({counts})[/red]"
        case _:
            verdict = f"every checked figure reproduced ({counts})"
    return [
        f"[bold]{doc['engine']} {doc['engine_version']}[/bold], model {doc['model']}: {settings}",
        table(columns, rows, overflow="fold"),
        *doc["notes"],
        verdict,
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


def _llamacpp_settings(a: LlamaCppAsk) -> dict[str, Any]:
    """The llama-server settings of a plan, the draft model's and the adapters' with them."""
    return {
        "n_ubatch": a.n_ubatch,
        "n_batch": a.n_batch,
        "flash_attn": a.fa,
        "type_k": a.type_k,
        "type_v": a.type_v,
        "n_seq_max": a.n_seq_max,
        "kv_unified": a.kv_unified,
        "swa_full": a.swa_full,
        "use_mmap": a.use_mmap,
        "no_kv_offload": a.no_kv_offload,
        "split_mode": a.split_mode,
        "tensor_split": [str(s) for s in a.split],
        "draft": None
        if a.draft is None
        else {
            "model": a.draft.spec.name,
            "n_gpu_layers": a.draft.n_gpu_layers,
            "type_k": a.draft.type_k,
            "type_v": a.draft.type_v,
            "draft_max": a.draft.draft_max,
        },
        "loras": list(a.loras),
    }


def llamacpp_plan_to_dict(p: LlamaCppPlan, spec: ModelSpec) -> dict[str, Any]:
    """``kvplan plan --engine llama.cpp --format json``: every buffer per device, the answer
    and the llama-server line that realises it."""
    from kvplan.engines.llamacpp_layout import layer_weights
    from kvplan.views.provenance import resolution_to_dict

    a = p.ask
    return {
        "schema_version": SCHEMA_VERSION,
        "engine": "llama.cpp",
        "model": p.model,
        "gpu": p.gpu.name,
        "backend": a.backend,
        "solved": p.solved,
        "fits": p.fits,
        "n_ctx": p.n_ctx,
        "n_gpu_layers": p.n_gpu_layers,
        "n_layer": p.n_layer,
        "command": p.command,
        # what to pass in place of a placeholder -m MODEL.gguf ("" when the line runs as it is)
        "command_note": p.source.note,
        "capacity_bytes": p.capacity_bytes,
        "headroom_bytes": p.headroom_bytes,
        "kv_cache_bytes": p.kv.kv_cache_bytes,
        "weights_exact": layer_weights(spec).exact,
        "settings": _llamacpp_settings(a),
        "devices": [
            {
                "device": d.name,
                "num_layers": d.num_layers,
                "model_bytes": d.model_bytes,
                "kv_bytes": d.kv_bytes,
                "output_bytes": d.output_bytes,
                "compute_bytes": d.compute_bytes,
                "draft_bytes": d.draft_bytes,
                "lora_bytes": d.lora_bytes,
                "total_bytes": d.total_bytes,
            }
            for d in p.layout.devices
        ],
        "buffers": [b.to_dict() for b in p.buffers],
        **resolution_to_dict(spec),
    }


def _compute_note(p: LlamaCppPlan) -> str:
    """How far to trust the compute column (docs/engines.md, llama.cpp plan)."""
    if p.layout.gpus and p.n_gpu_layers <= p.n_layer:
        # the GPU also runs the host layers' large-batch work: public logs printed 5% and 46%
        # more than the full-offload rule
        return "; compute buffers are estimates, lower bounds while layers stay on the host"
    return "; compute buffers are estimates (docs/engines.md)"


def llamacpp_plan_view(p: LlamaCppPlan, spec: ModelSpec) -> list[RenderableType]:
    """The ``kvplan plan --engine llama.cpp`` view: per device, then the command line (and
    what to pass for a placeholder ``-m MODEL.gguf``)."""
    from rich.markup import escape

    from kvplan.engines.llamacpp_plan import headroom_note
    from kvplan.views.provenance import resolution_line

    doc = llamacpp_plan_to_dict(p, spec)
    verdict = "[green]fits[/green]" if p.fits else "[red]does not fit[/red]"
    host = p.n_layer + 1 - p.n_gpu_layers
    if p.fits and host:
        verdict = f"[yellow]fits, {host} layer{'s' if host != 1 else ''} on the host[/yellow]"
    rows = [
        [
            d["device"],
            str(d["num_layers"]),
            format_bytes(d["model_bytes"]),
            format_bytes(d["kv_bytes"]),
            format_bytes(d["compute_bytes"]),
            format_bytes(d["output_bytes"]),
            *([format_bytes(d["draft_bytes"])] if p.ask.draft else []),
            *([format_bytes(d["lora_bytes"])] if p.ask.loras else []),
            format_bytes(d["total_bytes"]),
        ]
        for d in doc["devices"]
    ]
    columns = ["device", "layers", "model", "KV", "compute", "output"]
    columns += ["draft"] if p.ask.draft else []
    columns += ["LoRA", "total"] if p.ask.loras else ["total"]
    return [
        *resolution_line(spec),
        f"[bold]{escape(p.model)}[/bold] on llama.cpp ({p.ask.backend}, {p.gpu.display_name}):"
        f" -c {p.n_ctx:,} -ngl {p.n_gpu_layers} of {p.n_layer + 1}: {verdict}",
        table([(c, "left" if i == 0 else "right") for i, c in enumerate(columns)], rows),
        (
            f"each GPU: {format_bytes(p.capacity_bytes)}, headroom"
            f" {format_bytes(p.headroom_bytes)} ({headroom_note(p)})"
            if p.layout.gpus
            else "CPU backend: every buffer in host memory, which kvplan does not limit"
        )
        + _compute_note(p),
        escape(p.command),
        *([escape(f"  {p.source.note}")] if p.source.note else []),
    ]
