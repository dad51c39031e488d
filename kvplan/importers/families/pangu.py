"""Huawei openPangu Embedded (``PanguEmbedded``, remote code; vLLM openpangu.py,
``OpenPanguEmbeddedAttention``): GQA read like Llama, ``num_key_value_heads`` K/V heads
(absent: every head) of ``head_dim`` (absent: hidden_size / heads).

``interleaved_sliding_window``, when stated, makes layers slide: an integer is every layer's
window, a list gives layer i the window of entry i % len (null: full attention), as vLLM reads
it. A spec holds one window, so a list of different windows is refused.

openPangu Ultra MoE (``pangu_ultra_moe``) is DeepSeek V3's MLA and MoE layout in the same
vLLM file, openPangu Pro MoE V2 (``PanguProMoE``) its sink attention with that MoE layout; their
rules are the blocks at the end.
"""

from __future__ import annotations

from typing import Any

from kvplan.errors import SpecError
from kvplan.importers.families.deepseek import mla_attention
from kvplan.importers.parameters import (
    Count,
    decoder,
    flag,
    linear,
    mlp,
    moe,
    norm,
    plain,
    shapes,
    size,
)
from kvplan.importers.reading import Reading, whole
from kvplan.importers.registry import register
from kvplan.importers.rules import UNIFORM_KINDS, Rule, layers_uniform
from kvplan.model.limits import MAX_DIM

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


# openPangu Ultra MoE (``pangu_ultra_moe``; vLLM openpangu.py, PanguUltraMoEForCausalLM). vLLM
# counts the type among DeepSeek's MLA models (model_arch_config_convertor.py,
# is_deepseek_mla), and OpenPanguDecoderLayer builds OpenPanguMLAAttention when the config
# has qk_nope_head_dim, qk_rope_head_dim, v_head_dim and kv_lora_rank: an MLAAttentionSpec of
# one latent of kv_lora_rank + qk_rope_head_dim a token and layer, no factor 2, no window.
# Without those keys the layer would be sink or plain GQA attention, which this rule does not
# read for the type, so it refuses them.
_PANGU_MLA = ("kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")


def _pangu_mla_state(r: Reading) -> None:
    missing = [k for k in _PANGU_MLA if k != "q_lora_rank" and r.config.get(k) is None]
    if missing:
        raise SpecError(
            "",
            [
                f"{', '.join(missing)}: required (vLLM openpangu.py builds MLA only when"
                " qk_nope_head_dim, qk_rope_head_dim, v_head_dim and kv_lora_rank are stated)"
            ],
        )
    r.notes.append("MLA (vLLM openpangu.py): one latent of kv_lora_rank + qk_rope_head_dim")


def _count_pangu_moe(r: Reading, attention: Count) -> Count:
    """vLLM openpangu.py's MoE models: ``attention`` a layer; two RMSNorms a layer and two
    more with ``sandwich_norm``; a gated MLP of ``intermediate_size`` on the first
    ``first_k_dense_replace`` layers, then ``n_routed_experts`` experts of
    ``moe_intermediate_size``, ``n_shared_experts`` shared ones as one MLP, the router and,
    with ``router_enable_expert_bias``, its correction bias. MTP layers are not counted."""
    s = shapes(r)
    base = attention + norm(s.hidden).times(4 if flag(r, "sandwich_norm") else 2)
    dense = base + mlp(s.hidden, size(r, "intermediate_size"))
    width = size(r, "moe_intermediate_size")
    shared = size(r, "n_shared_experts", default=0, minimum=0) * width
    num_experts, active = size(r, "n_routed_experts"), size(r, "num_experts_per_tok")
    bias = flag(r, "router_enable_expert_bias")
    sparse = base + moe(s.hidden, width, num_experts, active, shared, bias)
    num_dense = min(size(r, "first_k_dense_replace", minimum=0), s.layers)
    return decoder(s, dense.times(num_dense) + sparse.times(s.layers - num_dense))


def _count_pangu_mla(r: Reading) -> Count:
    """MLA (the DeepSeek projections, ``mla_attention``) in ``_count_pangu_moe``'s layers."""
    s = shapes(r)
    return _count_pangu_moe(r, mla_attention(r, s.hidden, s.heads))


register(
    FAMILY,
    "pangu_ultra_moe",
    Rule(
        extra=_PANGU_MLA, reads_head_dim=False, state=_pangu_mla_state, parameters=_count_pangu_mla
    ),
    ("mla_latent",),
    "openPangu Ultra MoE (vLLM openpangu.py): MLA like DeepSeek V3, one latent of"
    " kv_lora_rank + qk_rope_head_dim per layer (no factor 2)",
    architectures=("PanguUltraMoEForCausalLM",),
)


# openPangu Pro MoE V2 (``PanguProMoE``, remote code; vLLM openpangu.py,
# PanguProMoEV2ForCausalLM, openPangu-R-72B). Without the MLA keys and with
# ``param_sink_number`` > 0 every layer is OpenPanguSinkAttention: K heads of qk_nope_dim +
# qk_rope_dim, V heads of ``v_channels`` (FlashAttentionDiffKV), through StaticSinkAttention,
# whose SinkFullAttentionSpec (kv_cache_interface.py) pages every token of every layer: the
# spec's full attention with ``v_head_dim``. The sink's keys and values are the layer's own
# parameters, not a per-request cache (0.32's SinkFullAttentionManager holds no sink blocks).
# vLLM reads only ``interleaved_sliding_window`` for a window (never ``layer_types``); what the
# sink spec does with one is not in the files read, so a stated one is refused.


#: The sink attention's K dims (no-RoPE and RoPE parts) and V dim.
_SINK_DIMS = ("qk_nope_dim", "qk_rope_dim", "v_channels")


def _pangu_sink_layers(r: Reading, n: int) -> None:
    if r.config.get("interleaved_sliding_window") is not None:
        raise SpecError(
            "",
            [
                "interleaved_sliding_window: a window on sink attention layers is not read"
                " (vLLM 0.32 pages them through SinkFullAttentionSpec)"
            ],
        )
    r.notes.append(f"{n} sink attention layers, every token kept (vLLM SinkFullAttentionSpec)")


def _pangu_sink_state(r: Reading) -> None:
    if any(r.config.get(k) is not None for k in ("kv_lora_rank", "qk_nope_head_dim")):
        raise SpecError("", ["kv_lora_rank: MLA keys select MLA; read as pangu_ultra_moe"])
    sink = whole(r.config.get("param_sink_number", 0), "param_sink_number", minimum=0)
    dims = [r.config.get(k) for k in _SINK_DIMS]
    if not sink or any(d is None for d in dims):
        raise SpecError(
            "",
            [
                "param_sink_number, qk_nope_dim, qk_rope_dim, v_channels: required (vLLM"
                " builds PanguProMoEV2 layers as sink attention)"
            ],
        )
    nope, rope, v = (whole(d, k, maximum=MAX_DIM) for d, k in zip(dims, _SINK_DIMS, strict=True))
    r.spec["head_dim"], r.spec["v_head_dim"] = nope + rope, v
    r.notes.append(f"head_dim {nope + rope}: qk_nope_dim + qk_rope_dim; v_head_dim {v}: v_channels")


def _sink_attention(r: Reading) -> Count:
    """OpenPanguSinkAttention: qkv_proj to q, k (heads of head_dim) and v (of v_channels),
    biased with ``qkv_bias`` (absent: ``attention_bias`` or ``bias``); o_proj from heads x
    v_channels (biased with ``attention_bias`` or ``bias``); k_layernorm of head_dim; the
    sink's param_sink_key (sink x K/V heads x head_dim) and, with ``param_sink_with_value``,
    param_sink_value (sink x K/V heads x v_channels)."""
    s = shapes(r)
    v_dim, sink = r.spec["v_head_dim"], size(r, "param_sink_number")
    out_bias = flag(r, "attention_bias") or flag(r, "bias")
    qkv_bias = flag(r, "qkv_bias", default=out_bias)
    q, k, v = s.heads * s.head_dim, s.kv_heads * s.head_dim, s.kv_heads * v_dim
    out = linear(s.hidden, q + k + v, qkv_bias) + linear(s.heads * v_dim, s.hidden, out_bias)
    values = sink * k + (sink * v if flag(r, "param_sink_with_value") else 0)
    return out + norm(s.head_dim) + plain(values)


def _count_pangu_sink(r: Reading) -> Count:
    """Sink attention (``_sink_attention``) in ``_count_pangu_moe``'s layers."""
    return _count_pangu_moe(r, _sink_attention(r))


register(
    FAMILY,
    "PanguProMoE",
    Rule(
        layers=_pangu_sink_layers,
        reads_head_dim=False,
        state=_pangu_sink_state,
        parameters=_count_pangu_sink,
    ),
    ("full_attention",),
    "openPangu Pro MoE V2 (vLLM openpangu.py): sink attention on every layer, K of qk_nope_dim"
    " + qk_rope_dim and V of v_channels, every token kept (SinkFullAttentionSpec)",
    architectures=("PanguProMoEV2ForCausalLM",),
)
