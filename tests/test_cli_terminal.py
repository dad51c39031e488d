"""The command line as a terminal sees it: parser errors as one line, shell completion scripts,
tables that fit 80 columns, and the shared options spelled the same in every command."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
import typer
from rich.console import Console
from typer.testing import CliRunner

from kvplan.cli import app
from kvplan.views.table import table

runner = CliRunner()


def run(*args: str, **env: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args), env=env or None)
    return result.exit_code, result.stdout, result.stderr


# --- parser errors: one line, exit code 2 --------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["calc", "llama-3.1-8b", "--bogus"], ["calc: No such option: --bogus"]),
        (["calc", "llama-3.1-8b", "--bacth", "2"], ["--bacth", "Possible options: --batch"]),
        (["calc"], ["calc: Missing argument 'model'"]),
        (["calc", "llama-3.1-8b", "--batch", "0"], ["'--batch'", "0 is not in the range x>=1"]),
        (
            ["calc", "llama-3.1-8b", "-f", "xml"],
            ["'--format'", "'xml' is not one of 'table', 'json'"],
        ),
        (
            ["plan", "llama-3.1-8b", "-g", "h100", "-tp", "abc"],
            ["plan: ", "'-tp'", "'abc' is not a whole number; allowed: x>=1"],
        ),
        (["flags", "llama-3.1-8b", "-c", "8K", "-n", "4"], ["flags: Missing option '--gpu'"]),
        (["models", "--kind", "dense"], ["'--kind'", "'dense' is not one of", "'mla'"]),
        (["perf", "llama-3.1-8b", "-g", "h100", "-n", "x"], ["perf: ", "'x' is not a whole"]),
        (["check"], ["check: Missing argument"]),
        (["schema", "yaml"], ["schema: ", "'yaml' is not one of 'spec', 'budget'"]),
        (["import", "--hub"], ["Option '--hub' requires an argument"]),
        (["probe", "llama-3.1-8b", "-b", "2"], ["probe: No such option: -b"]),
        (["no-such-command"], ["No such command 'no-such-command'", "`kvplan --help`"]),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) and v and v[0][0] != "'" else None,
)
def test_parser_errors_are_one_line_and_exit_2(args: list[str], fragments: list[str]) -> None:
    code, out, err = run(*args)
    assert code == 2, err
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("kvplan: error: ")
    assert "Usage:" not in err
    assert "Try '" not in err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_parser_error_names_where_to_look() -> None:
    _, _, err = run("calc", "llama-3.1-8b", "--bogus")
    assert err.strip().endswith("; `kvplan calc --help` lists its options")


def test_bare_kvplan_still_prints_the_help() -> None:
    code, out, err = run()
    assert code == 2
    assert "Usage: kvplan [OPTIONS] COMMAND" in out + err
    assert "kvplan: error" not in out + err


def test_help_and_version_still_exit_0() -> None:
    assert run("--help")[0] == 0
    assert run("calc", "--help")[0] == 0
    assert run("--version")[0] == 0


# --- shell completion ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shell", "marker"),
    [
        ("zsh", "compdef _kvplan_completion kvplan"),
        ("bash", "complete -o default -F _kvplan_completion kvplan"),
        # fish's -c is spelled --command in typer's script: the same option
        ("fish", "complete --command kvplan"),
        ("powershell", "Register-ArgumentCompleter -Native -CommandName kvplan"),
    ],
)
def test_show_completion_prints_the_named_shells_script(shell: str, marker: str) -> None:
    # whatever shell runs the tests
    for args in (["--show-completion", shell], [f"--show-completion={shell}"]):
        code, out, err = run(*args, SHELL="/bin/sh")
        assert code == 0, err
        assert marker in out, out


def test_show_completion_scripts_differ_by_shell() -> None:
    zsh, bash, fish = (run("--show-completion", s)[1] for s in ("zsh", "bash", "fish"))
    assert "compdef" in zsh
    assert "compdef" not in bash
    assert "compdef" not in fish
    assert "COMPREPLY" in bash
    assert "COMPREPLY" not in zsh


def test_show_completion_of_an_unknown_shell_is_one_error_line() -> None:
    code, out, err = run("--show-completion", "tcsh")
    assert code == 2
    assert out == ""
    assert err.splitlines() == [
        "kvplan: error: Invalid value for '--show-completion': 'tcsh' is not a shell kvplan"
        " completes; allowed: bash, zsh, fish, powershell, pwsh; `kvplan --help` lists the"
        " commands and options"
    ]


def test_a_command_argument_named_like_a_shell_is_not_taken_for_one() -> None:
    # "zsh" after the command is the command's model argument, not a shell
    code, _, err = run("show", "zsh")
    assert code == 2
    assert "unknown model 'zsh'" in err


# --- tables at 80 columns ------------------------------------------------------------------------

NARROW = {"COLUMNS": "80"}


def _narrow(*args: str) -> list[str]:
    code, out, err = run(*args, **NARROW)
    assert code in (0, 1), err
    return out.splitlines()


@pytest.mark.parametrize(
    ("args", "whole"),
    [
        (["plan", "llama-3.1-8b", "--gpu", "h100", "-c", "32K", "-n", "64"], ["hgx-h100"]),
        (["gpus"], ["h100-sxm", "79.19 GiB", "rtx-6000-ada", "mi300x"]),
        (["models"], ["deepseek-r1-distill-qwen-1.5b", "llama-3.1-8b", "128.00 KiB"]),
        (
            ["compare", "llama-3.1-8b", "qwen3-8b", "--gpu", "h100", "-c", "8K"],
            ["llama-3.1-8b", "qwen3-8b", "128.00 KiB"],
        ),
        (["architectures"], ["PanguEmbedded", "bailing_moe"]),
        (["flags", "llama-3.1-8b", "-g", "h100", "-c", "8K", "-n", "4"], ["llama.cpp"]),
    ],
    ids=lambda v: (
        " ".join(v)
        if isinstance(v, list)
        and v[0] in ("plan", "gpus", "models", "compare", "architectures", "flags")
        else None
    ),
)
def test_tables_fit_80_columns_without_cutting_a_name(args: list[str], whole: list[str]) -> None:
    lines = _narrow(*args)
    too_wide = [line for line in lines if len(line) > 80]
    assert not too_wide, too_wide[:3]
    text = "\n".join(lines)
    assert "…" not in text
    for name in whole:
        assert name in text, name


def test_the_ranked_cluster_table_keeps_its_ranks_at_80_columns() -> None:
    lines = _narrow("plan", "llama-3.1-8b", "--gpu", "h100", "-c", "32K", "-n", "64")
    # rows 1..4 of the ranking: 8 GPUs of one hgx-h100 node each (TP 8, 4, 2, 1)
    ranked = [line for line in lines if line[2:3].isdigit() and "hgx-h100" in line]
    assert [line.split()[0] for line in ranked] == ["1", "2", "3", "4"]


def test_a_left_out_column_is_named() -> None:
    lines = _narrow("gpus")
    assert "not shown at this width: aliases" in [line.strip() for line in lines]
    # the full width, piped, has them
    code, out, _ = run("gpus")
    assert code == 0
    assert "aliases" in out.splitlines()[2]


def test_piped_output_keeps_its_120_columns() -> None:
    code, out, _ = run("gpus")
    assert code == 0
    assert max(len(line) for line in out.splitlines()) > 80


def _render(renderable: Any, width: int) -> list[str]:
    console = Console(width=width, highlight=False, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text().splitlines()


def test_table_helper_keeps_the_first_column_whole_and_drops_the_longest_lines() -> None:
    rows = [
        ("hgx-h100-superpod", "8", "TP 8 x PP 1 x 1 replica", "a long note about this row"),
        ("gb200-nvl72", "72", "TP 4 x PP 1 x 18 replicas", "another long note"),
    ]
    columns = [("system", "left"), ("GPUs", "right"), ("shape", "left"), ("note", "left")]
    wide = _render(table(columns, rows), 120)
    assert any("a long note about this row" in line for line in wide)
    # 40 columns: 17 (name) + 4 (GPUs) + 8 (widest word of shape) + 4 x 2 padding + 2 edges
    # + 3 dividers = 42 > 40 with the note too: the note (the longest line) goes first
    narrow = _render(table(columns, rows), 40)
    assert all(len(line) <= 40 for line in narrow)
    text = "\n".join(narrow)
    assert "hgx-h100-superpod" in text
    assert "gb200-nvl72" in text
    assert "not shown at this width: note" in text
    assert "…" not in text
    kept = _render(table(columns, rows, drop_first=["shape"]), 40)
    assert "not shown at this width: shape" in "\n".join(kept)


def test_table_helper_leaves_a_table_that_fits_as_it_was() -> None:
    columns = [("name", "left"), ("bytes", "right")]
    assert _render(table(columns, [("a", "1")]), 80) == _render(table(columns, [("a", "1")]), 20)


# --- llama.cpp's spellings mean what llama.cpp means --------------------------------------------


def _calc_json(*args: str) -> dict[str, Any]:
    code, out, err = run("calc", *args, "-f", "json")
    assert code == 0, err
    return json.loads(out)  # type: ignore[no-any-return]


def test_calc_b_is_the_logical_batch_and_caps_ubatch() -> None:
    # gpt-oss-20b, window 128: llama.cpp takes n_ubatch = min(-ub, -b). SWA cells are
    # PAD(128 + n_ubatch, 256): -ub 512 -> PAD(640, 256) = 768; -b 256 -> PAD(384, 256) = 512
    base = ["gpt-oss-20b", "-c", "4096", "-e", "llama.cpp"]
    assert _calc_json(*base)["engine_log"]["swa_cells"] == 768
    assert _calc_json(*base, "-b", "256")["engine_log"]["swa_cells"] == 512
    assert _calc_json(*base, "--batch-size", "256", "-ub", "512")["engine_log"]["swa_cells"] == 512
    assert _calc_json(*base, "-b", "4096")["engine_log"]["swa_cells"] == 768


def test_calc_b_without_a_llamacpp_engine_is_refused_naming_batch() -> None:
    code, out, err = run("calc", "llama-3.1-8b", "-c", "4", "-b", "4")
    assert code == 2
    assert out == ""
    assert err.splitlines() == [
        "kvplan: error: -b/--batch-size 4: llama.cpp's logical batch in tokens, read with"
        " --engine llama.cpp or ik_llama.cpp; for concurrent sequences use --batch N (or -np N)"
    ]


def test_calc_sequences_under_every_spelling() -> None:
    # llama-3.1-8b: 2 x 32 layers x 8 heads x 128 x 2 B = 131,072 B a token; 4 x 16 tokens
    for flag in ("--batch", "--parallel", "-np", "-n"):
        doc = _calc_json("llama-3.1-8b", "-c", "16", flag, "4")
        assert doc["batch_size"] == 4
        assert doc["kv_cache_bytes"] == 4 * 16 * 131_072


def test_calc_fa_takes_on_off_auto() -> None:
    base = ["llama-3.1-8b", "-c", "100", "-e", "llama.cpp", "--engine-version", "b5000"]
    # older builds pad the cells to 256 with flash attention, to 32 without: 100 -> 256 or 128
    assert _calc_json(*base, "-fa", "on")["engine_log"]["cells"] == 256
    assert _calc_json(*base, "-fa", "auto")["engine_log"]["cells"] == 256
    assert _calc_json(*base, "-fa", "off")["engine_log"]["cells"] == 128
    assert _calc_json(*base, "--no-flash-attn")["engine_log"]["cells"] == 128
    code, _, err = run("calc", *base, "-fa", "maybe")
    assert code == 2
    assert "-fa 'maybe': allowed on, off, auto" in err


def test_calc_cache_types_under_llamacpp_spellings() -> None:
    base = ["llama-3.1-8b", "-c", "256", "-e", "llama.cpp"]
    short = _calc_json(*base, "-ctk", "q8_0", "-ctv", "q8_0")
    long = _calc_json(*base, "--cache-type-k", "q8_0", "--cache-type-v", "q8_0")
    old = _calc_json(*base, "--k-dtype", "q8_0", "--v-dtype", "q8_0")
    assert short == long == old
    # q8_0: 34 B per 32 values; 2 x 32 layers x 256 cells x 1024 values x 34/32 B = 17,825,792
    assert short["kv_cache_bytes"] == 2 * 32 * 256 * 1024 * 34 // 32


# --- the shared options ---------------------------------------------------------------------------


def _params(command: str) -> dict[str, Any]:
    group: Any = typer.main.get_command(app)
    return {p.name: p for p in group.commands[command].params}


@pytest.mark.parametrize(
    ("option", "commands"),
    [
        ("-c", ("calc", "flags", "probe")),
        ("--kv-cache-dtype", ("calc", "flags", "perf", "compare")),
        ("--format", ("calc", "show", "models", "flags", "reconcile", "check", "diff", "probe")),
        ("-tp", ("flags", "perf", "compare")),
        ("--engine", ("calc", "flags", "perf", "compare")),
        ("--gpu", ("flags", "perf")),
        ("-q", ("flags", "plan")),
    ],
)
def test_a_shared_option_has_one_spelling_and_one_help(option: str, commands: tuple[str]) -> None:
    seen = set()
    for command in commands:
        found = [p for p in _params(command).values() if option in getattr(p, "opts", [])]
        assert len(found) == 1, (command, option)
        seen.add((tuple(sorted(found[0].opts)), found[0].help))
    assert len(seen) == 1, seen


def test_every_old_spelling_still_works() -> None:
    # flags: -c was --max-model-len only, --kv-cache-dtype without --kv-dtype
    base = ["flags", "llama-3.1-8b", "-g", "h100", "-n", "4", "-f", "json"]
    first = run(*base, "--max-model-len", "8K", "--kv-cache-dtype", "fp8")
    second = run(*base, "--context", "8K", "--kv-dtype", "fp8")
    assert first[0] == second[0] == 0, first[2] + second[2]
    assert json.loads(first[1]) == json.loads(second[1])
    # calc: --context and --kv-dtype, now also --max-model-len and --kv-cache-dtype
    assert _calc_json("llama-3.1-8b", "--context", "16", "--kv-dtype", "fp8") == _calc_json(
        "llama-3.1-8b", "--max-model-len", "16", "--kv-cache-dtype", "fp8"
    )
