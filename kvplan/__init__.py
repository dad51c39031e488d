"""kvplan: exact KV-cache memory for LLM serving, from model specs.

>>> import kvplan
>>> spec = kvplan.load_model("qwen3-8b")
>>> kvplan.estimate(spec, context_tokens=32768).kv_cache_bytes
4831838208
>>> kvplan.plan(spec, kvplan.find_gpu("h100"), max_model_len=32768).max_concurrency
11
"""

from kvplan.catalog import list_models, load_model
from kvplan.errors import KvplanError, ModelNotFoundError, SpecError, UnitError
from kvplan.estimate import Estimate, LayerBreakdown, bytes_per_token, estimate, explain
from kvplan.hardware import GPU, UnknownGPUError, custom_gpu, find_gpu, list_gpus
from kvplan.layers import (
    ChunkedLocalAttention,
    FullAttention,
    LayerCache,
    MLALatent,
    NoCache,
    RecurrentState,
    SlidingWindowAttention,
)
from kvplan.plan import LengthMix, Overhead, Plan, StagePlan, estimate_overhead, plan
from kvplan.spec import ModelSpec, load_spec, parse_spec
from kvplan.units import DType, format_bytes, parse_bytes, parse_tokens, resolve_dtype
from kvplan.weights import Weights, model_weights, pipeline_partition
from kvplan.workload import load_lengths

__version__ = "0.1.0"

__all__ = [
    "GPU",
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
    "custom_gpu",
    "estimate",
    "estimate_overhead",
    "explain",
    "find_gpu",
    "format_bytes",
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
