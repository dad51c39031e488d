"""Render kvplan's example HTML reports (plans of each engine, a budget check, a comparison,
a diff) in a real browser (headless Chromium, no network, a fresh profile each time) and check
them from the DOM: every figure and label the report's own JSON gives is on the page, and
nothing spills out of its box at 1280 and 390 pixels wide.
Screenshots of each (and, at 1280, one in dark mode and the page printed to PDF) go to the
output folder.

Run: ``python scripts/check_reports_in_browser.py OUT_DIR``. Exit 0 when every check holds, 1
when one fails, 3 when no Chromium is found (the caller says so and skips).

The check runs inside the page: a copy of each report gets one inline script (the report
itself carries none) that records what it finds in an attribute of <body>, which
``--dump-dom`` prints once the page has loaded.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

#: the plans whose reports are checked: one per engine that answers with a memory budget
EXAMPLES = {
    "plan-vllm": ["llama-3.1-8b", "--gpu", "h100", "-e", "vllm", "-c", "32K"],
    "plan-ideal": ["qwen3-8b", "--gpu", "l40s", "-c", "32K", "-tp", "1"],
    "plan-sglang": ["gemma-3-27b", "--gpu", "h200", "-e", "sglang", "-c", "64K"],
    "plan-vllm-no-fit": ["llama-3.1-70b", "--gpu", "rtx-4090", "-e", "vllm", "-c", "8K"],
    "plan-nodes": ["llama-3.1-70b", "--gpu", "h100", "-c", "32K", "--concurrency", "64"],
}
#: the budget checks whose reports are checked (files of this repository)
CHECKS = {"check-example": ["examples/budget.yaml"]}
#: the comparisons whose reports are checked
COMPARES = {
    "compare-four": ["llama-3.1-8b", "qwen3-8b", "gemma-3-27b", "deepseek-v3", "--gpu", "h100"]
}
WIDTHS = (1280, 390)

_CHECK = """
<script>
window.addEventListener('load', () => {
  const problems = [];
  const width = document.documentElement.clientWidth;
  const inScroll = (el) => el.closest('.scroll') !== null;
  for (const el of document.body.querySelectorAll('*')) {
    if (el.tagName === 'SCRIPT' || inScroll(el)) continue;
    const r = el.getBoundingClientRect();
    if (r.width && r.right > width + 1) problems.push('past the page: ' + el.tagName + ' '
      + (el.id || el.className.baseVal || el.className || '') + ' right ' + Math.round(r.right));
  }
  for (const svg of document.querySelectorAll('svg')) {
    const box = svg.getBoundingClientRect();
    for (const t of svg.querySelectorAll('text')) {
      const r = t.getBoundingClientRect();
      if (r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1
          || r.bottom > box.bottom + 1) problems.push('text out of its chart: ' + t.textContent);
    }
  }
  const doc = JSON.parse(document.getElementById('kvplan-data').textContent);
  const text = document.body.innerText;
  const gib = (b) => (b / 2 ** 30).toLocaleString('en-US',
    {minimumFractionDigits: 2, maximumFractionDigits: 2}) + ' GiB';
  const want = ['Reproduce it'];
  if (doc.results) {
    for (const r of doc.results) want.push(r.deployment, r.assertion, r.margin);
  } else if (doc.metrics) {
    for (const m of doc.metrics) want.push(m.scope, m.name, m.change);
  } else if (doc.models) {
    for (const m of doc.models) want.push(m.model, gib(m.kv_cache_bytes),
      m.bytes_per_token.toLocaleString('en-US') + ' B');
  } else {
    want.push(doc.answer.sentence, 'The question', doc.model);
    for (const key of ['weights_bytes', 'kv_cache_memory_bytes', 'kv_cache_bytes']) {
      if (typeof doc[key] === 'number' && doc[key] > 0) want.push(gib(doc[key]));
    }
    for (const line of doc.log_lines || []) want.push(line);
    if (doc.kv_cache_tokens) want.push(doc.kv_cache_tokens.toLocaleString('en-US') + ' tokens');
    const over = doc.overhead || {};
    const labels = {activation_bytes: 'activation', non_torch_bytes: 'non-torch',
      cuda_graph_bytes: 'CUDA graphs'};
    for (const [key, label] of Object.entries(labels)) {
      if (over[key] > 0 && doc.total_memory_bytes) want.push(label + ' ' + gib(over[key]));
    }
    if (doc.kv_curve && doc.kv_cache_tokens) want.push('1 request', 'the KV pool (the limit)');
    for (const g of doc.kv_layers || []) want.push(g.kind, gib(g.bytes));
    for (const c of doc.candidates || []) want.push(c.shape);
  }
  for (const w of want) if (!text.includes(w)) problems.push('missing: ' + w);
  document.body.setAttribute('data-check', JSON.stringify({problems, checked: want.length}));
});
</script>
"""


def _browser() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _run(browser: str, args: list[str], timeout: int = 90) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory() as profile:
        flags = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            "--disable-background-networking",
            "--proxy-server=127.0.0.1:9",  # nothing reaches the network
            f"--user-data-dir={profile}",
        ]
        return subprocess.run(
            [browser, *flags, *args], capture_output=True, text=True, timeout=timeout, check=False
        )


def _check(browser: str, page: Path, width: int, out: Path) -> list[str]:
    probe = page.with_name(f"{page.stem}.check-{width}.html")
    text = page.read_text(encoding="utf-8")
    probe.write_text(text.replace("</body>", _CHECK + "</body>"), encoding="utf-8")
    size = f"--window-size={width},2400"
    dom = _run(browser, [size, "--virtual-time-budget=5000", "--dump-dom", probe.as_uri()])
    probe.unlink()
    found = re.search(r'data-check="([^"]*)"', dom.stdout)
    if not found:
        return [f"no result from the page (exit {dom.returncode}): {dom.stderr[-300:]}"]
    result = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    shot = out / f"{page.stem}-{width}.png"
    _run(browser, [size, f"--screenshot={shot}", page.as_uri()])
    problems = [str(p) for p in result["problems"]]
    if not shot.exists():
        problems.append(f"no screenshot {shot.name}")
    if width == WIDTHS[0]:  # the reader's dark setting, and printed
        dark = out / f"{page.stem}-{width}-dark.png"
        _run(browser, [size, "--force-dark-mode", f"--screenshot={dark}", page.as_uri()])
        pdf = out / f"{page.stem}.pdf"
        _run(browser, ["--no-pdf-header-footer", f"--print-to-pdf={pdf}", page.as_uri()])
        for made in (dark, pdf):
            if not made.exists() or made.stat().st_size < 1000:
                problems.append(f"no {made.name}")
    print(f"{page.name} at {width} px: {result['checked']} figures checked, {len(problems)}"
          f" problems; {shot.name}")  # fmt: skip
    return problems


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "report-shots").resolve()
    out.mkdir(parents=True, exist_ok=True)
    browser = _browser()
    if browser is None:
        print("no Chromium found (Debian: apt-get install chromium)", file=sys.stderr)
        return 3
    problems: list[str] = []
    asked = {name: ["plan", *args] for name, args in EXAMPLES.items()}
    asked.update({name: ["check", *args] for name, args in CHECKS.items()})
    asked.update({name: ["compare", *args] for name, args in COMPARES.items()})
    changed = out / "budget-changed.yaml"
    example = Path("examples/budget.yaml").read_text(encoding="utf-8")
    changed.write_text(example.replace("max_model_len: 32K", "max_model_len: 16K"), "utf-8")
    asked["diff-example"] = ["diff", "examples/budget.yaml", str(changed)]
    for name, args in asked.items():
        page = out / f"{name}.html"
        made = subprocess.run(
            [sys.executable, "-m", "kvplan", *args, "--html", str(page), "--force"],
            capture_output=True,
            text=True,
            check=False,
        )
        if made.returncode not in (0, 1) or not page.exists():
            problems.append(f"{name}: kvplan exit {made.returncode}: {made.stderr[-300:]}")
            continue
        print(f"{page.name}: {page.stat().st_size:,} bytes")
        for width in WIDTHS:
            problems += [f"{name} at {width} px: {p}" for p in _check(browser, page, width, out)]
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
