"""Recursive Superintelligence Flint (``flint``): a Qwen3-MoE-like decoder with attention sinks,
sliding and global layers, dense MLPs on ``mlp_only_layers``; served by vLLM 0.33 (models/flint,
FlintForCausalLM; not in vLLM 0.32).

vLLM reads the file through its own FlintConfig (models/flint/configs.py, which it registers
over transformers' configuration_flint.py): absent ``layer_types`` is every layer full,
absent ``mlp_only_layers`` no dense layer, and ``use_sliding_window: false`` drops the window
(default 513, the current token included). Its attention caches ``num_key_value_heads`` K/V
heads of ``head_dim`` on every layer, over the window on ``sliding_attention`` layers; a
learned sink logit per head caches nothing. flint.py does not clear the engine-wide window,
which vLLM sets when ``layer_types`` holds one kind only: then every layer slides over it.

Worked example (FlintConfig defaults, bf16): 49 layers, all listed full, window 513: every
layer slides, 2 x 4 x 128 x 2 = 2,048 B a token each, at most 49 x 2,048 x 513 = 51,480,576 B
a sequence.
"""

from __future__ import annotations

from kvplan.errors import SpecError
from kvplan.importers.parameters import (
    Count,
    decoder,
    flag,
    mlp,
    moe,
    norm,
    plain,
    shapes,
    size,
)
from kvplan.importers.reading import Reading, as_list, whole
from kvplan.importers.registry import register
from kvplan.importers.rules import UNIFORM_KINDS, Rule, check_kinds
from kvplan.model.limits import MAX_LAYERS

FAMILY = "flint"

# FlintConfig defaults (vLLM models/flint/configs.py) for the keys that size the cache or the
# weights; transformers' class has the same values (its layer_types and mlp_only_layers differ).
_DEFAULTS = {
    "vocab_size": 150144,
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "num_hidden_layers": 49,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "max_position_embeddings": 262144,
    "sliding_window": 513,
    "moe_intermediate_size": 512,
    "shared_expert_intermediate_size": 1024,
    "num_experts": 256,
    "num_experts_per_tok": 6,
    "tie_word_embeddings": False,
}


def _layers_flint(r: Reading, n: int) -> None:
    given = r.config.get("layer_types")
    if given is None:
        kinds = ["full_attention"] * n
        r.notes.append("layer_types absent: every layer listed full (vLLM FlintConfig)")
    else:
        kinds = [str(k) for k in as_list(given, "layer_types")]
        check_kinds(kinds, UNIFORM_KINDS)  # the config class allows these two only
        if len(kinds) != n:
            raise SpecError("", [f"layer_types: has {len(kinds):,} entries but {n} layers"])
    stated_off = r.config.get("use_sliding_window") is False or (
        "sliding_window" in r.config and r.config["sliding_window"] is None
    )
    window = None if stated_off else r.get("sliding_window")
    if window is None:
        r.spec["layer_types"] = ["full_attention"] * n
        return
    if len(set(kinds)) == 1:
        # one kind is not interleaved: vLLM sets the engine-wide window, every layer slides
        kinds = ["sliding_attention"] * n
        r.notes.append(f"one layer kind listed: every layer slides over {window} (vLLM)")
    r.spec["layer_types"] = kinds
    if "sliding_attention" in kinds:
        r.spec["sliding_window"] = window


def _dense_layers(r: Reading, n: int) -> int:
    given = r.config.get("mlp_only_layers")
    if given is None:
        return 0  # vLLM FlintConfig: none
    stated = as_list(given, "mlp_only_layers")
    layers = {whole(i, "mlp_only_layers", minimum=0, maximum=MAX_LAYERS) for i in stated}
    return sum(1 for i in layers if i < n)


def _count_flint(r: Reading) -> Count:
    """vLLM models/flint: per layer q, k, v, o, q/k RMSNorms of head_dim, a sink per head and
    two RMSNorms; a dense gated MLP on ``mlp_only_layers``, elsewhere ``num_experts`` experts,
    a gated shared expert of ``shared_expert_intermediate_size`` and a router without bias;
    untied head, final norm."""
    s = shapes(r)
    bias = flag(r, "attention_bias")
    layer = s.attention(bias) + norm(s.head_dim).times(2) + plain(s.heads) + norm(s.hidden).times(2)
    dense = mlp(s.hidden, size(r, "intermediate_size"))
    sparse = moe(
        s.hidden,
        size(r, "moe_intermediate_size"),
        size(r, "num_experts"),
        size(r, "num_experts_per_tok"),
        size(r, "shared_expert_intermediate_size"),
    )
    num_dense = _dense_layers(r, s.layers)
    ffn = dense.times(num_dense) + sparse.times(s.layers - num_dense)
    return decoder(s, layer.times(s.layers) + ffn)


register(
    FAMILY,
    "flint",
    Rule(layers=_layers_flint, defaults=_DEFAULTS, parameters=_count_flint),
    UNIFORM_KINDS,
    "Flint (vLLM 0.33 models/flint): layer_types (absent: all full), sliding_window 513 on the"
    " sliding ones, on every layer when one kind is listed; vLLM FlintConfig defaults",
    architectures=("FlintForCausalLM",),
)
