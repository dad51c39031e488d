"""The figures a capacity report adds to a plan's JSON document: the KV cache of one request
against context, and the cache's layers by kind, from kvplan's formula engine
(kvplan.model.estimator) in the dtype the plan's engine serves the cache in.

Each figure is an exact integer of bytes for the whole model; a GPU of a replica holds its
share (the views divide by the GPUs of one replica, tensor x pipeline, for the chart).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kvplan.model.spec import ModelSpec

__all__ = ["report_figures"]


def report_figures(
    spec: ModelSpec, max_model_len: int, kv_cache_dtype: str | None, engine: str
) -> dict[str, Any]:
    """``kv_curve``: one request's KV bytes at 1,024, 2,048, ... tokens and at
    ``max_model_len``; ``kv_layers``: each group of identical layers at ``max_model_len``
    (kind, layers, tokens each keeps, bytes)."""
    from kvplan.model.dtypes import cache_dtypes
    from kvplan.model.estimator import estimate

    served = "vllm" if engine == "vllm" else "ideal"
    dtypes = cache_dtypes(spec, served, kv_cache_dtype=kv_cache_dtype)
    k, v = dtypes.k.name, dtypes.v.name
    top = max(1, max_model_len)
    contexts = [2**j for j in range(10, top.bit_length()) if 2**j < top] + [top]
    curve = [estimate(spec, c, k_dtype=k, v_dtype=v).kv_cache_bytes for c in contexts]
    layers = estimate(spec, top, k_dtype=k, v_dtype=v).breakdown
    return {
        "kv_curve": {"context_tokens": contexts, "kv_bytes_one_request": curve},
        "kv_layers": [
            {
                "kind": g.kind,
                "num_layers": g.num_layers,
                "tokens_retained": g.tokens_retained,
                "bytes": g.bytes,
            }
            for g in layers
        ],
    }
