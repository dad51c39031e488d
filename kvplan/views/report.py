"""A capacity report people open in a browser: one self-contained HTML page per plan, made from
the plan's ``--format json`` document alone (so the page and the JSON cannot disagree).

The page carries its data as the same JSON (``<script type="application/json"
id="kvplan-data">``, data, never run), its styles inline (light and dark from the reader's
setting, a print style), and its charts as inline SVG with axes, units and legends. It loads
nothing: no script, font, stylesheet or image from anywhere. What it shows, each section only
where the document has its figures: the question as asked, the verdict in one sentence, the
memory of one GPU as a bar (weights, activation, non-torch, CUDA graphs, KV pool, headroom,
each in GiB), the KV cache against context for one request and for the most that fit with the
pool marked, the engine's own printed lines, what was estimated or left out, and the command
that reproduces it.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Callable
from typing import Any

from kvplan.units import format_bytes, format_tokens

__all__ = ["REPORT_MARKER", "check_report", "compare_report", "diff_report", "plan_report"]

#: the first line of every report kvplan writes (an earlier report is replaced without --force)
REPORT_MARKER = "<!-- kvplan capacity report -->"
GiB = 1 << 30

_CSS = """
:root { --fg: #1b1f24; --bg: #ffffff; --muted: #57606a; --line: #d0d7de; --ok: #1a7f37;
  --bad: #cf222e; --c1: #4c78a8; --c2: #f58518; --c3: #e45756; --c4: #72b7b2; --c5: #54a24b;
  --c6: #bab0ac; color-scheme: light dark; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6edf3; --bg: #0d1117; --muted: #9da7b3;
  --line: #30363d; --ok: #3fb950; --bad: #f85149; --c6: #6e7681; } }
* { box-sizing: border-box; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg);
  background: var(--bg); margin: 0 auto; padding: 16px; max-width: 1100px; }
h1 { font-size: 1.35em; margin: 0 0 4px; overflow-wrap: anywhere; }
h2 { font-size: 1.1em; margin: 24px 0 8px; border-bottom: 1px solid var(--line); }
h3 { font-size: 1em; margin: 16px 0 6px; }
.verdict { font-size: 1.15em; padding: 10px 12px; border-left: 5px solid var(--ok);
  overflow-wrap: anywhere; }
.verdict.fail { border-color: var(--bad); }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; }
td, th { padding: 3px 10px 3px 0; text-align: left; vertical-align: top;
  overflow-wrap: break-word; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
svg { width: 100%; height: auto; display: block; min-width: 640px; }
svg text { fill: var(--fg); font: 15px system-ui, sans-serif; }
svg .axis { stroke: var(--muted); }
svg .grid { stroke: var(--line); }
code, pre { font: 13px ui-monospace, SFMono-Regular, Menlo, monospace; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: rgba(127,127,127,.1);
  padding: 8px; }
.muted { color: var(--muted); }
.legend span { display: inline-block; margin-right: 14px; white-space: nowrap; }
.legend i { display: inline-block; width: 12px; height: 12px; margin-right: 4px;
  vertical-align: -1px; }
@media print { body { max-width: none; } .verdict { border-width: 3px; } }
"""

_SEGMENTS = (  # (label, colour) of the memory bar, bottom up
    ("weights", "--c1"),
    ("activation", "--c2"),
    ("non-torch", "--c3"),
    ("CUDA graphs", "--c4"),
    ("KV pool", "--c5"),
    ("headroom", "--c6"),
)


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _gib(num_bytes: int) -> str:
    return f"{num_bytes / GiB:,.2f} GiB"


def _pool(doc: dict[str, Any]) -> int:
    """The KV pool's bytes on one GPU, under either name engines' documents give it."""
    pool = doc.get("kv_cache_memory_bytes", doc.get("kv_cache_bytes"))
    return pool if isinstance(pool, int) else 0


def _memory(doc: dict[str, Any]) -> list[tuple[str, str, int]]:
    """The bar's segments (label, colour, bytes) from the document: those it gives."""
    over = doc.get("overhead") or {}
    kv = _pool(doc)
    parts = {
        "weights": doc.get("weights_bytes"),
        "activation": over.get("activation_bytes"),
        "non-torch": over.get("non_torch_bytes"),
        "CUDA graphs": over.get("cuda_graph_bytes"),
        "KV pool": kv,
    }
    if not over and doc.get("overhead_bytes"):
        parts["activation"] = doc["overhead_bytes"]  # one figure: shown as the activation
    total = doc.get("total_memory_bytes")
    used = sum(v for v in parts.values() if isinstance(v, int))
    if isinstance(total, int) and total >= used:
        parts["headroom"] = total - used
    return [
        (label, colour, int(value))
        for label, colour in _SEGMENTS
        if isinstance(value := parts.get(label), int) and value > 0
    ]


def _bar(segments: list[tuple[str, str, int]], total: int) -> str:
    """One GPU's memory as a horizontal bar with each segment's GiB in the legend; what
    does not fit runs past a line at the GPU's memory, the axis then the larger."""
    width, x = 1000.0, 0.0
    rects, ticks = [], []
    need = sum(b for _, _, b in segments)
    scale = max(total, need)
    for label, colour, num_bytes in segments:
        w = width * num_bytes / scale if scale else 0
        rects.append(
            f'<rect x="{x:.1f}" y="0" width="{w:.1f}" height="36" fill="var({colour})">'
            f"<title>{_e(label)}: {_gib(num_bytes)}</title></rect>"
        )
        x += w
    if need > total:
        tx = width * total / scale
        rects.append(
            f'<line x1="{tx:.1f}" y1="0" x2="{tx:.1f}" y2="42" stroke="var(--bad)"'
            f' stroke-width="3"><title>the GPU: {_gib(total)}</title></line>'
        )
    for k in range(5):
        gib = scale * k / 4 / GiB
        tx = width * k / 4
        anchor = "start" if k == 0 else "end" if k == 4 else "middle"
        ticks.append(
            f'<line class="axis" x1="{tx:.1f}" y1="36" x2="{tx:.1f}" y2="42"/>'
            f'<text x="{tx:.1f}" y="56" text-anchor="{anchor}">{gib:,.1f}</text>'
        )
    legend = "".join(
        f'<span><i style="background:var({c})"></i>{_e(label)} {_gib(b)}</span>'
        for label, c, b in segments
    )
    return (
        '<div class="scroll"><svg viewBox="0 0 1000 80" role="img" aria-label="memory of one'
        f' GPU">{"".join(rects)}{"".join(ticks)}'
        '<text x="500" y="76" text-anchor="middle">GiB of one GPU</text></svg></div>'
        f'<div class="legend">{legend}</div>'
    )


#: the KV chart's frame: width, height, left and bottom margins (viewBox units)
_W, _H, _LEFT, _BOTTOM = 1000, 370, 70, 50


def _axes(
    contexts: list[int], top: float, px: Callable[[int], float], py: Callable[[float], float]
) -> list[str]:
    """The KV chart's axes: GiB gridlines up to ``top`` bytes, a tick a context."""
    w, h, left, bottom = _W, _H, _LEFT, _BOTTOM
    parts = [
        f'<line class="axis" x1="{left}" y1="{h - bottom}" x2="{w - 10}" y2="{h - bottom}"/>',
        f'<line class="axis" x1="{left}" y1="10" x2="{left}" y2="{h - bottom}"/>',
    ]
    digits = 0 if top >= 20 * GiB else 1 if top >= 2 * GiB else 2
    for k in range(5):
        value = top * k / 4
        parts.append(
            f'<line class="grid" x1="{left}" y1="{py(value):.1f}" x2="{w - 10}"'
            f' y2="{py(value):.1f}"/><text x="{left - 6}" y="{py(value) + 5:.1f}"'
            f' text-anchor="end">{value / GiB:,.{digits}f}</text>'
        )
    for tokens in contexts:
        anchor = "end" if tokens == contexts[-1] else "middle"
        parts.append(
            f'<text x="{px(tokens):.1f}" y="{h - bottom + 18}" text-anchor="{anchor}">'
            f"{_e(format_tokens(tokens))}</text>"
        )
    return parts


def _kv_chart(doc: dict[str, Any]) -> str:
    """The KV cache one request and the most that fit take against context (log2 axis), per
    GPU of a replica (kvplan's estimate over tensor x pipeline), with the pool as a line."""
    curve = doc["kv_curve"]
    contexts = [int(c) for c in curve["context_tokens"]]
    share = max(1, int(doc.get("tensor_parallel_size") or 1)) * max(
        1, int(doc.get("pipeline_parallel_size") or 1)
    )
    one = [int(b) / share for b in curve["kv_bytes_one_request"]]
    pool, most = _pool(doc), max(1, int(doc.get("max_concurrency") or 1))
    top = max(pool, most * one[-1]) * 1.08 or 1.0
    w, h, left, bottom = _W, _H, _LEFT, _BOTTOM
    lo = math.log2(contexts[0])
    hi = max(math.log2(contexts[-1]), lo + 1)

    def px(tokens: int) -> float:
        return left + (w - left - 30) * (math.log2(tokens) - lo) / (hi - lo)

    def py(num_bytes: float) -> float:
        return float(h - bottom - (h - bottom - 10) * num_bytes / top)

    parts = _axes(contexts, top, px, py)
    for n, colour, label in ((1, "--c1", "1 request"), (most, "--c2", f"{most:,} requests")):
        points = " ".join(
            f"{px(t):.1f},{py(n * b):.1f}" for t, b in zip(contexts, one, strict=True)
        )
        parts.append(
            f'<polyline points="{points}" fill="none" stroke="var({colour})" stroke-width="2.5">'
            f"<title>{_e(label)}</title></polyline>"
        )
    parts.append(
        f'<line x1="{left}" y1="{py(pool):.1f}" x2="{w - 10}" y2="{py(pool):.1f}"'
        f' stroke="var(--bad)" stroke-dasharray="6 4" stroke-width="2"/>'
        f'<text x="{w - 12}" y="{py(pool) - 6:.1f}" text-anchor="end">the KV pool,'
        f" {_gib(pool)}</text>"
        f'<text x="{(w + left) / 2}" y="{h - 8}" text-anchor="middle">context (tokens, each'
        f' request)</text><text x="16" y="{(h - bottom) / 2}" text-anchor="middle"'
        f' transform="rotate(-90 16 {(h - bottom) / 2})">KV cache (GiB a GPU)</text>'
    )
    legend = (
        '<div class="legend"><span><i style="background:var(--c1)"></i>1 request</span>'
        f'<span><i style="background:var(--c2)"></i>{most:,} requests (the most that fit)</span>'
        '<span><i style="background:var(--bad)"></i>the KV pool (the limit)</span></div>'
    )
    return (
        f'<div class="scroll"><svg viewBox="0 0 {w} {h}" role="img" aria-label="KV cache'
        f' against context">{"".join(parts)}</svg></div>{legend}'
    )


def _layers(doc: dict[str, Any]) -> str:
    """The KV cache of one request at max_model_len by kind of layer."""
    head = "<tr><th>kind</th><th>layers</th><th>tokens each keeps</th><th>bytes</th></tr>"
    body = "".join(
        f'<tr><td>{_e(g["kind"])}</td><td class="num">{g["num_layers"]:,}</td>'
        f'<td class="num">{g["tokens_retained"]:,}</td>'
        f'<td class="num">{_gib(int(g["bytes"]))}</td></tr>'
        for g in doc["kv_layers"]
    )
    return f'<div class="scroll"><table>{head}{body}</table></div>'


def _rows(rows: list[tuple[str, str]]) -> str:
    body = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in rows)
    return f'<div class="scroll"><table>{body}</table></div>'


def _question(doc: dict[str, Any]) -> list[tuple[str, str]]:
    engine = doc.get("engine", "ideal")
    version = doc.get("engine_version")
    rows = [
        ("model", str(doc["model"])),
        ("where its numbers came from", _source(doc)),
        ("GPU", f"{doc['gpu']} x {doc.get('num_gpus', 1)}"),
        ("engine", f"{engine} {version}" if version else str(engine)),
        (
            "tensor x pipeline parallel",
            f"{doc.get('tensor_parallel_size', 1)} x {doc.get('pipeline_parallel_size', 1)}",
        ),
        ("max model length", f"{doc['max_model_len']:,} tokens"),
    ]
    for key, label in (
        ("gpu_memory_utilization", "GPU memory utilization"),
        ("kv_cache_dtype", "KV cache dtype"),
        ("block_size", "block size (tokens)"),
    ):
        if doc.get(key) is not None:
            rows.append((label, str(doc[key])))
    return rows


def _source(doc: dict[str, Any]) -> str:
    resolved = doc.get("resolved_from")
    if isinstance(resolved, dict):
        return ", ".join(f"{k}: {v}" for k, v in resolved.items())
    return str(resolved) if resolved else "the bundled spec of that name (model_specs/)"


def _notes(doc: dict[str, Any]) -> list[str]:
    answer = doc.get("answer") or {}
    notes = [str(w) for w in answer.get("warnings") or []]
    for key in ("pool_note", "message", "engine_version_note"):
        if doc.get(key):
            notes.append(str(doc[key]))
    over = doc.get("overhead") or {}
    if over.get("source"):
        notes.append(f"overhead: {over['source']}")
    for item in doc.get("provenance") or []:
        notes.append(json.dumps(item, sort_keys=True) if isinstance(item, dict) else str(item))
    return notes


def plan_report(doc: dict[str, Any], command: str) -> str:
    """The self-contained HTML page of one ``kvplan plan`` answer: its JSON ``doc`` and the
    ``command`` that reproduces it."""
    title = f"{doc['model']} on {doc['gpu']}: kvplan capacity report"
    sections = _plan_body(doc, "h2")
    if doc.get("candidates"):
        sections[1:1] = ["<h2>The deployments searched, best first</h2>", _candidates(doc)]
    sections += ["<h2>Reproduce it</h2>", f"<pre>{_e(command)}</pre>"]
    return _page(title, sections, doc, "plan")


def _candidates(doc: dict[str, Any]) -> str:
    """The search in whole nodes: each candidate ranked, with what it costs and holds (the
    first is the answer, whose memory the sections below show)."""
    head = (
        "<tr><th>system</th><th>shape</th><th>GPUs</th><th>nodes</th><th>requests held</th>"
        "<th>KV pool a GPU</th><th>USD an hour</th><th>output tokens/s</th>"
        "<th>USD a million output tokens</th><th>ranks below because</th></tr>"
    )
    rows = "".join(
        f"<tr><td>{_e(c['system'])}</td><td>{_e(c['shape'])}</td>"
        f'<td class="num">{c["num_gpus"]:,}</td><td class="num">{c["num_nodes"]:,}</td>'
        f'<td class="num">{c["held_requests"]:,}</td>'
        f'<td class="num">{_gib(int(c["kv_cache_memory_bytes"]))}</td>'
        f'<td class="num">{_e(c.get("usd_per_hour") or "-")}</td>'
        f'<td class="num">{_e(c.get("output_tokens_per_s") or "-")}</td>'
        f'<td class="num">{_e(c.get("usd_per_million_output_tokens") or "-")}</td>'
        f"<td>{_e(c.get('loses_because') or '')}</td></tr>"
        for c in doc["candidates"]
    )
    return f'<div class="scroll"><table>{head}{rows}</table></div>'


def _plan_body(doc: dict[str, Any], h: str) -> list[str]:
    """A plan's sections, headed by ``h`` (``h2`` on its own page, ``h3`` in a check's)."""
    answer = doc.get("answer") or {}
    fits = bool(doc.get("fits", answer.get("fits")))
    sentence = answer.get("sentence") or ("fits" if fits else "does not fit")
    sections = [
        f'<p class="verdict{"" if fits else " fail"}">{_e(sentence)}</p>',
        f"<{h}>The question</{h}>",
        _rows(_question(doc)),
    ]
    segments = _memory(doc)
    total = doc.get("total_memory_bytes") or 0
    if segments and total:
        need = sum(b for _, _, b in segments)
        short = (
            f"<p>It needs {_gib(need)}, more than the GPU's {_gib(total)}: the red line.</p>"
            if need > total
            else ""
        )
        head = f"<{h}>Memory of one GPU ({_gib(total)})</{h}>"
        sections += [head, short, _bar(segments, total)]
    if doc.get("kv_curve") and doc.get("kv_cache_tokens"):
        sections += [
            f"<{h}>KV cache against context</{h}>",
            f"<p>The pool holds {doc['kv_cache_tokens']:,} tokens ({format_bytes(_pool(doc))});"
            f" at {doc['max_model_len']:,} tokens each, {doc.get('max_concurrency', 0):,}"
            " requests fit at once, as the engine counts its pool. The lines are kvplan's"
            " estimate of the KV bytes, per GPU of a replica.</p>",
            _kv_chart(doc),
        ]
    if doc.get("kv_layers"):
        sections += [
            f"<{h}>One request of {doc['max_model_len']:,} tokens, by kind of layer</{h}>",
            _layers(doc),
        ]
    if doc.get("log_lines"):
        lines = "\n".join(str(x) for x in doc["log_lines"])
        sections += [f"<{h}>What the engine prints</{h}>", f"<pre>{_e(lines)}</pre>"]
    notes = _notes(doc)
    if notes:
        items = "".join(f"<li>{_e(n)}</li>" for n in notes)
        sections += [f"<{h}>Estimated or left out</{h}>", f"<ul>{items}</ul>"]
    return sections


def _page(title: str, sections: list[str], doc: dict[str, Any], what: str) -> str:
    """The page: ``sections`` under ``title``, with ``doc`` kept below as data."""
    data = json.dumps(doc, sort_keys=True).replace("</", "<\\/")
    return (
        f'{REPORT_MARKER}\n<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>{_e(title)}</h1>"
        f'<p class="muted">schema_version {doc.get("schema_version")}; every figure is the'
        f" {what}'s --format json document, kept below as data.</p>"
        f"{''.join(sections)}"
        f'<script type="application/json" id="kvplan-data">{data}</script>'
        "</body></html>\n"
    )


def check_report(doc: dict[str, Any], command: str) -> str:
    """The self-contained HTML page of one ``kvplan check``: a section per deployment, those
    with a failing assertion first, each assertion with required, actual and margin."""
    results = doc["results"]
    order: list[str] = []
    for r in results:
        if r["deployment"] not in order:
            order.append(r["deployment"])
    failing = {r["deployment"] for r in results if not r["passed"]}
    order.sort(key=lambda name: name not in failing)  # stable: the file's order otherwise
    passed = bool(doc["passed"])
    sentence = (
        f"All {doc['num_assertions']:,} assertions hold."
        if passed
        else f"{doc['num_failed']:,} of {doc['num_assertions']:,} assertions fail, in"
        f" {len(failing):,} of {len(order):,} deployments."
    )
    sections = [f'<p class="verdict{"" if passed else " fail"}" id="verdict">{_e(sentence)}</p>']
    head = (
        "<tr><th>assertion</th><th>required</th><th>actual</th><th>margin</th>"
        "<th>verdict</th><th>line</th></tr>"
    )
    for name in order:
        mine = [r for r in results if r["deployment"] == name]
        bad = name in failing
        rows = "".join(
            f'<tr><td>{_e(r["assertion"])}</td><td class="num">{_e(_value(r, "required"))}'
            f'</td><td class="num">{_e(_value(r, "actual"))}</td>'
            f'<td class="num">{_e(r["margin"])}</td>'
            f"<td>{'holds' if r['passed'] else 'FAILS'}</td>"
            f'<td class="num">{_e(r["line"])}</td></tr>'
            for r in mine
        )
        sections += [
            f"<h2>{_e(name)}: {'fails' if bad else 'holds'}</h2>",
            f'<div class="scroll"><table>{head}{rows}</table></div>',
        ]
        plan = next((p["plan"] for p in doc.get("plans", []) if p["deployment"] == name), None)
        if plan is not None:
            sections += _plan_body(plan, "h3")
    sections += ["<h2>Reproduce it</h2>", f"<pre>{_e(command)}</pre>"]
    files = ", ".join(str(f) for f in doc.get("files", []))
    return _page(f"{files}: kvplan budget check", sections, doc, "check")


def _value(result: dict[str, Any], key: str) -> str:
    """An assertion's value with its unit, as the check's table shows it."""
    value, unit = result[key], result["unit"]
    if isinstance(value, bool):
        return "yes" if value else "no"
    if unit == "bytes":
        return f"{format_bytes(value)} ({value:,} bytes)"
    return f"{value:,} {unit}" if unit else f"{value:,}"


def compare_report(doc: dict[str, Any], command: str) -> str:
    """The self-contained HTML page of one ``kvplan compare``: the models' table and a bar
    chart of each one's KV cache of one sequence at the context (and the most sequences that
    fit, with --gpu)."""
    models = doc["models"]
    tokens = int(doc["context_tokens"])
    where = f" on {doc['gpu']}" if doc.get("gpu") else ""
    head = (
        "<tr><th>model</th><th>KV cache dtype</th><th>KV bytes a token</th>"
        f"<th>one sequence of {tokens:,} tokens</th><th>most sequences</th>"
        "<th>decode, one sequence</th></tr>"
    )
    rows = "".join(
        f"<tr><td>{_e(m['model'])}</td><td>{_e(m['kv_cache_dtype'])}"
        f' <span class="muted">({_e(m["kv_cache_dtype_reason"])})</span></td>'
        f'<td class="num">{m["bytes_per_token"]:,} B</td>'
        f'<td class="num">{_gib(int(m["kv_cache_bytes"]))}</td>'
        f'<td class="num">{_count(m.get("max_concurrency"))}</td>'
        f'<td class="num">{_speed(m)}</td></tr>'
        for m in models
    )
    sections = [
        f'<p class="verdict" id="verdict">{len(models):,} models at {tokens:,} tokens a'
        f" sequence{_e(where)} (engine {_e(doc.get('engine', 'ideal'))}, TP"
        f" {doc.get('tensor_parallel_size', 1)}).</p>",
        "<h2>Side by side</h2>",
        f'<div class="scroll"><table>{head}{rows}</table></div>',
        f"<h2>KV cache of one sequence of {tokens:,} tokens</h2>",
        _model_bars(models),
    ]
    notes = [str(m["note"]) for m in models if m.get("note")]
    notes += [f"{m['model']}: {m['no_speed_reason']}" for m in models if m.get("no_speed_reason")]
    if notes:
        items = "".join(f"<li>{_e(n)}</li>" for n in notes)
        sections += ["<h2>Estimated or left out</h2>", f"<ul>{items}</ul>"]
    sections += ["<h2>Reproduce it</h2>", f"<pre>{_e(command)}</pre>"]
    names = ", ".join(str(m["model"]) for m in models)
    return _page(f"{names}: kvplan comparison", sections, doc, "comparison")


def _count(value: object) -> str:
    return f"{value:,}" if isinstance(value, int) else "(give --gpu)"


def _speed(model: dict[str, Any]) -> str:
    speed = model.get("decode_tokens_per_second")
    return f"{speed:,.1f} tokens/s" if isinstance(speed, int | float) else "-"


def _model_bars(models: list[dict[str, Any]]) -> str:
    """One horizontal bar a model: its KV cache of one sequence, in GiB, labelled."""
    widest = max(int(m["kv_cache_bytes"]) for m in models) or 1
    row, left, w = 34, 260, 1000
    parts = []
    for i, m in enumerate(models):
        y = 10 + i * row
        length = (w - left - 140) * int(m["kv_cache_bytes"]) / widest
        parts.append(
            f'<text x="{left - 8}" y="{y + 19}" text-anchor="end">{_e(m["model"])}</text>'
            f'<rect x="{left}" y="{y}" width="{length:.1f}" height="24"'
            f' fill="var(--c{1 + i % 5})"><title>{_e(m["model"])}</title></rect>'
            f'<text x="{left + length + 6:.1f}" y="{y + 19}">'
            f"{_gib(int(m['kv_cache_bytes']))}</text>"
        )
    base = 10 + len(models) * row
    span = w - left - 140
    parts.append(f'<line class="axis" x1="{left}" y1="{base}" x2="{left + span}" y2="{base}"/>')
    for k in range(5):
        x = left + span * k / 4
        parts.append(
            f'<line class="axis" x1="{x:.1f}" y1="{base}" x2="{x:.1f}" y2="{base + 6}"/>'
            f'<text x="{x:.1f}" y="{base + 22}" text-anchor="middle">'
            f"{widest * k / 4 / GiB:,.1f}</text>"
        )
    parts.append(
        f'<text x="{left + span / 2:.1f}" y="{base + 44}" text-anchor="middle">GiB, one'
        " sequence</text>"
    )
    h = base + 54
    return (
        f'<div class="scroll"><svg viewBox="0 0 {w} {h}" role="img" aria-label="KV cache of'
        f' one sequence a model">{"".join(parts)}</svg></div>'
    )


def diff_report(doc: dict[str, Any], command: str) -> str:
    """The self-contained HTML page of one ``kvplan diff``: the changes, then what they did
    to each answer, those that changed first."""
    changes, metrics = doc.get("changes") or [], doc.get("metrics") or []
    moved = [m for m in metrics if m.get("change") != "unchanged"]
    sentence = (
        f"{len(changes):,} change{'' if len(changes) == 1 else 's'};"
        f" {len(moved):,} of {len(metrics):,} answers moved."
    )
    sections = [
        f'<p class="verdict" id="verdict">{_e(sentence)}</p>',
        "<h2>What changed</h2>",
    ]
    head = "<tr><th>where</th><th>field</th><th>old</th><th>new</th></tr>"
    rows = "".join(
        f"<tr><td>{_e(c.get('scope', ''))}</td><td>{_e(c.get('field', ''))}</td>"
        f"<td><code>{_e(_shown(c.get('old')))}</code></td>"
        f"<td><code>{_e(_shown(c.get('new')))}</code></td></tr>"
        for c in changes
    )
    sections.append(f'<div class="scroll"><table>{head}{rows}</table></div>')
    head = "<tr><th>where</th><th>answer</th><th>old</th><th>new</th><th>change</th></tr>"
    ordered = sorted(metrics, key=lambda m: m.get("change") == "unchanged")  # stable
    rows = "".join(
        f"<tr><td>{_e(m.get('scope', ''))}</td><td>{_e(m.get('name', ''))}</td>"
        f'<td class="num">{_e(_metric(m, "old"))}</td>'
        f'<td class="num">{_e(_metric(m, "new"))}</td>'
        f'<td class="num">{_e(m.get("change", ""))}</td></tr>'
        for m in ordered
    )
    sections += [
        "<h2>What it did to the answers</h2>",
        f'<div class="scroll"><table>{head}{rows}</table></div>',
        "<h2>Reproduce it</h2>",
        f"<pre>{_e(command)}</pre>",
    ]
    return _page(f"{doc.get('old')} to {doc.get('new')}: kvplan diff", sections, doc, "diff")


def _shown(value: object) -> str:
    return json.dumps(value, sort_keys=True) if isinstance(value, dict | list) else str(value)


def _metric(metric: dict[str, Any], key: str) -> str:
    value, unit = metric.get(key), metric.get("unit", "")
    if isinstance(value, bool) or not isinstance(value, int):
        return _shown(value)
    return _value({key: value, "unit": unit}, key)
