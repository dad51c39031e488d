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
# function here (kvplan.answers.performance.perf, kvplan.answers.flags.recommend,
# kvplan.logs.reconcile.reconcile), so
# importing a submodule never shadows a function on the package.
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_LAZY: dict[str, str] = {
    "AssertionResult": "kvplan.gate.budget",
    "Budget": "kvplan.gate.budget",
    "check_budget": "kvplan.gate.budget",
    "load_budget": "kvplan.gate.budget",
    "list_models": "kvplan.catalog.lookup",
    "load_model": "kvplan.catalog.lookup",
    "Diff": "kvplan.gate.diffing",
    "diff_files": "kvplan.gate.diffing",
    "CacheDTypes": "kvplan.model.dtypes",
    "cache_dtypes": "kvplan.model.dtypes",
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
    "Estimate": "kvplan.model.estimator",
    "LayerBreakdown": "kvplan.model.estimator",
    "bytes_per_token": "kvplan.model.estimator",
    "estimate": "kvplan.model.estimator",
    "explain": "kvplan.model.estimator",
    "GPU": "kvplan.hardware.gpus",
    "UnknownGPUError": "kvplan.hardware.gpus",
    "custom_gpu": "kvplan.hardware.gpus",
    "find_gpu": "kvplan.hardware.lookup",
    "list_gpus": "kvplan.hardware.gpus",
    "Architecture": "kvplan.importers",
    "Imported": "kvplan.importers",
    "import_config": "kvplan.importers",
    "list_architectures": "kvplan.importers",
    "ChunkedLocalAttention": "kvplan.model.layers",
    "FullAttention": "kvplan.model.layers",
    "LayerCache": "kvplan.model.layers",
    "MLALatent": "kvplan.model.layers",
    "NoCache": "kvplan.model.layers",
    "RecurrentState": "kvplan.model.layers",
    "SlidingWindowAttention": "kvplan.model.layers",
    "Alternative": "kvplan.answers.performance",
    "Comparison": "kvplan.answers.performance",
    "DecodeStep": "kvplan.answers.performance",
    "Perf": "kvplan.answers.performance",
    "Prefill": "kvplan.answers.performance",
    "alternatives": "kvplan.answers.performance",
    "compare": "kvplan.answers.performance",
    "memory_curve": "kvplan.answers.performance",
    "perf": "kvplan.answers.performance",
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
    "System": "kvplan.hardware.systems",
    "UnknownSystemError": "kvplan.hardware.systems",
    "find_system": "kvplan.hardware.systems",
    "list_systems": "kvplan.hardware.systems",
    "Price": "kvplan.hardware.costs",
    "list_prices": "kvplan.hardware.costs",
    "ProbeResult": "kvplan.probe.measure",
    "run_probe": "kvplan.probe.measure",
    "EngineFlags": "kvplan.answers.flags_target",
    "recommend": "kvplan.answers.flags",
    "Reconciliation": "kvplan.logs.reconcile",
    "read_log": "kvplan.logs.reconcile",
    "reconcile": "kvplan.logs.reconcile",
    "Calibration": "kvplan.engines.vllm_calibration",
    "CalibrationFit": "kvplan.logs.calibrate",
    "calibrate": "kvplan.logs.calibrate",
    "load_calibration": "kvplan.logs.calibrate",
    "json_schema": "kvplan.gate.schemas",
    "ModelSpec": "kvplan.model.spec",
    "load_spec": "kvplan.model.spec",
    "parse_spec": "kvplan.model.spec",
    "DType": "kvplan.units",
    "format_bytes": "kvplan.units",
    "parse_bytes": "kvplan.units",
    "parse_tokens": "kvplan.units",
    "resolve_dtype": "kvplan.units",
    "Weights": "kvplan.model.weights",
    "model_weights": "kvplan.model.weights",
    "pipeline_partition": "kvplan.model.weights",
    "load_lengths": "kvplan.answers.workload",
    "ReloadVsRecompute": "kvplan.answers.tiers",
    "TierCapacity": "kvplan.answers.tiers",
    "reload_vs_recompute": "kvplan.answers.tiers",
    "tier_capacity": "kvplan.answers.tiers",
    "CurvePoint": "kvplan.answers.simulate",
    "TierSize": "kvplan.answers.simulate",
    "TraceReplay": "kvplan.answers.simulate",
    "hit_rate_curve": "kvplan.answers.simulate",
    "replay_trace": "kvplan.answers.simulate",
}

if TYPE_CHECKING:
    from kvplan.answers.flags import recommend
    from kvplan.answers.flags_target import EngineFlags
    from kvplan.answers.performance import (
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
    from kvplan.answers.simulate import (
        CurvePoint,
        TierSize,
        TraceReplay,
        hit_rate_curve,
        replay_trace,
    )
    from kvplan.answers.tiers import (
        ReloadVsRecompute,
        TierCapacity,
        reload_vs_recompute,
        tier_capacity,
    )
    from kvplan.answers.workload import load_lengths
    from kvplan.catalog.lookup import list_models, load_model
    from kvplan.engines.base import EngineResult
    from kvplan.engines.llamacpp import kv_cache as llamacpp_kv_cache
    from kvplan.engines.sglang import kv_cache as sglang_kv_cache
    from kvplan.engines.tgi import kv_cache as tgi_kv_cache
    from kvplan.engines.transformers import kv_cache as transformers_kv_cache
    from kvplan.engines.trtllm import kv_cache as trtllm_kv_cache
    from kvplan.engines.vllm import VllmConfig, VllmResult
    from kvplan.engines.vllm import config as vllm_config
    from kvplan.engines.vllm import profile as vllm_profile
    from kvplan.engines.vllm_calibration import Calibration
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
    from kvplan.gate.budget import AssertionResult, Budget, check_budget, load_budget
    from kvplan.gate.diffing import Diff, diff_files
    from kvplan.gate.schemas import json_schema
    from kvplan.hardware.costs import Price, list_prices
    from kvplan.hardware.gpus import GPU, UnknownGPUError, custom_gpu, list_gpus
    from kvplan.hardware.lookup import find_gpu
    from kvplan.hardware.systems import System, UnknownSystemError, find_system, list_systems
    from kvplan.importers import Architecture, Imported, import_config, list_architectures
    from kvplan.logs.calibrate import CalibrationFit, calibrate, load_calibration
    from kvplan.logs.reconcile import Reconciliation, read_log, reconcile
    from kvplan.model.dtypes import CacheDTypes, cache_dtypes
    from kvplan.model.estimator import Estimate, LayerBreakdown, bytes_per_token, estimate, explain
    from kvplan.model.layers import (
        ChunkedLocalAttention,
        FullAttention,
        LayerCache,
        MLALatent,
        NoCache,
        RecurrentState,
        SlidingWindowAttention,
    )
    from kvplan.model.spec import ModelSpec, load_spec, parse_spec
    from kvplan.model.weights import Weights, model_weights, pipeline_partition
    from kvplan.planner import LengthMix, Overhead, Plan, StagePlan, estimate_overhead, plan
    from kvplan.planner.api import plan_cluster
    from kvplan.planner.cluster import Candidate, ClusterPlan
    from kvplan.planner.cluster_route import is_cluster_question, plan_deployment
    from kvplan.probe.measure import ProbeResult, run_probe
    from kvplan.units import DType, format_bytes, parse_bytes, parse_tokens, resolve_dtype


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
    "Calibration",
    "CalibrationFit",
    "Candidate",
    "ChunkedLocalAttention",
    "ClusterPlan",
    "Comparison",
    "CurvePoint",
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
    "ReloadVsRecompute",
    "SlidingWindowAttention",
    "SpecError",
    "StagePlan",
    "System",
    "TierCapacity",
    "TierSize",
    "TraceReplay",
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
    "calibrate",
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
    "hit_rate_curve",
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
    "load_calibration",
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
    "reload_vs_recompute",
    "replay_trace",
    "resolve_dtype",
    "run_probe",
    "sglang_kv_cache",
    "tgi_kv_cache",
    "tier_capacity",
    "transformers_kv_cache",
    "trtllm_kv_cache",
    "vllm_config",
    "vllm_profile",
]
