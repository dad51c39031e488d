"""kvplan plan --html: one self-contained page whose figures are the plan's --format json
document (kept in the page as data), that loads nothing, and that replaces only its own
earlier page without --force. The page in a real browser: scripts/check_reports_in_browser.py
(a CI step)."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app

runner = CliRunner()
QUICK_START = ["plan", "llama-3.1-8b", "--gpu", "h100", "--max-model-len", "32K"]
VOID = {"meta", "br", "img", "input", "link", "hr", "wbr"}
SVG_LEAVES = {"rect", "line", "polyline", "path", "circle"}


class _Tags(HTMLParser):
    """The page's tags, with their attributes, checking each closes in order."""

    def __init__(self) -> None:
        super().__init__()
        self.open: list[str] = []
        self.seen: list[tuple[str, dict[str, str | None]]] = []
        self.problems: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.seen.append((tag, dict(attrs)))
        if tag not in VOID:
            self.open.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.seen.append((tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        if not self.open or self.open[-1] != tag:
            self.problems.append(f"</{tag}> closes {self.open[-1:] or 'nothing'}")
        else:
            self.open.pop()


def _page(tmp_path: Path, *extra: str) -> tuple[str, dict]:  # type: ignore[type-arg]
    out = tmp_path / "report.html"
    result = runner.invoke(app, [*QUICK_START, *extra, "--html", str(out), "-f", "json"])
    assert result.exit_code in (0, 1), result.stderr
    return out.read_text(encoding="utf-8"), json.loads(result.stdout)


def _data(page: str) -> dict:  # type: ignore[type-arg]
    found = re.search(r'<script type="application/json" id="kvplan-data">(.*?)</script>', page)
    assert found
    return json.loads(found.group(1).replace("<\\/", "</"))  # type: ignore[no-any-return]


def _gib(num_bytes: int) -> str:
    return f"{num_bytes / 2**30:,.2f} GiB"


def test_the_page_is_the_json_and_shows_each_figure(tmp_path: Path) -> None:
    page, doc = _page(tmp_path, "-e", "vllm")
    assert _data(page) == doc  # one source: the page carries what --format json printed
    assert page.startswith("<!-- kvplan capacity report -->\n<!doctype html>")
    over = doc["overhead"]
    used = (
        doc["weights_bytes"]
        + doc["kv_cache_memory_bytes"]
        + sum(over[k] for k in ("activation_bytes", "non_torch_bytes", "cuda_graph_bytes"))
    )
    for figure in (
        doc["answer"]["sentence"],
        f"weights {_gib(doc['weights_bytes'])}",
        f"KV pool {_gib(doc['kv_cache_memory_bytes'])}",
        f"CUDA graphs {_gib(over['cuda_graph_bytes'])}",
        f"headroom {_gib(doc['total_memory_bytes'] - used)}",
        f"{doc['kv_cache_tokens']:,} tokens",
        *doc["log_lines"],
        "kvplan plan llama-3.1-8b --gpu h100 --max-model-len 32K --engine vllm",
    ):
        assert figure in page, figure
    # Llama 3.1 8B: 32 full-attention layers x 8 KV heads x 128 x 2 B x 2 (K, V) a token
    (layer,) = doc["kv_layers"]
    assert (layer["kind"], layer["num_layers"]) == ("full_attention", 32)
    assert layer["bytes"] == 32 * 8 * 128 * 2 * 2 * 32_768 == 4 * 2**30
    assert doc["kv_curve"]["kv_bytes_one_request"][-1] == layer["bytes"]


def test_the_page_loads_nothing_and_its_tags_close(tmp_path: Path) -> None:
    page, _ = _page(tmp_path)
    tags = _Tags()
    tags.feed(page)
    tags.close()
    assert tags.problems == []
    assert tags.open == []
    for tag, attrs in tags.seen:
        assert tag not in ("link", "img", "iframe", "object", "embed"), tag
        assert not any(k in ("src", "href") for k in attrs), (tag, attrs)
        if tag == "script":
            assert attrs.get("type") == "application/json"  # data, never run
    for needle in ("http://", "https://", "@import", "url(", "@font-face"):
        assert needle not in page, needle
    assert len(page.encode("utf-8")) < 16 * 1024  # the quick start's plan: about 9.5 KB


def test_a_plan_that_does_not_fit_shows_what_it_needs(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    args = ["plan", "llama-3.1-70b", "--gpu", "rtx-4090", "-e", "vllm", "-c", "8K"]
    result = runner.invoke(app, [*args, "--html", str(out)])
    assert result.exit_code == 1  # the answer: does not fit
    page = out.read_text(encoding="utf-8")
    assert 'class="verdict fail"' in page
    assert "more than the GPU's 23.99 GiB" in page


def test_only_its_own_page_is_replaced_without_force(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    out.write_text("notes of my own\n", encoding="utf-8")
    result = runner.invoke(app, [*QUICK_START, "--html", str(out)])
    assert result.exit_code == 2
    assert "exists and was not written by kvplan; pass --force" in result.stderr
    assert out.read_text(encoding="utf-8") == "notes of my own\n"
    assert runner.invoke(app, [*QUICK_START, "--html", str(out), "--force"]).exit_code == 0
    assert runner.invoke(app, [*QUICK_START, "--html", str(out)]).exit_code == 0  # its own


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--html", "r.txt"], "--html r.txt: expected a file name ending in .html"),
    ],
)
def test_refused_in_one_line(extra: list[str], message: str, tmp_path: Path) -> None:
    args = [*QUICK_START, *[str(tmp_path / e) if e.startswith("r.") else e for e in extra]]
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert message.replace("r.txt", str(tmp_path / "r.txt")) in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_a_check_page_puts_the_failing_deployments_first(tmp_path: Path) -> None:
    """A budget of two deployments, the second failing: its section comes first, each
    assertion with its required, actual and margin as --format json gives them."""
    budget = tmp_path / "budget.yaml"
    budget.write_text(
        "deployments:\n"
        "  - name: roomy\n    model: llama-3.1-8b\n    gpu: h100\n    max_model_len: 8K\n"
        "    expect:\n      min_concurrency: 2\n"
        "  - name: tight\n    model: llama-3.1-8b\n    gpu: l4\n    max_model_len: 128K\n"
        "    expect:\n      min_concurrency: 4\n      fits: true\n",
        encoding="utf-8",
    )
    out = tmp_path / "check.html"
    result = runner.invoke(app, ["check", str(budget), "--html", str(out), "-f", "json"])
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    page = out.read_text(encoding="utf-8")
    assert _data(page) == doc
    assert page.index("<h2>tight: fails</h2>") < page.index("<h2>roomy: holds</h2>")
    failed = [r for r in doc["results"] if not r["passed"]]
    assert 'class="verdict fail"' in page
    assert f"{len(failed)} of {doc['num_assertions']} assertions fail" in page
    for r in doc["results"]:
        assert r["margin"] in page
        assert f"{r['required']:,} requests" in page or isinstance(r["required"], bool)
    assert f"kvplan check {budget}" in page
    # each deployment's plan, as kvplan plan gives it: tight's memory bar and its verdict
    plans = {p["deployment"]: p["plan"] for p in doc["plans"]}
    planned = runner.invoke(
        app, ["plan", "llama-3.1-8b", "--gpu", "l4", "--max-model-len", "128K", "-f", "json"]
    )
    assert plans["tight"]["kv_cache_tokens"] == json.loads(planned.stdout)["kv_cache_tokens"]
    assert plans["tight"]["answer"]["sentence"] in page
    assert f"weights {_gib(plans['roomy']['weights_bytes'])}" in page


def test_a_compare_page_shows_each_models_figures(tmp_path: Path) -> None:
    """Llama 3.1 8B and Qwen3 8B at 32K: 131,072 and 147,456 B a token (Qwen3: 36 layers x 8
    KV heads x 128 x 2 B x 2), 4.00 and 4.50 GiB a sequence, as the page and JSON say."""
    out = tmp_path / "compare.html"
    args = ["compare", "llama-3.1-8b", "qwen3-8b", "--gpu", "h100", "--html", str(out)]
    result = runner.invoke(app, [*args, "-f", "json"])
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    page = out.read_text(encoding="utf-8")
    assert _data(page) == doc
    per_token = [m["bytes_per_token"] for m in doc["models"]]
    assert per_token == [2 * 32 * 8 * 128 * 2, 2 * 36 * 8 * 128 * 2]
    for m in doc["models"]:
        assert f"{m['bytes_per_token']:,} B" in page
        assert _gib(m["kv_cache_bytes"]) in page
        assert f'<td class="num">{m["max_concurrency"]:,}</td>' in page
    assert "kvplan compare llama-3.1-8b qwen3-8b --gpu h100" in page


def test_a_diff_page_shows_what_the_change_did_to_each_answer(tmp_path: Path) -> None:
    """The example budget with chat-prod's max_model_len halved: its most requests move,
    and the page lists the moved answers first, with old, new and the change."""
    old = Path(__file__).parent.parent / "examples" / "budget.yaml"
    new = tmp_path / "budget.yaml"
    new.write_text(
        old.read_text(encoding="utf-8").replace("max_model_len: 32K", "max_model_len: 16K"),
        encoding="utf-8",
    )
    out = tmp_path / "diff.html"
    result = runner.invoke(app, ["diff", str(old), str(new), "--html", str(out), "-f", "json"])
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    page = out.read_text(encoding="utf-8")
    assert _data(page) == doc
    moved = [m for m in doc["metrics"] if m["change"] != "unchanged"]
    assert moved
    assert "max_concurrency" in {m["name"] for m in moved}
    first_unchanged = page.index(">unchanged<")
    for m in moved:
        assert f"{m['new']:,} {m['unit']}" in page or m["unit"] == "bytes"
        assert page.index(f">{m['change']}<") < first_unchanged
    assert "<td>max_model_len</td>" in page


def test_the_search_in_whole_nodes_lists_its_candidates(tmp_path: Path) -> None:
    """Llama 3.1 70B, 64 requests of 32K on H100s: the page ranks the candidates as the JSON
    does, the first the answer, whose memory the page then draws."""
    out = tmp_path / "nodes.html"
    args = ["plan", "llama-3.1-70b", "--gpu", "h100", "-c", "32K", "--concurrency", "64"]
    result = runner.invoke(app, [*args, "--html", str(out), "-f", "json"])
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    page = out.read_text(encoding="utf-8")
    assert _data(page) == doc
    assert doc["answer"]["sentence"] in page
    for c in doc["candidates"]:
        assert f"<td>{c['shape']}</td>" in page
        assert f'<td class="num">{c["held_requests"]:,}</td>' in page
    first = doc["candidates"][0]
    assert first["held_requests"] >= 64
    assert page.index(f"<td>{first['shape']}</td>") < page.index("Memory of one GPU")
