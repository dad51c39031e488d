"""kvplan's vLLM 0.32 rules against what the real engine decided, recorded by
scripts/vllm_oracle.py (vLLM's CPU build, config-only folders, dummy weights, the pool given to
the byte with kv_cache_memory_bytes) in tests/data/vllm_oracle_0.32.0.json.

Every recorded figure must come out exactly: the number of blocks, each group's page bytes and
layers, the printed ``KV cache size`` and ``Maximum concurrency`` lines, and, for a pool too
small for one request, the refusal and vLLM's estimated maximum model length.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

import kvplan
from kvplan.engines import vllm, vllm_versions
from kvplan.engines.vllm_speculative import Speculative, parse_speculative_config

#: the recording kept in the repository, or a live run's (.ci/run sets KVPLAN_VLLM_ORACLE)
KEPT = Path(__file__).parent / "data" / "vllm_oracle_0.32.0.json"
RECORDING = Path(os.environ.get("KVPLAN_VLLM_ORACLE") or KEPT)
CASES: list[dict[str, Any]] = json.loads(RECORDING.read_text(encoding="utf-8"))
#: the kept recording, for tests of one named case (a live run may hold only some cases)
KEPT_CASES: list[dict[str, Any]] = json.loads(KEPT.read_text(encoding="utf-8"))


FIXTURES = Path(__file__).parent / "fixtures" / "hf"


def _model(case: dict[str, Any], tmp: Path) -> kvplan.ModelSpec:
    """The case's model: the bundled spec, or its config.json with the case's overrides."""
    if not case.get("overrides"):
        return kvplan.load_model(case["fixture"])
    config = json.loads((FIXTURES / case["fixture"] / "config.json").read_text(encoding="utf-8"))
    inner = config.get("text_config", config)
    inner.update(case["overrides"])
    path = tmp / case["name"] / "config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config), encoding="utf-8")
    return kvplan.load_model(path)


def _state_dtype(case: dict[str, Any]) -> str | None:
    """The SSM state dtype the run kept: as asked, else float32 on a CPU with AVX-512 BF16,
    where vLLM's CPU build keeps Mamba state in float32 (a live run there printed 1,024 blocks
    for Jamba and 31 for Mamba-Codestral, half of the 2,048 and 62 of a bfloat16 state);
    on a GPU the model dtype's rule holds."""
    if case.get("mamba_ssm_cache_dtype"):
        return str(case["mamba_ssm_cache_dtype"])
    return "float32" if case.get("cpu_avx512_bf16") else None


def _kvplan(case: dict[str, Any], tmp: Path, line: str = "0.32") -> vllm.VllmResult:
    # the CPU build runs without async scheduling, and prefix caching is what the case asked
    cfg = vllm.config(
        int(case["max_model_len"]),
        block_size=int(case["block_size"]),
        max_num_batched_tokens=int(case.get("max_num_batched_tokens", case["max_model_len"])),
        max_num_seqs=8,
        version=line,
        mamba_ssm_cache_dtype=_state_dtype(case),
        enable_prefix_caching=bool(case.get("prefix_caching", False)),
        async_scheduling=bool(case.get("async_scheduling", False)),
        num_gpu_blocks_override=case.get("num_gpu_blocks_override"),
        speculative=_speculative(case),
    )
    return vllm.from_available(_model(case, tmp), int(case["kv_bytes"]), cfg)


def _speculative(case: dict[str, Any]) -> Speculative | None:
    """The case's ``--speculative-config``, read as kvplan reads the flag's JSON."""
    given = case.get("llm_kwargs", {}).get("speculative_config")
    return None if given is None else parse_speculative_config(json.dumps(given))


def _printed(case: dict[str, Any], pattern: str) -> list[str]:
    return [m.group(1) for line in case["printed"] for m in [re.search(pattern, line)] if m]


def test_the_recording_covers_the_cache_kinds() -> None:
    assert {c["vllm_version"] for c in CASES} == {"0.32.0"}
    kinds = {c["kind"].split(",")[0].split(" (")[0] for c in CASES}
    assert {
        "full",
        "sliding",
        "sliding/full 1:1",
        "sliding/full 5:1",
        "MLA latent",
        "Mamba2 hybrid",
        "Mamba1 hybrid",
        "gated delta net",
        "chunked/full 3:1",
    } <= kinds
    assert any("error" in c for c in CASES), "a refusal is recorded"
    # prefix caching on, for a Mamba2 and a gated-delta-net hybrid; async scheduling forced on
    prefix = {c["fixture"] for c in CASES if c.get("prefix_caching") and "error" not in c}
    assert {"nemotron-h-8b", "qwen3-next-80b-a3b"} <= prefix
    assert any(c.get("async_scheduling") and "error" not in c for c in CASES)


@pytest.mark.parametrize("case", [c for c in CASES if "error" not in c], ids=lambda c: c["name"])
def test_blocks_groups_and_printed_lines(case: dict[str, Any], tmp_path: Path) -> None:
    ours = _kvplan(case, tmp_path)
    assert ours.num_gpu_blocks == case["num_blocks"]
    groups = case["groups"]
    assert ours.num_groups == len(groups)
    assert {g["page_size_bytes"] for g in groups} == {ours.page_bytes}
    # vLLM's groups hold real layers only (gemma-3-1b: 22 sliding layers in groups of 4, 4,
    # 4, 4, 3, 3); kvplan counts the layers every group is padded to
    assert max(g["num_layers"] for g in groups) == ours.group_size
    real_layers = sum(g["num_layers"] for g in groups)
    assert ours.num_groups * ours.group_size - real_layers == ours.padding_layers
    (tokens,) = _printed(case, r"KV cache size: ([\d,]+) tokens")
    assert f"{ours.gpu_kv_cache_tokens:,}" == tokens
    (concurrency,) = _printed(case, r"tokens per request: ([\d.]+)x")
    assert f"{float(ours.max_concurrency):.2f}" == concurrency
    assert ours.fit_blocks >= ours.blocks_per_request


def test_the_engine_used_the_settings_asked_for() -> None:
    # the CPU build turns async scheduling off; the script turns it back on where asked
    for case in CASES:
        if "async_scheduling_used" in case:
            assert case["async_scheduling_used"] is bool(case.get("async_scheduling"))
        if "mamba_cache_mode_used" in case and case["fixture"] in ("nemotron-h-8b", "jamba-v0.1"):
            mode = "align" if case.get("prefix_caching") else "none"
            assert case["mamba_cache_mode_used"] == mode


def test_the_override_line_is_what_vllm_printed(tmp_path: Path) -> None:
    (case,) = [c for c in CASES if c.get("num_gpu_blocks_override")]
    (override,) = [line for line in case["printed"] if line.startswith("Overriding")]
    assert override in _kvplan(case, tmp_path).log_lines()


@pytest.mark.parametrize("case", [c for c in CASES if "error" in c], ids=lambda c: c["name"])
def test_refusals_and_the_estimated_maximum_length(case: dict[str, Any], tmp_path: Path) -> None:
    if RECORDING != KEPT:
        # a live run on a host whose CPU build cannot start the case at all (an AMX host
        # takes the AMX MLA backend, which needs 32-token blocks) says so, not a refusal
        _not_run(case)
    ours = _kvplan(case, tmp_path)
    assert "To serve at least one request" in case["error"]
    assert ours.fit_blocks < ours.blocks_per_request
    # vLLM prints no estimate when not even one token fits (prefix-refused-nemotron-h-8b)
    estimate = _printed(case, r"estimated maximum model length is (\d+)") or ["0"]
    assert vllm.estimated_max_model_len(ours) == int(estimate[0])
    # "(X GiB KV cache is needed ... available KV cache memory (Y GiB)" (2 decimals, trailing
    # zeros dropped): a request's blocks, each group_size pages; the pool less the null block
    printed = re.search(r"\(([\d.]+) GiB KV cache is needed.*?memory \(([\d.]+) GiB", case["error"])
    assert printed is not None
    block_bytes = ours.page_bytes * ours.group_size
    assert round(ours.blocks_per_request * block_bytes / 2**30, 2) == float(printed.group(1))
    assert round((int(case["kv_bytes"]) - block_bytes) / 2**30, 2) == float(printed.group(2))


def test_refusal_json_carries_the_estimated_maximum_length(tmp_path: Path) -> None:
    (case,) = [c for c in KEPT_CASES if c["name"] == "exact-llama-3.1-8b"]
    # 1 GiB = 64 blocks of 32 layers x 524,288 B; 0.32 holds one back: 63 x 128 = 8,064 tokens
    log = _kvplan(case, tmp_path).to_engine_result().engine_log
    assert log["estimated_max_model_len"] == 8064
    (fits,) = [c for c in KEPT_CASES if c["name"] == "gqa-llama-3.1-8b"]
    assert "estimated_max_model_len" not in _kvplan(fits, tmp_path).to_engine_result().engine_log


def test_json_block_size_is_the_one_the_engine_uses() -> None:
    import json as json_module

    from typer.testing import CliRunner

    from kvplan.cli import app

    (case,) = [c for c in KEPT_CASES if c["name"] == "mamba2-nemotron-h-8b"]
    (attention,) = [g for g in case["groups"] if g["spec"] == "FullAttentionSpec"]
    args = ["plan", "nemotron-h-8b", "--gpu-memory", "80GiB", "-c", "8192", "-e", "vllm"]
    args += ["--engine-version", "0.32", "--block-size", "128", "--kv-cache-memory", "1GiB"]
    doc = json_module.loads(CliRunner().invoke(app, [*args, "-f", "json"]).stdout)
    assert doc["block_size"] == attention["block_size"] == 1152
    assert doc["requested_block_size"] == 128


# --- the other releases recorded by the same script, each against its release line -------------

#: every recording but 0.32.0's, with the line its release maps to
OTHER_RECORDINGS = sorted(
    p for p in (Path(__file__).parent / "data").glob("vllm_oracle_*.json") if p != RECORDING
)
OTHER_CASES: list[tuple[str, dict[str, Any]]] = [
    (vllm.resolve_version(case["vllm_version"]).line, case)
    for path in OTHER_RECORDINGS
    for case in json.loads(path.read_text(encoding="utf-8"))
]


def _other(refused: bool) -> list[Any]:
    """The other recordings' cases that fit (or, ``refused``, that vLLM refused), each with its
    line, named by release and case."""
    return [
        pytest.param(line, case, id=f"{case['vllm_version']}-{case['name']}")
        for line, case in OTHER_CASES
        if ("error" in case) is refused
    ]


def _all_mode(case: dict[str, Any]) -> bool:
    """vLLM put the state in the all mode (0.26-0.27 with prefix caching)."""
    return "Mamba cache mode is set to 'all'" in case["printed"]


def _not_run(case: dict[str, Any]) -> None:
    """A case the release's CPU build could not run at all (0.27.1: MLA), not a refusal."""
    if "error" in case and "To serve at least one request" not in case["error"]:
        pytest.skip(f"vLLM {case['vllm_version']}'s CPU build: {case['error'][:80]}")


def test_other_recordings_are_a_release_each_and_cover_the_kinds() -> None:
    for path in OTHER_RECORDINGS:
        cases = json.loads(path.read_text(encoding="utf-8"))
        version = path.stem.removeprefix("vllm_oracle_")
        assert {c["vllm_version"] for c in cases} == {version}
        assert len(cases) >= 20
        assert any("error" in c for c in cases)


@pytest.mark.parametrize(("line", "case"), _other(refused=False))
def test_other_releases_blocks_groups_and_printed_lines(
    line: str, case: dict[str, Any], tmp_path: Path
) -> None:
    if case.get("cpu_avx512_bf16") and case["fixture"] == "qwen3-next-80b-a3b":
        pytest.skip("this CPU's accelerated gated-delta-net kernel keeps the state in float32")
    ours = _kvplan(case, tmp_path, line)
    assert ours.num_gpu_blocks == case["num_blocks"]
    if _all_mode(case):
        # the all mode: every group, state groups included, pages the aligned attention block,
        # and a request holds cdiv(max_model_len, that block) pages of each
        assert ours.settings is not None
        assert ours.settings.mamba_cache_mode == "all"
        assert {g["block_size"] for g in case["groups"]} == {ours.block_size}
    groups = case["groups"]
    assert ours.num_groups == len(groups)
    assert {g["page_size_bytes"] for g in groups} == {ours.page_bytes}
    assert max(g["num_layers"] for g in groups) == ours.group_size
    (concurrency,) = _printed(case, r"tokens per request: ([\d.]+)x")
    assert f"{float(ours.max_concurrency):.2f}" == concurrency
    (tokens,) = _printed(case, r"KV cache size: ([\d,]+) tokens")
    assert f"{ours.gpu_kv_cache_tokens:,}" == tokens


@pytest.mark.parametrize(("line", "case"), _other(refused=True))
def test_other_releases_refusals(line: str, case: dict[str, Any], tmp_path: Path) -> None:
    _not_run(case)
    ours = _kvplan(case, tmp_path, line)
    assert "To serve at least one request" in case["error"]
    assert ours.fit_blocks < ours.blocks_per_request
    estimate = _printed(case, r"estimated maximum model length is (\d+)") or ["0"]
    assert vllm.estimated_max_model_len(ours) == int(estimate[0])
    printed = re.search(r"\(([\d.]+) GiB KV cache is needed.*?memory \(([\d.]+) GiB", case["error"])
    assert printed is not None
    block_bytes = ours.page_bytes * ours.group_size
    assert round(ours.blocks_per_request * block_bytes / 2**30, 2) == float(printed.group(1))
    # the null block is held back from v0.29.0 only
    held = block_bytes if line in vllm_versions.HOLDS_NULL_BLOCK else 0
    assert round((int(case["kv_bytes"]) - held) / 2**30, 2) == float(printed.group(2))


@pytest.mark.parametrize(
    ("release", "line"),
    [
        # every release vLLM's CPU build has on the registry, 0.8.5 to 0.32.0, and the
        # boundaries each rule change sets (kvplan.engines.vllm_versions.RULES)
        *[(v, "0.8") for v in ("0.8.0", "0.8.5", "0.8.5.post2", "0.9.0", "0.9.0.1")],
        *[(v, "0.19") for v in ("0.9.1", "0.9.2", "0.10.1.1", "0.12.0.post2", "0.19.1")],
        *[(v, "0.20") for v in ("0.20.0", "0.20.2")],
        *[(v, "0.24") for v in ("0.21.0", "0.22.1", "0.23.0", "0.24.0")],
        *[(v, "0.25") for v in ("0.25.0", "0.25.1")],
        *[(v, "0.27") for v in ("0.26.0", "0.27.0", "0.27.1")],
        ("0.28.0", "0.28"),
        ("0.29.0", "0.29"),
        *[(v, "0.32") for v in ("0.30.0", "0.31.0", "0.32.0", "v0.32.1", "0.32.0+cpu")],
    ],
)
def test_every_release_maps_to_its_line_without_a_note(release: str, line: str) -> None:
    choice = vllm.resolve_version(release)
    assert (choice.line, choice.note) == (line, "")


def test_each_rule_change_names_its_release_and_file() -> None:
    lines = {line: vllm.resolve_version(line).line for line in vllm.VERSIONS}
    assert lines == {line: line for line in vllm.VERSIONS}  # a line's name is its own release
    for release, source, _ in vllm_versions.RULES:
        assert vllm.resolve_version(release).note == ""
        assert all(part.startswith("vllm/") for part in source.split(", "))
    # each tuple of lines starts at the release of its rule and runs to the newest line
    first = {what: vllm.resolve_version(release).line for release, _, what in vllm_versions.RULES}
    newest = vllm.VERSIONS.index
    for tuple_, words in (
        (vllm_versions.TOKENS_FROM_CONCURRENCY, "printed KV cache size"),
        (vllm_versions.ONE_LOG_LINE, "printed on one line"),
        (vllm_versions.HOLDS_NULL_BLOCK, "null block"),
    ):
        (start,) = [line for what, line in first.items() if words in what]
        assert tuple_ == vllm.VERSIONS[newest(start) :]
    # sliding layers on the kernel's block: from v0.25.0 until v0.30.0 gave --block-size back
    (start, end) = [line for what, line in first.items() if "sliding-window layers take" in what]
    assert vllm.VERSIONS[newest(start) : newest(end)] == vllm_versions.SLIDING_KERNEL_BLOCK


def test_the_rules_table_in_the_docs_is_the_modules() -> None:
    text = (Path(__file__).parent.parent / "docs" / "engines.md").read_text(encoding="utf-8")
    for release, source, _ in vllm_versions.RULES:
        assert any(
            line.startswith(f"| v{release} |") and f"`{source.split(', ')[0]}`" in line
            for line in text.splitlines()
        ), (release, source)
