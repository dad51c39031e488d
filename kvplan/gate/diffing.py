"""What changed between two specs or two budget files, and what it does to the answers.

Either side may be a catalog name, a file path, or ``REV:path`` (that file at a git
revision, read with ``git show``), so a pull request can be reviewed against its base:
``kvplan diff origin/main:budgets/prod.yaml budgets/prod.yaml``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvplan.arguments import as_path
from kvplan.errors import SpecError
from kvplan.files import TEXT_LIMIT_BYTES, path_exists
from kvplan.validation import parse_yaml, read_yaml


@dataclass(frozen=True, slots=True)
class Change:
    """A field whose value differs; ``scope`` is the deployment for budget files."""

    scope: str
    field: str
    old: Any
    new: Any


@dataclass(frozen=True, slots=True)
class Metric:
    """An answer before and after: ``max_concurrency 31 -> 22 (-29%)``."""

    scope: str
    name: str
    old: int | None
    new: int | None
    unit: str  # bytes | tokens | requests

    @property
    def change(self) -> str:
        if self.old is None or self.new is None:
            return "added" if self.old is None else "removed"
        if self.old == self.new:
            return "unchanged"
        if not self.old:
            return "from 0"
        return f"{100 * (self.new - self.old) / self.old:+.0f}%"


@dataclass(frozen=True, slots=True)
class Diff:
    kind: str  # spec | budget
    old: str
    new: str
    changes: tuple[Change, ...]
    metrics: tuple[Metric, ...]


def diff_files(old: str, new: str) -> Diff:
    """Compare two specs or two budget files (see the module docstring). ArgumentTypeError (a
    TypeError) for an ``old`` or ``new`` that is no str or path."""
    old, new = (str(as_path(v, n)) for v, n in ((old, "old"), (new, "new")))
    old_data, old_path = _read(old)
    new_data, new_path = _read(new)
    old_kind, new_kind = _kind(old_data), _kind(new_data)
    if old_kind != new_kind:
        raise SpecError(new, [f"cannot compare a {old_kind} with a {new_kind}"])
    if old_kind == "budget":
        return _diff_budgets(old, new, old_data, new_data, old_path, new_path)
    return _diff_specs(old, new, old_data, new_data)


def _read(label: str) -> tuple[Any, Path]:
    """The parsed YAML of a path, a ``REV:path``, or a catalog name (as a spec mapping)."""
    path = Path(label)
    if path_exists(path):
        data, _ = read_yaml(path)
        return data, path
    if ":" in label and not label.startswith(("/", ".")):
        rev, _, file = label.partition(":")
        shown = _git_show(label, rev, file)
        if len(shown) > TEXT_LIMIT_BYTES or b"\0" in shown[:8192]:
            raise SpecError(label, ["cannot read: not a text file of at most 64 MiB"])
        try:
            text = shown.decode("utf-8")
        except UnicodeDecodeError:
            raise SpecError(label, ["cannot read: not UTF-8 text"]) from None
        return parse_yaml(text, label), Path(file)
    from kvplan.catalog.lookup import load_model

    spec = load_model(label)
    return spec.model_dump(mode="json", exclude_none=True), path


#: How long ``git show`` may take: a blob of 64 MiB is read in well under a second
_GIT_TIMEOUT_S = 30.0


def _git_show(label: str, rev: str, file: str) -> bytes:
    """The bytes of ``file`` at ``rev``, by ``git show --end-of-options REV:FILE``: a revision
    that starts with ``-`` is refused (it would be read as an option of git's), and the rest
    can only be a revision. At most ``TEXT_LIMIT_BYTES`` + 1 bytes are read."""
    from kvplan.programs import run_bounded

    if not rev or rev.startswith("-") or not file:
        raise SpecError(
            label,
            ["REV:path: a revision (HEAD~1, main, a tag) and a path; no revision starts with '-'"],
        )
    try:
        done = run_bounded(
            ["git", "show", "--end-of-options", f"{rev}:{file}"],
            timeout_s=_GIT_TIMEOUT_S,
            limit_bytes=TEXT_LIMIT_BYTES,
        )
    except (OSError, ValueError) as e:
        raise SpecError(label, [f"cannot read from git: {e}"]) from None
    if done.timed_out:
        raise SpecError(label, [f"cannot read from git: no answer within {_GIT_TIMEOUT_S:g} s"])
    if done.returncode != 0 and not done.too_large:
        raise SpecError(label, [f"cannot read from git: {done.first_line()}"])
    return done.stdout


def _kind(data: Any) -> str:
    return "budget" if isinstance(data, dict) and "deployments" in data else "spec"


def _changes(scope: str, old: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    return [
        Change(scope, key, old.get(key), new.get(key))
        for key in dict.fromkeys([*old, *new])
        if old.get(key) != new.get(key)
    ]


def _diff_specs(old: str, new: str, old_data: Any, new_data: Any) -> Diff:
    from kvplan.model.estimator import bytes_per_token, estimate
    from kvplan.model.spec import parse_spec

    before, after = parse_spec(old_data, old), parse_spec(new_data, new)
    changes = _changes(
        "spec",
        before.model_dump(mode="json", exclude_none=True),
        after.model_dump(mode="json", exclude_none=True),
    )
    metrics = [
        Metric("spec", "bytes_per_token", bytes_per_token(before), bytes_per_token(after), "bytes")
    ]
    for label, tokens in (("kv_cache_bytes at 32,768 tokens", 32768),):
        metrics.append(
            Metric(
                "spec",
                label,
                estimate(before, tokens).kv_cache_bytes,
                estimate(after, tokens).kv_cache_bytes,
                "bytes",
            )
        )
    if before.max_position_embeddings and after.max_position_embeddings:
        metrics.append(
            Metric(
                "spec",
                "kv_cache_bytes at max_position_embeddings",
                estimate(before, before.max_position_embeddings).kv_cache_bytes,
                estimate(after, after.max_position_embeddings).kv_cache_bytes,
                "bytes",
            )
        )
    return Diff("spec", old, new, tuple(changes), tuple(metrics))


def _diff_budgets(
    old: str, new: str, old_data: Any, new_data: Any, old_path: Path, new_path: Path
) -> Diff:
    from kvplan.gate.budget import budget_from_data, context_at_concurrency, deployment_facts

    before = budget_from_data(old_data, old, None)
    after = budget_from_data(new_data, new, None)
    old_by_name = {d.name: d for d in before.deployments}
    new_by_name = {d.name: d for d in after.deployments}
    changes: list[Change] = []
    metrics: list[Metric] = []
    old_base, new_base = old_path.resolve().parent, new_path.resolve().parent
    for name in dict.fromkeys([*old_by_name, *new_by_name]):
        a, b = old_by_name.get(name), new_by_name.get(name)
        changes.extend(
            _changes(
                name,
                a.model_dump(mode="json", exclude_defaults=True) if a else {},
                b.model_dump(mode="json", exclude_defaults=True) if b else {},
            )
        )
        fa = deployment_facts(a, old_base) if a else None
        fb = deployment_facts(b, new_base) if b else None
        for metric, unit in (
            ("max_concurrency", "requests"),
            ("kv_cache_tokens", "tokens"),
            ("free_memory_bytes", "bytes"),
            ("kv_bytes_per_token", "bytes"),
        ):
            metrics.append(
                Metric(
                    name,
                    metric,
                    getattr(fa, metric) if fa else None,
                    getattr(fb, metric) if fb else None,
                    unit,
                )
            )
        latest = b if b is not None else a
        target = latest.expect.min_context_at_concurrency if latest is not None else None
        if target is not None:
            metrics.append(
                Metric(
                    name,
                    f"context at concurrency {target.concurrency}",
                    context_at_concurrency(a, old_base, target.concurrency) if a else None,
                    context_at_concurrency(b, new_base, target.concurrency) if b else None,
                    "tokens",
                )
            )
    return Diff("budget", old, new, tuple(changes), tuple(metrics))
