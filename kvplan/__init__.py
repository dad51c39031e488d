"""kvplan: exact KV-cache memory for LLM serving, from model specs.

>>> import kvplan
>>> spec = kvplan.load_model("qwen3-8b")
>>> kvplan.estimate(spec, context_tokens=32768).kv_cache_bytes
4831838208
>>> kvplan.plan(spec, kvplan.find_gpu("h100"), max_model_len=32768).max_concurrency
11
"""

# Every name loads on first use (PEP 562): `import kvplan` costs nothing, `kvplan --help`
# never imports pydantic, and a `kvplan calc` never imports the planner. Each engine
# profile's entry point is exported as `<engine>_<its name in its module>` (`vllm_profile`
# is kvplan.engines.vllm.profile): a "module:name" value below. No module is named like a
# function here (kvplan.performance.perf, kvplan.flags.recommend, kvplan.logs.reconcile), so
# importing a submodule never shadows a function on the package.
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_LAZY: dict[str, str] = {
    "AssertionResult": "kvplan.budget",
    "Budget": "kvplan.budget",
    "check_budget": "kvplan.budget",
    "load_budget": "kvplan.budget",
    "list_models": "kvplan.catalog",
    "load_model": "kvplan.catalog",
    "Diff": "kvplan.diffing",
    "diff_files": "kvplan.diffing",
    "CacheDTypes": "kvplan.dtypes",
    "cache_dtypes": "kvplan.dtypes",
    "EngineResult": "kvplan.engines.base",
    "llamacpp_kv_cache": "kvplan.engines.llamacpp:kv_cache",
    "sglang_kv_cache": "kvplan.engines.sglang:kv_cache",
    "tgi_kv_cache": "kvplan.engines.tgi:kv_cache",
    "transformers_kv_cache": "kvplan.engines.transformers:kv_cache",
    "trtllm_kv_cache": "kvplan.engines.trtllm:kv_cache",
    "VllmConfig": "kvplan.engines.vllm",
    "VllmResult": "kvplan.engines.vllm",
    "vllm_config": "kvplan.engines.vllm:config",
    "vllm_profile": "kvplan.engines.vllm:profile",
    "HubUnavailableError": "kvplan.errors",
    "KvplanError": "kvplan.errors",
    "ModelNotFoundError": "kvplan.errors",
    "ProbeUnavailableError": "kvplan.errors",
    "SpecError": "kvplan.errors",
    "UnavailableError": "kvplan.errors",
    "UnitError": "kvplan.errors",
    "UnknownEngineError": "kvplan.errors",
    "Estimate": "kvplan.estimator",
    "LayerBreakdown": "kvplan.estimator",
    "bytes_per_token": "kvplan.estimator",
    "estimate": "kvplan.estimator",
    "explain": "kvplan.estimator",
    "GPU": "kvplan.hardware",
    "UnknownGPUError": "kvplan.hardware",
    "custom_gpu": "kvplan.hardware",
    "find_gpu": "kvplan.hardware",
    "list_gpus": "kvplan.hardware",
    "Architecture": "kvplan.importers",
    "Imported": "kvplan.importers",
    "import_config": "kvplan.importers",
    "list_architectures": "kvplan.importers",
    "ChunkedLocalAttention": "kvplan.layers",
    "FullAttention": "kvplan.layers",
    "LayerCache": "kvplan.layers",
    "MLALatent": "kvplan.layers",
    "NoCache": "kvplan.layers",
    "RecurrentState": "kvplan.layers",
    "SlidingWindowAttention": "kvplan.layers",
    "Alternative": "kvplan.performance",
    "Comparison": "kvplan.performance",
    "DecodeStep": "kvplan.performance",
    "Perf": "kvplan.performance",
    "Prefill": "kvplan.performance",
    "alternatives": "kvplan.performance",
    "compare": "kvplan.performance",
    "memory_curve": "kvplan.performance",
    "perf": "kvplan.performance",
    "LengthMix": "kvplan.planner",
    "Overhead": "kvplan.planner",
    "Plan": "kvplan.planner",
    "StagePlan": "kvplan.planner",
    "estimate_overhead": "kvplan.planner",
    "plan": "kvplan.planner",
    "Candidate": "kvplan.planner.cluster",
    "ClusterPlan": "kvplan.planner.cluster",
    "plan_cluster": "kvplan.planner.api",
    "is_cluster_question": "kvplan.planner.cluster_route",
    "plan_deployment": "kvplan.planner.cluster_route",
    "System": "kvplan.systems",
    "UnknownSystemError": "kvplan.systems",
    "find_system": "kvplan.systems",
    "list_systems": "kvplan.systems",
    "Price": "kvplan.costs",
    "list_prices": "kvplan.costs",
    "ProbeResult": "kvplan.probe",
    "run_probe": "kvplan.probe",
    "EngineFlags": "kvplan.flags",
    "recommend": "kvplan.flags",
    "Reconciliation": "kvplan.logs",
    "read_log": "kvplan.logs",
    "reconcile": "kvplan.logs",
    "json_schema": "kvplan.schemas",
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
    from kvplan.budget import AssertionResult, Budget, check_budget, load_budget
    from kvplan.catalog import list_models, load_model
    from kvplan.costs import Price, list_prices
    from kvplan.diffing import Diff, diff_files
    from kvplan.dtypes import CacheDTypes, cache_dtypes
    from kvplan.engines.base import EngineResult
    from kvplan.engines.llamacpp import kv_cache as llamacpp_kv_cache
    from kvplan.engines.sglang import kv_cache as sglang_kv_cache
    from kvplan.engines.tgi import kv_cache as tgi_kv_cache
    from kvplan.engines.transformers import kv_cache as transformers_kv_cache
    from kvplan.engines.trtllm import kv_cache as trtllm_kv_cache
    from kvplan.engines.vllm import VllmConfig, VllmResult
    from kvplan.engines.vllm import config as vllm_config
    from kvplan.engines.vllm import profile as vllm_profile
    from kvplan.errors import (
        HubUnavailableError,
        KvplanError,
        ModelNotFoundError,
        ProbeUnavailableError,
        SpecError,
        UnavailableError,
        UnitError,
        UnknownEngineError,
    )
    from kvplan.estimator import Estimate, LayerBreakdown, bytes_per_token, estimate, explain
    from kvplan.flags import EngineFlags, recommend
    from kvplan.hardware import GPU, UnknownGPUError, custom_gpu, find_gpu, list_gpus
    from kvplan.importers import Architecture, Imported, import_config, list_architectures
    from kvplan.layers import (
        ChunkedLocalAttention,
        FullAttention,
        LayerCache,
        MLALatent,
        NoCache,
        RecurrentState,
        SlidingWindowAttention,
    )
    from kvplan.logs import Reconciliation, read_log, reconcile
    from kvplan.performance import (
        Alternative,
        Comparison,
        DecodeStep,
        Perf,
        Prefill,
        alternatives,
        compare,
        memory_curve,
        perf,
    )
    from kvplan.planner import LengthMix, Overhead, Plan, StagePlan, estimate_overhead, plan
    from kvplan.planner.api import plan_cluster
    from kvplan.planner.cluster import Candidate, ClusterPlan
    from kvplan.planner.cluster_route import is_cluster_question, plan_deployment
    from kvplan.probe import ProbeResult, run_probe
    from kvplan.schemas import json_schema
    from kvplan.spec import ModelSpec, load_spec, parse_spec
    from kvplan.systems import System, UnknownSystemError, find_system, list_systems
    from kvplan.units import DType, format_bytes, parse_bytes, parse_tokens, resolve_dtype
    from kvplan.weights import Weights, model_weights, pipeline_partition
    from kvplan.workload import load_lengths


def __getattr__(name: str) -> Any:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'kvplan' has no attribute {name!r}")
    import importlib

    module, _, attribute = where.partition(":")
    value = getattr(importlib.import_module(module), attribute or name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "GPU",
    "Alternative",
    "Architecture",
    "AssertionResult",
    "Budget",
    "CacheDTypes",
    "Candidate",
    "ChunkedLocalAttention",
    "ClusterPlan",
    "Comparison",
    "DType",
    "DecodeStep",
    "Diff",
    "EngineFlags",
    "EngineResult",
    "Estimate",
    "FullAttention",
    "HubUnavailableError",
    "Imported",
    "KvplanError",
    "LayerBreakdown",
    "LayerCache",
    "LengthMix",
    "MLALatent",
    "ModelNotFoundError",
    "ModelSpec",
    "NoCache",
    "Overhead",
    "Perf",
    "Plan",
    "Prefill",
    "Price",
    "ProbeResult",
    "ProbeUnavailableError",
    "Reconciliation",
    "RecurrentState",
    "SlidingWindowAttention",
    "SpecError",
    "StagePlan",
    "System",
    "UnavailableError",
    "UnitError",
    "UnknownEngineError",
    "UnknownGPUError",
    "UnknownSystemError",
    "VllmConfig",
    "VllmResult",
    "Weights",
    "__version__",
    "alternatives",
    "bytes_per_token",
    "cache_dtypes",
    "check_budget",
    "compare",
    "custom_gpu",
    "diff_files",
    "estimate",
    "estimate_overhead",
    "explain",
    "find_gpu",
    "find_system",
    "format_bytes",
    "import_config",
    "is_cluster_question",
    "json_schema",
    "list_architectures",
    "list_gpus",
    "list_models",
    "list_prices",
    "list_systems",
    "llamacpp_kv_cache",
    "load_budget",
    "load_lengths",
    "load_model",
    "load_spec",
    "memory_curve",
    "model_weights",
    "parse_bytes",
    "parse_spec",
    "parse_tokens",
    "perf",
    "pipeline_partition",
    "plan",
    "plan_cluster",
    "plan_deployment",
    "read_log",
    "recommend",
    "reconcile",
    "resolve_dtype",
    "run_probe",
    "sglang_kv_cache",
    "tgi_kv_cache",
    "transformers_kv_cache",
    "trtllm_kv_cache",
    "vllm_config",
    "vllm_profile",
]
