"""kvplan: exact KV-cache memory for LLM serving, from model specs.

>>> import kvplan
>>> spec = kvplan.load_model("qwen3-8b")
>>> kvplan.estimate(spec, context_tokens=32768).kv_cache_bytes
4831838208
>>> kvplan.plan(spec, kvplan.find_gpu("h100"), max_model_len=32768).max_concurrency
11
"""

# Every name loads on first use (PEP 562): `import kvplan` costs nothing, `kvplan --help`
# never imports pydantic, and a `kvplan calc` never imports the planner. (Module and function
# names differ -- estimator.estimate, planner.plan -- so that a submodule import can never
# shadow a function of the same name on the package.)
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_LAZY: dict[str, str] = {
    "list_models": "kvplan.catalog",
    "load_model": "kvplan.catalog",
    "KvplanError": "kvplan.errors",
    "ModelNotFoundError": "kvplan.errors",
    "SpecError": "kvplan.errors",
    "UnitError": "kvplan.errors",
    "CacheDTypes": "kvplan.dtypes",
    "cache_dtypes": "kvplan.dtypes",
    "Estimate": "kvplan.estimator",
    "LayerBreakdown": "kvplan.estimator",
    "bytes_per_token": "kvplan.estimator",
    "estimate": "kvplan.estimator",
    "explain": "kvplan.estimator",
    "GPU": "kvplan.hardware",
    "import_config": "kvplan.hfconfig",
    "UnknownGPUError": "kvplan.hardware",
    "custom_gpu": "kvplan.hardware",
    "find_gpu": "kvplan.hardware",
    "list_gpus": "kvplan.hardware",
    "ChunkedLocalAttention": "kvplan.layers",
    "FullAttention": "kvplan.layers",
    "LayerCache": "kvplan.layers",
    "MLALatent": "kvplan.layers",
    "NoCache": "kvplan.layers",
    "RecurrentState": "kvplan.layers",
    "SlidingWindowAttention": "kvplan.layers",
    "LengthMix": "kvplan.planner",
    "Overhead": "kvplan.planner",
    "Plan": "kvplan.planner",
    "StagePlan": "kvplan.planner",
    "estimate_overhead": "kvplan.planner",
    "plan": "kvplan.planner",
    "ModelSpec": "kvplan.spec",
    "load_spec": "kvplan.spec",
    "parse_spec": "kvplan.spec",
    "DType": "kvplan.units",
    "format_bytes": "kvplan.units",
    "parse_bytes": "kvplan.units",
    "parse_tokens": "kvplan.units",
    "resolve_dtype": "kvplan.units",
    "Weights": "kvplan.weights",
    "model_weights": "kvplan.weights",
    "pipeline_partition": "kvplan.weights",
    "load_lengths": "kvplan.workload",
}

if TYPE_CHECKING:
    from kvplan.catalog import list_models, load_model
    from kvplan.dtypes import CacheDTypes, cache_dtypes
    from kvplan.errors import KvplanError, ModelNotFoundError, SpecError, UnitError
    from kvplan.estimator import Estimate, LayerBreakdown, bytes_per_token, estimate, explain
    from kvplan.hardware import GPU, UnknownGPUError, custom_gpu, find_gpu, list_gpus
    from kvplan.hfconfig import import_config
    from kvplan.layers import (
        ChunkedLocalAttention,
        FullAttention,
        LayerCache,
        MLALatent,
        NoCache,
        RecurrentState,
        SlidingWindowAttention,
    )
    from kvplan.planner import LengthMix, Overhead, Plan, StagePlan, estimate_overhead, plan
    from kvplan.spec import ModelSpec, load_spec, parse_spec
    from kvplan.units import DType, format_bytes, parse_bytes, parse_tokens, resolve_dtype
    from kvplan.weights import Weights, model_weights, pipeline_partition
    from kvplan.workload import load_lengths


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kvplan' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "GPU",
    "CacheDTypes",
    "ChunkedLocalAttention",
    "DType",
    "Estimate",
    "FullAttention",
    "KvplanError",
    "LayerBreakdown",
    "LayerCache",
    "LengthMix",
    "MLALatent",
    "ModelNotFoundError",
    "ModelSpec",
    "NoCache",
    "Overhead",
    "Plan",
    "RecurrentState",
    "SlidingWindowAttention",
    "SpecError",
    "StagePlan",
    "UnitError",
    "UnknownGPUError",
    "Weights",
    "__version__",
    "bytes_per_token",
    "cache_dtypes",
    "custom_gpu",
    "estimate",
    "estimate_overhead",
    "explain",
    "find_gpu",
    "format_bytes",
    "import_config",
    "list_gpus",
    "list_models",
    "load_lengths",
    "load_model",
    "load_spec",
    "model_weights",
    "parse_bytes",
    "parse_spec",
    "parse_tokens",
    "pipeline_partition",
    "plan",
    "resolve_dtype",
]
