"""Checks for the arguments of kvplan's public functions: one rule for every entry point.

The library takes what the command line takes: a model as a ``ModelSpec`` or a name (catalog
name, Hugging Face id, alias or path), a GPU as a ``GPU`` or a catalog name, token counts as
integers or strings (``32768``, ``32k``, ``32K``), sizes as integers of bytes or strings
(``80GiB``, ``80GB``). Integers are integers: ``True`` and ``32768.0`` are refused, so a slip
never turns into a silently different figure. Every refusal is a ``UnitError`` (or
``ModelNotFoundError`` / ``UnknownGPUError`` for names), all documented ``KvplanError``\\ s.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING

from kvplan.errors import UnitError
from kvplan.units import abbreviate, parse_bytes, parse_tokens

if TYPE_CHECKING:
    from kvplan.hardware.gpus import GPU
    from kvplan.model.spec import ModelSpec

#: Parallel sizes beyond this are refused outright (no deployment has more GPUs in one model
#: replica; it also bounds every per-rank loop).
MAX_PARALLEL = 4096


def _kind(value: object) -> str:
    return type(value).__name__


def as_spec(model: ModelSpec | str | Path) -> ModelSpec:
    """A ModelSpec as given, or the one a name or path resolves to."""
    from kvplan.model.spec import ModelSpec

    if isinstance(model, ModelSpec):
        return model
    if isinstance(model, (str, Path)):
        from kvplan.catalog.lookup import load_model

        return load_model(model)
    raise UnitError(f"model: expected a ModelSpec or a model name, got {_kind(model)}")


def as_gpu(gpu: GPU | str) -> GPU:
    """A GPU as given, or the catalog GPU a name resolves to."""
    from kvplan.hardware.gpus import GPU, find_gpu

    if isinstance(gpu, GPU):
        return gpu
    if isinstance(gpu, str):
        return find_gpu(gpu)
    raise UnitError(f"gpu: expected a GPU or a GPU name, got {_kind(gpu)}")


def as_int(value: object, name: str, *, minimum: int = 0, maximum: int | None = None) -> int:
    """An integer in ``[minimum, maximum]``; bool, float and every other type refused."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise UnitError(f"{name}: expected an integer, got {_kind(value)} {abbreviate(value)}")
    if value < minimum:
        raise UnitError(f"{name}: must be at least {minimum:,}, got {abbreviate(value)}")
    if maximum is not None and value > maximum:
        raise UnitError(f"{name}: must be at most {maximum:,}, got {abbreviate(value)}")
    return value


def _as_parsed(value: object, name: str, parse: Callable[[str], int], minimum: int) -> int:
    if isinstance(value, str):
        try:
            value = parse(value)
        except UnitError as e:
            raise UnitError(f"{name}: {e}") from None
    return as_int(value, name, minimum=minimum)


def as_tokens(value: object, name: str, *, minimum: int = 0) -> int:
    """A token count: an int, or a string such as ``32768``, ``32k`` (32,000), ``32K``."""
    return _as_parsed(value, name, parse_tokens, minimum)


def as_bytes(value: object, name: str, *, minimum: int = 0) -> int:
    """A size in bytes: an int, or a string such as ``80GiB`` or ``80GB``."""
    return _as_parsed(value, name, parse_bytes, minimum)


def as_parallel(value: object, name: str) -> int:
    """A tensor or pipeline parallel size: 1 to MAX_PARALLEL."""
    return as_int(value, name, minimum=1, maximum=MAX_PARALLEL)


_MAX_FRACTION_CHARS = 32


def as_fraction(
    value: object, name: str, *, low: Fraction = Fraction(0), high: Fraction = Fraction(1)
) -> Fraction:
    """A fraction in ``(low, high]`` from a Fraction, an int, a float as written (0.9 is 9/10,
    not the nearest double) or a decimal string. Exponents and long strings are refused
    before any conversion, so ``9e99999999`` costs nothing."""
    if isinstance(value, bool):
        raise UnitError(f"{name}: expected a number, got bool {value!r}")
    text: str
    if isinstance(value, Fraction):
        result = value
    elif isinstance(value, int):
        result = Fraction(value)
    elif isinstance(value, (float, str)):
        text = repr(value) if isinstance(value, float) else value.strip()
        if len(text) > _MAX_FRACTION_CHARS or not _is_plain_decimal(text):
            raise UnitError(
                f"{name}: expected a decimal number such as 0.9, got {str(value)[:40]!r}"
            )
        result = Fraction(text)
    else:
        raise UnitError(f"{name}: expected a number, got {_kind(value)}")
    if not low < result <= high:
        shown = str(result) if isinstance(value, Fraction) else abbreviate(value)
        raise UnitError(f"{name}: must be in ({low}, {high}], got {shown}")
    return result


def _is_plain_decimal(text: str) -> bool:
    """``0.9``, ``1``, ``.5``: digits with at most one point, no sign, exponent, nan or inf."""
    digits = text.replace(".", "", 1)
    return bool(digits) and digits.isascii() and digits.isdigit()


def tensor_parallel_valid(spec: ModelSpec, tp: int) -> bool:
    """Whether the engines can shard ``spec`` over ``tp`` GPUs: query heads divide evenly, KV
    heads divide evenly or are replicated (TP a multiple of them); MLA keeps one latent per
    rank, so only the query heads count (vLLM ``verify_with_parallel_config``)."""
    if spec.num_attention_heads % tp:
        return False
    kv = spec.kv_heads
    return spec.kv_lora_rank is not None or kv % tp == 0 or tp % kv == 0


def as_tensor_parallel_size(spec: ModelSpec, value: object) -> int:
    """``value`` if it is a tensor-parallel size ``spec`` shards over, else UnitError naming
    the valid sizes."""
    tp = as_parallel(value, "tensor_parallel_size")
    if not tensor_parallel_valid(spec, tp):
        heads = spec.num_attention_heads
        valid = ", ".join(str(t) for t in range(1, heads + 1) if tensor_parallel_valid(spec, t))
        raise UnitError(
            f"tensor_parallel_size {tp}: {spec.name} has {heads} attention heads and"
            f" {spec.kv_heads} KV heads, which do not shard over {tp} GPUs; valid sizes: {valid}"
        )
    return tp
