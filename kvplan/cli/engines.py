"""``kvplan reconcile``, ``kvplan calibrate`` and ``kvplan flags``: engines' own figures, one
site's corrections fitted from them, and the flags that hold a target on each engine."""

from typing import Annotated

import typer

from kvplan.cli.common import (
    calibration_option,
    check_failed_unless,
    command,
    dtype_option,
    emit,
    gpu_option,
    guard,
    option,
)
from kvplan.cli.lora_options import (
    EnableLoraOpt,
    FullyShardedLorasOpt,
    LoraTargetModulesOpt,
    MaxLoraRankOpt,
    MaxLorasOpt,
)
from kvplan.cli.options import (
    CalibrationOpt,
    EngineOpt,
    FormatOpt,
    GpuOpt,
    HfOverridesOpt,
    KvCacheDtypeOpt,
    MaxModelLenOpt,
    ModelArg,
    OutputFormat,
    QuantizationOpt,
    SpeculativeConfigOpt,
    TpOpt,
)

LogArg = Annotated[
    str,
    typer.Argument(
        help="A vLLM, SGLang or llama.cpp start-up log ('-' reads stdin).", show_default=False
    ),
]
LogModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model",
        "-m",
        help="The model, when the log does not name a bundled one.",
        show_default=False,
    ),
]
LogGpuOpt = Annotated[
    str | None,
    gpu_option(
        "The GPU, when the log's total memory is ambiguous or not printed (vLLM at INFO"
        " level: then only for the end-to-end estimate).",
        show_default=False,
    ),
]


@command("reconcile")
def reconcile(
    logfile: LogArg,
    model: LogModelOpt = None,
    gpu: LogGpuOpt = None,
    output: FormatOpt = OutputFormat.table,
) -> None:
    """Recompute an engine's printed KV-cache figures from its own log, component by component.

    Each printed figure kvplan recomputes (blocks, tokens, concurrency, cells, MiB lines) is
    reproduced, differs (by how much), or not read (with the reason). Exits 0 when every
    checked figure reproduces, 1 when one differs, 2 when nothing was checked ("checked
    nothing: ..." on stderr) or the log cannot be read.
    """
    from kvplan.cli.common import fail
    from kvplan.logs.reconcile import read_log
    from kvplan.logs.reconcile import reconcile as run_reconcile
    from kvplan.views import engines as views

    def run() -> None:
        result = run_reconcile(read_log(logfile), model=model, gpu=gpu, path=logfile)
        doc = views.reconciliation_to_dict(result)
        emit(output, lambda: doc, lambda: views.reconciliation_view(doc))
        if result.status == "checked nothing":
            fail(f"checked nothing: {result.checked_nothing}")  # exit 2: no proof either way
        check_failed_unless(result.reproduced)

    guard(run)


CalibrateLogsArg = Annotated[
    list[str],
    typer.Argument(
        help="vLLM start-up logs of one site: one GPU model, vLLM line and TP size (at least 3).",
        show_default=False,
    ),
]
CalibrationOutputOpt = Annotated[
    str | None,
    typer.Option(
        "--output",
        "-o",
        help="Write the calibration file here (plan, flags and check take it as --calibration).",
        show_default=False,
    ),
]
CalibrationForceOpt = Annotated[
    bool, typer.Option("--force", help="Overwrite --output even if kvplan did not write it.")
]
#: the most logs one calibration reads (each up to the log size kvplan reads)
MAX_CALIBRATION_LOGS = 200


@command("calibrate")
def calibrate(
    logfiles: CalibrateLogsArg,
    model: LogModelOpt = None,
    gpu: LogGpuOpt = None,
    output_file: CalibrationOutputOpt = None,
    force: CalibrationForceOpt = False,
    output: FormatOpt = OutputFormat.table,
) -> None:
    """Fit one site's vLLM budget terms (activation, CUDA graphs, non-torch memory, the rest)
    from its own start-up logs, and show each log's pool residual before, after and held out.

    Each log must print 'Available KV cache memory' and the GPU's memory (vLLM's DEBUG line
    'Free memory on device', or --gpu). Refuses fewer than three logs and logs of several sites.
    """
    from kvplan.cli.common import fail
    from kvplan.files import write_atomic
    from kvplan.logs.calibrate import calibrate as fit_logs
    from kvplan.logs.calibrate import calibration_yaml, is_calibration_file
    from kvplan.logs.reconcile import read_log
    from kvplan.views import calibration as views

    def run() -> None:
        if len(logfiles) > MAX_CALIBRATION_LOGS:
            fail(f"calibrate: {len(logfiles)} logs; at most {MAX_CALIBRATION_LOGS}")
        if logfiles.count("-") > 1:
            fail("calibrate: '-' (standard input) may be given once")
        fit = fit_logs([(name, read_log(name)) for name in logfiles], model=model, gpu=gpu)
        if output_file is not None:
            write_atomic(output_file, calibration_yaml(fit), force=force, ours=is_calibration_file)
        doc = views.calibration_fit_to_dict(fit)
        emit(output, lambda: doc, lambda: views.calibration_view(doc))

    guard(run)


FlagsConcurrencyOpt = Annotated[
    int, typer.Option("--concurrency", "-n", min=1, help="Concurrent requests to hold.")
]


def _engines(engine: str) -> tuple[str, ...] | None:
    """``--engine``: None for all, else the one engine, checked."""
    from kvplan.answers.flags import ENGINES
    from kvplan.errors import UnitError

    chosen = engine.strip().lower()
    if chosen != "all" and chosen not in ENGINES:
        raise UnitError(f"--engine: unknown engine {engine!r}; allowed: all, {', '.join(ENGINES)}")
    return None if chosen == "all" else (chosen,)


def _quantization(text: str | None) -> str | None:
    """``--quantization``, checked to name a weight format."""
    from kvplan.errors import UnitError
    from kvplan.model.weights import QUANTIZATIONS, quantization_names

    if text is not None and text.strip().lower() not in QUANTIZATIONS:
        raise UnitError(f"--quantization: unknown format {text!r}; allowed: {quantization_names()}")
    return text


@command("flags")
def flags(
    model: ModelArg,
    gpu: GpuOpt,
    max_model_len: MaxModelLenOpt,
    concurrency: FlagsConcurrencyOpt,
    tensor_parallel_size: TpOpt = 1,
    kv_cache_dtype: KvCacheDtypeOpt = "auto",
    quantization: QuantizationOpt = None,
    engine: EngineOpt = "all",
    hf_overrides: HfOverridesOpt = None,
    calibration: CalibrationOpt = None,
    speculative_config: SpeculativeConfigOpt = None,
    enable_lora: EnableLoraOpt = None,
    max_loras: MaxLorasOpt = None,
    max_lora_rank: MaxLoraRankOpt = None,
    lora_target_modules: LoraTargetModulesOpt = None,
    fully_sharded_loras: FullyShardedLorasOpt = None,
    output: FormatOpt = OutputFormat.table,
) -> None:
    """The flags that make vLLM, SGLang, llama.cpp and TGI hold a target, engine by engine.

    Each engine's verdict counts the weights on each GPU, the cache and the engine's
    overhead; an engine that does not fit gets the reason and no flags. vLLM and SGLang
    refuse a --max-model-len past the model's trained length unless --hf-overrides extends
    it, which their lines then carry. --speculative-config and the LoRA options are vLLM's
    (with --engine vllm), and so are its per-token-head cache dtypes.
    """
    from kvplan.answers.flags import recommend
    from kvplan.catalog.lookup import load_model
    from kvplan.errors import UnitError
    from kvplan.hardware.lookup import find_gpu
    from kvplan.units import parse_tokens
    from kvplan.views import engines as views

    def run() -> None:
        length = option("--max-model-len", parse_tokens, max_model_len)
        if length < 1:
            raise UnitError(f"--max-model-len: must be at least 1 token, got {max_model_len!r}")
        from kvplan.answers.lora import vllm_lora
        from kvplan.answers.question import Question
        from kvplan.model.dtypes import PER_TOKEN_HEAD

        given = kv_cache_dtype.strip().lower()
        kv = given if given in PER_TOKEN_HEAD else dtype_option("--kv-cache-dtype", kv_cache_dtype)
        lora = vllm_lora(
            Question(
                engine="vllm",
                enable_lora=enable_lora,
                max_loras=max_loras,
                max_lora_rank=max_lora_rank,
                lora_target_modules=lora_target_modules,
                fully_sharded_loras=fully_sharded_loras,
            )
        )
        quantized = _quantization(quantization)
        engines = _engines(engine)
        spec = load_model(model)
        results = recommend(
            spec,
            find_gpu(gpu),
            max_model_len=length,
            concurrency=concurrency,
            tensor_parallel_size=tensor_parallel_size,
            kv_cache_dtype=kv,
            quantization=quantized,
            engines=engines,
            hf_overrides=hf_overrides,
            model_as_typed=model,
            calibration=calibration_option(calibration),
            speculative_config=speculative_config,
            lora=lora,
        )
        doc = views.flags_to_dict(
            spec.name,
            gpu,
            length,
            concurrency,
            results,
            tensor_parallel_size=tensor_parallel_size,
            quantization=quantized,
        )
        emit(output, lambda: doc, lambda: views.flags_view(doc))
        check_failed_unless(any(r.fits for r in results))

    guard(run)
