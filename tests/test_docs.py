"""The docs cannot drift: commands, options, JSON keys and README output are checked here."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.model.spec_doc import render_spec_doc

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = ROOT / "README.md"
runner = CliRunner()

pytestmark = pytest.mark.skipif(not DOCS.is_dir(), reason="not run from a source checkout")


def _commands() -> dict[str, Any]:
    group: Any = typer.main.get_command(app)
    return dict(group.commands)


def _fenced_blocks(text: str, after_heading: str) -> list[str]:
    section = text.split(after_heading, 1)[1]
    return re.findall(r"```[a-z]*\n(.*?)```", section, flags=re.S)


def test_spec_doc_is_generated_from_the_model() -> None:
    text = (DOCS / "spec.md").read_text(encoding="utf-8")
    assert text == render_spec_doc(text), "run: python -m kvplan.model.spec_doc"


@pytest.mark.parametrize("name", sorted(_commands()))
def test_every_command_and_option_is_documented(name: str) -> None:
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    assert f"## kvplan {name}" in text
    for param in _commands()[name].params:
        for flag in getattr(param, "opts", []):
            if flag.startswith("--"):
                assert flag in text, f"docs/cli.md does not mention {flag} of kvplan {name}"


def test_quick_start_is_exactly_two_commands() -> None:
    (block, *_) = _fenced_blocks(README.read_text(encoding="utf-8"), "## Quick start")
    commands = block.strip().splitlines()
    assert len(commands) == 2
    assert commands[0].startswith("pip install . && kvplan ")
    assert "pytest" in commands[1]
    assert "pip install" in commands[1]


def _strip(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip().splitlines() if line.strip()]


def test_readme_quick_start_output_is_real() -> None:
    text = README.read_text(encoding="utf-8")
    command, _ = _fenced_blocks(text, "## Quick start")[0].strip().splitlines()
    shown = _fenced_blocks(text, "The first prints:")[0]
    args = shlex.split(command.split("&& kvplan ", 1)[1])
    result = runner.invoke(app, args)
    assert result.exit_code == 0
    assert _strip(result.stdout) == _strip(shown)


def test_readme_explain_example_is_real() -> None:
    block = _fenced_blocks(README.read_text(encoding="utf-8"), "## More examples")[0]
    command, *shown = block.strip().splitlines()
    result = runner.invoke(app, shlex.split(command.removeprefix("$ kvplan ")))
    assert result.exit_code == 0
    assert _strip(result.stdout) == _strip("\n".join(shown))


@pytest.mark.parametrize(
    "args",
    [
        ["calc", "jamba-v0.1", "-c", "8", "-f", "json", "--explain"],
        ["models", "-f", "json"],
        ["show", "deepseek-v3", "-f", "json"],
        ["plan", "llama-3.1-8b", "-g", "h100", "-pp", "2", "--mean-length", "2K", "-f", "json"],
        ["gpus", "-f", "json"],
        ["check", str(ROOT / "examples" / "budget.yaml"), "-f", "json"],
        ["diff", "llama-3.1-8b", "llama-3.1-70b", "-f", "json"],
    ],
    ids=lambda a: a[0],
)
def test_every_json_key_is_documented(args: list[str]) -> None:
    text = (DOCS / "json.md").read_text(encoding="utf-8")
    doc = json.loads(runner.invoke(app, args).stdout)

    def keys(value: object) -> set[str]:
        if isinstance(value, dict):
            return set(value) | {k for v in value.values() for k in keys(v)}
        if isinstance(value, list):
            return {k for v in value for k in keys(v)}
        return set()

    spec_keys = set(doc.get("spec", {}))  # the spec's own keys are documented in spec.md
    for key in keys(doc) - spec_keys:
        assert f"`{key}`" in text, f"docs/json.md does not document `{key}` of kvplan {args[0]}"


def _shown_commands() -> list[tuple[str, str, str]]:
    """Every ``$ kvplan ...`` example in the docs that needs no local file: (file, cmd, shown)."""
    found = []
    for path in [README, *sorted(DOCS.glob("*.md"))]:
        for block in re.findall(r"```[a-z]*\n(.*?)```", path.read_text(encoding="utf-8"), re.S):
            first, _, rest = block.partition("\n")
            if not first.startswith("$ kvplan ") or "--help" in first:
                continue
            files = [a for a in shlex.split(first) if a.endswith((".yaml", ".yml", ".json"))]
            if any(not (ROOT / f).is_file() for f in files):
                continue  # a file of the reader's, not in the repository
            # a block may hold several commands; check up to the next prompt
            found.append((path.name, first[2:], rest.split("\n$ ", 1)[0]))
    return found


@pytest.mark.parametrize(
    ("doc", "command", "shown"),
    _shown_commands(),
    ids=[f"{d}: {c}" for d, c, _ in _shown_commands()],
)
def test_documented_output_is_real(
    doc: str, command: str, shown: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)  # examples name files by their path in the repository
    result = runner.invoke(app, shlex.split(command)[1:])
    actual, expected = _strip(result.stdout + result.stderr), _strip(shown)
    if "..." in expected:  # an elided listing: the lines shown are its start
        expected = expected[: expected.index("...")]
        actual = actual[: len(expected)]
    assert actual == expected, f"{doc}: {command}"


# --- every count the docs state is computed here ------------------------------------------------

_WORDS = {
    "both": 2,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
}


def _reference_log_ids() -> dict[str, tuple[str, ...]]:
    import test_engine_llamacpp
    import test_engine_sglang
    import test_engine_vllm

    return {
        "vllm": test_engine_vllm.REFERENCE_LOG_IDS,
        "sglang": test_engine_sglang.REFERENCE_LOG_IDS,
        "llamacpp": test_engine_llamacpp.REFERENCE_LOG_IDS,
    }


def _kept_logs() -> list[Path]:
    return list((ROOT / "tests" / "data" / "logs").glob("*.log"))


def _ci_oracle_cases() -> int:
    """Cases .ci/run gives the live vLLM oracle (its --only list)."""
    text = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    listed = text.split("--only", 1)[1].split("\n  KVPLAN_VLLM_ORACLE", 1)[0]
    return len(re.findall(r"[a-z0-9.]+-[a-z0-9.-]+", listed))


def _counts() -> list[tuple[str, str, int]]:
    """(file, pattern whose group 1 is the count, the count computed now)."""
    import test_engine_vllm

    from kvplan.catalog.lookup import list_models
    from kvplan.hardware.gpus import list_gpus

    ids = _reference_log_ids()
    every_log = {i for group in ids.values() for i in group}
    vllm_19 = test_engine_vllm.CASES
    oracle = json.loads((ROOT / "tests" / "data" / "vllm_oracle_0.32.0.json").read_text("utf-8"))
    models, gpus = len(list_models()), len(list_gpus())
    return [
        ("README.md", r"\*\*(\d+) bundled models\*\*", models),
        ("README.md", r"checked against (\d+) real logs", len(every_log)),
        ("README.md", r"on (\d+) accelerators", gpus),
        ("README.md", r"(\d+) of them kept whole in tests/data/logs", len(_kept_logs())),
        ("docs/cli.md", r"(\d+) bundled models", models),
        ("docs/cli.md", r"(\d+) accelerators", gpus),
        ("docs/cli.md", r"(\d+) commands, in", len(app.registered_commands)),
        ("docs/engines.md", r"holds (\d+) vLLM v0\.19\.0 start-ups", len(vllm_19)),
        (
            "docs/engines.md",
            r"\((\d+) of \d+ single-stage cases",
            sum(1 for c in vllm_19 if c.pp == 1),
        ),
        ("docs/engines.md", r"come out exactly as\s+printed \((\d+) of", len(vllm_19)),
        ("docs/engines.md", r"All (\w+) llama\.cpp and ik_llama\.cpp logs", len(ids["llamacpp"])),
        ("docs/engines.md", r"(\w+) reference logs \(Qwen3-235B", len(ids["sglang"])),
        ("docs/engines.md", r"vllm_oracle_0\.32\.0\.json holds (\d+) cases", len(oracle)),
        ("docs/engines.md", r"MLA, and (\d+) refusals", sum("error" in c for c in oracle)),
        ("docs/engines.md", r"installs the engine and runs (\w+) of", _ci_oracle_cases()),
    ]


@pytest.mark.parametrize(("path", "pattern", "expected"), _counts(), ids=lambda v: str(v)[:40])
def test_every_count_in_the_docs_is_computed(path: str, pattern: str, expected: int) -> None:
    text = (ROOT / path).read_text(encoding="utf-8")
    found = re.findall(pattern, text)
    assert found, f"{path}: no match for {pattern!r}"
    for word in found:
        value = int(word) if word.isdigit() else _WORDS[word.lower()]
        assert value == expected, f"{path}: says {word} where the count is {expected}"


def test_no_uncounted_count_of_logs_models_or_gpus() -> None:
    """A new sentence with a count of logs, models or accelerators must join the table above."""
    counted = {(p, pat) for p, pat, _ in _counts()}
    for doc in [README, *sorted(DOCS.glob("*.md"))]:
        rel = doc.relative_to(ROOT).as_posix()
        text = doc.read_text(encoding="utf-8")
        counts = r"\b(\d+) (?:real |reference |bundled )?(?:logs|models|accelerators)\b"
        for m in re.finditer(counts, text):
            assert any(
                p == rel and re.search(pat, text[max(0, m.start() - 40) : m.end() + 40])
                for p, pat in counted
            ), f"{rel}: {m.group(0)!r} is a count no test computes"


def test_exit_codes_per_command_are_documented_and_in_help() -> None:
    from kvplan.cli import COMMAND_EXIT_CODES

    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    assert set(COMMAND_EXIT_CODES) == set(_commands())
    for name, meaning in COMMAND_EXIT_CODES.items():
        assert f"| `{name}` | {meaning} |" in text, f"docs/cli.md: exit codes of {name}"
        assert _commands()[name].epilog == f"Exit codes: {meaning}.", name


# --- docs/api.md: every public name documented, every example real ----------------------------


def test_every_public_name_is_documented_in_api_md() -> None:
    import kvplan

    lines = (DOCS / "api.md").read_text(encoding="utf-8").splitlines()
    documented = [line for line in lines if line.startswith(("#", "|"))]
    for name in kvplan.__all__:
        assert any(f"`{name}`" in line or f"`{name}(" in line for line in documented), (
            f"docs/api.md documents `{name}` in no heading or table row"
        )


def _expected_output(block: str) -> list[str]:
    """What an example says it prints: the comment after each ``print(...)`` line, and the
    comment lines right below a print (or below such a line), up to a blank line."""
    expected: list[str] = []
    after_print = False
    for line in block.splitlines():
        comment = line.partition("  # ")[2]
        stripped = line.strip()
        if stripped.startswith("print("):
            if comment:
                expected.append(comment.strip())
            after_print = True
        elif stripped.startswith("# ") and after_print:
            expected.append(stripped[2:])
        else:
            after_print = bool(stripped) and after_print and stripped.startswith("#")
    return expected


def _api_examples() -> list[tuple[str, list[str]]]:
    """Each python example of docs/api.md and the output it states: the ``prints`` block
    after it, else its output comments (``_expected_output``)."""
    text = (DOCS / "api.md").read_text(encoding="utf-8")
    found = re.findall(r"```python\n(.*?)```(?:\s*prints\s*```\n(.*?)```)?", text, flags=re.S)
    return [(code, _strip(shown) if shown else _expected_output(code)) for code, shown in found]


@pytest.mark.parametrize(
    ("code", "expected"),
    _api_examples(),
    ids=[
        f"{i}: {code.strip().splitlines()[-1][:40]}" for i, (code, _) in enumerate(_api_examples())
    ],
)
def test_api_example_runs_and_prints_what_it_says(
    code: str,
    expected: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(ROOT)  # examples name files by their path in the repository
    exec(compile(code, "docs/api.md", "exec"), {})
    if expected:  # an example whose output depends on the machine states none
        assert _strip(capsys.readouterr().out) == expected


def test_the_readme_budget_paragraph_states_what_check_prints() -> None:
    """The figures the prose above the budget example states are those kvplan check gives."""
    doc = json.loads(
        runner.invoke(app, ["check", str(ROOT / "examples" / "budget.yaml"), "-f", "json"]).stdout
    )
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(
        r"fails (\d+) of its (\d+) assertions: on (\d+) H100s, (\d+) requests reach only"
        r" ([\d,]+) tokens each\s+\(and ([\d.]+) GiB stays free[^)]*\), and an L4 holds"
        r" (\d+) requests",
        text,
    )
    assert found, "README.md: the budget paragraph no longer states its figures"
    by = {(r["deployment"], r["assertion"]): r for r in doc["results"]}
    context = by[("chat-prod", "min_context_at_concurrency")]
    free = by[("chat-prod", "min_free_memory")]["actual"]
    assert int(found[1]) == doc["num_failed"]
    assert int(found[2]) == doc["num_assertions"]
    assert int(found[5].replace(",", "")) == context["actual"]
    assert found[6] == f"{free / 2**30:.2f}"
    assert int(found[7]) == by[("edge", "min_concurrency")]["actual"]
    budget = (ROOT / "examples" / "budget.yaml").read_text(encoding="utf-8")
    assert f"tensor_parallel_size: {found[3]}" in budget
    assert f"concurrency: {found[4]}," in budget


def test_readme_examples_name_files_the_repository_holds_or_say_placeholder() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        for line in block.splitlines():
            command, _, comment = line.partition("#")
            for word in shlex.split(command)[1:]:
                if word.endswith((".jsonl", ".csv", ".log", ".gguf")):
                    assert (ROOT / word).is_file(), f"README.md: {word} is not in the repository"
            if "MY_" in command:
                assert "placeholder" in comment, line
