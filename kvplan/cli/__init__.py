"""The ``kvplan`` command: parse arguments, call the library, show the result. Errors become
exit codes.

One module per command group (``calc``: calc, models, show; ``plan``: plan, gpus; ``simulate``;
``tiers``; ``engines``: reconcile, flags; ``budget``: check, diff, schema; ``importing``: import,
architectures; ``probe``; ``perf``: perf, compare, chart), each command a short function that
parses its options, calls one library function and hands the result to a view
(``kvplan.views``). What they share -- the app, exit codes, the error guard, parser errors
and completion -- is in ``kvplan.cli.common``; the options several commands take are defined
once in ``kvplan.cli.options``. Neither imports a command module.

Kept light on purpose: importing this package must not import every spec, torch or anything
heavy, so that ``kvplan --help`` and a ``calc`` start about as fast as typer itself.
"""

# Importing a command module registers its commands on ``app``.
from kvplan.cli import budget, calc, engines, importing, perf, plan, probe, simulate, tiers
from kvplan.cli.common import (
    COMMAND_EXIT_CODES,
    ExitCode,
    OutputFormat,
    app,
    complete_gpu,
    complete_model,
    exit_codes_epilog,
    order_commands,
)

order_commands()

__all__ = [
    "COMMAND_EXIT_CODES",
    "ExitCode",
    "OutputFormat",
    "app",
    "budget",
    "calc",
    "complete_gpu",
    "complete_model",
    "engines",
    "exit_codes_epilog",
    "importing",
    "perf",
    "plan",
    "probe",
    "simulate",
    "tiers",
]
