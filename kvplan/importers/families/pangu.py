"""Huawei openPangu Embedded (``PanguEmbedded``, remote code; vLLM openpangu.py,
``OpenPanguEmbeddedAttention``): GQA read like Llama, ``num_key_value_heads`` K/V heads
(absent: every head) of ``head_dim`` (absent: hidden_size / heads).

``interleaved_sliding_window``, when stated, makes layers slide: an integer is every layer's
window, a list gives layer i the window of entry i % len (null: full attention), as vLLM reads
it. A spec holds one window, so a list of different windows is refused.
"""

from __future__ import annotations

from typing import Any

from kvplan.errors import SpecError
from kvplan.importers.parameters import Count, decoder, flag, linear, mlp, norm, shapes, size
from kvplan.importers.reading import Reading
from kvplan.importers.registry import register
from kvplan.importers.rules import UNIFORM_KINDS, Rule, layers_uniform

FAMILY = "pangu"


def _layers_pangu(r: Reading, n: int) -> None:
    given: Any = r.config.get("interleaved_sliding_window")
    if given is None:
        layers_uniform(r, n)
        return
    windows = given if isinstance(given, list) else [given]
    stated = {w for w in windows if w is not None}
    if not windows or len(stated) > 1 or not all(isinstance(w, int) for w in stated):
        raise SpecError(
            "",
            ["interleaved_sliding_window: one window (an integer, or a list of it and null)"],
        )
    if not stated:
        return
    r.spec["sliding_window"] = stated.pop()
    r.spec["layer_types"] = [
        "full_attention" if windows[i % len(windows)] is None else "sliding_attention"
        for i in range(n)
    ]
    r.notes.append("layer_types from interleaved_sliding_window (entry i % len per layer)")


def _count_pangu(r: Reading) -> Count:
    """vLLM openpangu.py: q, k, v biases with ``qkv_bias`` (absent: ``attention_bias`` or
    ``bias``), an o bias with ``attention_bias`` or ``bias``; a gated MLP of
    ``intermediate_size``; two RMSNorms a layer."""
    s = shapes(r)
    out_bias = flag(r, "attention_bias") or flag(r, "bias")
    qkv_bias = flag(r, "qkv_bias", default=out_bias)
    q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
    layer = linear(s.hidden, q + 2 * kv, qkv_bias) + linear(q, s.hidden, out_bias)
    layer += mlp(s.hidden, size(r, "intermediate_size")) + norm(s.hidden).times(2)
    return decoder(s, layer.times(s.layers))


register(
    FAMILY,
    "PanguEmbedded",
    Rule(layers=_layers_pangu, parameters=_count_pangu),
    UNIFORM_KINDS,
    "openPangu Embedded (vLLM openpangu.py): GQA read as llama; interleaved_sliding_window"
    " makes layers slide",
    architectures=("PanguEmbeddedForCausalLM",),
)
