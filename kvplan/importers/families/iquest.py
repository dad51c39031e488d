"""IQuestLab IQuest-Coder V1 (``iquestcoder``) and its Loop variant (``iquestloopcoder``).

IQuest-Coder is a Llama: vLLM 0.32's registry serves IQuestCoderForCausalLM with its llama
model, which reads ``num_key_value_heads`` and ``head_dim`` as stated and slides every layer
when the file states a ``sliding_window`` (IQuestCoderConfig keeps the window whatever
``use_sliding_window`` says; vLLM then applies it to all layers, as for any config without
``layer_types``).

The Loop variant runs its decoder stack ``loop_num`` times (vLLM iquest_loopcoder.py, default
2). Each decoder layer keeps one full-attention cache, written on the first pass, and for
every later pass one more cache of the same heads limited to ``loop_window_size`` tokens
(default 64): vLLM registers them as attention layers ``layers.{loop * L + i}``. kvplan lists
them the same way, so the spec has ``loop_num x L`` cache layers: the first L full, the rest
sliding. Worked example (40B Loop: L 80, 8 K/V heads of 5120 / 40 = 128, loop_num 2, window
64): a token below the window adds 160 x 2 x 8 x 128 x 2 B = 655,360 B in bf16; past it only
the 80 full layers grow.
"""

from __future__ import annotations

from kvplan.errors import SpecError
from kvplan.importers.parameters import Count, count_llama, decoder, mlp, norm, plain, shapes
from kvplan.importers.parameters import size as read_size
from kvplan.importers.reading import Reading, whole
from kvplan.importers.registry import register
from kvplan.importers.rules import UNIFORM_KINDS, Rule
from kvplan.model.limits import MAX_LAYERS, MAX_TOKENS

FAMILY = "iquest"

# IQuestCoderConfig (configuration_iquestcoder.py, remote code) defaults for the keys that
# size the cache or the weights; vLLM serves it with its llama model.
_IQUESTCODER = {
    "vocab_size": 76800,
    "hidden_size": 5120,
    "intermediate_size": 27648,
    "num_hidden_layers": 80,
    "num_attention_heads": 40,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "max_position_embeddings": 16384,
    "tie_word_embeddings": False,
}

#: vLLM iquest_loopcoder.py's getattr defaults.
_LOOP_NUM = 2
_LOOP_WINDOW = 64


def _loops(r: Reading, n: int) -> tuple[int, int]:
    """``loop_num`` and ``loop_window_size`` (vLLM's defaults 2 and 64 when absent)."""
    loop_num = r.config.get("loop_num")
    window = r.config.get("loop_window_size")
    loops = whole(_LOOP_NUM if loop_num is None else loop_num, "loop_num", maximum=MAX_LAYERS // n)
    tokens = whole(
        _LOOP_WINDOW if window is None else window, "loop_window_size", maximum=MAX_TOKENS
    )
    return loops, tokens


def _loop_layers(r: Reading, n: int) -> None:
    """The first pass's n full caches, then (loop_num - 1) x n caches of the loop window."""
    stated = r.config.get("sliding_window")
    if stated not in (None, 0):
        # vLLM would slide the first pass too (cache_config.sliding_window): a second window.
        raise SpecError(
            "", ["sliding_window: the Loop model's first pass would slide too; not supported"]
        )
    loops, window = _loops(r, n)
    r.spec["num_hidden_layers"] = loops * n
    r.spec["layer_types"] = ["full_attention"] * n + ["sliding_attention"] * ((loops - 1) * n)
    if loops > 1:
        r.spec["sliding_window"] = window
    r.notes.append(
        f"{n} decoder layers run loop_num {loops} times: {n} full caches and"
        f" {(loops - 1) * n} of loop_window_size {window} (vLLM iquest_loopcoder.py)"
    )


def _count_loop(r: Reading) -> Count:
    """modeling_iquestloopcoder.py: a Llama layer (no biases) plus, per layer, the loop gate
    (a head_dim -> 1 projection with bias for each head), counted over the config's layers,
    not the cache layers."""
    s = shapes(r)
    layers = whole(r.config.get("num_hidden_layers"), "num_hidden_layers")
    inter = read_size(r, "intermediate_size")
    gate = plain(s.heads * s.head_dim + s.heads)
    layer = s.attention() + mlp(s.hidden, inter) + norm(s.hidden).times(2) + gate
    return decoder(s, layer.times(layers))


register(
    FAMILY,
    "iquestcoder",
    Rule(defaults=_IQUESTCODER, parameters=count_llama),
    UNIFORM_KINDS,
    "IQuest-Coder: read as llama (vLLM serves IQuestCoderForCausalLM with its llama model; a"
    " stated sliding_window slides every layer); IQuestCoderConfig defaults",
    architectures=("IQuestCoderForCausalLM",),
)
register(
    FAMILY,
    "iquestloopcoder",
    Rule(layers=_loop_layers, reads_head_dim=False, parameters=_count_loop),
    UNIFORM_KINDS,
    "IQuest-Coder Loop: loop_num (default 2) x num_hidden_layers cache layers, the first pass"
    " full, later ones sliding over loop_window_size (default 64); head_dim hidden_size / heads"
    " (vLLM iquest_loopcoder.py)",
    architectures=("IQuestLoopCoderForCausalLM",),
)
