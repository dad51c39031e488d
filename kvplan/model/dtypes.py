"""The one rule for the dtype a model runs in and the dtype its cache is stored in.

Every command and engine profile asks :func:`cache_dtypes`; nothing else reads
``spec.torch_dtype`` to decide a cache dtype. The answer carries its reason, so every output
can say why it sized the cache the way it did.

The rules, by engine (``--dtype auto`` and ``--kv-cache-dtype auto`` unless flags say
otherwise):

- Serving engines (``ideal``, ``vllm``, ``sglang``, ``trtllm``, ``tgi``): a float32 checkpoint
  is served in 16 bits (vLLM ``_resolve_auto_dtype`` takes the platform's first supported
  dtype, bfloat16 on current GPUs; SGLang's ``_get_and_verify_dtype`` takes bfloat16 for Gemma
  and float16 for the rest, two bytes either way); any other checkpoint runs in its own dtype.
  The cache follows the served dtype. ``ideal`` follows the same serving convention, so
  ``calc``, ``models``, ``compare`` and ``plan`` give one figure for one question.
  Worked example: OLMo 2 7B (float32 checkpoint, 32 layers x 32 KV heads x 128 dims) caches
  2 x 32 x 32 x 128 x 2 B = 524,288 B a token, not the 1,048,576 B of float32.
- ``transformers``: the cache holds what the model computes, in the dtype ``from_pretrained``
  loads: up to 4.x torch's default float32 unless ``torch_dtype`` is passed; from v5 the
  default ``dtype="auto"`` loads the checkpoint's ``torch_dtype`` (float32 stays float32).
- ``llama.cpp`` and ``ik_llama.cpp`` size their cache with ``-ctk``/``-ctv`` (f16 unless given);
  their profile decides that, this module only gives the model dtype.
"""

from __future__ import annotations

from typing import NamedTuple

from kvplan.arguments import as_instance, as_optional_str, as_str
from kvplan.errors import UnitError
from kvplan.model.spec import ModelSpec
from kvplan.units import FLOAT_DTYPES, DType, kv_dtype_name, resolve_dtype

__all__ = ["SERVING_ENGINES", "CacheDTypes", "cache_dtypes", "served_dtype"]

#: Engines that serve a float32 checkpoint in 16 bits by default.
SERVING_ENGINES = ("ideal", "vllm", "sglang", "trtllm", "tgi", "llama.cpp", "ik_llama.cpp")
_ENGINES = (*SERVING_ENGINES, "transformers")


#: vLLM's ``--kv-cache-dtype`` layouts of one-byte values with an fp32 scale per token and
#: head (``int8_per_token_head``, ``fp8_per_token_head``), by the element type they store.
PER_TOKEN_HEAD = {"int8_per_token_head": "int8", "fp8_per_token_head": "fp8_e4m3"}


class CacheDTypes(NamedTuple):
    """The model's run dtype and the K and V cache dtypes, with the reason in words."""

    model: DType
    k: DType
    v: DType
    reason: str

    @property
    def kv_dtype(self) -> str:
        """``bfloat16``, or ``k/v`` when K and V differ (``q8_0/q4_0``)."""
        return kv_dtype_name(self.k, self.v)


def _explicit(dtype: str | None, name: str) -> str | None:
    """The dtype named by the parameter ``name``; None for ``auto`` or not given."""
    if dtype is None:
        return None
    text = as_str(dtype, name, "a dtype's name such as 'bfloat16' or 'fp8', or None")
    return None if text.strip().lower() == "auto" else text


def _transformers_major(version: str | None) -> int:
    if version is None:
        return 5
    head = version.split(".", 1)[0]
    return int(head) if head.isdigit() else 5


def served_dtype(
    spec: ModelSpec,
    engine: str = "ideal",
    *,
    dtype: str | None = None,
    engine_version: str | None = None,
) -> tuple[DType, str]:
    """The dtype the model runs in under ``engine``, and why (one phrase)."""
    as_instance(spec, ModelSpec, "spec", "a ModelSpec")
    as_str(engine, "engine")
    as_optional_str(engine_version, "engine_version")
    given = _explicit(dtype, "dtype")
    if given is not None:
        found = resolve_dtype(given)
        if found.name not in FLOAT_DTYPES:
            raise UnitError(f"dtype {given!r}: a model runs in one of {', '.join(FLOAT_DTYPES)}")
        return found, f"--dtype {found.name}"
    checkpoint = spec.torch_dtype
    if engine == "transformers":
        if _transformers_major(engine_version) < 5:
            return resolve_dtype("float32"), (
                "transformers 4.x loads in torch's default float32 unless torch_dtype is given"
            )
        return resolve_dtype(checkpoint), ("transformers v5 loads the checkpoint's torch_dtype")
    if engine not in _ENGINES:
        raise UnitError(f"unknown engine {engine!r}; allowed: {', '.join(_ENGINES)}")
    if checkpoint == "float32":
        if engine == "sglang" and not (spec.model_type or "").startswith("gemma"):
            return resolve_dtype("float16"), (
                "float32 checkpoint served in float16, as SGLang's --dtype auto does"
            )
        return resolve_dtype("bfloat16"), (
            "float32 checkpoint served in bfloat16, as the engines' --dtype auto does"
        )
    return resolve_dtype(checkpoint), "the checkpoint's torch_dtype"


def cache_dtypes(
    spec: ModelSpec,
    engine: str = "ideal",
    *,
    kv_cache_dtype: str | None = None,
    dtype: str | None = None,
    k_dtype: str | None = None,
    v_dtype: str | None = None,
    engine_version: str | None = None,
) -> CacheDTypes:
    """The run dtype and the K and V cache dtypes of ``spec`` under ``engine`` and flags.

    ``kv_cache_dtype`` sets both K and V (``auto``/None: the run dtype); ``k_dtype`` and
    ``v_dtype`` override one side, as llama.cpp's ``-ctk``/``-ctv`` do; ``dtype`` is the
    engine's ``--dtype`` (the run dtype). Raises UnitError for an unknown name, ArgumentTypeError
    (a TypeError) for an argument of the wrong type.
    """
    model, why = served_dtype(spec, engine, dtype=dtype, engine_version=engine_version)
    both = _explicit(kv_cache_dtype, "kv_cache_dtype")
    k_name, v_name = _explicit(k_dtype, "k_dtype") or both, _explicit(v_dtype, "v_dtype") or both
    if k_name is None and v_name is None:
        return CacheDTypes(model, model, model, why)
    layout = both if both in PER_TOKEN_HEAD else None
    if layout is not None:
        if engine != "vllm":
            raise UnitError(
                f"--kv-cache-dtype {layout}: vLLM's per-token-head layout, read with --engine"
                f" vllm only; for {engine} give one of {', '.join(FLOAT_DTYPES)}, fp8, int8"
            )
        k_name = v_name = PER_TOKEN_HEAD[layout]
        why = f"as given: {k_name} values with an fp32 scale per token and head ({layout})"
    else:
        why = f"as given; the model runs in {model.name}"
    k = resolve_dtype(k_name) if k_name is not None else model
    v = resolve_dtype(v_name) if v_name is not None else model
    return CacheDTypes(model, k, v, why)
