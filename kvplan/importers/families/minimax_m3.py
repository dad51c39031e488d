"""MiniMax M3: GQA attention everywhere, and on its sparse layers the indexer's key.

vLLM 0.32 (models/minimax_m3/nvidia/model.py, common/indexer.py): a layer whose
``sparse_attention_config.sparse_attention_freq`` entry is not 0 runs
``MiniMaxM3SparseAttention``, which caches, beside its K and V, one indexer key of
``sparse_index_dim`` values a token (``MiniMaxM3IndexerCache``: one head, bf16 unless
``indexer_kv_dtype`` says fp8); the other layers are plain GQA. Defaults are vLLM's
``MiniMaxM3TextConfig`` (transformers_utils/configs/minimax_m3.py).
"""

from __future__ import annotations

from typing import Any

from kvplan.errors import SpecError
from kvplan.importers.parameters import (
    Count,
    decoder,
    linear,
    mlp,
    moe,
    norm,
    shapes,
    size,
)
from kvplan.importers.reading import Reading, as_list, mapping, whole
from kvplan.importers.registry import register
from kvplan.importers.rules import Rule

FAMILY = "minimax_m3"

#: MiniMaxM3TextConfig's sparse_attention_config: the first 3 of 60 layers dense.
_SPARSE_DEFAULT: dict[str, Any] = {
    "sparse_index_dim": 128,
    "sparse_num_index_heads": 4,
    "sparse_attention_freq": [0] * 3 + [1] * 57,
}

#: MiniMaxM3TextConfig's values for the keys the cache and the count read.
_DEFAULTS: dict[str, Any] = {
    "vocab_size": 200064,
    "hidden_size": 6144,
    "intermediate_size": 3072,
    "dense_intermediate_size": 12288,
    "num_hidden_layers": 60,
    "num_attention_heads": 64,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "max_position_embeddings": 524288,
    "num_local_experts": 128,
    "num_experts_per_tok": 4,
    "n_shared_experts": 1,
    "use_routing_bias": True,
    "moe_layer_freq": [0] * 3 + [1] * 57,
    "sparse_attention_config": _SPARSE_DEFAULT,
    "tie_word_embeddings": False,
}


def _sparse(r: Reading) -> dict[str, Any]:
    return dict(mapping(r.get("sparse_attention_config"), "sparse_attention_config"))


def _per_layer(r: Reading, values: Any, key: str, n: int) -> list[bool]:
    given = as_list(values, key)
    if len(given) < n:
        raise SpecError("", [f"{key}: has {len(given)} entries but {n} layers"])
    return [bool(whole(v, f"{key}.{i}", 0, 1 << 20)) for i, v in enumerate(given[:n])]


def _layers(r: Reading, n: int) -> None:
    """``sparse_attention`` where sparse_attention_freq is not 0, ``full_attention`` elsewhere:
    also past the list's end, or every layer without one (vLLM's ``_sparse_attention_layer_ids``
    takes the indices of its non-zero entries)."""
    sparse = _sparse(r)
    key = "sparse_attention_config.sparse_attention_freq"
    given = as_list(sparse.get("sparse_attention_freq") or [], key)[:n]
    freq = _per_layer(r, given + [0] * (n - len(given)), key, n)
    r.spec["layer_types"] = ["sparse_attention" if f else "full_attention" for f in freq]
    if any(freq):
        dim = sparse.get("sparse_index_dim")
        r.spec["index_head_dim"] = whole(dim, "sparse_attention_config.sparse_index_dim")
    r.notes.append(f"layer_types from {key}: {sum(freq)} of {n} layers keep an indexer key")


def _attention(s: Any, index_heads: int, index_dim: int, sparse: bool) -> Count:
    """q, k, v (fused with the indexer's q of ``index_heads`` heads and its one key on a sparse
    layer), o, the per-head q and k norms (and the indexer's on a sparse layer)."""
    q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
    index = (index_heads + 1) * index_dim if sparse else 0
    extra = norm(index_dim).times(2) if sparse else Count()
    return (
        linear(s.hidden, q + 2 * kv + index)
        + linear(q, s.hidden)
        + norm(s.head_dim).times(2)
        + extra
    )


def _count(r: Reading) -> Count:
    """Embeddings and head; per layer the attention, a dense MLP of
    ``dense_intermediate_size`` where moe_layer_freq is 0 else the experts (a shared expert
    of n_shared_experts x intermediate_size, the router and its bias), two norms."""
    s = shapes(r)
    n = s.layers
    sparse = _sparse(r)
    index_heads = size(r, "sparse_num_index_heads", default=sparse.get("sparse_num_index_heads"))
    index_dim = r.spec.get("index_head_dim") or 0
    is_moe = _per_layer(r, r.get("moe_layer_freq"), "moe_layer_freq", n)
    width = size(r, "intermediate_size")
    shared = size(r, "n_shared_experts", default=0, minimum=0) * width
    experts, active = size(r, "num_local_experts"), size(r, "num_experts_per_tok")
    routed = moe(s.hidden, width, experts, active, shared, bool(r.get("use_routing_bias")))
    dense = mlp(s.hidden, size(r, "dense_intermediate_size"))
    layers = Count()
    for i, kind in enumerate(r.spec["layer_types"]):
        attention = _attention(s, index_heads, index_dim, kind == "sparse_attention")
        layers += attention + (routed if is_moe[i] else dense) + norm(s.hidden).times(2)
    return decoder(s, layers)


register(
    FAMILY,
    "minimax_m3_text",
    Rule(layers=_layers, defaults=_DEFAULTS, parameters=_count),
    ("full_attention", "sparse_attention"),
    "MiniMax M3 (vLLM minimax_m3/nvidia/model.py, common/indexer.py): GQA, plus a bf16 indexer"
    " key of sparse_index_dim a token on the layers sparse_attention_freq marks",
    architectures=("MiniMaxM3SparseForCausalLM",),
)
