"""The ``kvplan`` command: parse arguments, call the library, render. Errors become exit codes.

Kept light on purpose: importing this module must not import every spec, torch or anything
heavy, so that ``kvplan --help`` and a ``calc`` start about as fast as typer itself.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from enum import Enum, IntEnum
from typing import Annotated, Any, NoReturn, TypeVar

import typer

from kvplan import __version__
from kvplan.errors import KvplanError


class ExitCode(IntEnum):
    """Exit codes of every kvplan command."""

    OK = 0
    CHECK_FAILED = 1
    USAGE = 2
    UNAVAILABLE = 3


class OutputFormat(str, Enum):
    table = "table"
    json = "json"


EXIT_CODES_HELP = (
    "Exit codes: 0 ok; 1 a budget check failed; 2 bad usage or bad input (a spec, a size,"
    " an unknown model); 3 an optional component or device is unavailable."
)

app = typer.Typer(
    name="kvplan",
    help="How much GPU memory does the KV cache take, and what fits? "
    "Exact KV-cache sizes from model specs.\n\n" + EXIT_CODES_HELP,
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)

ModelArg = Annotated[
    str,
    typer.Argument(
        help="A catalog name (llama-3.1-8b), a Hugging Face id (meta-llama/Llama-3.1-8B, any"
        " case), an alias, or a path to a spec YAML.",
        show_default=False,
    ),
]
FormatOpt = Annotated[
    OutputFormat,
    typer.Option("--format", "-f", help="table for people, json (with schema_version) for tools."),
]

T = TypeVar("T")


def _fail(message: str, code: ExitCode = ExitCode.USAGE) -> NoReturn:
    for line in message.splitlines() or [message]:
        typer.echo(f"kvplan: error: {line}", err=True)
    raise typer.Exit(int(code))


def _guard(fn: Callable[[], T]) -> T:
    """Run ``fn``; a KvplanError becomes a message on stderr and exit code 2."""
    try:
        return fn()
    except KvplanError as e:
        _fail(str(e))


def _option(name: str, parse: Callable[[str], T], value: str) -> T:
    """``parse(value)``; a UnitError is re-raised naming the option it came from."""
    from kvplan.errors import UnitError

    try:
        return parse(value)
    except UnitError as e:
        raise UnitError(f"{name}: {e}") from None


def _print_json(doc: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(doc, indent=2) + "\n")


def _print_rich(items: list[Any]) -> None:
    from rich.console import Console

    # A terminal sets its own width; piped output (CI logs, files) gets room for every column.
    console = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 120)
    for item in items:
        console.print(item)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"kvplan {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """How much GPU memory does the KV cache take, and what fits?"""


@app.command()
def calc(
    model: ModelArg,
    context: Annotated[
        str | None,
        typer.Option(
            "--context",
            "-c",
            help="Tokens cached per sequence: 32768, 32k (=32,000) or 32K (=32,768)."
            " Default: the model's max_position_embeddings.",
            show_default=False,
        ),
    ] = None,
    batch: Annotated[int, typer.Option("--batch", "-b", min=1, help="Concurrent sequences.")] = 1,
    kv_dtype: Annotated[
        str,
        typer.Option(
            "--kv-dtype",
            "--kv-cache-dtype",
            help="Cache dtype for K and V: auto (the model's), float16, bfloat16, float32, fp8"
            " (e4m3), fp8_e5m2, int8, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, nvfp4, mxfp4.",
        ),
    ] = "auto",
    k_dtype: Annotated[
        str | None,
        typer.Option("--k-dtype", help="K cache dtype, overriding --kv-dtype (llama.cpp -ctk)."),
    ] = None,
    v_dtype: Annotated[
        str | None,
        typer.Option("--v-dtype", help="V cache dtype, overriding --kv-dtype (llama.cpp -ctv)."),
    ] = None,
    output: FormatOpt = OutputFormat.table,
    explain: Annotated[
        bool,
        typer.Option("--explain", help="Work the formula with the model's numbers substituted."),
    ] = False,
) -> None:
    """KV-cache bytes for a context and batch: total, per token, by layer kind and K/V."""
    from kvplan.catalog import load_model
    from kvplan.estimate import estimate
    from kvplan.estimate import explain as explain_lines
    from kvplan.units import parse_tokens, resolve_dtype

    def run() -> None:
        spec = load_model(model)
        if context is None:
            if spec.max_position_embeddings is None:
                _fail(f"{spec.name}: no max_position_embeddings in the spec; pass --context")
            tokens = spec.max_position_embeddings
        else:
            tokens = _option("--context", parse_tokens, context)
        for name, dtype in (
            ("--kv-dtype", kv_dtype),
            ("--k-dtype", k_dtype),
            ("--v-dtype", v_dtype),
        ):
            if dtype is not None and dtype.strip().lower() != "auto":
                _option(name, resolve_dtype, dtype)
        est = estimate(
            spec, tokens, batch_size=batch, kv_dtype=kv_dtype, k_dtype=k_dtype, v_dtype=v_dtype
        )
        from kvplan import render

        if output is OutputFormat.json:
            doc = render.estimate_to_dict(est, spec)
            if explain:
                doc["explain"] = explain_lines(est)
            _print_json(doc)
        else:
            _print_rich(render.estimate_view(est, spec, with_explain=explain))

    _guard(run)


@app.command()
def models(output: FormatOpt = OutputFormat.table) -> None:
    """The bundled catalog: one row per model, with its KV bytes per token."""
    from kvplan import render
    from kvplan.catalog import list_models
    from kvplan.estimate import bytes_per_token

    def run() -> None:
        rows = [(spec, bytes_per_token(spec)) for spec in list_models()]
        if output is OutputFormat.json:
            _print_json(render.models_to_dict(rows))
        else:
            _print_rich(render.models_view(rows))

    _guard(run)


@app.command()
def show(model: ModelArg, output: FormatOpt = OutputFormat.table) -> None:
    """A spec's fields and its resolved per-layer cache schedule."""
    from kvplan import render
    from kvplan.catalog import load_model

    def run() -> None:
        spec = load_model(model)
        if output is OutputFormat.json:
            _print_json(render.spec_to_dict(spec))
        else:
            _print_rich(render.spec_view(spec))

    _guard(run)
