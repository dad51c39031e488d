"""Essential AI Rnj-1 (vLLM rnj1.py, ``Rnj1ForCausalLM``): Gemma 3's layer read through
``Gemma3TextConfig``, with one difference in what a layer caches.

vLLM's ``Rnj1Attention`` gives only a ``chunked_attention`` entry of ``layer_types`` a window:
``per_layer_sliding_window=sliding_window`` with ``chunk_lookback=1``, so the kernel attends
within the current aligned chunk of ``sliding_window // 2`` tokens and the one before it,
never more than ``sliding_window`` tokens back. The KV cache is the plain ``Attention``
layer's ``SlidingWindowSpec`` of that window (kv_cache_interface.py), which is the spec's
``sliding_attention``. Every other entry, ``sliding_attention`` included, is built with no
window and caches like full attention; Gemma3TextConfig's own ``layer_types`` (five sliding,
one full) therefore make a model that vLLM serves with global attention on every layer.

Released Rnj-1 configs name ``model_type`` ``gemma3_text``: the gemma family's rule hands those
naming ``Rnj1ForCausalLM`` to ``layers_rnj1``. The ``rnj1`` type registered here reads a config
that names the class's own type.
"""

from __future__ import annotations

from kvplan.errors import SpecError
from kvplan.importers.parameters import Count, decoder, flag, mlp, norm, shapes, size
from kvplan.importers.reading import Reading, as_list
from kvplan.importers.registry import register
from kvplan.importers.rules import Rule, check_kinds

FAMILY = "rnj1"

#: vLLM's class, which config.json ``architectures`` names for an Rnj-1 checkpoint.
RNJ1_CLASS = "Rnj1ForCausalLM"

# Gemma3TextConfig's values (transformers configuration_gemma3.py) for the keys read here.
_GEMMA3_TEXT = {
    "num_hidden_layers": 26,
    "hidden_size": 2304,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "intermediate_size": 9216,
    "max_position_embeddings": 131072,
    "sliding_window": 4096,
    "vocab_size": 262208,
    "tie_word_embeddings": True,
}

_KINDS = ("full_attention", "sliding_attention", "chunked_attention")


def layers_rnj1(r: Reading, n: int) -> None:
    """Rnj-1's layer kinds: ``chunked_attention`` entries slide over ``sliding_window``, every
    other layer is global (vLLM rnj1.py)."""
    given = r.config.get("layer_types")
    if given is None or not as_list(given, "layer_types"):
        r.notes.append("every layer global: no chunked_attention in layer_types (vLLM rnj1.py)")
        return
    if len(given) != n:
        raise SpecError("", [f"layer_types: has {len(given):,} entries but {n} layers"])
    check_kinds(given, _KINDS)
    if "chunked_attention" not in given:
        r.notes.append("every layer global: no chunked_attention in layer_types (vLLM rnj1.py)")
        return
    window = r.get("sliding_window")
    if window is None:
        raise SpecError("", ["sliding_window: chunked_attention layers need their window"])
    r.spec["sliding_window"] = window
    r.spec["layer_types"] = [
        "sliding_attention" if kind == "chunked_attention" else "full_attention" for kind in given
    ]
    r.notes.append(
        f"layer_types: chunked_attention layers slide over sliding_window {window} (two"
        " chunks of look-back), every other layer is global (vLLM rnj1.py)"
    )


def _count_rnj1(r: Reading) -> Count:
    """vLLM rnj1.py: q, k, v and o (``attention_bias``), q/k GemmaRMSNorms of head_dim, a
    gated GeGLU MLP of ``intermediate_size``, four RMSNorms a layer, the final norm."""
    s = shapes(r)
    bias = flag(r, "attention_bias")
    layer = s.attention(bias, bias) + norm(s.head_dim).times(2)
    layer += mlp(s.hidden, size(r, "intermediate_size")) + norm(s.hidden).times(4)
    return decoder(s, layer.times(s.layers))


register(
    FAMILY,
    "rnj1",
    Rule(layers=layers_rnj1, defaults=_GEMMA3_TEXT, parameters=_count_rnj1),
    ("full_attention", "sliding_attention"),
    "Rnj-1 (vLLM rnj1.py): only chunked_attention layers keep a window (sliding_window,"
    " a SlidingWindowSpec); every other layer is global",
    architectures=(RNJ1_CLASS,),
)
