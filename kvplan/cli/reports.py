"""``--html FILE``: the self-contained page of an answer (kvplan.views.report), written only
where no file is, or where kvplan wrote the one there, unless ``--force``."""

from typing import Annotated, Any

import typer

HtmlOpt = Annotated[
    str | None,
    typer.Option(
        "--html",
        help="Also write the answer as one self-contained HTML page (no network, no script):"
        " the question, the verdict, the memory bar, the KV cache against context, the"
        " engine's lines and the command that reproduces it.",
        show_default=False,
    ),
]
HtmlForceOpt = Annotated[
    bool, typer.Option("--force", help="Overwrite --html's file when kvplan did not write it.")
]


def with_report_figures(doc: dict[str, Any], spec: Any, kv_cache_dtype: str | None) -> None:
    """Add to a plan's ``doc`` what its report draws (kvplan.answers.report), so the page
    and ``--format json`` print the same figures."""
    from kvplan.answers.report import report_figures

    length = doc.get("max_model_len")
    if isinstance(length, int) and length > 0:
        doc.update(report_figures(spec, length, kv_cache_dtype, str(doc.get("engine", "ideal"))))


def write_report(path: str, doc: dict[str, Any], command: str, force: bool) -> None:
    """Write the plan report of ``doc`` to ``path``."""
    from kvplan.views.report import plan_report

    write_page(path, plan_report(doc, command), force)


def check_html_path(path: str) -> None:
    """UnitError unless ``path`` names an .html file."""
    if not path.endswith((".html", ".htm")):
        from kvplan.errors import UnitError

        raise UnitError(f"--html {path}: expected a file name ending in .html")


def write_page(path: str, page: str, force: bool) -> None:
    """Write ``page`` to ``path`` (a file kvplan did not write kept unless ``force``); say
    so on stderr."""
    from kvplan.files import head_contains, write_atomic
    from kvplan.views.report import REPORT_MARKER

    check_html_path(path)
    write_atomic(path, page, force=force, ours=lambda p: head_contains(p, REPORT_MARKER))
    typer.echo(f"wrote {path} ({len(page.encode('utf-8')):,} bytes)", err=True)
