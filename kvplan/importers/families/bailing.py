"""inclusionAI Ling / Ring (``bailing_moe``: BailingMoeForCausalLM and BailingMoeV2ForCausalLM)
and BharatGen Param2 (``param2moe``), which keeps the same keys.

GQA read like Llama: ``num_key_value_heads`` K/V heads of ``head_dim`` (absent or null:
hidden_size / heads), as vLLM's bailing_moe.py reads them; the config class ships with the
checkpoint (remote code). The experts share one cache; the optional q/k norms and partial
rotary change the weights or the positions, not what a token caches.

Ling / Ring 2.5 (BailingMoeV2_5ForCausalLM: lightning attention beside MLA) is the block at the
end, ``V25_RULE``.
"""

from __future__ import annotations

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
from kvplan.importers.rules import UNIFORM_KINDS, Rule
from kvplan.model.limits import MAX_DIM

FAMILY = "bailing"


def count_bailing(r: Reading) -> Count:
    """vLLM bailing_moe.py: a fused query_key_value (bias with ``use_bias`` or
    ``use_qkv_bias``) and a dense output (``use_bias``), q/k norms with ``use_qk_norm``
    (RMSNorm with ``use_rmsnorm``, else LayerNorm), two RMSNorms a layer; the first
    ``first_k_dense_replace`` layers a gated MLP of ``intermediate_size``, the rest
    ``num_experts`` experts of ``moe_intermediate_size``, ``num_shared_experts`` shared ones as
    one MLP, a router and, with ``moe_router_enable_expert_bias``, its expert bias."""
    s = shapes(r)
    q_dim, kv_dim = s.heads * s.head_dim, s.kv_heads * s.head_dim
    qkv_bias = flag(r, "use_bias") or flag(r, "use_qkv_bias")
    base = linear(s.hidden, q_dim + 2 * kv_dim, qkv_bias) + linear(
        q_dim, s.hidden, flag(r, "use_bias")
    )
    if flag(r, "use_qk_norm"):
        base += norm(s.head_dim, bias=not flag(r, "use_rmsnorm")).times(2)
    base += norm(s.hidden).times(2)
    dense = base + mlp(s.hidden, size(r, "intermediate_size"))
    width = size(r, "moe_intermediate_size")
    num_experts = size(r, "num_experts")
    shared_width = size(r, "moe_shared_expert_intermediate_size", default=width)
    shared = size(r, "num_shared_experts", default=0, minimum=0) * shared_width
    bias = plain(num_experts if flag(r, "moe_router_enable_expert_bias") else 0)
    sparse = base + moe(s.hidden, width, num_experts, size(r, "num_experts_per_tok"), shared) + bias
    num_dense = min(size(r, "first_k_dense_replace", default=0, minimum=0), s.layers)
    return decoder(s, dense.times(num_dense) + sparse.times(s.layers - num_dense))


register(
    FAMILY,
    "bailing_moe",
    Rule(parameters=count_bailing),
    UNIFORM_KINDS,
    "read as llama (head_dim or hidden_size / heads), the experts share one cache",
    architectures=("BailingMoeForCausalLM", "BailingMoeV2ForCausalLM"),
)

# Param2 (vLLM param2moe.py, no transformers class): BailingMoeV2's layout and keys, with the
# model file's getattr defaults where they differ from bailing_moe.py's: the router keeps its
# expert bias and one shared expert unless told otherwise, layer 0 dense.
_PARAM2 = {
    "moe_router_enable_expert_bias": True,
    "num_shared_experts": 1,
    "first_k_dense_replace": 1,
}

register(
    FAMILY,
    "param2moe",
    Rule(defaults=_PARAM2, parameters=count_bailing),
    UNIFORM_KINDS,
    "Param2 (vLLM param2moe.py): GQA read as llama (head_dim or hidden_size / heads);"
    " BailingMoeV2's expert keys with vLLM's defaults",
    architectures=("Param2MoEForCausalLM",),
)


# --- Ling / Ring 2.5 (BailingMoeV2_5ForCausalLM) ----------------------------------------------
# vLLM bailing_moe_linear.py: lightning (linear) attention on every layer i with
# (i + 1) % layer_group_size != 0, MLA on the others (layer_group_size absent: 1, all MLA; 0:
# all MLA). A lightning layer keeps the state linear_attention_state_shape gives:
# num_attention_heads heads of a head_dim x head_dim matrix (head_dim absent: hidden_size /
# heads), no conv tail, in the model dtype (linear_attention_state_dtype under
# --mamba-cache-dtype auto). An MLA layer (the type is among vLLM's DeepSeek MLA models,
# model_arch_config_convertor.py is_deepseek_mla) caches one latent of kv_lora_rank +
# qk_rope_head_dim. Its config.json names model_type ``bailing_hybrid``, which Ling 3.0's rule
# holds (bailing_v3.py); ``V25_RULE`` is this class's rule for that type, chosen by its class.
V25_CLASS = "BailingMoeV2_5ForCausalLM"

# vLLM bailing_moe_linear.py's getattr defaults (the config class ships as remote code).
_V25 = {
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "kv_lora_rank": 512,
    "layer_group_size": 1,
    "first_k_dense_replace": 0,
}
_V25_MLA = ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")


def _layers_v25(r: Reading, n: int) -> None:
    group = whole(r.get("layer_group_size"), "layer_group_size", minimum=0, maximum=n)
    r.spec["layer_types"] = [
        "linear_attention" if group and (i + 1) % group else "full_attention" for i in range(n)
    ]
    r.notes.append(
        f"layer_types from layer_group_size {group}: MLA where (i + 1) % {group} == 0,"
        " lightning attention elsewhere (vLLM bailing_moe_linear.py is_linear_layer)"
    )


def _lightning_head_dim(r: Reading) -> int:
    heads, hidden = r.spec["num_attention_heads"], r.spec.get("hidden_size")
    stated = r.config.get("head_dim")
    if stated is None and hidden is None:
        raise SpecError("", ["head_dim, hidden_size: one is required by lightning attention"])
    return whole(stated if stated is not None else hidden // heads, "head_dim", maximum=MAX_DIM)


def _state_v25(r: Reading) -> None:
    if r.config.get("kv_lora_rank") is None:
        raise SpecError("", ["kv_lora_rank: required (vLLM builds MLA only when it is stated)"])
    for key in (*_V25_MLA, "q_lora_rank"):
        if (value := r.get(key)) is not None:
            r.spec[key] = value
    if "linear_attention" not in r.spec["layer_types"]:
        return
    heads, dim = r.spec["num_attention_heads"], _lightning_head_dim(r)
    r.spec.update(
        linear_num_key_heads=heads,
        linear_num_value_heads=heads,
        linear_key_head_dim=dim,
        linear_value_head_dim=dim,
        linear_conv_kernel_dim=1,
        state_dtype=r.spec["torch_dtype"],
    )
    r.notes.append(f"lightning state: {heads} heads x {dim} x {dim} in the model dtype, no conv")


def _lightning(r: Reading, hidden: int, heads: int) -> Count:
    """One lightning mixer (vLLM bailing_linear_attn.py ``BailingMoELinearAttention``): the
    fused query_key_value of 3 x heads x head_dim (bias with ``use_bias`` or
    ``use_qkv_bias``), q/k RMSNorms of head_dim with ``use_qk_norm``, the output gate g_proj,
    the gated group RMSNorm over heads x head_dim, the dense output (bias with ``use_bias``)."""
    inner = heads * _lightning_head_dim(r)
    qkv_bias = flag(r, "use_bias") or flag(r, "use_qkv_bias")
    out = linear(hidden, 3 * inner, qkv_bias) + linear(hidden, inner) + norm(inner)
    if flag(r, "use_qk_norm"):
        out += norm(inner // heads).times(2)
    return out + linear(inner, hidden, flag(r, "use_bias"))


def _count_v25(r: Reading) -> Count:
    """Embeddings and the head; a lightning or MLA mixer a layer (``mla_attention``), two
    RMSNorms; a gated MLP of ``intermediate_size`` below ``first_k_dense_replace`` (or
    everywhere with one expert), else ``num_experts`` experts, ``num_shared_experts`` shared
    ones of ``moe_shared_expert_intermediate_size`` (absent: moe_intermediate_size) and the
    router with, under ``moe_router_enable_expert_bias``, its bias. MTP layers not counted."""
    s = shapes(r)
    kinds = r.spec["layer_types"]
    lightning = _lightning(r, s.hidden, s.heads) if "linear_attention" in kinds else Count()
    mla = mla_attention(r, s.hidden, s.heads) if "full_attention" in kinds else Count()
    dense = mlp(s.hidden, size(r, "intermediate_size"), bias=flag(r, "use_bias"))
    num_experts = size(r, "num_experts", default=1)
    sparse = dense
    if num_experts > 1:
        width = size(r, "moe_intermediate_size")
        shared_width = size(r, "moe_shared_expert_intermediate_size", default=width)
        shared = size(r, "num_shared_experts", default=0, minimum=0) * shared_width
        active = size(r, "num_experts_per_tok")
        bias = flag(r, "moe_router_enable_expert_bias")
        sparse = moe(s.hidden, width, num_experts, active, shared, bias)
    first = size(r, "first_k_dense_replace", minimum=0)
    layers = Count()
    for i, kind in enumerate(kinds):
        mixer = lightning if kind == "linear_attention" else mla
        layers += mixer + (dense if i < first else sparse) + norm(s.hidden).times(2)
    return decoder(s, layers)


#: Ling / Ring 2.5's rule for ``bailing_hybrid`` configs that name ``V25_CLASS``.
V25_RULE = Rule(
    layers=_layers_v25,
    defaults=_V25,
    reads_head_dim=False,
    state=_state_v25,
    parameters=_count_v25,
)
