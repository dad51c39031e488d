"""Budget files: deployments and the memory assertions each must hold, checked in CI.

A budget file is YAML validated like a spec (unknown keys refused, errors with file, line and
field). Each deployment names a model, a GPU, its parallelism, an engine and its flags, and an
``expect`` block of assertions; ``check_budget`` plans each deployment and returns one result
per assertion with the required and actual values, the margin, the verdict and the assertion's
line in the file (for CI annotations).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
)

from kvplan.answers.plans import answer
from kvplan.answers.question import Question
from kvplan.arguments import (
    MAX_PARALLEL,
    as_instance,
    as_path,
    as_sequence,
    as_str,
    wrong_type,
)
from kvplan.errors import KvplanError, SpecError, UnitError
from kvplan.gate.fields import ByteSize, TokenCount
from kvplan.gate.paths import budget_model
from kvplan.gate.traces import TraceSettings, trace_facts
from kvplan.model.estimator import bytes_per_token
from kvplan.units import (
    format_bytes,
    format_tokens,
    fraction_of,
)
from kvplan.validation import field_names, line_locator, read_yaml, validate

if TYPE_CHECKING:
    from kvplan.answers.plans import Answer
    from kvplan.engines.vllm_calibration import Calibration
    from kvplan.hardware.gpus import GPU
    from kvplan.model.spec import ModelSpec

#: Upper bound of counts in a budget file (requests, sequences, tokens per step, block size).
MAX_COUNT = 2**24
#: Deployments in one budget file: each is planned, a few hundred microseconds apiece, so a
#: file is checked in about a second; a larger fleet splits into several files.
MAX_DEPLOYMENTS = 4096
#: Upper bound of tensor and pipeline parallel sizes (GPUs in one model replica).

# Integers are integers: YAML's true is refused, never read as 1.
Count = Annotated[StrictInt, Field(gt=0, le=MAX_COUNT)]
Parallel = Annotated[StrictInt, Field(gt=0, le=MAX_PARALLEL)]
Text = Annotated[StrictStr, Field(max_length=4096)]


class ContextAtConcurrency(BaseModel):
    """``concurrency`` requests must each reach at least ``tokens`` tokens."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    concurrency: Count = Field(description="Concurrent requests.")
    tokens: TokenCount = Field(description="Tokens each must reach: 8192, 8k or 8K.")


class Expect(BaseModel):
    """The assertions a deployment must hold. Each is optional; give at least one."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    min_concurrency: Count | None = Field(
        None, description="Requests of max_model_len tokens that must fit at once."
    )
    min_context_at_concurrency: ContextAtConcurrency | None = Field(
        None, description="The context each of that many concurrent requests must reach."
    )
    max_kv_bytes_per_token: ByteSize | None = Field(
        None, description="Most KV bytes one token may take across the model (320KiB)."
    )
    min_free_memory: ByteSize | None = Field(
        None,
        description="Memory per GPU that must stay free for more work (2GiB): usable memory"
        " less weights, overhead and the KV cache the requests hold; never the headroom.",
    )
    min_kv_cache_tokens: TokenCount | None = Field(
        None, description="Token slots the KV pool must hold per GPU (a stage's)."
    )
    fits: StrictBool | None = Field(None, description="Whether the deployment must fit at all.")
    min_trace_hit_rate: float | None = Field(
        None, ge=0, le=1, strict=True, description="Share of the trace's input found cached."
    )
    max_trace_load_ms: Annotated[StrictInt, Field(ge=0)] | None = Field(
        None, description="Most ms one request of the trace may spend loading from tiers."
    )


class Deployment(BaseModel):
    """One deployment: the model, where and how it runs, and what it must hold."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: Text = Field(min_length=1, description="Shown in reports and CI test names.")
    model: Text = Field(
        min_length=1, description="Catalog name, HF id, or spec path (relative to this file)."
    )
    gpu: Text | None = Field(None, description="Catalog GPU (`kvplan gpus`).")
    gpu_memory: ByteSize | None = Field(
        None, description="Device memory (24GiB); with gpu, replaces its memory."
    )
    tensor_parallel_size: Parallel = Field(1, description="GPUs sharding each layer.")
    pipeline_parallel_size: Parallel = Field(1, description="Pipeline stages.")
    engine: Literal["ideal", "vllm", "sglang", "trtllm"] = Field(
        "ideal",
        description="ideal (kvplan's planner), vllm (vLLM V1's rules), sglang or trtllm (their"
        " token pools); a key the engine does not read is refused.",
    )
    engine_version: Text | None = Field(None, description="Engine version (vllm: 0.19, 0.8).")
    gpu_memory_utilization: float = Field(
        0.9, gt=0, le=1, strict=True, description="Share of total memory."
    )
    max_model_len: TokenCount | None = Field(
        None, description="Tokens per request (32K); default: the model's maximum."
    )
    kv_cache_dtype: Text | None = Field(None, description="Cache dtype (fp8, ...); default auto.")
    dtype: Text | None = Field(None, description="Model dtype in place of the spec's.")
    quantization: Text | None = Field(None, description="Weight format (fp8, awq, ...).")
    block_size: Count = Field(16, description="Tokens per KV page.")
    max_num_batched_tokens: Count = Field(
        8192,
        description="Tokens per step (vLLM, when absent: 8192 on a GPU of 70 GiB or more,"
        " 2048 on others and on A100s).",
    )
    max_num_seqs: Count = Field(
        1024,
        description="vLLM: sequences per step (when absent: 1024 on a GPU of 70 GiB or more,"
        " 256 on others and on A100s).",
    )
    kv_cache_memory: ByteSize | None = Field(
        None, description="KV pool per GPU, skipping the budget."
    )
    overhead: ByteSize | None = Field(
        None, description="Per-GPU overhead in place of the estimate."
    )
    shared_prefix: TokenCount = Field(
        0, description="Tokens of a shared prompt prefix (ideal engine)."
    )
    limit_mm_per_prompt: dict[str, Annotated[int, Field(ge=0, le=1 << 20, strict=True)]] | None = (
        Field(None, description="vLLM, multimodal models: items a prompt holds ({image: 0}).")
    )
    language_model_only: bool | None = Field(
        None, strict=True, description="vLLM, multimodal models: text only, no encoder weights."
    )
    speculative_config: dict[str, str | int | bool] | None = Field(
        None,
        description="vLLM: --speculative-config as vLLM takes it ({method: mtp,"
        " num_speculative_tokens: 3}); a drafter's model is a catalog name, never a path.",
    )
    enable_lora: bool | None = Field(
        None, strict=True, description="vLLM and SGLang: LoRA adapter slots (--enable-lora)."
    )
    max_loras: Annotated[int, Field(ge=1, le=1024, strict=True)] | None = Field(
        None, description="vLLM: adapters in one batch (--max-loras, default 1)."
    )
    max_loras_per_batch: Annotated[int, Field(ge=1, le=1024, strict=True)] | None = Field(
        None, description="SGLang: adapter slots (--max-loras-per-batch, default 8)."
    )
    max_lora_rank: Annotated[int, Field(ge=1, le=4096, strict=True)] | None = Field(
        None, description="vLLM and SGLang: the largest adapter rank (--max-lora-rank)."
    )
    lora_target_modules: list[Annotated[str, Field(max_length=40)]] | None = Field(
        None, max_length=32, description="The modules adapters target ([qkv_proj, o_proj])."
    )
    fully_sharded_loras: bool | None = Field(
        None, strict=True, description="vLLM: both adapter halves split over TP ranks."
    )
    trace: TraceSettings | None = Field(None, description="A trace to replay (kvplan simulate).")
    expect: Expect = Field(description="The assertions.")


class Budget(BaseModel):
    """A budget file: the deployments to check."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    deployments: list[Deployment] = Field(
        min_length=1, max_length=MAX_DEPLOYMENTS, description="The deployments."
    )


_KEYS = field_names(Budget)


def load_budget(path: str | Path) -> tuple[Budget, str]:
    """A validated budget file and its text. Raises SpecError with file, line and field,
    ArgumentTypeError (a TypeError) for a ``path`` that is not a str or Path."""
    path = as_path(path, "path")
    data, text = read_yaml(path)
    return budget_from_data(data, str(path), text), text


def budget_from_data(data: Any, shown: str, text: str | None) -> Budget:
    """The budget a parsed YAML document holds (``text`` its source, for lines), refused
    before validation when it is no mapping or holds more than MAX_DEPLOYMENTS."""
    if not isinstance(data, dict):
        raise SpecError(shown, ["a budget file is a mapping with a `deployments` list"])
    deployments = data.get("deployments")
    if isinstance(deployments, list) and len(deployments) > MAX_DEPLOYMENTS:
        raise SpecError(
            shown,
            [f"deployments: {len(deployments):,} of them; at most {MAX_DEPLOYMENTS:,} a file"],
        )
    return validate(Budget, data, shown, text, _KEYS, "docs/ci.md")


@dataclass(frozen=True, slots=True)
class AssertionResult:
    """One assertion of one deployment: what was required, what the plan gives."""

    deployment: str
    assertion: str
    required: int | bool
    actual: int | bool
    passed: bool
    line: int | None
    unit: str  # tokens | bytes | requests | ms | bool

    @property
    def margin(self) -> str:
        """Actual beyond required, signed so that negative means failing, with a percent."""
        if isinstance(self.required, bool) or isinstance(self.actual, bool):
            return ""
        sign = -1 if self.assertion.startswith("max_") else 1
        diff = sign * (self.actual - self.required)
        share = f" ({100 * diff / self.required:+.0f}%)" if self.required else ""
        return f"{self.show(diff, signed=True)}{share}"

    def show(self, value: int | bool, *, signed: bool = False) -> str:
        """``value`` in this assertion's unit, for people."""
        if isinstance(value, bool):
            return "yes" if value else "no"
        prefix = "+" if signed and value >= 0 else ""
        if self.unit == "bytes":
            return prefix + format_bytes(value)
        if self.unit == "tokens":
            return prefix + format_tokens(value) + " tokens"
        return f"{prefix}{value:,}" + (" ms" if self.unit == "ms" else "")

    def exact(self, value: int | bool, *, signed: bool = False) -> str:
        """``value`` once, with its unit, for a report read without the table's columns:
        ``6 requests``, ``20,480 tokens``, ``128.00 KiB (131,072 bytes)`` (``512 B`` below a
        KiB, where the two agree), ``yes``."""
        if isinstance(value, bool):
            return "yes" if value else "no"
        prefix = "+" if signed and value >= 0 else ""
        if self.unit == "bytes":
            shown = format_bytes(value)
            if abs(value) < 1024:
                return prefix + shown
            return f"{prefix}{shown} ({prefix}{value:,} bytes)"
        if self.unit == "requests":
            return f"{prefix}{value:,} request{'' if abs(value) == 1 else 's'}"
        return self.show(value, signed=signed)

    @property
    def described(self) -> str:
        """The requirement and the plan's value, each once with its unit: ``required >= 12
        requests, actual 6 requests`` (``<=`` for a ``max_*`` bound; ``fits``: ``required yes,
        actual no``)."""
        if isinstance(self.required, bool) or isinstance(self.actual, bool):
            return f"required {self.exact(self.required)}, actual {self.exact(self.actual)}"
        bound = "<=" if self.assertion.startswith("max_") else ">="
        return f"required {bound} {self.exact(self.required)}, actual {self.exact(self.actual)}"

    @property
    def exact_margin(self) -> str:
        """``margin`` with the unit and exact bytes of ``exact``: ``-6 requests (-50%)``;
        "" for a yes/no assertion."""
        if isinstance(self.required, bool) or isinstance(self.actual, bool):
            return ""
        sign = -1 if self.assertion.startswith("max_") else 1
        diff = sign * (self.actual - self.required)
        share = f" ({100 * diff / self.required:+.0f}%)" if self.required else ""
        return f"{self.exact(diff, signed=True)}{share}"


@dataclass(frozen=True, slots=True)
class DeploymentFacts:
    """What a deployment's plan gives, for its assertions and for ``kvplan diff``."""

    fits: bool
    max_model_len: int
    max_concurrency: int
    kv_cache_tokens: int
    free_memory_bytes: int | None  # None: not modelled for the engine (SGLang, TensorRT-LLM)
    kv_bytes_per_token: int


def deployment_answer(
    d: Deployment, base: Path, calibrations: Sequence[Calibration] = ()
) -> tuple[ModelSpec, Question, Answer]:
    """Deployment ``d``'s model, its question as ``kvplan plan`` asks it (the most requests
    of its length) and the engine's answer (``kvplan.answers.plans.answer``)."""
    spec, device = budget_model(d.name, d.model, base), _device(d)
    length = d.max_model_len or spec.max_position_embeddings or 0
    q = _question(d, length, None, calibration_for(d, calibrations, device))
    return spec, q, answer(spec, device, q)


def deployment_facts(
    d: Deployment, base: Path, calibrations: Sequence[Calibration] = ()
) -> DeploymentFacts:
    """Plan deployment ``d`` (model paths relative to ``base``) with its engine, as ``kvplan
    plan`` asks it (``kvplan.answers.plans.answer``): the most requests of its length. A vLLM
    deployment on the site of one of ``calibrations`` takes its fitted budget terms."""
    spec, _, found = deployment_answer(d, base, calibrations)
    device = _device(d)
    length = d.max_model_len or spec.max_position_embeddings or 0
    per_token = bytes_per_token(spec, d.kv_cache_dtype)
    result, verdict = found.result, found.verdict
    if d.engine == "vllm":
        r = result.result
        stage = min(r.stages, key=lambda s: s.num_blocks)
        # free: what the deployment could still use (docs/plan.md): the pool's blocks the
        # max_concurrency requests do not hold, plus any remainder of the pool and, with
        # kv_cache_memory, usable memory it leaves; never the headroom above utilization
        held = verdict.max_concurrency * r.blocks_per_request * r.page_bytes * r.group_size
        engine_overhead = stage.overhead.total_bytes
        budget = (
            device.memory_bytes
            if d.kv_cache_memory is not None
            else fraction_of(device.memory_bytes, r.config.gpu_memory_utilization)
        )
        free, tokens = budget - engine_overhead - held, r.gpu_kv_cache_tokens
    elif d.engine == "ideal":
        free, tokens = result.free_memory_bytes, result.kv_cache_tokens
    else:
        free, tokens = None, result.kv_cache_tokens
    return DeploymentFacts(
        fits=verdict.fits,
        max_model_len=length,
        max_concurrency=verdict.max_concurrency,
        kv_cache_tokens=tokens,
        free_memory_bytes=free,
        kv_bytes_per_token=per_token,
    )


def context_at_concurrency(
    d: Deployment, base: Path, concurrency: int, calibrations: Sequence[Calibration] = ()
) -> int:
    """The longest context ``concurrency`` requests can each reach on deployment ``d``, at
    most its ``max_model_len`` (default: the model's trained length)."""
    spec, device = budget_model(d.name, d.model, base), _device(d)
    calibration = calibration_for(d, calibrations, device)
    found = answer(spec, device, _question(d, None, concurrency, calibration))
    longest = found.verdict.max_context_tokens or 0
    return min(longest, d.max_model_len) if d.max_model_len else longest


def calibration_for(
    d: Deployment, calibrations: Sequence[Calibration], device: GPU | None = None
) -> Calibration | None:
    """The calibration of ``calibrations`` fitted on deployment ``d``'s site (a vLLM
    deployment's GPU, release line and TP size; ``device``: its GPU, if found), or None."""
    if d.engine != "vllm" or d.kv_cache_memory is not None or not calibrations:
        return None
    device = device or _device(d)
    from kvplan.engines.vllm_versions import resolve_version

    line = resolve_version(d.engine_version).line
    site = f"{device.name}, vLLM {line}, TP {d.tensor_parallel_size or 1}"
    return next((c for c in calibrations if c.site == site), None)


def _question(
    d: Deployment,
    length: int | None,
    concurrency: int | None,
    calibration: Calibration | None = None,
) -> Question:
    """Deployment ``d``'s question: what its keys give (those left out are the engine's
    defaults), so an engine that does not read a key refuses it as ``kvplan plan`` does."""
    given = d.model_fields_set

    def optional(key: str) -> Any:
        return getattr(d, key) if key in given else None

    utilization = optional("gpu_memory_utilization")
    limits = d.limit_mm_per_prompt
    return Question(
        engine=d.engine,
        max_model_len=length,
        concurrency=concurrency,
        tensor_parallel_size=d.tensor_parallel_size,
        pipeline_parallel_size=optional("pipeline_parallel_size"),
        gpu_memory_utilization=None if utilization is None else Fraction(str(utilization)),
        kv_cache_dtype=d.kv_cache_dtype,
        dtype=d.dtype,
        quantization=d.quantization,
        overhead_bytes=d.overhead,
        kv_cache_memory_bytes=d.kv_cache_memory,
        block_size=optional("block_size"),
        shared_prefix_tokens=d.shared_prefix,
        max_num_batched_tokens=optional("max_num_batched_tokens"),
        max_num_seqs=optional("max_num_seqs"),
        version=d.engine_version,
        limit_mm_per_prompt=None if limits is None else json.dumps(limits),
        language_model_only=d.language_model_only,
        speculative_config=_speculative(d),
        calibration=calibration,
        enable_lora=d.enable_lora,
        max_loras=d.max_loras,
        max_loras_per_batch=d.max_loras_per_batch,
        max_lora_rank=d.max_lora_rank,
        lora_target_modules=(
            None if d.lora_target_modules is None else ",".join(d.lora_target_modules)
        ),
        fully_sharded_loras=d.fully_sharded_loras,
        device_fixed=True,
    )


def _speculative(d: Deployment) -> str | None:
    """The deployment's speculative config as the flag's JSON, its drafter read by name only
    (a budget file never makes kvplan open another file)."""
    if d.speculative_config is None:
        return None
    from kvplan.engines.vllm_speculative import parse_speculative_config

    text = json.dumps(d.speculative_config)
    try:
        parse_speculative_config(text, paths=False)
    except KvplanError as e:
        raise UnitError(f"deployment {d.name}: speculative_config: {e}") from None
    return text


def _device(d: Deployment) -> Any:
    from kvplan.hardware.gpus import custom_gpu
    from kvplan.hardware.lookup import find_gpu

    if d.gpu is None and d.gpu_memory is None:
        raise SpecError(d.name, ["gpu: give a catalog GPU or gpu_memory"])
    device = find_gpu(d.gpu) if d.gpu is not None else None
    return custom_gpu(d.gpu_memory, device) if d.gpu_memory is not None else device


def check_budget(
    budget: Budget, text: str, path: str | Path, calibrations: Sequence[Calibration] = ()
) -> list[AssertionResult]:
    """Every assertion of every deployment, in file order, with its line in ``text``; a vLLM
    deployment on the site of one of ``calibrations`` (kvplan calibrate) takes its terms.

    ``budget`` and ``text`` are what ``load_budget(path)`` returns; model paths in it are
    relative to ``path``'s folder. Raises ArgumentTypeError (a TypeError) for arguments of the
    wrong type, and the
    errors of loading a model or planning (SpecError, ModelNotFoundError, UnknownGPUError,
    UnitError) naming the deployment's setting."""
    if not isinstance(budget, Budget):
        raise wrong_type("budget", "a Budget (load_budget)", budget)
    text = as_str(text, "text", "the budget file's text (a str)")
    path = as_path(path, "path")
    from kvplan.engines.vllm_calibration import Calibration

    what = "a list of Calibration (kvplan calibrate)"
    calibrations = [
        as_instance(c, Calibration, "calibrations", what)
        for c in as_sequence(calibrations, "calibrations", what)
    ]
    base = Path(path).resolve().parent
    line_of = line_locator(text)  # the file composed once, whatever the number of assertions
    results: list[AssertionResult] = []
    for index, d in enumerate(budget.deployments):
        found = [
            AssertionResult(
                d.name,
                key,
                required,
                actual,
                ok,
                line_of(("deployments", index, "expect", key)),
                unit,
            )
            for key, required, actual, ok, unit in _checks(d, base, calibrations)
        ]
        results.extend(sorted(found, key=lambda r: r.line or 0))  # in the file's order
    return results


#: One checked assertion: its key, the required and actual values, the verdict, the unit.
_Check = tuple[str, int | bool, int | bool, bool, str]


def _checks(d: Deployment, base: Path, calibrations: Sequence[Calibration]) -> list[_Check]:
    """The assertions deployment ``d`` states, in the order of ``Expect``'s fields, each with
    the value its plan gives: ``fits`` must match, ``max_*`` bounds from above, the rest
    from below."""
    facts = deployment_facts(d, base, calibrations)
    expect = d.expect
    if expect.min_free_memory is not None and facts.free_memory_bytes is None:
        raise SpecError(
            d.name,
            [
                f"expect.min_free_memory: not modelled for engine {d.engine}; allowed with engine"
                " ideal or vllm"
            ],
        )
    want = expect.min_context_at_concurrency
    reached = 0 if want is None else context_at_concurrency(d, base, want.concurrency, calibrations)
    stated: list[tuple[str, int | bool | None, int | bool, str]] = [
        ("fits", expect.fits, facts.fits, "bool"),
        ("min_concurrency", expect.min_concurrency, facts.max_concurrency, "requests"),
        ("min_context_at_concurrency", None if want is None else want.tokens, reached, "tokens"),
        (
            "max_kv_bytes_per_token",
            expect.max_kv_bytes_per_token,
            facts.kv_bytes_per_token,
            "bytes",
        ),
        ("min_free_memory", expect.min_free_memory, facts.free_memory_bytes or 0, "bytes"),
        ("min_kv_cache_tokens", expect.min_kv_cache_tokens, facts.kv_cache_tokens, "tokens"),
    ]
    if expect.min_trace_hit_rate is not None or expect.max_trace_load_ms is not None:
        device = _device(d)
        if d.engine not in ("vllm", "sglang") or d.pipeline_parallel_size != 1 or not device:
            raise SpecError(
                d.name,
                ["trace: replayed with engine vllm or sglang on a gpu (pipeline size 1)"],
            )
        utilization = Fraction(str(d.gpu_memory_utilization))
        settings = (utilization, d.kv_cache_dtype, d.engine_version, d.tensor_parallel_size)
        t = trace_facts(d.name, d.trace, (d.model, base), device, (d.engine, settings))
        rate = expect.min_trace_hit_rate
        required = None if rate is None else t.required_tokens(rate)
        stated.append(("min_trace_hit_rate", required, t.reused_tokens, "tokens"))
        stated.append(("max_trace_load_ms", expect.max_trace_load_ms, t.max_load_ms, "ms"))
    return [
        (key, required, actual, _holds(key, required, actual), unit)
        for key, required, actual, unit in stated
        if required is not None
    ]


def _holds(key: str, required: int | bool, actual: int | bool) -> bool:
    if key == "fits":
        return actual == required
    if key.startswith("max_"):
        return actual <= required
    return actual >= required
