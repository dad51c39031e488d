"""The rows of a reconciliation, and what every engine's reader shares: reading a log and
its numbers safely, finding the model it ran, and the verdict on each printed figure
(``kvplan.logs.reconcile`` explains the statuses)."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Literal

from kvplan.arguments import as_str
from kvplan.catalog.lookup import as_spec, load_model
from kvplan.errors import (
    ModelNotFoundError,
    SpecError,
)
from kvplan.files import TEXT_LIMIT_BYTES, read_text
from kvplan.model.spec import ModelSpec
from kvplan.units import GiB, abbreviate

if TYPE_CHECKING:
    pass

#: Largest parallel size, block size, sequence or step count taken from a log.
_MAX_COUNT = 2**24
_MAX_PARALLEL = 4096
#: GiB figures are printed with two decimals; more digits than this are not a figure.
_DECIMAL = re.compile(r"[0-9]{1,12}(?:\.[0-9]{1,12})?")


def read_log(path: str) -> str:
    """The text of the log file ``path`` (``-``: standard input): at most its first
    ``TEXT_LIMIT_BYTES`` bytes, invalid UTF-8 replaced. Raises SpecError naming the file when
    it is not a regular file, cannot be read, or is binary; ArgumentTypeError (a TypeError)
    when ``path`` is not a str."""
    if as_str(path, "path", "a log file's path or '-'") == "-":
        return sys.stdin.read(TEXT_LIMIT_BYTES)
    return read_text(path, truncate=True, errors="replace")


def _count(text: str | None, name: str, path: str, default: int, maximum: int = _MAX_COUNT) -> int:
    """A positive integer setting read from the log (``default`` when absent)."""
    if text is None:
        return default
    digits = text.replace(",", "").lstrip("0") or "0"
    if not digits.isdigit() or len(digits) > 15 or not 1 <= int(digits) <= maximum:
        raise SpecError(
            path, [f"{name} {abbreviate(text)} in the log: expected an integer 1 to {maximum:,}"]
        )
    return int(digits)


def _gib_figure(text: str | None, name: str, path: str) -> float | None:
    """A figure printed in GiB (``71.27``), or None when absent."""
    if text is None:
        return None
    if not _DECIMAL.fullmatch(text):
        raise SpecError(path, [f"{name} {abbreviate(text)} in the log: not a figure in GiB"])
    return float(text)


#: What reconcile says of one row.
Status = Literal["reproduced", "differs", "not read", "estimate"]

#: The printed figures each engine's rules check, named as the engine prints them.
_FIGURES = {
    "vllm": "'GPU KV cache size', 'Maximum concurrency' or 'num_gpu_blocks is'",
    "sglang": "'KV Cache is allocated. #tokens: ...'",
    "llama.cpp": "'size = ... MiB' or 'KV self size = ... MiB'",
    "ik_llama.cpp": "'KV self size = ... MiB'",
}


@dataclass(frozen=True, slots=True)
class Difference:
    """How far a printed figure is from kvplan's nearest value: ``amount`` = printed - kvplan
    in ``unit`` (tokens, blocks, x, MiB, GB, cells...), ``percent`` of kvplan's value (None when
    that is 0). 480,000 printed against 476,016: +3,984 tokens, +0.84%."""

    amount: Fraction
    unit: str
    percent: Fraction | None

    def describe(self) -> str:
        """``+3,984 tokens (+0.84%)``; decimals (x, MiB, GB) with two digits: ``+0.67x``."""
        if self.amount.denominator == 1 and self.unit not in ("x", "MiB", "GB", "GiB"):
            shown = f"{int(self.amount):+,} {self.unit}"
        else:
            shown = f"{float(self.amount):+.2f}{'' if self.unit == 'x' else ' '}{self.unit}"
        return shown + ("" if self.percent is None else f" ({float(self.percent):+.2f}%)")


def _difference(printed: Fraction, mine: Fraction, unit: str) -> Difference:
    amount = printed - mine
    return Difference(amount, unit, 100 * amount / mine if mine else None)


@dataclass(frozen=True, slots=True)
class Row:
    """One compared figure. ``reproduced``: True or False for a rule, None for a modelled
    estimate or a figure not read; ``not_read``: why a printed figure was not checked ("" for
    every other row); ``difference``: by how much a rule's figure differs (None otherwise)."""

    component: str
    printed: str
    kvplan: str
    residual: str
    reproduced: bool | None
    not_read: str = ""
    difference: Difference | None = None

    @property
    def status(self) -> Status:
        """``reproduced``, ``differs``, ``not read`` or ``estimate``."""
        if self.reproduced is not None:
            return "reproduced" if self.reproduced else "differs"
        return "not read" if self.not_read else "estimate"


def _rule(
    component: str, printed: str, mine: str, ok: bool, difference: Difference | None = None
) -> Row:
    """A checked figure: ``exact``, or what differs and by how much."""
    if ok:
        return Row(component, printed, mine, "exact", True)
    return Row(
        component,
        printed,
        mine,
        difference.describe() if difference else "differs",
        False,
        difference=difference,
    )


def _unread(component: str, printed: str, reason: str) -> Row:
    """A printed figure kvplan recognises but could not check, and why."""
    return Row(component, printed, "-", reason, None, not_read=reason)


@dataclass(frozen=True, slots=True)
class Reconciliation:
    engine: str
    engine_version: str
    model: str
    settings: dict[str, Any] = field(default_factory=dict)
    rows: tuple[Row, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def num_checked(self) -> int:
        """Printed figures a rule checked (reproduced or differs)."""
        return sum(1 for row in self.rows if row.reproduced is not None)

    @property
    def num_differ(self) -> int:
        """Printed figures a rule checked that differ from kvplan's."""
        return sum(1 for row in self.rows if row.reproduced is False)

    @property
    def num_not_read(self) -> int:
        """Printed figures kvplan recognised but could not check."""
        return sum(1 for row in self.rows if row.status == "not read")

    @property
    def reproduced(self) -> bool:
        """At least one printed figure checked, and every one reproduced (estimates carry no
        verdict; a figure not read is not a check)."""
        return self.num_checked > 0 and all(row.reproduced is not False for row in self.rows)

    @property
    def status(self) -> Literal["reproduced", "differs", "checked nothing"]:
        """The one answer: every checked figure reproduced, one differs, or nothing checked."""
        if self.num_checked == 0:
            return "checked nothing"
        return "reproduced" if self.reproduced else "differs"

    @property
    def checked_nothing(self) -> str:
        """Why no figure was checked ("" when one was): the figures not read and their
        reasons, else the figures kvplan looks for in this engine's logs."""
        if self.num_checked:
            return ""
        unread = [row for row in self.rows if row.status == "not read"]
        if unread:
            why: dict[str, list[str]] = {}
            for row in unread:
                why.setdefault(row.not_read, []).append(row.component)
            reasons = "; ".join(f"{', '.join(names)}: {reason}" for reason, names in why.items())
            return (
                f"{len(unread)} printed figure{'s' if len(unread) > 1 else ''} not read ({reasons})"
            )
        looked_for = _FIGURES.get(self.engine, "none")
        return f"the log prints none of the figures kvplan recomputes ({looked_for})"


def _find(pattern: str, text: str) -> str | None:
    m = re.search(pattern, text)
    return m.group(1) if m else None


def _model(
    found: str | None, given: ModelSpec | str | None, path: str, text: str = ""
) -> ModelSpec:
    """The model: ``given``, else the name the log prints (read by ``kvplan.catalog.names``), else
    the catalog model whose shapes the log prints (``kvplan.logs.models``)."""
    from kvplan.logs.models import identify_model

    if given is not None:
        return as_spec(given, "model")
    if found is None:
        return identify_model(text, path)
    error: ModelNotFoundError | None = None
    try:
        return load_model(found, paths=False)  # a name the log prints, never a path
    except ModelNotFoundError as e:
        error = e
    except OSError:  # a name too long to probe as a path: no catalog name either
        pass
    if text:
        try:
            return identify_model(text, path)
        except SpecError:
            pass
    close = f"; did you mean {', '.join(error.suggestions)}?" if error and error.suggestions else ""
    raise SpecError(
        path,
        [
            f"model {abbreviate(found)} in the log is not in the catalog{close} (pass --model:"
            " a catalog name, an HF id or a spec file)"
        ],
    )


def _gib(value: int) -> str:
    return f"{value / GiB:.2f} GiB"


def _estimate_row(component: str, printed_gib: float | None, modelled: int) -> Row:
    if printed_gib is None:
        return Row(component, "-", _gib(modelled), "-", None)
    residual = modelled / GiB - printed_gib
    share = f" ({100 * residual / printed_gib:+.1f}%)" if printed_gib else ""
    return Row(
        component, f"{printed_gib:.2f} GiB", _gib(modelled), f"{residual:+.2f} GiB{share}", None
    )
