"""``kvplan check`` (a table, JUnit XML, GitHub annotations and summary) and ``kvplan diff``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvplan.units import format_bytes, format_tokens
from kvplan.views import SCHEMA_VERSION
from kvplan.views.table import Column, table

if TYPE_CHECKING:
    from rich.console import RenderableType

    from kvplan.gate.budget import AssertionResult
    from kvplan.gate.diffing import Diff


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


_CHECK_COLUMNS: tuple[Column, ...] = (
    ("deployment", "left"),
    ("assertion", "left"),
    ("required", "right"),
    ("actual", "right"),
    ("margin", "right"),
    ("verdict", "left"),
)


def check_view(path: str, results: list[AssertionResult]) -> list[RenderableType]:
    """The ``kvplan check`` table: deployment, assertion, required, actual, margin, verdict."""
    rows = [
        (
            r.deployment,
            r.assertion,
            r.show(r.required),
            r.show(r.actual),
            r.margin,
            "pass" if r.passed else "[red]FAIL[/red]",
        )
        for r in results
    ]
    failed = sum(not r.passed for r in results)
    summary = (
        f"{len(results)} assertions passed"
        if not failed
        else f"[red]{failed} of {len(results)} assertions failed[/red]"
    )
    return [f"[bold]kvplan check[/bold] {path}", table(_CHECK_COLUMNS, rows, no_wrap=True), summary]


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
                # each value once, with its unit: "required >= 12 requests, actual 6 requests"
                failure = ET.SubElement(
                    case, "failure", message=f"{r.assertion}: {r.described}", type="BudgetAssertion"
                )
                margin = f", margin {r.exact_margin}" if r.exact_margin else ""
                failure.text = f"{r.deployment}: {r.assertion}: {r.described}{margin}"
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
