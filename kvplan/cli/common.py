"""What every command module of ``kvplan.cli`` shares: the app, exit codes, the output-format
switch, the error guard, option parsing, printing, shared option types and completion.

Kept light on purpose: importing it imports typer and nothing of kvplan's heavy parts, so
that ``kvplan --help`` starts about as fast as typer itself. No ``from __future__ import
annotations`` here or in any command module: typer would evaluate the string annotations
several times per command on every start.
"""

import json
import os
import sys
from collections.abc import Callable
from enum import Enum, IntEnum
from typing import Annotated, Any, NoReturn, TypeVar

import typer

from kvplan import __version__
from kvplan.errors import KvplanError
from kvplan.progress import set_quiet

# kvplan validates with pydantic but uses none of its plugins; looking them up scans every
# installed distribution's entry points on a `calc`'s start-up path. Set for this process and
# the children it starts (git for `kvplan diff`), which do not use pydantic plugins either.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")


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

#: What each command's exit codes mean; shown under its --help and in docs/cli.md. The order
#: is the order of the commands in ``kvplan --help``.
COMMAND_EXIT_CODES: dict[str, str] = {
    "calc": "0 printed; 2 bad input",
    "models": "0 printed",
    "show": "0 printed; 2 unknown model or invalid spec",
    "gpus": "0 printed",
    "plan": "0 the target fits; 1 it does not (the message says what to change); 2 bad input"
    "; 3 --gpu local with no GPU found",
    "reconcile": "0 every figure reproduces; 1 one does not; 2 unreadable log or bad input"
    "; 3 --gpu local with no GPU found",
    "flags": "0 at least one engine holds the target (or the one asked for does); 1 none does;"
    " 2 bad input; 3 --gpu local with no GPU found",
    "check": "0 every assertion holds; 1 one fails; 2 invalid budget file, model or GPU"
    "; 3 --gpu local with no GPU found",
    "import": "0 written or printed; 2 invalid config, or the output exists without --force;"
    " 3 huggingface_hub missing or the Hub unreachable",
    "architectures": "0 printed",
    "schema": "0 printed; 2 unknown schema",
    "diff": "0 printed (a difference is not a failure); 2 unreadable or invalid side",
    "probe": "0 measured within tolerance; 1 outside it; 2 bad input; 3 torch, transformers"
    " or the device unavailable",
    "perf": "0 printed; 2 bad input; 3 --gpu local with no GPU found",
    "compare": "0 printed; 2 bad input; 3 --gpu local with no GPU found",
    "chart": "0 drawn or written; 2 bad input, or the output exists without --force;"
    " 3 matplotlib missing for a PNG or SVG file, or --gpu local with no GPU found",
}


def exit_codes_epilog(command: str) -> str:
    """The ``--help`` epilog of ``command``: its exit codes."""
    return f"Exit codes: {COMMAND_EXIT_CODES[command]}."


app = typer.Typer(
    name="kvplan",
    help="How much GPU memory does the KV cache take, and what fits? "
    "Exact KV-cache sizes from model specs.\n\n" + EXIT_CODES_HELP,
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


def command(name: str) -> Callable[[F], F]:
    """Register a command on ``app`` under ``name``, with its exit codes as the epilog."""
    return app.command(name=name, epilog=exit_codes_epilog(name))


def order_commands() -> None:
    """List the registered commands in ``kvplan --help`` in the order of COMMAND_EXIT_CODES."""
    order = list(COMMAND_EXIT_CODES)
    app.registered_commands.sort(key=lambda info: order.index(info.name or ""))


# -- completion -----------------------------------------------------------------------------------


def complete_model(incomplete: str) -> list[str]:
    """Shell completion: bundled model names starting with what was typed (reads file names
    only, so it answers at once)."""
    from kvplan.catalog import bundled_names

    key = incomplete.lower()
    return [name for name in bundled_names() if name.startswith(key)]


def complete_gpu(incomplete: str) -> list[str]:
    """Shell completion: catalog GPU names and aliases starting with what was typed."""
    from kvplan.hardware import list_gpus

    key = incomplete.lower()
    names = (label for gpu in list_gpus() for label in (gpu.name, *gpu.aliases))
    return sorted({n for n in names if n.lower().startswith(key)})


# -- shared option types --------------------------------------------------------------------------


GPU_NAMES_HELP = (
    ' Also the name nvidia-smi or rocm-smi prints ("NVIDIA H100 80GB HBM3", "Tesla T4",'
    ' "AMD Instinct MI300X"), or local: the GPUs of this machine, as nvidia-smi or rocm-smi'
    " list them."
)


def _say_local_gpus(value: str | None) -> str | None:
    """``--gpu local``: say on stderr what was found."""
    from kvplan.hardware import LOCAL, normalize_gpu_name

    if value is not None and normalize_gpu_name(value) == LOCAL:
        from kvplan.local_gpus import local_gpus

        try:
            summary = local_gpus().summary
        except KvplanError:
            return value  # the lookup raises it again, inside the command's error guard
        typer.echo(f"kvplan: {summary}", err=True)
    return value


def gpu_option(help: str, *, show_default: bool = True) -> Any:
    """``--gpu`` / ``-g`` with GPU completion; each command words its help, to which the
    driver names and ``local`` are added."""
    return typer.Option(
        "--gpu",
        "-g",
        autocompletion=complete_gpu,
        callback=_say_local_gpus,
        help=help + GPU_NAMES_HELP,
        show_default=show_default,
    )


ModelArg = Annotated[
    str,
    typer.Argument(
        autocompletion=complete_model,
        help="A catalog name (llama-3.1-8b), a Hugging Face id (meta-llama/Llama-3.1-8B, any"
        " case), an alias, a re-upload or quantized variant (Qwen/Qwen3-32B-AWQ), an Ollama"
        " tag (llama3.1:8b), a path to a spec YAML, or a Hugging Face config.json or model"
        " folder (read as `kvplan import` reads it).",
        show_default=False,
    ),
]
FormatOpt = Annotated[
    OutputFormat,
    typer.Option("--format", "-f", help="table for people, json (with schema_version) for tools."),
]
GpuOpt = Annotated[str, gpu_option("A catalog GPU (`kvplan gpus`): h100, h200, a100-80gb...")]
TpOpt = Annotated[
    int,
    typer.Option("--tensor-parallel-size", "-tp", min=1, help="GPUs sharding each layer."),
]
KvDtypeOpt = Annotated[
    str | None,
    typer.Option(
        "--kv-cache-dtype",
        help="KV cache dtype: auto (the model's), fp8, bfloat16...",
        show_default=False,
    ),
]
EngineOpt = Annotated[
    str,
    typer.Option(
        "--engine",
        "-e",
        help="Whose budget sets the maximum concurrency: ideal (kvplan's planner) or vllm"
        " (vLLM's block pool and its printed maximum concurrency).",
    ),
]
QuantizationOpt = Annotated[
    str | None,
    typer.Option(
        "--quantization",
        "-q",
        help="Weight format for the linear layers: fp8, int8, int4, awq, gptq, mxfp4,"
        " nvfp4 (group scales counted). Default: the checkpoint's own formats.",
        show_default=False,
    ),
]


# -- errors, option values, output ----------------------------------------------------------------


def fail(message: str, code: ExitCode = ExitCode.USAGE) -> NoReturn:
    """Each line of ``message`` on stderr as ``kvplan: error: ...``, then exit ``code``."""
    for line in message.splitlines() or [message]:
        typer.echo(f"kvplan: error: {line}", err=True)
    raise typer.Exit(int(code))


def guard(fn: Callable[[], T]) -> T:
    """Run ``fn``; a KvplanError becomes a message on stderr and exit code 2 (3 when an
    optional component or device is unavailable)."""
    from kvplan.errors import UnavailableError

    try:
        return fn()
    except UnavailableError as e:
        fail(str(e), ExitCode.UNAVAILABLE)
    except KvplanError as e:
        fail(str(e))


def check_failed_unless(ok: bool) -> None:
    """Exit 1 (a check failed) unless ``ok``."""
    if not ok:
        raise typer.Exit(int(ExitCode.CHECK_FAILED))


def option(name: str, parse: Callable[[str], T], value: str) -> T:
    """``parse(value)``; a UnitError is re-raised naming the option it came from."""
    from kvplan.errors import UnitError

    try:
        return parse(value)
    except UnitError as e:
        raise UnitError(f"{name}: {e}") from None


def auto_none(text: str | None) -> str | None:
    """None for an absent or ``auto`` dtype, else the text as given."""
    return None if text is None or text.strip().lower() == "auto" else text


def dtype_option(name: str, text: str | None) -> str | None:
    """A dtype option: None for absent or ``auto``, else the text, checked to name a dtype."""
    from kvplan.units import resolve_dtype

    if text is None or auto_none(text) is None:
        return None
    option(name, resolve_dtype, text)
    return text


def tokens_option(name: str, text: str) -> int:
    """A token count of at least 1, as ``--context`` reads it; errors name the option."""
    from kvplan.errors import UnitError
    from kvplan.units import parse_tokens

    tokens = option(name, parse_tokens, text)
    if tokens < 1:
        raise UnitError(f"{name}: must be at least 1 token, got {text}")
    return tokens


def print_json(doc: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(doc, indent=2) + "\n")


def print_rich(items: list[Any]) -> None:
    from rich.console import Console

    # A terminal sets its own width; piped output (CI logs, files) gets room for every column.
    console = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 120)
    for item in items:
        console.print(item)


def emit(
    output: OutputFormat, doc: Callable[[], dict[str, Any]], view: Callable[[], list[Any]]
) -> None:
    """Print ``doc()`` as JSON or ``view()`` for a terminal, as ``--format`` asks."""
    if output is OutputFormat.json:
        print_json(doc())
    else:
        print_rich(view())


# -- the app's own options ------------------------------------------------------------------------


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
    quiet: Annotated[
        bool,
        typer.Option(
            "--quiet",
            help="No progress lines on stderr (they appear only on a terminal, for work"
            " slower than a second: probe, chart files, imports of large folders).",
        ),
    ] = False,
) -> None:
    """How much GPU memory does the KV cache take, and what fits?"""
    if quiet:
        set_quiet(True)
