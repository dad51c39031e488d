"""Cohere Command R7B and Command A (``cohere2``).

Three sliding layers (``sliding_window``, default 4096) then one global layer: the
transformers Cohere2Config builds ``layer_types`` from ``sliding_window_pattern`` (default 4)
when a file states none, a layer sliding unless ``(i + 1) % pattern == 0``; vLLM's commandr
model reads the same ``layer_types``. The global layers use no rotary embedding, which does
not change what they cache.
"""

from __future__ import annotations

from kvplan.errors import SpecError
from kvplan.importers.parameters import Count, decoder, flag, mlp, norm, shapes, size
from kvplan.importers.reading import Reading, whole
from kvplan.importers.registry import register
from kvplan.importers.rules import Rule, layers_explicit
from kvplan.model.limits import MAX_TOKENS

FAMILY = "cohere2"

# transformers configuration_cohere2.py defaults (keys that change the cache or the weights).
_DEFAULTS = {
    "vocab_size": 256000,
    "hidden_size": 8192,
    "intermediate_size": 22528,
    "num_hidden_layers": 40,
    "num_attention_heads": 64,
    "max_position_embeddings": 8192,
    "sliding_window": 4096,
    "tie_word_embeddings": True,
}


def _layers_cohere2(r: Reading, n: int) -> None:
    if layers_explicit(r, n):
        return
    r.spec["sliding_window"] = r.get("sliding_window")
    every = r.config.get("sliding_window_pattern")
    if every is None:
        every = 4
        r.notes.append("sliding_window_pattern 4: the cohere2 default (not in file)")
    every = whole(every, "sliding_window_pattern", maximum=n)
    r.spec["layer_types_pattern"] = ["sliding_attention"] * (every - 1) + ["full_attention"]


def _count_cohere2(r: Reading) -> Count:
    """One LayerNorm (weight only) before the parallel attention and gated MLP of each
    layer; q, k, v, o biases with ``attention_bias``; tied embeddings; a final LayerNorm."""
    s = shapes(r)
    bias = flag(r, "attention_bias")
    layer = s.attention(bias, bias) + mlp(s.hidden, size(r, "intermediate_size")) + norm(s.hidden)
    return decoder(s, layer.times(s.layers))


register(
    FAMILY,
    "cohere2",
    Rule(layers=_layers_cohere2, defaults=_DEFAULTS, parameters=_count_cohere2),
    ("full_attention", "sliding_attention"),
    "3 sliding : 1 global (sliding_window_pattern, default 4); config-class defaults",
    architectures=("Cohere2ForCausalLM",),
)


def _layers_cohere2_moe(r: Reading, n: int) -> None:
    if not layers_explicit(r, n):
        first = whole(r.config.get("first_k_dense_replace", 0), "first_k_dense_replace", 0, n)
        prefix = whole(
            r.config.get("prefix_dense_sliding_window_pattern", 1),
            "prefix_dense_sliding_window_pattern",
            maximum=n,
        )
        every = whole(
            r.config.get("sliding_window_pattern", 4), "sliding_window_pattern", maximum=n
        )
        kinds = [(i + 1) % prefix != 0 for i in range(first)]
        kinds += [(i + 1) % every != 0 for i in range(n - first)]
        r.spec["layer_types"] = ["sliding_attention" if k else "full_attention" for k in kinds]
        r.notes.append(
            f"layer_types: {first} prefix layers by pattern {prefix}, then by pattern {every}"
            " (Cohere2MoeConfig)"
        )
    if "sliding_attention" in r.spec["layer_types"]:
        # The config's window, as for cohere2: vLLM's commandr.py and cohere2_moe.py attend to
        # sliding_window + 1 tokens, an engine detail its profile does not model yet.
        r.spec["sliding_window"] = whole(
            r.get("sliding_window"), "sliding_window", maximum=MAX_TOKENS
        )


def _uncounted(r: Reading) -> Count:
    """Command A MoE's expert layout (prefix dense layers, shared experts combined by a
    strategy) is not counted from the config: a folder with its safetensors gives the count."""
    raise SpecError("", ["num_parameters: cohere2_moe is not counted from the config's shapes"])


# Cohere2MoeConfig defaults (configuration_cohere2_moe.py) for the keys that size the cache.
_MOE_DEFAULTS = {**_DEFAULTS, "head_dim": 128}
register(
    FAMILY,
    "cohere2_moe",
    Rule(layers=_layers_cohere2_moe, defaults=_MOE_DEFAULTS, parameters=_uncounted),
    ("full_attention", "sliding_attention"),
    "layer_types, else first_k_dense_replace prefix layers then 3 sliding : 1 global;"
    " head_dim default 128",
    architectures=("Cohere2MoeForCausalLM",),
)
