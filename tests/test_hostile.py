"""Untrusted input in CI (a budget, a log or a model folder from a pull request): nothing it says
makes kvplan write a file, read a file it may not reference, or print another file's content.

Each test is the class of a defect, not its one example: every program kvplan runs goes through
kvplan/programs.py (an argument list, bounded in time and bytes), every name read from inside a
file is read as a name, and a file that is not of the kind asked for is refused without a word
of its content.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.errors import LocalGPUError, SpecError
from kvplan.hardware.local import parse_nvidia_smi, parse_rocm_smi
from kvplan.programs import run_bounded
from kvplan.validation import parse_yaml

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()
#: what a secret file holds: a mapping, so YAML reads it, with no key of a spec or a budget
SECRET = "root_password: hunter2-secret\napi_token: tok-0123456789\n"


def _secret(folder: Path) -> Path:
    path = folder / "secret.yaml"
    path.write_text(SECRET)
    return path


def _git(folder: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=ci@example.com", "-c", "user.name=ci", *args],
        cwd=folder,
        check=True,
        capture_output=True,
    )


# --- programs: an argument list, options kept apart from what the user typed -----------------


def test_only_programs_py_runs_programs_and_nothing_uses_a_shell() -> None:
    runners = []
    for path in sorted((ROOT / "kvplan").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
                module = node.module if isinstance(node, ast.ImportFrom) else None
                if "subprocess" in names or module == "subprocess" or "os" in names:
                    runners.append((path.relative_to(ROOT).as_posix(), ast.unparse(node)))
            if isinstance(node, ast.keyword) and node.arg == "shell":
                pytest.fail(f"{path}: a shell= argument")
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "os"
                and node.attr in ("system", "popen", "execv", "execvp", "spawnv")
            ):
                pytest.fail(f"{path}: os.{node.attr}")
    assert [r for r in runners if "subprocess" in r[1]] == [
        ("kvplan/programs.py", "import subprocess")
    ]


@pytest.mark.parametrize(
    "revision",
    ["--output=victim:x", "-ovictim:x", "--upload-pack=touch victim:x", "-:x", ":x"],
)
def test_diff_takes_no_git_option_for_a_revision(
    revision: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `kvplan diff -- '--output=victim:x' MODEL` once made git write ./victim
    _git(tmp_path, "init", "-q")
    (tmp_path / "a.yaml").write_text((ROOT / "model_specs" / "llama-3.1-8b.yaml").read_text())
    _git(tmp_path, "add", "a.yaml")
    _git(tmp_path, "commit", "-qm", "a spec")
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["diff", "--", revision, "llama-3.1-8b"])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [".git", "a.yaml"]
    # a revision is still read, after --end-of-options
    assert runner.invoke(app, ["diff", "HEAD:a.yaml", "llama-3.1-8b"]).exit_code == 0


def test_a_program_is_stopped_at_its_byte_limit_and_its_time_limit() -> None:
    endless = [sys.executable, "-c", "import sys\nwhile True: sys.stdout.write('x' * 65536)"]
    done = run_bounded(endless, timeout_s=20, limit_bytes=1 << 20)
    assert done.too_large
    assert done.returncode is None
    assert len(done.stdout) == (1 << 20) + 1  # one byte past the limit says it was passed
    hung = [sys.executable, "-c", "import time; time.sleep(60)"]
    done = run_bounded(hung, timeout_s=0.5, limit_bytes=1024)
    assert done.timed_out
    assert done.returncode is None
    with pytest.raises(ValueError, match="NUL"):
        run_bounded(["echo", "a\0b"], timeout_s=1, limit_bytes=10)


@pytest.mark.parametrize(
    "text",
    [
        "0, NVIDIA H100 80GB HBM3, ⁸¹⁵⁵⁹, 0\n",  # superscript digits pass str.isdigit()
        "\u0660, NVIDIA H100 80GB HBM3, 81559, 0\n",  # an Arabic-Indic zero too
        "0, NVIDIA H100, " + "9" * 400 + ", 0\n",
    ],
)
def test_nvidia_smi_counts_are_ascii_digits(text: str) -> None:
    with pytest.raises(LocalGPUError):
        parse_nvidia_smi(text)


def test_rocm_smi_json_nested_past_the_parser_is_one_error() -> None:
    with pytest.raises(LocalGPUError, match="not JSON"):
        parse_rocm_smi("[" * 100_000 + "]" * 100_000)


def test_a_failing_local_gpu_tool_runs_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kvplan.hardware import local

    calls = tmp_path / "calls"
    tool = tmp_path / "nvidia-smi"
    tool.write_text(f"#!/bin/sh\necho run >> '{calls}'\necho 'no driver' >&2\nexit 9\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    for _ in range(2):
        with pytest.raises(LocalGPUError, match="no driver"):
            local.local_gpus()
    assert calls.read_text().count("run") == 1


# --- what a file may reference, and what an error may show ------------------------------------


def test_a_file_of_another_kind_is_refused_without_its_content(tmp_path: Path) -> None:
    secret = _secret(tmp_path)
    for command in (["calc", str(secret)], ["check", str(secret)], ["show", str(secret)]):
        result = runner.invoke(app, command)
        assert result.exit_code == 2, command
        assert "hunter2" not in result.output
        assert "root_password" not in result.output
        assert "its content is not shown" in result.stderr
        assert result.stderr.count("\n") == 1


def test_an_unknown_key_that_is_no_key_name_is_not_echoed(tmp_path: Path) -> None:
    spec = (ROOT / "model_specs" / "llama-3.1-8b.yaml").read_text()
    path = tmp_path / "spec.yaml"
    path.write_text(spec + "'root:x:0:0:hunter2': 1\n")
    result = runner.invoke(app, ["calc", str(path)])
    assert result.exit_code == 2
    assert "hunter2" not in result.output
    assert "an unknown key that is no key name" in result.stderr


def _budget(folder: Path, model: str) -> Path:
    path = folder / "budget.yaml"
    path.write_text(
        "deployments:\n"
        f"  - name: chat\n    model: {model!r}\n    gpu: h100\n    max_model_len: 8192\n"
        "    expect:\n      min_concurrency: 1\n"
    )
    return path


@pytest.mark.parametrize("where", ["absolute", "parent", "link"])
def test_a_budget_names_no_file_outside_its_folder(where: str, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    spec = outside / "spec.yaml"
    spec.write_text((ROOT / "model_specs" / "llama-3.1-8b.yaml").read_text())
    folder = tmp_path / "ci"
    folder.mkdir()
    if where == "link":
        (folder / "spec.yaml").symlink_to(spec)
    model = {"absolute": str(spec), "parent": "../outside/spec.yaml", "link": "spec.yaml"}[where]
    result = runner.invoke(app, ["check", str(_budget(folder, model))])
    assert result.exit_code == 2, result.output
    assert "a budget names catalog models, or spec files inside its own folder" in result.stderr


def test_a_budget_reads_a_spec_inside_its_folder_and_a_catalog_name(tmp_path: Path) -> None:
    (tmp_path / "specs").mkdir()
    spec = (ROOT / "model_specs" / "llama-3.1-8b.yaml").read_text()
    (tmp_path / "specs" / "mine.yaml").write_text(spec)
    names = ("specs/mine.yaml", "./specs/mine.yaml", "llama-3.1-8b", "meta-llama/Llama-3.1-8B")
    for model in names:
        result = runner.invoke(app, ["check", str(_budget(tmp_path, model))])
        assert result.exit_code == 0, (model, result.output)


def test_a_log_names_a_model_it_never_opens(tmp_path: Path) -> None:
    # a valid spec file named by the log's model=: read as a name, it is no catalog model
    log = (ROOT / "tests" / "data" / "logs" / "vllm-0.19-llama-3.1-8b-tp1.log").read_text()
    spec = tmp_path / "spec.yaml"
    spec.write_text((ROOT / "model_specs" / "qwen3-8b.yaml").read_text())
    hostile = tmp_path / "vllm.log"
    hostile.write_text(log.replace("model='meta-llama/Llama-3.1-8B-Instruct'", f"model='{spec}'"))
    result = runner.invoke(app, ["reconcile", str(hostile)])
    # the Qwen3 spec at the path was never read: the name is no catalog model
    assert result.exit_code == 2, result.output
    assert "in the log is not in the catalog" in result.stderr
    assert "qwen3" not in result.output.lower()


# --- bounds, and nothing nonsensical taken as "not given" ---------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["plan", "llama-3.1-8b", "--gpu", "h100", "-c", "8K", "-e", "vllm",
         "--num-gpu-blocks-override", str(2**64)],
        ["plan", "llama-3.1-8b", "--gpu", "h100", "-c", "8K", "-e", "llama.cpp", "-ncmoe",
         str(2**64)],
        ["plan", "llama-3.1-8b", "--gpu", "h100", "-c", "8K", "-n", str(2**40)],
        ["calc", "llama-3.1-8b", "-c", "8K", "-np", str(2**33)],
    ],
    ids=["blocks override", "n-cpu-moe", "concurrency", "sequences"],
)
def test_every_whole_number_option_has_a_ceiling(args: list[str]) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert result.stderr.endswith(": at most 4,294,967,296\n")
    assert result.stderr.count("\n") == 1


def test_layers_of_experts_past_the_model_add_no_work() -> None:
    # -ncmoe 2^32 once built 2^32 override patterns (minutes); past the layers it is all of them
    many = ["plan", "gpt-oss-20b", "--gpu", "h100", "-c", "8K", "-e", "llama.cpp"]
    every = runner.invoke(app, [*many, "-ncmoe", str(2**32), "-f", "json"])
    layers = runner.invoke(app, [*many, "-ncmoe", "24", "-f", "json"])
    assert every.exit_code == layers.exit_code == 0
    first, second = (
        [(d["device"], d["model_bytes"]) for d in json.loads(r.stdout)["devices"]]
        for r in (every, layers)
    )
    assert first == second


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["plan", "llama-3.1-8b", "--gpu", "h100", "-c", "8K", "--overhead", ""], "--overhead"),
        (["plan", "llama-3.1-8b", "--gpu", "h100", "-c", "8K", "--kv-cache-memory", ""],
         "--kv-cache-memory"),
        (["plan", "llama-3.1-8b", "--gpu", "h100", "-c", "32K", "--mean-length", ""],
         "--mean-length"),
        (["plan", "llama-3.1-8b", "--gpu", "h100", "-c", "32K", "--p99-length", ""],
         "--p99-length"),
        (["perf", "llama-3.1-8b", "--gpu", "h100", "-c", "8K", "--prompt", ""], "--prompt"),
        (["calc", "llama-3.1-8b", "-c", ""], "--context"),
        (["plan", "llama-3.1-8b", "--gpu-memory", "1.5", "-c", "8K"], "--gpu-memory"),
        (["plan", "llama-3.1-8b", "--gpu", "h100", "-c", "8K", "-e", "llama.cpp", "-np", "300"],
         "-np 300"),
        (["calc", "llama-3.1-8b", "-c", "8K", "-e", "llama.cpp", "--engine-version",
          "b9999999999999999999"], "--engine-version"),
    ],
)
def test_an_empty_or_nonsense_value_is_refused_not_dropped(args: list[str], named: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"kvplan: error: {named}")
    assert result.stderr.count("\n") == 1


@pytest.mark.parametrize("entry", [None, ["full_attention"], {"kind": "x"}, 7])
@pytest.mark.parametrize("family", ["qwen3-coder-30b-a3b", "phi-1"])
def test_a_layer_kind_that_is_no_string_is_one_error(
    entry: object, family: str, tmp_path: Path
) -> None:
    # layer_types: [null, ...] ended in a KeyError: the entry None read as "none found"
    config = json.loads((ROOT / "tests" / "fixtures" / "hf" / family / "config.json").read_text())
    n = config["num_hidden_layers"]
    config["layer_types"] = ["full_attention"] * (n - 1) + [entry]
    (tmp_path / "config.json").write_text(json.dumps(config))
    result = runner.invoke(app, ["calc", str(tmp_path), "-c", "8K"])
    assert result.exit_code == 2, result.output
    assert f"layer_types.{n - 1}: unknown kind" in result.stderr
    assert result.stderr.count("\n") == 1


@pytest.mark.parametrize("version", [None, "0.x.y"])
def test_a_log_without_a_readable_version_says_whose_rules_read_it(
    version: str | None, tmp_path: Path
) -> None:
    log = (ROOT / "tests" / "data" / "logs" / "vllm-0.19-llama-3.1-8b-tp1.log").read_text()
    lines = [line for line in log.splitlines() if "LLM engine (v" not in line]
    if version is not None:
        lines.insert(0, f"INFO vLLM API server version {version}")
    (tmp_path / "vllm.log").write_text("\n".join(lines) + "\n")
    result = runner.invoke(app, ["reconcile", str(tmp_path / "vllm.log"), "-f", "json"])
    assert result.exit_code in (0, 1), result.output
    notes = json.loads(result.stdout)["notes"]
    assert any("read with vLLM 0.32's rules" in note for note in notes), notes


def test_a_key_given_twice_is_refused_with_its_line(tmp_path: Path) -> None:
    # PyYAML keeps the last of two equal keys silently: 32 layers read, 16 sized
    spec = tmp_path / "twice.yaml"
    spec.write_text(
        "name: twice\nnum_hidden_layers: 32\nnum_attention_heads: 8\nhead_dim: 64\n"
        "num_hidden_layers: 16\n"
    )
    done = CliRunner().invoke(app, ["calc", str(spec), "-c", "4K"])
    assert done.exit_code == 2
    assert f"{spec}:5: num_hidden_layers: given twice in one mapping; keep one" in done.stderr
    nested = tmp_path / "nested.yaml"
    nested.write_text("a:\n  b: 1\n  '\\x1b[2J': 2\n  '\\x1b[2J': 3\n")
    with pytest.raises(SpecError, match="a key: given twice") as err:
        parse_yaml(nested.read_text(), str(nested))
    assert "\x1b" not in str(err.value)
