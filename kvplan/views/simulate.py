"""``kvplan simulate``: a trace's replay through vLLM's prefix cache, as a table and JSON."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvplan.views import SCHEMA_VERSION
from kvplan.views.table import Column, table

if TYPE_CHECKING:
    from rich.console import RenderableType

    from kvplan.answers.simulate import TraceReplay


def replay_to_dict(r: TraceReplay, trace: str) -> dict[str, Any]:
    """The replay for ``--format json``: the pool, the service rates and the totals (tokens,
    blocks, FLOPs and milliseconds as integers; the rates as decimal strings)."""
    s = r.result
    return {
        "schema_version": SCHEMA_VERSION,
        "trace": trace,
        "engine": "vllm",
        "model": r.model,
        "gpu": r.gpu,
        "num_blocks": r.num_blocks,
        "block_tokens": r.block_tokens,
        "prefill_seconds_per_token": f"{float(r.prefill_seconds_per_token):.9f}",
        "decode_seconds_per_token": f"{float(r.decode_seconds_per_token):.9f}",
        "num_requests": s.num_requests,
        "num_refused": s.num_refused,
        "input_tokens": s.input_tokens,
        "hit_tokens": s.hit_tokens,
        "computed_tokens": s.computed_tokens,
        "hit_ratio": round(s.hit_ratio, 6),
        "saved_prefill_flops": r.saved_flops,
        "evicted_blocks": s.evicted_blocks,
        "peak_running": s.peak_running,
        "wait_ms": s.wait_ms,
    }


def replay_view(doc: dict[str, Any]) -> list[RenderableType]:
    """The ``kvplan simulate`` table, from its JSON document (no arithmetic)."""
    rows = [
        (
            "requests replayed",
            f"{doc['num_requests']:,} ({doc['num_refused']:,} longer than the pool)",
        ),
        ("input tokens", f"{doc['input_tokens']:,}"),
        ("found in the prefix cache", f"{doc['hit_tokens']:,} ({100 * doc['hit_ratio']:.2f}%)"),
        ("prefilled", f"{doc['computed_tokens']:,} tokens"),
        ("prefill FLOPs saved", f"{doc['saved_prefill_flops']:.3e}"),
        ("blocks evicted", f"{doc['evicted_blocks']:,}"),
        ("most requests at once", f"{doc['peak_running']:,}"),
        ("time waiting for blocks", f"{doc['wait_ms'] / 1000:,.1f} s, all requests"),
    ]
    columns: list[Column] = [("", "left"), ("", "right")]
    return [
        f"[bold]{doc['model']}[/bold] on vLLM, 1 x {doc['gpu']}: {doc['num_blocks']:,} blocks of"
        f" {doc['block_tokens']} tokens, trace {doc['trace']}",
        table(columns, rows, show_header=False, key_style="bold"),
        "each request held for its prefill (the tokens not found) and its decode, one request"
        " at a time at kvplan perf's rates",
    ]
