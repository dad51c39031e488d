"""``kvplan check``, ``kvplan diff`` and ``kvplan schema``: budget files in CI, what a change
does, and the JSON Schemas for editors."""

import os
import sys
from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from kvplan.cli.common import (
    check_failed_unless,
    command,
    command_line,
    emit,
    guard,
    print_json,
)
from kvplan.cli.options import FormatOpt, OutputFormat

BudgetsArg = Annotated[
    list[str],
    typer.Argument(help="One or more budget YAML files (docs/ci.md).", show_default=False),
]
JunitOpt = Annotated[
    str | None,
    typer.Option(
        "--junit-xml",
        help="Also write a JUnit XML report (one test case per assertion) to this path.",
        show_default=False,
    ),
]
ForceOpt = Annotated[
    bool,
    typer.Option("--force", help="Overwrite --junit-xml or --html when kvplan did not write it."),
]
CheckHtmlOpt = Annotated[
    str | None,
    typer.Option(
        "--html",
        help="Also write the check as one self-contained HTML page: a section per deployment,"
        " the failing ones first, each assertion with required, actual and margin.",
        show_default=False,
    ),
]
AllowHubOpt = Annotated[
    bool,
    typer.Option(
        "--allow-hub",
        help="Read a Hub id a budget names as model: from the Hugging Face Hub (or its cache)."
        " Off by default: a budget from a pull request does not make kvplan reach the network.",
    ),
]


def _our_junit(path: str | Path) -> bool:
    """A JUnit report an earlier ``kvplan check`` wrote: reruns may replace it. Reads the
    first 400 bytes of a regular file only (never a FIFO or a device)."""
    from kvplan.files import head_contains

    return head_contains(path, '<testsuites name="kvplan check')


CheckCalibrationOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--calibration",
        help="A site's calibration file (kvplan calibrate), repeatable: each vLLM deployment on"
        " its GPU, line and TP size takes its fitted budget terms.",
        show_default=False,
    ),
]


def _calibrations(paths: list[str]) -> tuple[Any, ...]:
    """The calibrations of ``--calibration``, one a site."""
    from kvplan.cli.common import calibration_option, fail

    found = [calibration_option(path) for path in paths]
    sites = [c.site for c in found if c is not None]
    for site in sites:
        if sites.count(site) > 1:
            fail(f"--calibration: two files calibrate {site}; give one a site")
    return tuple(found)


def _refuse_unused(sites: tuple[Any, ...], loaded: list[tuple[str, Any, str]]) -> None:
    """Exit 2 when a calibration fits no vLLM deployment of the budget files."""
    from kvplan.cli.common import fail
    from kvplan.gate.budget import calibration_for

    used = {
        c.site
        for _, budget, _ in loaded
        for d in budget.deployments
        if (c := calibration_for(d, sites)) is not None
    }
    for c in sites:
        if c.site not in used:
            fail(f"--calibration: {c.site} is the site of no vLLM deployment in the budget files")


@command("check")
def check(
    ctx: typer.Context,
    budgets: BudgetsArg,
    output: FormatOpt = OutputFormat.table,
    junit_xml: JunitOpt = None,
    html: CheckHtmlOpt = None,
    force: ForceOpt = False,
    allow_hub: AllowHubOpt = False,
    calibration: CheckCalibrationOpt = None,
) -> None:
    """Check every deployment of budget files against their assertions; fail CI when one fails.

    Exit 0 when all hold, 1 when any fails, 2 when a file or a model is invalid, or a
    --calibration file matches no vLLM deployment's site (its GPU, line and TP size). With
    GITHUB_ACTIONS=true, failures are also annotated on their lines and a summary is appended
    to $GITHUB_STEP_SUMMARY.
    """
    from contextlib import nullcontext

    from kvplan.catalog.lookup import hub_from_files
    from kvplan.cli.reports import check_html_path, write_page
    from kvplan.files import write_atomic
    from kvplan.gate.budget import check_budget, load_budget
    from kvplan.views import budget as views
    from kvplan.views.report import check_report

    command = command_line(ctx, leave_out=("html", "force", "output", "junit_xml"))

    def run() -> None:
        if html is not None:
            check_html_path(html)
        sites = _calibrations(calibration or [])
        with hub_from_files() if allow_hub else nullcontext():
            loaded = [(path, *load_budget(path)) for path in budgets]
            _refuse_unused(sites, loaded)
            checked = [(path, check_budget(b, text, path, sites)) for path, b, text in loaded]
        if junit_xml is not None:
            write_atomic(junit_xml, views.junit_xml(checked), force=force, ours=_our_junit)
        doc = views.check_to_dict(checked)
        if html is not None:
            with hub_from_files() if allow_hub else nullcontext():
                doc["plans"] = _plans(loaded, sites)
            write_page(html, check_report(doc, command), force)
        emit(
            output,
            lambda: doc,
            lambda: [item for path, rs in checked for item in views.check_view(path, rs)],
        )
        if os.environ.get("GITHUB_ACTIONS") == "true":
            for path, results in checked:
                for line in views.github_annotations(path, results):
                    sys.stdout.write(line + "\n")
            summary = os.environ.get("GITHUB_STEP_SUMMARY")
            if summary:
                with open(summary, "a", encoding="utf-8") as f:
                    for path, results in checked:
                        f.write(views.github_summary(path, results))
        check_failed_unless(all(r.passed for _, results in checked for r in results))

    guard(run)


def _plans(loaded: list[tuple[str, Any, str]], sites: Sequence[Any]) -> list[dict[str, Any]]:
    """Each deployment's plan document, as ``kvplan plan`` prints it with ``--html`` (the
    figures a check page draws for it)."""
    from pathlib import Path

    from kvplan.cli.reports import with_report_figures
    from kvplan.gate.budget import deployment_answer
    from kvplan.views import plan as plan_views

    plans = []
    for path, budget, _ in loaded:
        base = Path(path).resolve().parent
        for d in budget.deployments:
            spec, q, found = deployment_answer(d, base, sites)
            plan = plan_views.plan_result_to_dict(found.result, spec)
            plan = plan_views.with_answer(plan, q, found.verdict)
            with_report_figures(plan, spec, d.kv_cache_dtype)
            plans.append({"file": path, "deployment": d.name, "plan": plan})
    return plans


class SchemaKind(str, Enum):
    spec = "spec"
    budget = "budget"


@command("schema")
def schema(
    kind: Annotated[SchemaKind, typer.Argument(help="spec or budget.", show_default=False)],
) -> None:
    """The JSON Schema of spec or budget files, for editors (yaml-language-server)."""
    from kvplan.gate.schemas import json_schema

    guard(lambda: print_json(json_schema(kind.value)))


OldArg = Annotated[
    str,
    typer.Argument(
        help="A spec (catalog name, path, or REV:path from git) or a budget file.",
        show_default=False,
    ),
]
NewArg = Annotated[str, typer.Argument(help="The same kind of file, changed.", show_default=False)]


DiffHtmlOpt = Annotated[
    str | None,
    typer.Option(
        "--html",
        help="Also write the diff as one self-contained HTML page: each change, and what it"
        " did to each answer (old, new, the change).",
        show_default=False,
    ),
]


@command("diff")
def diff(
    ctx: typer.Context,
    old: OldArg,
    new: NewArg,
    html: DiffHtmlOpt = None,
    force: ForceOpt = False,
    output: FormatOpt = OutputFormat.table,
) -> None:
    """What changed between two specs or two budget files, and what it does to the answers."""
    from kvplan.cli.reports import check_html_path, write_page
    from kvplan.gate.diffing import diff_files
    from kvplan.views import budget as views
    from kvplan.views.report import diff_report

    command = command_line(ctx, leave_out=("html", "force", "output"))

    def run() -> None:
        if html is not None:
            check_html_path(html)
        result = diff_files(old, new)
        doc = views.diff_to_dict(result)
        if html is not None:
            write_page(html, diff_report(doc, command), force)
        emit(output, lambda: doc, lambda: views.diff_view(result))

    guard(run)
