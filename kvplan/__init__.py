"""kvplan: exact KV-cache memory for LLM serving, from model specs.

>>> import kvplan
>>> spec = kvplan.load_model("qwen3-8b")
>>> kvplan.estimate(spec, context_tokens=32768).kv_cache_bytes
4831838208
"""

from kvplan.catalog import list_models, load_model
from kvplan.errors import KvplanError, ModelNotFoundError, SpecError, UnitError
from kvplan.estimate import Estimate, LayerBreakdown, bytes_per_token, estimate, explain
from kvplan.layers import (
    ChunkedLocalAttention,
    FullAttention,
    LayerCache,
    MLALatent,
    NoCache,
    RecurrentState,
    SlidingWindowAttention,
)
from kvplan.spec import ModelSpec, load_spec, parse_spec
from kvplan.units import DType, format_bytes, parse_bytes, parse_tokens, resolve_dtype

__version__ = "0.1.0"

__all__ = [
    "ChunkedLocalAttention",
    "DType",
    "Estimate",
    "FullAttention",
    "KvplanError",
    "LayerBreakdown",
    "LayerCache",
    "MLALatent",
    "ModelNotFoundError",
    "ModelSpec",
    "NoCache",
    "RecurrentState",
    "SlidingWindowAttention",
    "SpecError",
    "UnitError",
    "__version__",
    "bytes_per_token",
    "estimate",
    "explain",
    "format_bytes",
    "list_models",
    "load_model",
    "load_spec",
    "parse_bytes",
    "parse_spec",
    "parse_tokens",
    "resolve_dtype",
]
