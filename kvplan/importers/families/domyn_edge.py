"""Domyn Edge (``domyn_edge``): GQA whose head_dim and window are set per layer, served by vLLM
0.33 (domyn_edge.py, DomynEdgeForCausalLM; not in vLLM 0.32). Its config class ships with the
checkpoint (remote code); neither transformers nor vLLM holds one, so nothing is defaulted.

vLLM's domyn_edge.py builds layer i's attention with ``num_key_value_heads`` K/V heads of
``per_layer_config[i].head_dim``, and a window from ``window_sizes[i]``, a Hugging Face
``(left, right)`` pair: ``left`` w > 0 attends to w + 1 keys (the current one and w before it),
which vLLM's window counts, so the layer slides over w + 1 tokens; w = 0 is global.
``position_layers`` (rope or nope) moves positions, not the cache.

Worked example (two layers of 8 K/V heads, head_dim 128 then 256, window_sizes [[1023, 0],
[0, 0]], bf16): a token costs 2 x 8 x 128 x 2 = 4,096 B on the layer sliding over 1,024 tokens
and 2 x 8 x 256 x 2 = 8,192 B on the global one.
"""

from __future__ import annotations

from kvplan.errors import SpecError
from kvplan.importers.parameters import (
    Count,
    decoder,
    linear,
    mlp,
    norm,
    shapes,
    size,
    total,
)
from kvplan.importers.reading import Reading, as_list, mapping, whole
from kvplan.importers.registry import register
from kvplan.importers.rules import UNIFORM_KINDS, Rule
from kvplan.model.limits import MAX_DIM, MAX_TOKENS

FAMILY = "domyn_edge"


def _per_layer(r: Reading, key: str, n: int) -> list[object]:
    value = r.config.get(key)
    if value is None:
        raise SpecError("", [f"{key}: required, one entry per layer (vLLM domyn_edge.py)"])
    given = as_list(value, key)
    if len(given) != n:
        raise SpecError("", [f"{key}: has {len(given):,} entries but {n} layers"])
    return given


def _head_dims(r: Reading, n: int) -> list[int]:
    dims = []
    for i, entry in enumerate(_per_layer(r, "per_layer_config", n)):
        head_dim = mapping(entry, f"per_layer_config.{i}").get("head_dim")
        dims.append(whole(head_dim, f"per_layer_config.{i}.head_dim", maximum=MAX_DIM))
    return dims


def _left_windows(r: Reading, n: int) -> list[int]:
    lefts = []
    for i, pair in enumerate(_per_layer(r, "window_sizes", n)):
        given = as_list(pair, f"window_sizes.{i}")
        if not given:
            raise SpecError("", [f"window_sizes.{i}: must be a (left, right) pair"])
        lefts.append(whole(given[0], f"window_sizes.{i}", minimum=0, maximum=MAX_TOKENS - 1))
    return lefts


def _layers_domyn(r: Reading, n: int) -> None:
    if r.config.get("sliding_window") is not None:
        # vLLM would give the global layers the engine-wide window too: not modelled.
        raise SpecError("", ["sliding_window: not read by domyn_edge; window_sizes sets it"])
    r.spec["head_dim_per_layer"] = _head_dims(r, n)
    lefts = _left_windows(r, n)
    windows = {w + 1 for w in lefts if w > 0}
    if len(windows) > 1:
        raise SpecError("", [f"window_sizes: different windows {sorted(windows)}; one is read"])
    r.spec["layer_types"] = ["sliding_attention" if w else "full_attention" for w in lefts]
    if windows:
        r.spec["sliding_window"] = windows.pop()
    r.notes.append(
        "head_dim per layer from per_layer_config; window_sizes left w > 0 slides over"
        " w + 1 tokens (vLLM domyn_edge.py)"
    )


def _count_domyn(r: Reading) -> Count:
    """vLLM domyn_edge.py: per layer q, k, v and o of the layer's head_dim, a k_norm of it (the
    q_norm has no weight), a gated MLP (Qwen2MLP) and four RMSNorms; Qwen2Model's embeddings
    and final norm; the head unless tied."""
    s = shapes(r)
    inter = size(r, "intermediate_size")
    layers = []
    for head_dim in r.spec["head_dim_per_layer"]:
        q, kv = s.heads * head_dim, s.kv_heads * head_dim
        attention = linear(s.hidden, q + 2 * kv) + linear(q, s.hidden) + norm(head_dim)
        layers.append(attention + mlp(s.hidden, inter) + norm(s.hidden).times(4))
    return decoder(s, total(layers))


register(
    FAMILY,
    "domyn_edge",
    Rule(layers=_layers_domyn, reads_head_dim=False, parameters=_count_domyn),
    UNIFORM_KINDS,
    "Domyn Edge (vLLM 0.33 domyn_edge.py): head_dim per layer (per_layer_config), window_sizes"
    " left w > 0 slides over w + 1 tokens, else global; remote-code config, no defaults",
    architectures=("DomynEdgeForCausalLM",),
)
