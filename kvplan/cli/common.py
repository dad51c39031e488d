"""What every command module of ``kvplan.cli`` shares: the app, exit codes, the error guard,
parser errors and completion, option parsing and printing. The shared option types are defined
in ``kvplan.cli.options`` and re-exported here under their old names.

Kept light on purpose: importing it imports typer and nothing of kvplan's heavy parts, so
that ``kvplan --help`` starts about as fast as typer itself. No ``from __future__ import
annotations`` here or in any command module: typer would evaluate the string annotations
several times per command on every start.
"""

import functools
import json
import os
import sys
from collections.abc import Callable, Sequence
from enum import IntEnum
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer
from typer.core import TyperGroup, TyperOption

from kvplan import __version__
from kvplan.cli.options import EngineOpt as EngineOpt
from kvplan.cli.options import FormatOpt as FormatOpt
from kvplan.cli.options import GpuOpt as GpuOpt
from kvplan.cli.options import ModelArg as ModelArg
from kvplan.cli.options import OptionalKvCacheDtypeOpt
from kvplan.cli.options import OutputFormat as OutputFormat
from kvplan.cli.options import QuantizationOpt as QuantizationOpt
from kvplan.cli.options import TpOpt as TpOpt
from kvplan.cli.options import complete_gpu as complete_gpu
from kvplan.cli.options import complete_model as complete_model

if TYPE_CHECKING:
    from kvplan.engines.vllm_calibration import Calibration
    from kvplan.views.charts import Chart
from kvplan.cli.options import gpu_option as gpu_option
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
    "reconcile": "0 every checked figure reproduces; 1 one differs; 2 nothing checked, an"
    " unreadable log or bad input"
    "; 3 --gpu local with no GPU found",
    "calibrate": "0 fitted (and written with --output); 2 fewer than three logs, logs of several"
    " sites, an unreadable log, or --output exists without --force",
    "flags": "0 at least one engine holds the target (or the one asked for does); 1 none does;"
    " 2 bad input; 3 --gpu local with no GPU found",
    "simulate": "0 replayed; 2 a bad trace (the line and field named), model, GPU, tier"
    " or link; 3 --gpu local with no GPU found",
    "tiers": "0 printed (and --plot written); 2 bad input, a tier larger than the node's host"
    " memory, or --plot exists without --force; 3 matplotlib missing for --plot, or --gpu"
    " local with no GPU found",
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


#: the old name of ``OptionalKvCacheDtypeOpt`` (``kvplan.cli.options``)
KvDtypeOpt = OptionalKvCacheDtypeOpt


# -- parser errors and completion -----------------------------------------------------------------


def _click() -> Any:
    """The click that typer parses with: typer 0.28 carries its own copy, older typer uses
    the click package."""
    import importlib

    try:
        return importlib.import_module("typer._click")
    except ImportError:  # typer < 0.28
        return importlib.import_module("click")


def parser_error_line(error: Any) -> str:
    """A parser error of click (an unknown option, a missing argument, a value of the wrong
    type, a choice not offered) as one line: the command, click's message naming the option
    and what it allows, and where to look."""
    ctx = getattr(error, "ctx", None)
    message = " ".join(error.format_message().split()).rstrip(".")
    param = getattr(error, "param", None)
    describe = getattr(getattr(param, "type", None), "_describe_range", None)
    for wrong in (" is not a valid int range", " is not a valid integer range"):
        if message.endswith(wrong) and describe is not None:
            # click names the type ("int range"), not what it takes: "'abc' is not a whole
            # number; allowed: x>=1"
            message = message.removesuffix(wrong) + f" is not a whole number; allowed: {describe()}"
    if ctx is None:
        return message
    path = ctx.command_path
    command = path.partition(" ")[2]
    if not command:
        return f"{message}; `{path} --help` lists the commands and options"
    return f"{command}: {message}; `{path} --help` lists its options"


SHELLS = ("bash", "zsh", "fish", "powershell", "pwsh")

_COMPLETION_HELP = {
    "install_completion": "Install completion for SHELL (bash, zsh, fish, powershell, pwsh)"
    " if one follows, else for the shell this runs in.",
    "show_completion": "Print the completion script for SHELL (bash, zsh, fish, powershell,"
    " pwsh) if one follows, else for the shell this runs in, to copy it or customize the"
    " installation.",
}


def _named_shell(args: Sequence[str], flag: str) -> str | None:
    """The shell named after ``flag`` (``--show-completion zsh`` or ``--show-completion=zsh``)
    among kvplan's own options, before any command; None when no shell is named."""
    for index, arg in enumerate(args):
        if arg.startswith(flag + "="):
            return arg.partition("=")[2]
        if arg == flag:
            following = args[index + 1] if index + 1 < len(args) else None
            return following if following and not following.startswith("-") else None
        if not arg.startswith("-"):
            return None  # a command: its own arguments follow
    return None


def _complete_for(ctx: Any, args: Sequence[str]) -> None:
    """``--show-completion SHELL`` / ``--install-completion SHELL``: typer's script or
    installation for that shell, whatever shell runs kvplan (typer takes a bare flag and
    reads the shell from the environment, and would take the name for a command)."""
    from typer.completion import install_callback, show_callback

    actions: tuple[tuple[str, Callable[..., Any]], ...] = (
        ("--show-completion", show_callback),
        ("--install-completion", install_callback),
    )
    for flag, action in actions:
        shell = _named_shell(args, flag)
        if shell is None:
            continue
        if shell not in SHELLS:
            raise typer.BadParameter(
                f"{shell!r} is not a shell kvplan completes; allowed: {', '.join(SHELLS)}",
                ctx=ctx,
                param_hint=f"'{flag}'",
            )
        action(ctx, None, shell)  # prints or installs, then exits 0


class KvplanGroup(TyperGroup):
    """kvplan's top-level command: a parser error is one ``kvplan: error:`` line on stderr
    and exit code 2, as every other kvplan error, instead of click's usage block."""

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)
        for param in params:
            if isinstance(param, TyperOption) and param.name in _COMPLETION_HELP:
                param.help = _COMPLETION_HELP[param.name]
        return params

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        _complete_for(ctx, args)
        return super().parse_args(ctx, args)

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        more = {"prog_name": prog_name, "complete_var": complete_var, **extra}
        more["windows_expand_args"] = windows_expand_args
        if not standalone_mode:
            return super().main(args, standalone_mode=False, **more)
        click = _click()
        help_error = getattr(click.exceptions, "NoArgsIsHelpError", ())
        try:
            code = super().main(args, standalone_mode=False, **more)
        except help_error as e:  # bare `kvplan`: the help, as click prints it
            e.show()
            sys.exit(e.exit_code)
        except click.ClickException as e:
            typer.echo(f"kvplan: error: {parser_error_line(e)}", err=True)
            sys.exit(int(ExitCode.USAGE))
        except typer.Abort:
            typer.echo("kvplan: error: aborted", err=True)
            sys.exit(1)
        # not standalone, click returns an Exit's code, or the command's return value (None)
        sys.exit(code if isinstance(code, int) else 0)


app = typer.Typer(
    cls=KvplanGroup,
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


#: The largest whole number any option takes (a count of GPUs, sequences, blocks, layers,
#: pixels): far above every real value, low enough that no loop or buffer sized by one runs
#: unbounded. An option with a tighter rule of its engine's says so itself.
MAX_OPTION_INT = 2**32


def command(name: str) -> Callable[[F], F]:
    """Register a command on ``app`` under ``name``, with its exit codes as the epilog; every
    whole-number option is refused past ``MAX_OPTION_INT`` before the command runs."""
    register = app.command(name=name, epilog=exit_codes_epilog(name))

    def decorate(fn: F) -> F:
        def bounded(*args: Any, **kwargs: Any) -> Any:
            for key, value in kwargs.items():
                if type(value) is int and abs(value) > MAX_OPTION_INT:
                    fail(f"{_flag_of(key)} {value}: at most {MAX_OPTION_INT:,}")
            return fn(*args, **kwargs)

        register(functools.update_wrapper(bounded, fn))  # typer reads fn's signature
        return fn

    return decorate


def _flag_of(name: str) -> str:
    """The longest spelling of the running command's parameter ``name`` (``--n-cpu-moe``)."""
    import importlib

    try:
        where = importlib.import_module("typer._click.globals")
    except ImportError:  # typer < 0.28: the click package
        where = importlib.import_module("click")
    ctx = where.get_current_context(silent=True)
    for param in getattr(getattr(ctx, "command", None), "params", ()):
        if param.name == name and param.opts:
            return str(max(param.opts, key=len))
    return name


def order_commands() -> None:
    """List the registered commands in ``kvplan --help`` in the order of COMMAND_EXIT_CODES."""
    order = list(COMMAND_EXIT_CODES)
    app.registered_commands.sort(key=lambda info: order.index(info.name or ""))


# -- errors, option values, output ----------------------------------------------------------------


def calibration_option(path: str | None) -> "Calibration | None":
    """``--calibration FILE``: the site's calibration the file holds (kvplan.logs.calibrate);
    a file that is not one is a SpecError naming it and the field."""
    from kvplan.logs.calibrate import load_calibration

    return None if path is None else load_calibration(path)


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


#: the width of piped output (CI logs, files) when COLUMNS does not set one
PIPED_WIDTH = 120


def terminal_width() -> int | None:
    """The width to print at: None on a terminal or with COLUMNS set (rich reads either),
    else ``PIPED_WIDTH``."""
    if sys.stdout.isatty() or os.environ.get("COLUMNS", "").strip().isdigit():
        return None
    return PIPED_WIDTH


def print_rich(items: list[Any]) -> None:
    """Print rich renderables. On a terminal (or at COLUMNS) tables fit its width (see
    ``kvplan.views.table``) and prose wraps at words; piped output, 120 columns wide, keeps
    each line of prose whole for tools that search it."""
    from rich.console import Console

    width = terminal_width()
    console = Console(highlight=False, soft_wrap=width is not None, width=width)
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


def given_options(ctx: typer.Context) -> frozenset[str]:
    """The parameters of the running command that the user gave (not their defaults)."""
    sources = ((name, ctx.get_parameter_source(name)) for name in ctx.params)
    return frozenset(name for name, source in sources if source and source.name != "DEFAULT")


def draw_chart(chart: "Chart", path: str, force: bool) -> None:
    """Save ``chart`` to ``path`` with matplotlib (refused when it exists without ``force``)."""
    from kvplan.progress import progress
    from kvplan.views.charts import save_chart

    with progress(f"drawing {path} with matplotlib"):
        save_chart(chart, path, force=force)
    typer.echo(f"wrote {path}", err=True)


def command_line(ctx: typer.Context, leave_out: tuple[str, ...] = ()) -> str:
    """The running command as the user typed it, from the parameters they gave (in the
    command's order; ``leave_out``: parameters that do not change the answer, such as where
    a report goes), quoted for a POSIX shell."""
    import shlex

    words = ["kvplan", ctx.info_name or ""]
    for param in ctx.command.params:
        name = param.name or ""
        source = ctx.get_parameter_source(name)
        if name in leave_out or not source or source.name == "DEFAULT":
            continue
        value = ctx.params.get(name)
        values = list(value) if isinstance(value, list | tuple) else [value]
        flag = max(param.opts, key=len) if param.opts and param.param_type_name == "option" else ""
        for one in values:
            shown = getattr(one, "value", one)  # an enum's value
            if isinstance(one, bool):
                if flag:
                    words.append(flag if one else _negated(param, flag))
            else:
                words.extend([flag, str(shown)] if flag else [str(shown)])
    return shlex.join(w for w in words if w)


def _negated(param: Any, flag: str) -> str:
    """A boolean option's off form (``--no-x``), or the flag when it has none."""
    secondary = getattr(param, "secondary_opts", None) or []
    return str(secondary[0]) if secondary else flag
