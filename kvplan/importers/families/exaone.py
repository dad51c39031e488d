"""LG AI EXAONE 3.0 / 3.5 (``exaone``) and EXAONE 4.0 (``exaone4``).

EXAONE 3.x is Llama-shaped under GPT-era names (``num_layers``, ``layer_norm_epsilon``,
``activation_function``); its config class ships with the checkpoint (remote code) and vLLM's
exaone.py reads ``num_key_value_heads`` (absent: one per head) and ``head_dim`` (absent:
hidden_size / heads) like Llama.

EXAONE 4.0 mixes sliding and global layers: ``layer_types`` when stated, else built by
Exaone4Config from ``sliding_window_pattern`` (default 4: a layer slides unless
``(i + 1) % 4 == 0``); a pattern string such as ``"LLLG"`` names each layer of the period
(L local, G global); no ``sliding_window`` means every layer is global. vLLM's exaone4.py reads
the resulting ``layer_types``.
"""

from __future__ import annotations

from kvplan.errors import SpecError
from kvplan.importers.parameters import Count, decoder, mlp, moe, norm, shapes, size
from kvplan.importers.reading import Reading, whole
from kvplan.importers.registry import register, register_wrapper
from kvplan.importers.rules import UNIFORM_KINDS, Rule, layers_explicit
from kvplan.units import abbreviate

FAMILY = "exaone"

# Exaone4Config defaults (configuration_exaone4.py) for the keys that size the cache or weights.
_EXAONE4 = {
    "vocab_size": 102400,
    "hidden_size": 4096,
    "intermediate_size": 16384,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "max_position_embeddings": 2048,
    "tie_word_embeddings": False,
}


def _period(r: Reading, n: int) -> list[str]:
    """One period of layer kinds from ``sliding_window_pattern`` (an int or an L/G string)."""
    pattern = r.config.get("sliding_window_pattern")
    if pattern is None:
        pattern = 4
        r.notes.append("sliding_window_pattern 4: the exaone4 default (not in file)")
    if isinstance(pattern, str):
        if not pattern or set(pattern.upper()) - {"L", "G"}:
            raise SpecError(
                "", [f"sliding_window_pattern: L and G letters expected, got {abbreviate(pattern)}"]
            )
        return ["sliding_attention" if c == "L" else "full_attention" for c in pattern.upper()]
    every = whole(pattern, "sliding_window_pattern", maximum=n)
    return ["sliding_attention"] * (every - 1) + ["full_attention"]


def _window(r: Reading, model_type: str) -> int | None:
    """The config's ``sliding_window`` (4096 when absent, as both config classes set it);
    None, noted, when the file says null: every layer global."""
    window: int | None = r.config.get("sliding_window", 4096)
    if window is None:
        r.notes.append("sliding_window null: every layer global")
    elif "sliding_window" not in r.config:
        r.notes.append(f"sliding_window 4096: the {model_type} default (not in file)")
    return window


def _layers_exaone4(r: Reading, n: int) -> None:
    if layers_explicit(r, n):
        return
    window = _window(r, "exaone4")
    if window is None:
        return
    period = _period(r, n)
    r.spec["sliding_window"] = window
    r.spec["layer_types"] = [period[i % len(period)] for i in range(n)]


def _count_exaone4(r: Reading) -> Count:
    """EXAONE 4.0 (modeling_exaone4.py): bias-free GQA with RMSNorms on q and k per head, a
    gated MLP, the two norms after attention and after the MLP; untied by default."""
    s = shapes(r)
    attention = s.attention() + norm(s.head_dim).times(2)
    layer = attention + mlp(s.hidden, size(r, "intermediate_size")) + norm(s.hidden).times(2)
    return decoder(s, layer.times(s.layers))


register(
    FAMILY,
    "exaone",
    Rule(),
    UNIFORM_KINDS,
    "EXAONE 3.x: read as llama (num_layers; remote-code config, vLLM exaone.py)",
    architectures=("ExaoneForCausalLM",),
)
register(
    FAMILY,
    "exaone4",
    Rule(layers=_layers_exaone4, defaults=_EXAONE4, parameters=_count_exaone4),
    ("full_attention", "sliding_attention"),
    "layer_types, else sliding_window_pattern (default 4, or an L/G string); no window: global",
    architectures=("Exaone4ForCausalLM",),
)
# Exaone4_5_Config reads a text_config of model_type exaone4_5_text as exaone4.
register(
    FAMILY,
    "exaone4_5_text",
    Rule(layers=_layers_exaone4, defaults=_EXAONE4, parameters=_count_exaone4),
    ("full_attention", "sliding_attention"),
    "EXAONE 4.5's text model: read as exaone4 (Exaone4_5_Config maps it so)",
)
register_wrapper(
    FAMILY,
    "exaone4_5",
    "exaone4",
    "EXAONE 4.5 with vision (vLLM: Exaone4_5_ForConditionalGeneration): text in text_config;"
    " the vision tower is not counted",
    engines=("vllm",),
)


def _layers_exaone_moe(r: Reading, n: int) -> None:
    windows = r.config.get("sliding_windows")
    if windows is not None and len({w for w in windows if w}) > 1:
        raise SpecError("", ["sliding_windows: layers of different windows are not supported"])
    if layers_explicit(r, n):
        if windows is not None and any(windows):
            r.spec["sliding_window"] = next(w for w in windows if w)
        return
    window = _window(r, "exaone_moe")
    if window is None:
        return
    every = r.config.get("sliding_window_pattern", 4)
    every = whole(every, "sliding_window_pattern", maximum=n)
    r.spec["sliding_window"] = window
    r.spec["layer_types"] = [
        "sliding_attention" if (i + 1) % every else "full_attention" for i in range(n)
    ]


def _count_exaone_moe(r: Reading) -> Count:
    """K-EXAONE (modeling_exaone_moe.py): exaone4's attention and norms; a dense gated MLP in
    the first ``first_k_dense_replace`` layers (``mlp_layer_types`` when stated), routed experts
    of ``moe_intermediate_size`` with ``num_shared_experts`` shared ones and a router with a
    score-correction bias elsewhere."""
    s = shapes(r)
    attention = s.attention() + norm(s.head_dim).times(2) + norm(s.hidden).times(2)
    dense = attention + mlp(s.hidden, size(r, "intermediate_size"))
    width = size(r, "moe_intermediate_size")
    shared = width * size(r, "num_shared_experts", default=0, minimum=0)
    routed = moe(
        s.hidden,
        width,
        size(r, "num_experts"),
        size(r, "num_experts_per_tok"),
        shared,
        router_bias=True,
    )
    kinds = r.config.get("mlp_layer_types")
    if kinds is None:
        first = size(r, "first_k_dense_replace", minimum=0)
        kinds = ["dense" if i < first else "sparse" for i in range(s.layers)]
    num_dense = sum(1 for kind in kinds if kind == "dense")
    layers = dense.times(num_dense) + (attention + routed).times(s.layers - num_dense)
    return decoder(s, layers)


# ExaoneMoeConfig defaults (configuration_exaone_moe.py) for the keys that size cache or weights.
_EXAONE_MOE = {
    **_EXAONE4,
    "first_k_dense_replace": 1,
    "moe_intermediate_size": 1024,
    "num_experts": 64,
    "num_experts_per_tok": 8,
    "num_shared_experts": 1,
}
register(
    FAMILY,
    "exaone_moe",
    Rule(layers=_layers_exaone_moe, defaults=_EXAONE_MOE, parameters=_count_exaone_moe),
    ("full_attention", "sliding_attention"),
    "K-EXAONE: layer_types, else sliding unless (i + 1) % sliding_window_pattern == 0 (default"
    " 4, window 4096); one window (ExaoneMoeConfig, vLLM exaone_moe.py)",
    architectures=("ExaoneMoEForCausalLM", "ExaoneMoeForCausalLM"),
)
