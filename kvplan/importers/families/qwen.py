"""Qwen 2, 2.5, 3 (dense and MoE), Qwen3-Next, Qwen3.5 (dense and MoE, with vision), and Xiaomi's
MiMo (a Qwen2 with MTP layers).

Qwen2-style configs carry a ``sliding_window`` that ``use_sliding_window: false`` switches off
(Qwen2.5 states 131072 and never slides); when on, layers from ``max_window_layers`` slide.
Qwen3-Next interleaves gated-delta linear attention with full attention every
``full_attention_interval`` layers (default 4: three linear, then one full); Qwen3.5 does the
same (its config states ``layer_types``), with a vision tower around the text model.
"""

from __future__ import annotations

from collections.abc import Mapping

from kvplan.importers.parameters import (
    Count,
    decoder,
    flag,
    gated_delta,
    linear,
    mlp,
    moe,
    norm,
    plain,
    shapes,
    size,
    vision,
)
from kvplan.importers.reading import Config, Reading, as_list, mapping, whole
from kvplan.importers.registry import register, register_wrapper
from kvplan.importers.rules import UNIFORM_KINDS, Rule, layers_explicit, pattern_every

FAMILY = "qwen"

#: Gated-delta linear attention: its state sizes, copied as they are.
LINEAR_KEYS = (
    "linear_num_key_heads",
    "linear_num_value_heads",
    "linear_key_head_dim",
    "linear_value_head_dim",
    "linear_conv_kernel_dim",
)


def _layers_qwen2(r: Reading, n: int) -> None:
    window = r.config.get("sliding_window")
    use = bool(r.config.get("use_sliding_window", False))
    if window is not None and not use:
        r.notes.append(f"sliding_window {window} inactive: use_sliding_window is false")
    if layers_explicit(r, n):
        return
    if window is not None:
        r.spec["sliding_window"] = window
        r.spec["use_sliding_window"] = use
        if r.config.get("max_window_layers") is not None:
            r.spec["max_window_layers"] = r.config["max_window_layers"]


def _layers_qwen3_next(r: Reading, n: int) -> None:
    if layers_explicit(r, n):
        return
    every = whole(r.get("full_attention_interval"), "full_attention_interval")
    pattern_every(
        r,
        n,
        lambda i: (i + 1) % every == 0,
        "linear_attention",
        f"full_attention_interval {every}",
    )


def _ffn(r: Reading, hidden: int) -> tuple[Count, Count]:
    """The MLP of a dense layer and of a sparse one: routed experts of
    ``moe_intermediate_size``, a router, and (Qwen2-MoE, Qwen3-Next) a shared expert of
    ``shared_expert_intermediate_size`` with its one-output gate."""
    dense = mlp(hidden, size(r, "intermediate_size"))
    num_experts = size(r, "num_experts", default=0, minimum=0)
    if not num_experts:
        return dense, dense
    shared = size(r, "shared_expert_intermediate_size", default=0, minimum=0)
    width, active = size(r, "moe_intermediate_size"), size(r, "num_experts_per_tok")
    sparse = moe(hidden, width, num_experts, active, shared) + plain(hidden if shared else 0)
    return dense, sparse


def _is_sparse(r: Reading, n: int) -> list[bool]:
    """Qwen MoE layers: every ``decoder_sparse_step``-th layer not in ``mlp_only_layers``."""
    if not size(r, "num_experts", default=0, minimum=0):
        return [False] * n
    step = size(r, "decoder_sparse_step", default=1)
    dense_only = set(as_list(r.get("mlp_only_layers") or [], "mlp_only_layers"))
    return [i not in dense_only and (i + 1) % step == 0 for i in range(n)]


def _count_qwen(r: Reading) -> Count:
    """Qwen2 (q, k, v biases), Qwen3 (q/k norms of head_dim; ``attention_bias`` on all four
    projections) and their MoE: two RMSNorms a layer."""
    s = shapes(r)
    if r.model_type.startswith("qwen2") or r.model_type == "mimo":
        attention = s.attention(flag(r, "qkv_bias", default=True), False)
    else:
        bias = flag(r, "attention_bias")
        attention = s.attention(bias, bias) + norm(s.head_dim).times(2)
    dense, sparse = _ffn(r, s.hidden)
    base = attention + norm(s.hidden).times(2)
    num_sparse = sum(_is_sparse(r, s.layers))
    return decoder(
        s, (base + sparse).times(num_sparse) + (base + dense).times(s.layers - num_sparse)
    )


def _hybrid(r: Reading, ffn: list[Count]) -> Count:
    """Qwen3-Next and Qwen3.5 layers: gated full attention (q_proj doubled for the output
    gate, q/k norms) or a gated delta net (``linear_*``), then ``ffn[i]``; two RMSNorms a
    layer. The multi-token-prediction layers are not counted."""
    s = shapes(r)
    q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
    bias = flag(r, "attention_bias")
    full = linear(s.hidden, 2 * q + 2 * kv, bias) + linear(q, s.hidden, bias)
    full += norm(s.head_dim).times(2)
    delta = gated_delta(
        s.hidden,
        size(r, "linear_num_key_heads"),
        size(r, "linear_num_value_heads"),
        size(r, "linear_key_head_dim"),
        size(r, "linear_value_head_dim"),
        size(r, "linear_conv_kernel_dim"),
    )
    layers = Count()
    for kind, mlp_part in zip(r.spec["layer_types"], ffn, strict=True):
        mixer = full if kind == "full_attention" else delta
        layers += mixer + mlp_part + norm(s.hidden).times(2)
    return decoder(s, layers)


def _count_qwen3_next(r: Reading) -> Count:
    """Qwen3-Next: the hybrid layers with the MoE block where ``_is_sparse``."""
    dense, sparse = _ffn(r, size(r, "hidden_size"))
    n = size(r, "num_hidden_layers")
    return _hybrid(r, [sparse if is_sparse else dense for is_sparse in _is_sparse(r, n)])


def _count_qwen3_5(r: Reading) -> Count:
    """Qwen3.5: the hybrid layers with a gated MLP of ``intermediate_size`` in every layer;
    Qwen3.5-MoE (vLLM's Qwen3_5DecoderLayer by model_type) with the sparse block in every
    layer: routed experts, a shared expert and its gate (``mlp_only_layers`` unread)."""
    hidden, n = size(r, "hidden_size"), size(r, "num_hidden_layers")
    if r.model_type == "qwen3_5_moe_text":
        shared = size(r, "shared_expert_intermediate_size")
        width, active = size(r, "moe_intermediate_size"), size(r, "num_experts_per_tok")
        part = moe(hidden, width, size(r, "num_experts"), active, shared) + plain(hidden)
    else:
        part = mlp(hidden, size(r, "intermediate_size"))
    return _hybrid(r, [part] * n)


# Qwen3_5VisionConfig defaults (configuration_qwen3_5.py; Qwen3.5-MoE's are the same).
_QWEN3_5_VISION = {
    "depth": 27,
    "hidden_size": 1152,
    "intermediate_size": 4304,
    "in_channels": 3,
    "patch_size": 16,
    "spatial_merge_size": 2,
    "temporal_patch_size": 2,
    "out_hidden_size": 3584,
    "num_position_embeddings": 2304,
}


def count_qwen3_5_vision(config: Config, text_hidden: int) -> Count:
    """Qwen3.5's vision tower: a Conv3d patch embedding with bias, a learned position table,
    ``depth`` blocks (two LayerNorms, biased qkv and proj, a biased fc1/fc2 MLP) and the patch
    merger (LayerNorm, fc1 over ``spatial_merge_size``^2 patches, fc2 to ``out_hidden_size``,
    which released configs state as the text width; the class default 3584 otherwise)."""
    tower = mapping(config.get("vision_config"), "vision_config")
    v = Reading("qwen3_5_vision", tower, _QWEN3_5_VISION)
    h, inner = size(v, "hidden_size"), size(v, "intermediate_size")
    patch, frames = size(v, "patch_size"), size(v, "temporal_patch_size")
    merged = h * size(v, "spatial_merge_size") ** 2
    embed = plain(size(v, "in_channels") * frames * patch * patch * h + h)
    embed += plain(size(v, "num_position_embeddings") * h)
    block = plain(4 * h) + linear(h, 3 * h, True) + linear(h, h, True)
    block += linear(h, inner, True) + linear(inner, h, True)
    merger = plain(2 * h) + linear(merged, merged, True)
    merger += linear(merged, size(v, "out_hidden_size"), True)
    # Qwen3-VL: one more merger per deepstack layer, its LayerNorm over the merged patches
    levels = len(as_list(tower.get("deepstack_visual_indexes", []), "deepstack_visual_indexes"))
    deepstack = (merger + plain(2 * merged - 2 * h)).times(levels)
    del text_hidden  # the projection's width is out_hidden_size, stated or the class default
    return vision(embed + block.times(size(v, "depth")) + merger + deepstack)


_QWEN2 = Rule(layers=_layers_qwen2, parameters=_count_qwen)
_SLIDING = "sliding_window counts only with use_sliding_window (from max_window_layers)"

_CLASSES = {
    "qwen2": "Qwen2ForCausalLM",
    "qwen2_moe": "Qwen2MoeForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "qwen3_moe": "Qwen3MoeForCausalLM",
}
for _type, _class in _CLASSES.items():
    register(FAMILY, _type, _QWEN2, UNIFORM_KINDS, _SLIDING, architectures=(_class,))
register(
    FAMILY,
    "qwen3_next",
    Rule(
        layers=_layers_qwen3_next,
        extra=LINEAR_KEYS,
        defaults={"full_attention_interval": 4},
        parameters=_count_qwen3_next,
    ),
    ("full_attention", "linear_attention"),
    "linear attention, full every full_attention_interval layers (default 4); linear_* state",
    architectures=("Qwen3NextForCausalLM",),
)
# MiMo's config is Qwen2's plus num_nextn_predict_layers; vLLM's MiMoModel is its Qwen2Model.
register(
    FAMILY,
    "mimo",
    _QWEN2,
    UNIFORM_KINDS,
    "MiMo: read as qwen2 (vLLM's MiMoModel extends Qwen2Model); MTP layers not counted",
    architectures=("MiMoForCausalLM",),
)

# Qwen3_5TextConfig / Qwen3_5MoeTextConfig defaults (configuration_qwen3_5*.py) for the keys that
# size the cache or the weights.
_QWEN3_5_SHARED = {
    "full_attention_interval": 4,
    "vocab_size": 248320,
    "max_position_embeddings": 32768,
    "num_attention_heads": 16,
    "head_dim": 256,
    "linear_conv_kernel_dim": 4,
    "linear_key_head_dim": 128,
    "linear_value_head_dim": 128,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 32,
    "tie_word_embeddings": False,
}
_QWEN3_5_DENSE = _QWEN3_5_SHARED | {
    "hidden_size": 4096,
    "intermediate_size": 12288,
    "num_hidden_layers": 32,
    "num_key_value_heads": 4,
}
_QWEN3_5_MOE = _QWEN3_5_SHARED | {
    "hidden_size": 2048,
    "num_hidden_layers": 40,
    "num_key_value_heads": 2,
    "moe_intermediate_size": 512,
    "shared_expert_intermediate_size": 512,
    "num_experts_per_tok": 8,
    "num_experts": 256,
}


def _qwen3_5_state(r: Reading) -> None:
    """A stated ``mamba_ssm_dtype`` is the SSM state's dtype, the conv tail staying in the model
    dtype: vLLM's Qwen3_5 config hook (model_executor/models/config.py, since PR 34489 of
    February 2026) adopts it when ``--mamba-ssm-cache-dtype`` is auto."""
    stated = r.config.get("mamba_ssm_dtype")
    if stated is not None:
        r.spec["state_dtype"] = stated
        r.spec["conv_dtype"] = r.spec["torch_dtype"]


def _qwen3_5_rule(defaults: Mapping[str, object]) -> Rule:
    """Qwen3.5 reads like Qwen3-Next: vLLM's qwen3_5.py builds Qwen3NextAttention and the gated
    delta net from layer_types and sizes the recurrent state from the same linear_* keys."""
    return Rule(
        layers=_layers_qwen3_next,
        extra=LINEAR_KEYS,
        defaults=defaults,
        state=_qwen3_5_state,
        parameters=_count_qwen3_5,
    )


_QWEN3_5_NOTES = (
    "Qwen3_5TextConfig / Qwen3_5MoeTextConfig: layer_types, else linear attention with full"
    " every full_attention_interval (4) layers; linear_* state; vLLM qwen3_5.py"
)
register(
    FAMILY,
    "qwen3_5_text",
    _qwen3_5_rule(_QWEN3_5_DENSE),
    ("full_attention", "linear_attention"),
    _QWEN3_5_NOTES,
    architectures=("Qwen3_5ForCausalLM",),
)
register(
    FAMILY,
    "qwen3_5_moe_text",
    _qwen3_5_rule(_QWEN3_5_MOE),
    ("full_attention", "linear_attention"),
    _QWEN3_5_NOTES + " (every layer MoE)",
    architectures=("Qwen3_5MoeForCausalLM",),
)
register_wrapper(
    FAMILY,
    "qwen3_5",
    "qwen3_5_text",
    "Qwen3.5 with vision (vLLM: Qwen3_5ForConditionalGeneration): the text model in text_config",
    vision=count_qwen3_5_vision,
    engines=("vllm",),
)
# Qwen3-VL: Qwen3 (dense or MoE) in text_config, Qwen3.5's vision tower plus deepstack mergers.
for _text, _base in (("qwen3_vl_text", "qwen3"), ("qwen3_vl_moe_text", "qwen3_moe")):
    register(FAMILY, _text, _QWEN2, UNIFORM_KINDS, f"Qwen3-VL's text model: read as {_base}")
for _wrapper, _text, _class in (
    ("qwen3_vl", "qwen3_vl_text", "Qwen3VLForConditionalGeneration"),
    ("qwen3_vl_moe", "qwen3_vl_moe_text", "Qwen3VLMoeForConditionalGeneration"),
):
    register_wrapper(
        FAMILY,
        _wrapper,
        _text,
        "Qwen3-VL: the text model in text_config; the vision tower with its deepstack mergers",
        vision=count_qwen3_5_vision,
        architectures=(_class,),
    )
register_wrapper(
    FAMILY,
    "qwen3_5_moe",
    "qwen3_5_moe_text",
    "Qwen3.5-MoE with vision (vLLM: Qwen3_5MoeForConditionalGeneration): text in text_config",
    vision=count_qwen3_5_vision,
    engines=("vllm",),
)
