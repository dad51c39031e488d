"""The question, once: what a user asks of a deployment, whatever command or engine asks it.

``Question`` holds the workload (context, concurrency, length mix, shared prefix), the model's
dtypes and the engine's settings, each None where the user did not give it. It is built once
from any command's options (``kvplan.cli``) or from the library, and every engine profile
answers it (``kvplan.answers.plans.answer``) or refuses it.

What is asked follows from what is given (``Question.kind``):

- ``max_model_len`` alone: the most requests of that length (``max_concurrency``);
- ``concurrency`` alone: the longest context that many requests each reach (``max_context``);
- both, with ``-tp``/``-pp`` (or a pool or device fixed): whether they fit (``fits``);
- both, without a parallel size: the fewest GPUs that hold them (``fewest_gpus``);
- neither: the most requests of the model's trained length (``max_concurrency``).

An engine answers only from the settings it reads (``ENGINE_SETTINGS``): a setting given to an
engine that does not read it is refused by name (``refuse_unread``), never ignored.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Literal

from kvplan.errors import UnitError

if TYPE_CHECKING:
    from kvplan.engines.llamacpp_plan import LlamaCppAsk
    from kvplan.engines.vllm_calibration import Calibration
    from kvplan.model.spec import ModelSpec

Kind = Literal["max_concurrency", "max_context", "fits", "fewest_gpus"]

#: each setting as the command line spells it, for refusals
FLAG_NAMES: Mapping[str, str] = {
    "max_model_len": "--max-model-len",
    "concurrency": "--concurrency",
    "tensor_parallel_size": "-tp",
    "pipeline_parallel_size": "-pp",
    "gpu_memory_utilization": "--gpu-memory-utilization",
    "kv_cache_dtype": "--kv-cache-dtype",
    "dtype": "--dtype",
    "quantization": "--quantization",
    "overhead_bytes": "--overhead",
    "kv_cache_memory_bytes": "--kv-cache-memory",
    "block_size": "--block-size",
    "shared_prefix_tokens": "--shared-prefix",
    "lengths": "--lengths",
    "mean_length": "--mean-length",
    "p99_length": "--p99-length",
    "max_num_batched_tokens": "--max-num-batched-tokens",
    "max_num_seqs": "--max-num-seqs",
    "mamba_ssm_cache_dtype": "--mamba-ssm-cache-dtype",
    "enable_prefix_caching": "--enable-prefix-caching",
    "async_scheduling": "--async-scheduling",
    "mamba_cache_mode": "--mamba-cache-mode",
    "num_gpu_blocks_override": "--num-gpu-blocks-override",
    "enforce_eager": "--enforce-eager",
    "limit_mm_per_prompt": "--limit-mm-per-prompt",
    "language_model_only": "--language-model-only",
    "speculative_config": "--speculative-config",
    "calibration": "--calibration",
    "speculative_algorithm": "--speculative-algorithm",
    "speculative_num_draft_tokens": "--speculative-num-draft-tokens",
    "speculative_draft_model": "--speculative-draft-model-path",
    "enable_lora": "--enable-lora",
    "max_loras": "--max-loras",
    "max_loras_per_batch": "--max-loras-per-batch",
    "max_lora_rank": "--max-lora-rank",
    "lora_target_modules": "--lora-target-modules",
    "fully_sharded_loras": "--fully-sharded-loras",
    "mem_fraction_static": "--mem-fraction-static",
    "max_total_tokens": "--max-total-tokens",
    "page_size": "--page-size",
    "version": "--engine-version",
    "llamacpp": "a llama.cpp option (-ngl, -ts, -np, -ctk, ...)",
    "max_position_embeddings": "--hf-overrides",
}

_WORKLOAD = frozenset({"max_model_len", "concurrency", "tensor_parallel_size"})
_VLLM_ONLY = frozenset(
    {
        "max_num_seqs",
        "mamba_ssm_cache_dtype",
        "enable_prefix_caching",
        "async_scheduling",
        "mamba_cache_mode",
        "num_gpu_blocks_override",
        "enforce_eager",
        "limit_mm_per_prompt",
        "language_model_only",
        "speculative_config",
        "calibration",
        "enable_lora",
        "max_loras",
        "max_lora_rank",
        "lora_target_modules",
        "fully_sharded_loras",
    }
)

#: What kvplan's planner and vLLM both read: the pool's budget and the model's dtypes.
_BUDGET = frozenset(
    {
        "pipeline_parallel_size",
        "gpu_memory_utilization",
        "kv_cache_dtype",
        "dtype",
        "quantization",
        "kv_cache_memory_bytes",
        "block_size",
        "max_num_batched_tokens",
        "max_position_embeddings",
    }
)

#: The settings each engine's rules read; anything else given is refused (``refuse_unread``).
ENGINE_SETTINGS: Mapping[str, frozenset[str]] = {
    "ideal": _WORKLOAD
    | _BUDGET
    | {"overhead_bytes", "shared_prefix_tokens", "lengths", "mean_length", "p99_length"},
    "vllm": _WORKLOAD | _BUDGET | _VLLM_ONLY | {"version"},
    "sglang": _WORKLOAD
    | {
        "pipeline_parallel_size",
        "kv_cache_dtype",
        "mem_fraction_static",
        "max_total_tokens",
        "page_size",
        "max_position_embeddings",
        "version",
        "speculative_algorithm",
        "speculative_num_draft_tokens",
        "speculative_draft_model",
        "enable_lora",
        "max_loras_per_batch",
        "max_lora_rank",
        "lora_target_modules",
    },
    "trtllm": _WORKLOAD
    | {
        "pipeline_parallel_size",
        "gpu_memory_utilization",
        "kv_cache_dtype",
        "max_position_embeddings",
    },
    "llama.cpp": _WORKLOAD
    | {"kv_cache_dtype", "overhead_bytes", "llamacpp", "max_position_embeddings"},
}

#: Why an engine does not read a setting, where the reason is more than "not modelled".
_WHY_UNREAD: Mapping[tuple[str, str], str] = {
    ("sglang", "gpu_memory_utilization"): "SGLang's share is --mem-fraction-static",
    ("vllm", "overhead_bytes"): "vLLM profiles its own overhead (give --kv-cache-memory)",
    ("vllm", "shared_prefix_tokens"): "vLLM's printed pool and concurrency count no sharing",
    ("llama.cpp", "pipeline_parallel_size"): "llama.cpp splits layers with -ts/--split-mode",
    ("llama.cpp", "gpu_memory_utilization"): "llama.cpp leaves --fit-target free instead",
    ("llama.cpp", "block_size"): "llama.cpp stores cells of one token",
}

#: Engines that refuse a --max-model-len past the model's trained length, and the flag each
#: takes to extend it: vLLM's ``_get_and_verify_max_len`` (vllm/config/model.py) and SGLang's
#: ``ModelConfig`` (sglang/srt/configs/model_config.py) raise; llama.cpp and TensorRT-LLM warn.
OVERRIDE_FLAGS: Mapping[str, str] = {
    "vllm": "--hf-overrides",
    "sglang": "--json-model-override-args",
}

_OVERRIDE_KEYS = ("max_position_embeddings", "rope_scaling")


@dataclass(frozen=True, slots=True)
class Question:
    """One capacity question: the workload, the dtypes and the engine's settings.

    Every field is None (``shared_prefix_tokens`` 0) where the user did not give it, so an
    engine knows what was asked. Token counts are ``*_tokens``/lengths in tokens, memory in
    bytes, fractions exact. ``max_position_embeddings``: the model's trained length as the
    user extended it (``--hf-overrides``), None for the spec's own.
    """

    engine: str = "ideal"
    max_model_len: int | None = None
    concurrency: int | None = None
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    gpu_memory_utilization: Fraction | None = None
    kv_cache_dtype: str | None = None
    dtype: str | None = None
    quantization: str | None = None
    overhead_bytes: int | None = None
    kv_cache_memory_bytes: int | None = None
    block_size: int | None = None
    shared_prefix_tokens: int = 0
    lengths: Sequence[int] | Mapping[int, int] | None = None
    mean_length: int | None = None
    p99_length: int | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    mamba_ssm_cache_dtype: str | None = None
    enable_prefix_caching: bool | None = None
    async_scheduling: bool | None = None
    mamba_cache_mode: str | None = None
    num_gpu_blocks_override: int | None = None
    enforce_eager: bool | None = None
    #: a multimodal model's items per prompt, JSON as vLLM takes it; and its text-only mode
    limit_mm_per_prompt: str | None = None
    language_model_only: bool | None = None
    #: vLLM's --speculative-config, JSON as vLLM takes it (kvplan.engines.vllm_speculative)
    speculative_config: str | None = None
    #: a site's fitted budget terms (kvplan calibrate; vLLM only)
    calibration: Calibration | None = None
    #: SGLang's speculative decoding: the algorithm, draft tokens, and the drafter's name
    speculative_algorithm: str | None = None
    speculative_num_draft_tokens: int | None = None
    speculative_draft_model: str | None = None
    #: LoRA slots: vLLM's --max-loras and --fully-sharded-loras, SGLang's
    #: --max-loras-per-batch, both engines' rank and comma-separated target modules
    enable_lora: bool | None = None
    max_loras: int | None = None
    max_loras_per_batch: int | None = None
    max_lora_rank: int | None = None
    lora_target_modules: str | None = None
    fully_sharded_loras: bool | None = None
    mem_fraction_static: Fraction | None = None
    max_total_tokens: int | None = None
    page_size: int | None = None
    version: str | None = None
    llamacpp: LlamaCppAsk | None = field(default=None, compare=False)
    max_position_embeddings: int | None = None
    #: the pool or the device was fixed by the user (a fewest-GPU search cannot change it)
    device_fixed: bool = False

    def given(self) -> tuple[str, ...]:
        """The settings the user gave, in field order."""
        skip = {"engine", "device_fixed"}
        return tuple(
            f.name
            for f in fields(self)
            if f.name not in skip
            and getattr(self, f.name) is not None
            and not (f.name == "shared_prefix_tokens" and self.shared_prefix_tokens == 0)
        )

    @property
    def kind(self) -> Kind:
        """What is asked (the module docstring)."""
        if self.concurrency is None:
            return "max_concurrency"
        if self.max_model_len is None:
            return "max_context"
        fixed = (
            self.tensor_parallel_size is not None
            or self.pipeline_parallel_size is not None
            or self.kv_cache_memory_bytes is not None
            or self.device_fixed
        )
        return "fits" if fixed else "fewest_gpus"


def refuse_unread(q: Question) -> None:
    """Raise UnitError naming the first setting ``q`` gives that its engine does not read."""
    read = ENGINE_SETTINGS.get(q.engine)
    if read is None:
        return  # an unknown engine is the planner's error to give, with the modelled list
    for name in q.given():
        if name not in read:
            why = _WHY_UNREAD.get(
                (q.engine, name), f"{_ENGINE_LABELS.get(q.engine, q.engine)} does not use it"
            )
            readers = [e for e, names in ENGINE_SETTINGS.items() if name in names]
            also = ""
            if len(readers) == 1:
                also = f"; it applies with --engine {readers[0]} only"
            elif readers:
                also = f"; it applies with --engine {', '.join(readers)}"
            raise UnitError(
                f"{FLAG_NAMES.get(name, name)}: not read by --engine {q.engine} ({why}){also}"
            )


_ENGINE_LABELS = {
    "ideal": "kvplan's own planner",
    "vllm": "vLLM",
    "sglang": "SGLang",
    "trtllm": "TensorRT-LLM",
    "llama.cpp": "llama.cpp",
}


def trained_length(spec: ModelSpec, q: Question) -> int | None:
    """The model's trained length in tokens as ``q`` sees it (``--hf-overrides`` applied)."""
    return q.max_position_embeddings or spec.max_position_embeddings


def length_problem(spec: ModelSpec, q: Question, length: int | None) -> str:
    """A sentence when ``length`` is past the model's trained length; empty otherwise."""
    trained = trained_length(spec, q)
    if length is None or trained is None or length <= trained:
        return ""
    return (
        f"{length:,} tokens is past {spec.name}'s trained length (max_position_embeddings"
        f" {trained:,})"
    )


def engine_refuses_length(engine: str, name: str, length: int, trained: int | None) -> str:
    """Why ``engine`` refuses ``length`` tokens of model ``name`` trained for ``trained``
    ("" when it takes them): the sentence ``plan`` raises and ``flags`` gives as the reason."""
    flag = OVERRIDE_FLAGS.get(engine)
    if flag is None or trained is None or length <= trained:
        return ""
    return (
        f"{_ENGINE_LABELS[engine]} refuses --max-model-len {length:,}: past {name}'s trained"
        f" length (max_position_embeddings {trained:,}); {flag} (rope_scaling) extends it, as"
        " kvplan's --hf-overrides does"
    )


def refuse_past_trained_length(spec: ModelSpec, q: Question) -> None:
    """Raise UnitError when ``q``'s engine refuses its ``--max-model-len`` as too long."""
    if q.max_model_len is None:
        return
    why = engine_refuses_length(q.engine, spec.name, q.max_model_len, trained_length(spec, q))
    if why:
        raise UnitError(f"--max-model-len: {why}")


def parse_hf_overrides(text: str) -> int:
    """The trained length that ``--hf-overrides JSON`` gives, as vLLM derives it.

    Accepts ``{"max_position_embeddings": N}`` and ``{"rope_scaling": {"rope_type": "yarn",
    "factor": F, "original_max_position_embeddings": N}}`` (vLLM's ``_get_and_verify_max_len``:
    a scaled length is ``original x factor`` for YaRN, ``max_position_embeddings x factor`` for
    the other types but ``llama3``, ``longrope`` and ``su``, which keep it). Raises UnitError.
    """
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        raise UnitError("--hf-overrides: not a JSON object") from None
    if not isinstance(doc, dict) or not doc:
        raise UnitError("--hf-overrides: expected a JSON object")
    unknown = sorted(set(doc) - set(_OVERRIDE_KEYS))
    if unknown:
        raise UnitError(
            f"--hf-overrides: {unknown[0][:40]!r}: not a length setting; allowed:"
            f" {', '.join(_OVERRIDE_KEYS)}"
        )
    base = doc.get("max_position_embeddings")
    scaling = doc.get("rope_scaling")
    if scaling is None:
        return _positive(base, "max_position_embeddings")
    if not isinstance(scaling, dict):
        raise UnitError("--hf-overrides: rope_scaling: expected an object")
    kind = scaling.get("rope_type", scaling.get("type"))
    factor = _factor(scaling.get("factor"))
    if kind == "yarn":
        original = _positive(
            scaling.get("original_max_position_embeddings", base),
            "rope_scaling.original_max_position_embeddings",
        )
        return int(original * factor)
    if kind in ("llama3", "longrope", "su"):
        return _positive(base, "max_position_embeddings")
    return int(_positive(base, "max_position_embeddings") * factor)


def _positive(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value < 1 << 40:
        raise UnitError(f"--hf-overrides: {name}: expected a whole number of tokens > 0")
    return value


def _factor(value: object) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1024:
        raise UnitError("--hf-overrides: rope_scaling.factor: expected a number in (0, 1024]")
    return Fraction(str(value))


def with_trained_length(spec: ModelSpec, q: Question) -> ModelSpec:
    """``spec`` with its trained length extended as ``q`` asks (the spec itself when not)."""
    if q.max_position_embeddings is None:
        return spec
    return replace(spec, max_position_embeddings=q.max_position_embeddings)


def question_to_dict(q: Question) -> dict[str, Any]:
    """The question as given, for JSON: the settings the user set, with the kind asked."""
    doc: dict[str, Any] = {"engine": q.engine, "kind": q.kind}
    for name in q.given():
        if name == "llamacpp":
            continue
        value = getattr(q, name)
        if isinstance(value, Fraction):
            value = str(float(value))
        elif name == "lengths":
            value = sum(value.values()) if isinstance(value, Mapping) else len(value)
            name = "num_lengths"
        elif name == "calibration":
            value = value.site
        doc[name] = value
    return doc
