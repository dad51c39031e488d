"""MuseGlimmer (``muse_glimmer``, text in ``muse_glimmer_text``): iRoPE sliding and NoPE layers.

vLLM 0.32's muse_glimmer.py decides each layer's window from ``no_rope_layers``, not from
``layer_types``: a layer with RoPE (entry 1) slides over ``sliding_window`` (default 2048), a
NoPE layer (entry 0) attends globally. MuseGlimmerTextConfig (vLLM
transformers_utils/configs/muse_glimmer.py) defaults the list to NoPE every fourth layer
counted back from the last: with 52 layers, layers 3, 7, ..., 51 are global (13), 39 slide.
The checkpoint nests the text model in ``text_config``; the older flat layout (every text key
at the top level) is not read.
"""

from __future__ import annotations

from kvplan.errors import SpecError
from kvplan.importers.parameters import Count
from kvplan.importers.reading import Reading, as_list
from kvplan.importers.registry import register, register_wrapper
from kvplan.importers.rules import UNIFORM_KINDS, Rule, pattern_every

FAMILY = "muse_glimmer"

# MuseGlimmerTextConfig defaults for the keys that size the cache or the weights.
_TEXT = {
    "vocab_size": 202048,
    "hidden_size": 6656,
    "intermediate_size": 19968,
    "num_hidden_layers": 52,
    "num_attention_heads": 32,
    "num_key_value_heads": 2,
    "head_dim": 128,
    "max_position_embeddings": 16384,
    "tie_word_embeddings": False,
}
_WINDOW = 2048  # MuseGlimmerTextConfig's sliding_window; null means no window


def _rope_layers(r: Reading, n: int) -> list[bool]:
    """Whether each layer uses RoPE: ``no_rope_layers`` (1: RoPE), else the default mask."""
    given = r.config.get("no_rope_layers")
    if given is None:
        return [(n - 1 - i) % 4 != 0 for i in range(n)]
    flags = as_list(given, "no_rope_layers")
    if len(flags) != n or any(f not in (0, 1) for f in flags):
        raise SpecError("", [f"no_rope_layers: must be {n} entries of 0 or 1"])
    return [f == 1 for f in flags]


def _layers(r: Reading, n: int) -> None:
    if "sliding_window" not in r.config:
        r.notes.append(f"sliding_window {_WINDOW}: the {r.model_type} default (not in file)")
    window = r.config.get("sliding_window", _WINDOW)
    if window is None:
        r.notes.append("sliding_window null: every layer global")
        return
    uses_rope = _rope_layers(r, n)
    r.spec["sliding_window"] = window
    pattern_every(r, n, lambda i: not uses_rope[i], "sliding_attention", "no_rope_layers")


def _uncounted(r: Reading) -> Count:
    """MuseGlimmer's output gates, q/k norms and vision tower are not counted from the
    config: a folder with its safetensors gives the count."""
    raise SpecError("", ["num_parameters: muse_glimmer is not counted from the config's shapes"])


register(
    FAMILY,
    "muse_glimmer_text",
    Rule(layers=_layers, defaults=_TEXT, parameters=_uncounted),
    UNIFORM_KINDS,
    "MuseGlimmer text: RoPE layers of no_rope_layers slide over sliding_window (default 2048),"
    " NoPE layers global (vLLM muse_glimmer.py; layer_types unread); MuseGlimmerTextConfig"
    " defaults",
)
register_wrapper(
    FAMILY,
    "muse_glimmer",
    "muse_glimmer_text",
    "MuseGlimmer: the text model in text_config (the flat layout is not read); the vision"
    " tower is not counted",
    architectures=("MuseGlimmerForCausalLM",),
)
