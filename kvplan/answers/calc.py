"""``kvplan calc`` asked of one engine by name: the formula (``ideal``), or what llama.cpp,
ik_llama.cpp or transformers allocate.

``calculate(spec, engine, CalcRequest)``: ``ideal`` -> ``Calculation`` (the estimate and why
its cache dtype); ``llama.cpp``, ``ik_llama.cpp``, ``transformers`` -> their ``EngineResult``.
A new engine flag is one field of the request and one argument where the engine is called.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvplan.errors import UnitError, UnknownEngineError

if TYPE_CHECKING:
    from kvplan.engines.base import EngineResult
    from kvplan.model.estimator import Estimate
    from kvplan.model.spec import ModelSpec

#: the engines ``calculate`` models
CALC_ENGINES = ("ideal", "llama.cpp", "ik_llama.cpp", "transformers")

#: What each engine reads of ``kvplan calc``'s settings, by the flag that gives it; a setting
#: given to an engine that does not read it is refused (``refuse_unread``), never dropped.
_EVERY = ("-c", "-np", "--kv-cache-dtype")
_LLAMA = (*_EVERY, "-ctk", "-ctv", "--engine-version", "-ub", "-b", "--swa-full", "-fa")
CALC_READS: dict[str, frozenset[str]] = {
    "ideal": frozenset((*_EVERY, "-ctk", "-ctv", "--explain")),
    "llama.cpp": frozenset((*_LLAMA, "--kv-unified", "--mmap")),
    "ik_llama.cpp": frozenset(_LLAMA),
    "transformers": frozenset((*_EVERY, "--engine-version", "--cache-implementation")),
}


def refuse_unread(engine: str, given: tuple[str, ...]) -> None:
    """Raise UnitError naming the first flag of ``given`` that ``engine`` does not read, and
    the engines that do."""
    read = CALC_READS.get(engine)
    if read is None:
        return  # calculate names the modelled engines
    for flag in given:
        if flag not in read:
            readers = [e for e, flags in CALC_READS.items() if flag in flags]
            raise UnitError(
                f"{flag}: not read by calc --engine {engine}; it applies with --engine"
                f" {', '.join(readers)}"
            )


def llamacpp_n_ctx(request: CalcRequest) -> int:
    """llama.cpp's ``-c`` for ``request``: the cells of all its sequences. kvplan's ``-c`` is
    one sequence's tokens in every command, so 4 sequences of 32,768 are ``-c 131072 -np 4``
    (each stream gets ``n_ctx / n_seq_max`` cells, llama-context.cpp)."""
    return request.context_tokens * request.batch_size


def context_tokens(spec: ModelSpec, given: int | None) -> int:
    """``given``, or the model's ``max_position_embeddings`` (a UnitError when it has none)."""
    if given is not None:
        return given
    if spec.max_position_embeddings is None:
        raise UnitError(f"{spec.name}: no max_position_embeddings in the spec; pass --context")
    return spec.max_position_embeddings


@dataclass(frozen=True, slots=True)
class CalcRequest:
    """What ``kvplan calc`` asks: ``context_tokens`` for each of ``batch_size`` sequences
    (None dtypes: auto). The CLI refuses a setting the engine does not read
    (``CALC_READS``)."""

    context_tokens: int
    batch_size: int = 1
    kv_dtype: str | None = None
    k_dtype: str | None = None
    v_dtype: str | None = None
    ubatch_size: int = 512
    swa_full: bool = False
    flash_attn: bool = True
    kv_unified: bool = False
    cache_implementation: str = "dynamic"
    version: str | None = None
    gguf_path: str | None = None  # llama.cpp: list every buffer from this file's tensor table
    use_mmap: bool = True


@dataclass(frozen=True, slots=True)
class Calculation:
    """The formula's answer: the estimate, and why its cache has its dtype."""

    estimate: Estimate
    dtype_reason: str


def calculate(spec: ModelSpec, engine: str, request: CalcRequest) -> Calculation | EngineResult:
    """The KV cache of ``request`` under ``engine`` (see the module docstring)."""
    r = request
    if engine == "ideal":
        from kvplan.model.dtypes import cache_dtypes
        from kvplan.model.estimator import estimate

        dtypes = {"kv_dtype": r.kv_dtype, "k_dtype": r.k_dtype, "v_dtype": r.v_dtype}
        est = estimate(spec, r.context_tokens, batch_size=r.batch_size, **dtypes)
        reason = cache_dtypes(
            spec, kv_cache_dtype=r.kv_dtype, k_dtype=r.k_dtype, v_dtype=r.v_dtype
        ).reason
        return Calculation(est, reason)
    if engine == "transformers":
        from kvplan.engines import transformers

        return transformers.kv_cache(
            spec,
            context_tokens=r.context_tokens,
            batch_size=r.batch_size,
            cache="static" if r.cache_implementation == "static" else "dynamic",
            dtype=r.kv_dtype,
            version=r.version,
        )
    if engine not in ("llama.cpp", "ik_llama.cpp"):
        raise UnknownEngineError(
            f"--engine {engine}: calc models ideal, llama.cpp, ik_llama.cpp and transformers"
            " (use `kvplan plan --engine vllm` for vLLM)"
        )
    from kvplan.engines import llamacpp
    from kvplan.engines.llamacpp_budget import check_cache_types
    from kvplan.model.layers import MLALatent

    type_k = r.k_dtype or r.kv_dtype or "f16"
    type_v = r.v_dtype or r.kv_dtype or "f16"
    if engine == "llama.cpp":
        mla = any(isinstance(layer, MLALatent) for layer in spec.layers)
        check_cache_types(type_k, type_v, flash_attn=r.flash_attn, mla=mla)
    result = llamacpp.kv_cache(
        spec,
        n_ctx=llamacpp_n_ctx(r),
        n_seq_max=r.batch_size,
        n_ubatch=r.ubatch_size,
        cache_type_k=type_k,
        cache_type_v=type_v,
        swa_full=r.swa_full,
        flash_attn=r.flash_attn,
        kv_unified=r.kv_unified,
        build=llamacpp_build(r.version),
        fork=engine,
    )
    if r.gguf_path is None or engine != "llama.cpp":
        return result
    return _with_buffers(result, spec, r)


def _with_buffers(result: EngineResult, spec: ModelSpec, r: CalcRequest) -> EngineResult:
    """``result`` with every CPU buffer llama.cpp allocates for ``r.gguf_path``."""
    from kvplan.engines.llamacpp_budget import cpu_buffers
    from kvplan.importers.gguf import import_gguf

    assert r.gguf_path is not None
    weights = import_gguf(r.gguf_path).weights
    if spec.vocab_size is None:
        return result
    return cpu_buffers(
        result,
        weights.tensors,
        n_vocab=spec.vocab_size,
        n_seq_max=r.batch_size,
        use_mmap=r.use_mmap,
    )


def llamacpp_build(version: str | None) -> int | None:
    """A llama.cpp build number from ``b5781`` or ``5781``; None for the newest modelled."""
    if version is None:
        return None
    digits = version.strip().lower().removeprefix("b")
    if not (digits.isascii() and digits.isdigit()) or len(digits) > 7:
        raise UnitError(f"--engine-version: a llama.cpp build number (b5781), got {version!r}")
    return int(digits)
