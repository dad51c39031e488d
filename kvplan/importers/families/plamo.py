"""Preferred Networks PLaMo 3 (``plamo3``): interleaved sliding and global GQA layers.

Plamo3Config (configuration_plamo3.py, remote code) derives the per-layer windows that vLLM's
plamo3.py reads (``interleaved_sliding_window``): layer i is global when
``(i + 1) % sliding_window_pattern == 0`` (default 8), every other layer slides over the one
``window_size``. Older releases state the window as ``sliding_window``, an integer or a
per-layer list; the config class reads a list only when all its windows agree, and kvplan
refuses one that does not, since one spec holds one window. The class's default window has
changed between releases (128, 2048), so a config stating none is refused rather than read
with a guess. Worked example (pattern 8, 32 layers): layers 7, 15, 23, 31 global, 28 slide.
"""

from __future__ import annotations

from kvplan.errors import SpecError
from kvplan.importers.parameters import Count, decoder, mlp, norm, shapes, size
from kvplan.importers.reading import Reading, whole
from kvplan.importers.registry import register
from kvplan.importers.rules import Rule, pattern_every
from kvplan.model.limits import MAX_LAYERS, MAX_TOKENS

FAMILY = "plamo"

# Plamo3Config defaults for the keys that size the cache or the weights.
_PLAMO3 = {
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "max_position_embeddings": 2048,
    "sliding_window_pattern": 8,
    "intermediate_size": 13312,
    "vocab_size": 32000,
    "tie_word_embeddings": True,
}


def _window(r: Reading) -> int:
    """The one window of the sliding layers: ``window_size``, else the legacy
    ``sliding_window`` (an integer, or a list whose non-null windows all agree)."""
    stated = r.config.get("window_size")
    legacy = r.config.get("sliding_window")
    if isinstance(legacy, list):
        windows = {w for w in legacy if w is not None}
        if len(windows) > 1:
            shown = ", ".join(str(w) for w in sorted(windows, key=str))
            raise SpecError(
                "", [f"sliding_window: layers of different windows ({shown}); not supported"]
            )
        legacy = next(iter(windows), None)
    window = legacy if legacy is not None else stated
    if window is None:
        raise SpecError(
            "",
            [
                "window_size: required (Plamo3Config's default differs between releases:"
                " 128 or 2048)"
            ],
        )
    return whole(window, "window_size", maximum=MAX_TOKENS)


def _plamo3_layers(r: Reading, n: int) -> None:
    pattern = whole(r.get("sliding_window_pattern"), "sliding_window_pattern", maximum=MAX_LAYERS)
    r.spec["sliding_window"] = _window(r)
    pattern_every(
        r,
        n,
        lambda i: (i + 1) % pattern == 0,
        "sliding_attention",
        f"sliding_window_pattern {pattern}: global where (i + 1) % {pattern} == 0",
    )


def _count_plamo3(r: Reading) -> Count:
    """modeling_plamo3.py: q, k, v and o without bias, q/k RMSNorms of head_dim, a gated
    MLP, four RMSNorms a layer (before and after the mixer and the MLP), a final norm."""
    s = shapes(r)
    inter = size(r, "intermediate_size")
    layer = s.attention() + norm(s.head_dim).times(2) + mlp(s.hidden, inter)
    layer += norm(s.hidden).times(4)
    return decoder(s, layer.times(s.layers))


register(
    FAMILY,
    "plamo3",
    Rule(layers=_plamo3_layers, defaults=_PLAMO3, parameters=_count_plamo3),
    ("full_attention", "sliding_attention"),
    "PLaMo 3: global where (i + 1) % sliding_window_pattern == 0 (default 8), else one"
    " window_size (or legacy sliding_window, one window) required; Plamo3Config defaults"
    " (vLLM plamo3.py reads interleaved_sliding_window)",
    architectures=("Plamo3ForCausalLM",),
)
