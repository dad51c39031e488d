"""NVIDIA Nemotron Labs Dory (``dory``): a looped nGPT decoder whose layers are each either
attention or an MLP, served by vLLM 0.33 (dory.py, DoryForCausalLM; not in vLLM 0.32).

vLLM reads the file through its own DoryConfig (transformers_utils/configs/dory.py, which it
registers over transformers' configuration_dory.py). Both count the physical layers as the
file writes them: ``layer_types`` alternates an attention kind with ``mlp`` and
``num_hidden_layers``, ``n_input_layers``, ``n_output_layers`` count both (transformers' class
halves them in memory and doubles them again when it writes). An ``mlp`` layer caches nothing,
an attention layer ``num_key_value_heads`` K/V heads of ``head_dim``, a ``sliding_attention``
one over ``sliding_window`` tokens. The middle ``n_recurrent_layers`` run ``n_recurrent_loops``
times; with ``recurrent_kv_cache_mode`` ``per_loop`` each later loop registers one more cache
per attention layer (virtual layer ``loop * num_hidden_layers + i``), with ``last_loop`` the
loops overwrite one cache. kvplan lists those extra caches after the physical layers, as for
IQuest Loop. vLLM 0.33 serves it with tensor_parallel_size 1 only.

Worked example (72 layers, 36 of them attention with 9 full and 27 sliding over 1,024; 4 K/V
heads of 256; 16 input and 16 output layers, 2 loops, as transformers' DoryConfig writes its
defaults): the 40 recurrent layers hold 20 attention layers, so 36 + 20 = 56 caches of
2 x 4 x 256 x 2 = 4,096 B a token in bf16. vLLM's own defaults (no input or output layers, one
loop) keep the 36.
"""

from __future__ import annotations

from kvplan.errors import SpecError
from kvplan.importers.parameters import (
    Count,
    linear,
    mlp,
    plain,
    shapes,
    size,
    total,
)
from kvplan.importers.reading import Reading, as_list, whole
from kvplan.importers.registry import register
from kvplan.importers.rules import Rule, check_kinds
from kvplan.model.limits import MAX_LAYERS

FAMILY = "dory"

# DoryConfig defaults (vLLM transformers_utils/configs/dory.py) for the keys that size the
# cache or the weights.
_DEFAULTS = {
    "vocab_size": 131072,
    "hidden_size": 2560,
    "intermediate_size": 7168,
    "num_hidden_layers": 72,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "max_position_embeddings": 8192,
    "sliding_window": 1024,
    "n_input_layers": 0,
    "n_output_layers": 0,
    "n_recurrent_loops": 1,
    "recurrent_kv_cache_mode": "per_loop",
    "tie_word_embeddings": False,
}

_KINDS = {"sliding_attention": "sliding_attention", "full_attention": "full_attention"}
_KINDS_MLP = {**_KINDS, "mlp": "no_cache"}


def _physical(r: Reading, n: int) -> list[str]:
    """The file's ``layer_types`` (``mlp`` -> no cache), else the config class's pattern: odd
    layers MLP, even ones full where i % 8 == 6, else sliding."""
    given = r.config.get("layer_types")
    if given is None:
        r.notes.append("layer_types from DoryConfig: odd layers mlp, full where i % 8 == 6")
        return [
            "no_cache" if i % 2 else "full_attention" if i % 8 == 6 else "sliding_attention"
            for i in range(n)
        ]
    kinds = as_list(given, "layer_types")
    if len(kinds) != n:
        raise SpecError("", [f"layer_types: has {len(kinds):,} entries but {n} layers"])
    check_kinds(kinds, _KINDS_MLP)
    return [_KINDS_MLP[k] for k in kinds]


def _recurrent(r: Reading, n: int) -> tuple[int, int, int]:
    """First recurrent layer, their number and the extra cache passes (0 for ``last_loop``)."""
    first = whole(r.get("n_input_layers"), "n_input_layers", minimum=0)
    last = whole(r.get("n_output_layers"), "n_output_layers", minimum=0)
    stated = r.config.get("n_recurrent_layers")
    middle = n - first - last if stated is None else whole(stated, "n_recurrent_layers", 0)
    if middle < 0 or first + middle + last != n:
        raise SpecError(
            "",
            [f"n_recurrent_layers: input, recurrent and output layers must sum to {n}"],
        )
    loops = whole(r.get("n_recurrent_loops"), "n_recurrent_loops", maximum=MAX_LAYERS)
    mode = r.get("recurrent_kv_cache_mode")
    if mode not in ("per_loop", "last_loop"):
        raise SpecError("", ["recurrent_kv_cache_mode: allowed: per_loop, last_loop"])
    return first, middle, (loops - 1 if mode == "per_loop" else 0)


def _layers_dory(r: Reading, n: int) -> None:
    kinds = _physical(r, n)
    if set(kinds) == {"full_attention"} and r.get("sliding_window") is not None:
        # one kind is not interleaved: vLLM sets the engine-wide window, which dory.py keeps
        kinds = ["sliding_attention"] * n
        r.notes.append("every layer listed full_attention: all slide (vLLM's engine window)")
    first, middle, extra = _recurrent(r, n)
    looped = [k for k in kinds[first : first + middle] if k != "no_cache"]
    if len(kinds) + extra * len(looped) > MAX_LAYERS:
        raise SpecError("", [f"n_recurrent_loops: more than {MAX_LAYERS:,} cache layers"])
    r.spec["num_hidden_layers"] = len(kinds) + extra * len(looped)
    r.spec["layer_types"] = kinds + looped * extra
    if "sliding_attention" in kinds:
        r.spec["sliding_window"] = r.get("sliding_window")
    r.notes.append(
        f"{n} layers, {len(looped)} recurrent attention layers cached {extra} more time(s)"
        " (n_recurrent_loops, recurrent_kv_cache_mode; vLLM dory.py)"
    )


def _count_dory(r: Reading) -> Count:
    """vLLM dory.py, counted over the config's layers: an attention layer q, k, v, an output
    gate g_proj and o_proj, the scales sqk and s_gate (one per query dim) and attn_alpha; an MLP
    layer gate, up and down, suv_gate and suv_up and mlp_alpha; no final norm; an untied head
    with a logit_scale per token of the vocabulary."""
    s = shapes(r)
    n = whole(r.get("num_hidden_layers"), "num_hidden_layers")
    kinds = r.spec["layer_types"][:n]
    inter = size(r, "intermediate_size")
    q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
    attention = total(
        [linear(s.hidden, q + 2 * kv), linear(s.hidden, q), linear(q, s.hidden)]
    ) + plain(2 * q + s.hidden)
    feed = mlp(s.hidden, inter) + plain(2 * inter + s.hidden)
    num_mlp = kinds.count("no_cache")
    layers = attention.times(n - num_mlp) + feed.times(num_mlp)
    return Count(s.vocab * s.hidden * 2 + s.vocab) + layers


register(
    FAMILY,
    "dory",
    Rule(layers=_layers_dory, defaults=_DEFAULTS, parameters=_count_dory),
    ("full_attention", "sliding_attention", "no_cache"),
    "Dory (vLLM 0.33 dory.py): layer_types attention or mlp (no cache); per_loop keeps one more"
    " cache per recurrent attention layer and extra loop; vLLM DoryConfig defaults",
    architectures=("DoryForCausalLM",),
)
