"""Errors raised by kvplan.

The library raises these; the command line turns them into exit codes at its edge
(``kvplan.cli``), so a user mistake never shows a traceback::

    KvplanError                      root of everything kvplan raises on purpose
    ├── SpecError (ValueError)       an input file is invalid: a model spec, a length mix
    ├── UnitError (ValueError)       a size, token count, dtype or setting cannot be used
    │   └── ArgumentTypeError (TypeError)
    │                                an argument of a public function has the wrong type
    ├── ModelNotFoundError (LookupError)
    │   │                            no bundled model has that name, HF id or alias
    │   ├── NameRefusedError         a variant's name that differs from its catalog entry
    │   └── HubNotFoundError         no such repository or revision on the Hub
    ├── UnknownGPUError (LookupError)
    │                                no catalog GPU has that name (kvplan.hardware.gpus)
    ├── UnknownEngineError (LookupError)
    │                                no profile for that engine, or for that version of it
    └── UnavailableError             an optional component or the device is missing (exit 3)
        ├── ProbeUnavailableError    torch/transformers or the device (kvplan probe)
        ├── HubUnavailableError      huggingface_hub or the network (kvplan import --hub)
        └── LocalGPUError            --gpu local: no nvidia-smi/rocm-smi, or no usable answer
"""

from __future__ import annotations

from collections.abc import Sequence


class KvplanError(Exception):
    """Root of every error kvplan raises on purpose."""


class SpecError(KvplanError, ValueError):
    """An input file (a model spec, a length mix) is invalid.

    ``problems`` holds one line per problem, each naming the field
    (``layer_types.3: input should be ...``), and ``lines`` the 1-based line of each in the
    file where known. ``str()`` gives one ``path:line: problem`` line per problem.
    """

    def __init__(
        self, path: str, problems: Sequence[str], lines: Sequence[int | None] = ()
    ) -> None:
        self.path = path
        self.problems = tuple(problems) or ("invalid spec",)
        self.lines = tuple(lines) + (None,) * (len(self.problems) - len(lines))
        super().__init__(
            "\n".join(
                f"{path}:{line}: {p}" if line else f"{path}: {p}"
                for p, line in zip(self.problems, self.lines, strict=True)
            )
        )


class UnitError(KvplanError, ValueError):
    """A size, token count or dtype string cannot be read."""


class ArgumentTypeError(UnitError, TypeError):
    """An argument of a public function has the wrong type (``None`` for a spec, ``True`` or
    ``1.5`` for a count); the message names the parameter and what it takes.

    A ``TypeError``, as Python's own functions raise for a wrong type, and a ``UnitError``, so
    ``except KvplanError`` (and the command line's edge) still catch every refusal at once.
    """


class UnavailableError(KvplanError):
    """An optional component (an extra, a device, the network) is not available here."""


class ProbeUnavailableError(UnavailableError):
    """The probe cannot run here: torch or transformers is not installed, or no device."""


class HubUnavailableError(UnavailableError):
    """``--hub`` cannot download: huggingface_hub is not installed, or the Hub is unreachable."""


class UnknownEngineError(KvplanError, LookupError):
    """No profile for that engine, or for that version of it."""


class ModelNotFoundError(KvplanError, LookupError):
    """No bundled model or spec file matches; ``suggestions`` holds the closest names."""

    def __init__(self, query: str, suggestions: Sequence[str]) -> None:
        self.query = query
        self.suggestions = tuple(suggestions)
        hint = f"; did you mean {', '.join(self.suggestions)}?" if self.suggestions else ""
        shown = query if len(query) <= 80 else query[:77] + "..."
        super().__init__(
            f"unknown model {shown!r}{hint} (`kvplan models` lists the catalog; "
            "a path to a spec file works too)"
        )


class NameRefusedError(ModelNotFoundError):
    """The name is a known variant of a catalog model that differs from it (or is unchecked)."""

    def __init__(self, query: str, reason: str, suggestions: list[str]) -> None:
        super().__init__(query, suggestions)
        shown = query if len(query) <= 80 else query[:77] + "..."
        hint = f"; nearest: {', '.join(suggestions)}" if suggestions else ""
        self.args = (f"model {shown!r} is not in the catalog: {reason}{hint}",)


class HubNotFoundError(ModelNotFoundError):
    """The Hub has no such repository, or no such revision of it (exit 2, like any unknown
    model)."""

    def __init__(self, query: str, message: str) -> None:
        self.query = query
        self.suggestions = ()
        Exception.__init__(self, message)


class LocalGPUError(UnavailableError):
    """No GPU tool here, or its answer cannot be used for planning (exit 3)."""


def closest(
    query: str, candidates: Sequence[str], limit: int = 3, cutoff: float = 0.6
) -> list[str]:
    """The candidates nearest to a mistyped ``query``, best first, for did-you-mean hints."""
    import difflib  # only on the error path: keeps the start-up of every command light

    return difflib.get_close_matches(query, list(candidates), n=limit, cutoff=cutoff)
