"""``kvplan calibrate``: one site's vLLM budget terms fitted from its start-up logs, and
``plan``, ``flags`` and ``check`` taking the fit (``--calibration``).

The logs are the recorded vLLM 0.19 run of Llama 3.1 8B on an H100 at utilization 0.95
(tests/data/logs/vllm-0.19-llama-3.1-8b-tp1.log) and copies of it whose printed activation,
non-torch memory and pool are changed, so every fitted figure follows by hand:

- kvplan's V1 activation for the run: 8,192 batched tokens x 2 x 14,336 x 2 B
  + 1,024 sequences x 128,256 x 12 B = 469,762,048 + 1,576,009,728 = 2,045,771,776 B;
- printed 1.50, 1.89 and 2.50 GiB: 1,610,612,736 / 2,029,372,047 / 2,684,354,560 B, ratios
  787,288, 991,983 and 1,312,147 parts per million: the lower median is 991,983;
- non-torch printed 0.20, 0.25 and 0.30 GiB: the lower median 0.25 GiB = 268,435,456 B;
- the pools printed 58.00, 58.11 and 58.20 GiB. The three runs are the same, so kvplan's pool
  with the fitted terms is one figure P for all, and ``other_bytes``, the lower median of
  (P - 58.00, P - 58.11, P - 58.20) GiB, is the middle one, P - 58.11 GiB. After the fit
  each log's residual is 58.11 GiB - its printed pool.
"""

from __future__ import annotations

import json
import re
from fractions import Fraction
from pathlib import Path

import pytest
from typer.testing import CliRunner

import kvplan
from kvplan.answers.plans import answer
from kvplan.answers.question import Question
from kvplan.cli import app
from kvplan.engines import vllm
from kvplan.engines.vllm_calibration import PPM, Calibration
from kvplan.errors import SpecError, UnitError
from kvplan.logs.calibrate import (
    MIN_LOGS,
    calibrate,
    calibration_from_dict,
    calibration_to_dict,
    load_calibration,
)
from kvplan.units import GiB

runner = CliRunner()
DATA = Path(__file__).parent / "data"
REAL = (DATA / "logs" / "vllm-0.19-llama-3.1-8b-tp1.log").read_text(encoding="utf-8")
ACTIVATION = 8192 * 2 * 14336 * 2 + 1024 * 128256 * 12


def _gib(text: str) -> int:
    return round(Fraction(text) * GiB)


def _variant(activation: str, non_torch: str, pool: str) -> str:
    text = REAL.replace("1.89 GiB for peak activation", f"{activation} GiB for peak activation")
    text = text.replace("0.25 GiB for non-torch", f"{non_torch} GiB for non-torch")
    return text.replace("Available KV cache memory: 58.11", f"Available KV cache memory: {pool}")


VARIANTS = [("1.50", "0.20", "58.00"), ("1.89", "0.25", "58.11"), ("2.50", "0.30", "58.20")]


def _logs(tmp_path: Path) -> list[Path]:
    paths = []
    for i, figures in enumerate(VARIANTS):
        path = tmp_path / f"run{i}.log"
        path.write_text(_variant(*figures), encoding="utf-8")
        paths.append(path)
    return paths


def test_the_modelled_activation_is_the_hand_figure() -> None:
    spec = kvplan.load_model("llama-3.1-8b")
    result = vllm.profile(spec, "h100", vllm.config(8192, version="0.19"))
    assert result.stages[-1].overhead.activation_bytes == ACTIVATION == 2_045_771_776


def test_the_fit_is_each_terms_lower_median() -> None:
    fit = calibrate([(f"run{i}", _variant(*v)) for i, v in enumerate(VARIANTS)])
    c = fit.calibration
    assert (c.gpu, c.version_line, c.tensor_parallel_size, c.num_logs) == ("h100-sxm", "0.19", 1, 3)
    ratios = sorted(_gib(a) * PPM // ACTIVATION for a, _, _ in VARIANTS)
    assert ratios == [787_288, 991_983, 1_312_147]
    assert c.activation_ppm == 991_983
    assert c.non_torch_bytes == _gib("0.25") == 268_435_456
    # v0.19 prints its CUDA-graph pool but does not subtract it: nothing to scale
    assert c.cuda_graph_ppm == PPM
    # with the fit, kvplan's pool for this run is the median printed pool, to the byte
    spec = kvplan.load_model("llama-3.1-8b")
    cfg = vllm.config(8192, version="0.19", gpu_memory_utilization="0.95", calibration=c)
    assert vllm.profile(spec, "h100", cfg).available_bytes == _gib("58.11")
    middle = _gib("58.11")
    assert [r.after_bytes for r in fit.residuals] == [middle - _gib(p) for _, _, p in VARIANTS]
    assert [r.printed_bytes for r in fit.residuals] == [_gib(p) for _, _, p in VARIANTS]
    # before: one kvplan pool against three printed ones
    before = [r.before_bytes + r.printed_bytes for r in fit.residuals]
    assert len(set(before)) == 1


def test_each_log_held_out_is_fitted_on_the_other_two() -> None:
    """The runs are alike, so a pool fitted on two logs is the upper of their printed pools
    (other_bytes is the lower median of kvplan minus printed): run 0 held out is fitted to
    58.20 (+0.20 GiB), run 1 to 58.20 (+0.09), run 2 to 58.11 (-0.09)."""
    fit = calibrate([(f"run{i}", _variant(*v)) for i, v in enumerate(VARIANTS)])
    held = [r.held_out_bytes for r in fit.residuals]
    assert held == [
        _gib("58.20") - _gib("58.00"),
        _gib("58.20") - _gib("58.11"),
        _gib("58.11") - _gib("58.20"),
    ]


def test_the_command_prints_the_residuals_and_writes_the_file(tmp_path: Path) -> None:
    paths = [str(p) for p in _logs(tmp_path)]
    out = tmp_path / "site.yaml"
    result = runner.invoke(app, ["calibrate", *paths, "-o", str(out), "-f", "json"])
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["schema_version"] >= 1
    assert doc["calibration"]["activation_ppm"] == 991_983
    assert [row["log"] for row in doc["logs"]] == paths
    assert doc["logs"][0]["residual_after_bytes"] == _gib("58.11") - _gib("58.00")
    assert (
        load_calibration(str(out))
        == calibrate([(p, Path(p).read_text(encoding="utf-8")) for p in paths]).calibration
    )
    # the table names the site and each log
    table = runner.invoke(app, ["calibrate", *paths])
    assert table.exit_code == 0
    assert "calibration of h100-sxm, vLLM 0.19, TP 1 from 3 logs" in table.stdout
    assert "held out" in table.stdout


def test_the_file_is_not_overwritten_unless_it_is_ours_or_forced(tmp_path: Path) -> None:
    paths = [str(p) for p in _logs(tmp_path)]
    mine = tmp_path / "notes.yaml"
    mine.write_text("my notes\n", encoding="utf-8")
    refused = runner.invoke(app, ["calibrate", *paths, "-o", str(mine)])
    assert refused.exit_code == 2
    assert "pass --force" in refused.stderr
    assert mine.read_text(encoding="utf-8") == "my notes\n"
    assert runner.invoke(app, ["calibrate", *paths, "-o", str(mine), "--force"]).exit_code == 0
    # a file kvplan wrote is replaced by the next fit
    assert runner.invoke(app, ["calibrate", *paths, "-o", str(mine)]).exit_code == 0


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda t: re.sub(r"Available KV cache memory: [\d.]+ GiB", "", t), "prints no 'Available"),
        (
            lambda t: t.replace("Free memory on device (78.68/79.19 GiB)", ""),
            "prints no GPU memory",
        ),
        (lambda t: t.replace("pipeline_parallel_size=1", "pipeline_parallel_size=2"), "pipeline"),
        (lambda t: t.replace("v0.19.0", "v0.32.0"), "one site's GPU, vLLM line and TP size"),
    ],
    ids=["no pool", "no GPU memory", "pipeline parallel", "another line"],
)
def test_a_log_that_cannot_calibrate_is_refused_by_name(
    tmp_path: Path, edit: object, words: str
) -> None:
    paths = _logs(tmp_path)
    assert callable(edit)
    paths[2].write_text(edit(paths[2].read_text(encoding="utf-8")), encoding="utf-8")
    result = runner.invoke(app, ["calibrate", *map(str, paths)])
    assert result.exit_code == 2
    assert words in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr


def test_fewer_than_three_logs_are_refused(tmp_path: Path) -> None:
    paths = [str(p) for p in _logs(tmp_path)][: MIN_LOGS - 1]
    result = runner.invoke(app, ["calibrate", *paths])
    assert result.exit_code == 2
    assert "at least 3 start-up logs" in result.stderr
    with pytest.raises(UnitError, match="1 log given"):
        calibrate([("one", REAL)])


def test_plan_takes_the_calibration_on_its_site_only(tmp_path: Path) -> None:
    paths = [str(p) for p in _logs(tmp_path)]
    out = tmp_path / "site.yaml"
    assert runner.invoke(app, ["calibrate", *paths, "-o", str(out)]).exit_code == 0
    args = ["plan", "llama-3.1-8b", "--gpu", "h100", "-e", "vllm", "-c", "8K"]
    site = [*args, "--engine-version", "0.19", "--gpu-memory-utilization", "0.95"]
    result = runner.invoke(app, [*site, "--calibration", str(out), "-f", "json"])
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["kv_cache_memory_bytes"] == _gib("58.11")
    assert doc["vllm_settings"]["calibration"] == "h100-sxm, vLLM 0.19, TP 1"
    assert (
        doc["overhead"]["non_torch_bytes"] == 268_435_456 + load_calibration(str(out)).other_bytes
    )
    other = runner.invoke(app, [*args, "--calibration", str(out)])
    assert other.exit_code == 2
    assert "fitted on h100-sxm, vLLM 0.19, TP 1; this question asks h100-sxm, vLLM 0.32" in (
        other.stderr
    )
    ideal = runner.invoke(app, ["plan", "llama-3.1-8b", "--gpu", "h100", "--calibration", str(out)])
    assert ideal.exit_code == 2
    assert "--calibration: not read by --engine ideal" in ideal.stderr


def test_flags_and_check_take_it_as_plan_does(tmp_path: Path) -> None:
    site = DATA / "calibration-h100-sxm-0.32.yaml"
    c = load_calibration(str(site))
    spec = kvplan.load_model("llama-3.1-8b")
    cfg = vllm.config(8192, max_num_seqs=16, calibration=c)
    overhead = vllm.profile(spec, "h100", cfg).stages[-1].overhead
    plain = vllm.profile(spec, "h100", vllm.config(8192, max_num_seqs=16)).stages[-1].overhead
    assert overhead.activation_bytes == plain.activation_bytes * c.activation_ppm // PPM
    assert overhead.non_torch_bytes == (c.non_torch_bytes or 0) + c.other_bytes
    flags = runner.invoke(
        app,
        ["flags", "llama-3.1-8b", "--gpu", "h100", "--max-model-len", "8K", "-n", "16",
         "--calibration", str(site), "-f", "json"],
    )  # fmt: skip
    assert flags.exit_code == 0, flags.stderr
    row = next(r for r in json.loads(flags.stdout)["engines"] if r["engine"] == "vllm")
    assert row["required_bytes"] == overhead.total_bytes + (16 * 512 + 1) * 2 * 2**20
    budget = tmp_path / "budget.yaml"
    budget.write_text(
        "deployments:\n  - name: a\n    model: llama-3.1-8b\n    gpu: h100\n    engine: vllm\n"
        "    max_model_len: 8K\n    expect:\n      min_concurrency: 1\n",
        encoding="utf-8",
    )
    checked = runner.invoke(app, ["check", str(budget), "--calibration", str(site), "-f", "json"])
    assert checked.exit_code == 0, checked.stderr
    question = Question(engine="vllm", max_model_len=8192, calibration=c, device_fixed=True)
    asked = answer(spec, kvplan.find_gpu("h100"), question)
    result = json.loads(checked.stdout)["results"][0]
    assert result["actual"] == asked.verdict.max_concurrency
    unused = tmp_path / "other.yaml"
    unused.write_text(site.read_text(encoding="utf-8").replace("'0.32'", "'0.29'"), "utf-8")
    refused = runner.invoke(app, ["check", str(budget), "--calibration", str(unused)])
    assert refused.exit_code == 2
    assert "is the site of no vLLM deployment" in refused.stderr


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"kind": "budget"}, "kind: expected 'kvplan-vllm-calibration'"),
        ({"schema_version": 2}, "schema_version: expected 1"),
        ({"activation_ppm": "1e6"}, "activation_ppm: expected an integer from 0 to"),
        ({"other_bytes": 2**41}, "other_bytes: expected an integer from"),
        ({"gpu": ""}, "gpu: expected a name of at most 64 characters"),
        ({"path": "/etc/passwd"}, "unknown key"),
    ],
    ids=["kind", "schema", "ratio type", "out of range", "empty gpu", "unknown key"],
)
def test_a_bad_calibration_file_names_the_field(change: dict[str, object], words: str) -> None:
    doc = {**calibration_to_dict(Calibration("h100-sxm", "0.32")), **change}
    with pytest.raises(SpecError, match=words):
        calibration_from_dict(doc, "site.yaml")


def test_a_bad_calibration_file_on_the_command_line_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "site.yaml"
    bad.write_text("kind: kvplan-vllm-calibration\nschema_version: 1\nextra: [\n", "utf-8")
    result = runner.invoke(
        app, ["plan", "llama-3.1-8b", "--gpu", "h100", "-e", "vllm", "--calibration", str(bad)]
    )
    assert result.exit_code == 2
    assert result.stderr.startswith(f"kvplan: error: {bad}")
    assert len(result.stderr.strip().splitlines()) == 1


#: vLLM 0.31.0 on an A100 80GB with the defaults, its lines as public study notes quote them;
#: the engine line is cut to the settings it prints
V031 = """\
INFO [core.py:105] Initializing a V1 LLM engine (v0.31.0) with config:\
 model='meta-llama/Llama-3.1-8B-Instruct', speculative_config=None, dtype=torch.bfloat16,\
 max_seq_len=131072, tensor_parallel_size=1, pipeline_parallel_size=1, kv_cache_dtype=auto,\
 enable_prefix_caching=True
INFO [model_runner.py:407] Model loading took 15.0 GiB memory and 5.420225 seconds
DEBUG [gpu_worker.py:955] Free memory on device (78.84/79.25 GiB) on startup. Desired GPU\
 memory utilization is (0.92, 72.91 GiB). Actual usage is 15.26 GiB for consumed memory\
 (weights + non-torch), 1.44 GiB for peak activation, and 0.23 GiB for CUDAGraph memory.
INFO [gpu_worker.py:436] Available KV cache memory: 56.21 GiB
INFO [kv_cache_utils.py:1319] GPU KV cache size: 460,496 tokens, Maximum concurrency for\
 131,072 tokens per request: 3.51x
"""


def test_the_0_32_lines_memory_figures_are_read() -> None:
    """From the 0.32 line vLLM prints weights with non-torch memory, and the peak activation
    with the CUDA-graph estimate: reconcile sets kvplan's sums beside them, and calibrate
    takes non-torch memory as consumed less loaded (15.26 - 15.0 = 0.26 GiB) and the
    activation as the peak less the printed estimate (1.44 - 0.78 = 0.66 GiB)."""
    from kvplan.logs.reconcile import reconcile

    result = reconcile(V031, gpu="a100-80gb")
    rows = {row.component: row for row in result.rows}
    assert rows["weights + non-torch memory"].printed == "15.26 GiB"
    assert rows["peak activation + CUDA-graph estimate"].printed == "1.44 GiB"
    assert result.reproduced
    estimate = "INFO [gpu_model_runner.py:4000] Estimated CUDA graph memory: 0.78 GiB total\n"
    pools = ("56.10", "56.21", "56.30")
    logs = [(p, (V031 + estimate).replace("memory: 56.21", f"memory: {p}")) for p in pools]
    fit = calibrate(logs, gpu="a100-80gb")
    assert fit.calibration.non_torch_bytes == _gib("15.26") - _gib("15.0")
    # kvplan's V2 forward on the A100's 2,048 batched tokens: 2,048 x (3 x 14,336 + 3 x
    # 4,096) x 2 B; its estimate 86 graphs x 32 layers x 64 x 4,734 B
    forward = 2048 * (3 * 14336 + 3 * 4096) * 2
    graphs = 86 * 32 * 64 * 4_734
    assert fit.calibration.activation_ppm == (_gib("1.44") - _gib("0.78")) * PPM // forward
    assert fit.calibration.cuda_graph_ppm == _gib("0.78") * PPM // graphs
    assert [r.after_bytes for r in fit.residuals] == [_gib("56.21") - _gib(p) for p in pools]
