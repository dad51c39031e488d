"""Kimi Linear (``kimi_linear``, KimiLinearForCausalLM): Kimi delta attention (KDA) on the
layers ``linear_attn_config.kda_layers`` names (1-based), MLA on the rest.

vLLM 0.32 (models/kimi_k3, config class transformers_utils/configs/kimi_linear.py) gives a
KDA layer one recurrent state per request (mamba_utils.py ``kda_state_shape``): a conv tail
over q, k and v of ``num_heads x head_dim`` channels each, ``short_conv_kernel_size - 1``
positions deep, in the model dtype, and a ``head_dim x head_dim`` state per head in float32
(``kda_state_dtype``). That is a gated delta net state with as many key heads as value heads,
so it is written in the spec's ``linear_*`` keys with ``conv_dtype`` for the tail. An MLA layer
caches one latent of ``kv_lora_rank + qk_rope_head_dim`` (the rope part is cached although the
model applies no rotary, ``mla_use_nope``).

Kimi Linear 48B: 32 heads of 128, kernel 4: conv 3 x 4,096 x 3 = 36,864 values x 2 B =
73,728 B and state 32 x 128 x 128 = 524,288 values x 4 B = 2,097,152 B per KDA layer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvplan.errors import SpecError
from kvplan.importers.families.deepseek import mla_attention
from kvplan.importers.parameters import Count, decoder, linear, mlp, moe, norm, plain, shapes, size
from kvplan.importers.reading import Reading, as_list, mapping, whole
from kvplan.importers.registry import register
from kvplan.importers.rules import Rule
from kvplan.model.limits import MAX_DIM, MAX_TOKENS

FAMILY = "kimi_linear"

_MLA = ("kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")

# KimiLinearConfig's values for the keys the cache and the count read.
_DEFAULTS = {
    "vocab_size": 163840,
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "first_k_dense_replace": 0,
    "moe_layer_freq": 1,
    "num_shared_experts": 0,
    "tie_word_embeddings": False,
}


def _kda_config(r: Reading) -> Mapping[str, Any]:
    return mapping(r.config.get("linear_attn_config"), "linear_attn_config")


def _kda_sizes(r: Reading) -> tuple[int, int, int]:
    """KDA heads, head dim and conv kernel from ``linear_attn_config``."""
    kda = _kda_config(r)
    return (
        whole(kda.get("num_heads"), "linear_attn_config.num_heads", maximum=MAX_DIM),
        whole(kda.get("head_dim"), "linear_attn_config.head_dim", maximum=MAX_DIM),
        whole(
            kda.get("short_conv_kernel_size"),
            "linear_attn_config.short_conv_kernel_size",
            maximum=MAX_DIM,
        ),
    )


def kda_layer_indexes(r: Reading, n: int) -> set[int]:
    """The 0-based layers that run KDA: ``kda_layers`` lists them from 1 (KimiLinearConfig's
    ``is_kda_layer``: layer i when i + 1 is listed). Raises SpecError for an entry that is not
    a layer number."""
    given = _kda_config(r).get("kda_layers")
    if given is None:
        return set()
    key = "linear_attn_config.kda_layers"
    return {whole(i, key, 1, n) - 1 for i in as_list(given, key)}


def _layers(r: Reading, n: int) -> None:
    kda = kda_layer_indexes(r, n)
    r.spec["layer_types"] = ["linear_attention" if i in kda else "full_attention" for i in range(n)]
    r.notes.append(
        f"layer_types from linear_attn_config.kda_layers (1-based): {len(kda)} KDA layers,"
        f" {n - len(kda)} MLA"
    )


def kda_state(r: Reading, heads: int, head_dim: int, kernel: int) -> None:
    """A KDA state in the spec's gated-delta-net keys: as many key as value heads, the conv
    tail in the model dtype and the state in float32 (vLLM ``kda_state_dtype``)."""
    r.spec["linear_num_key_heads"] = heads
    r.spec["linear_num_value_heads"] = heads
    r.spec["linear_key_head_dim"] = head_dim
    r.spec["linear_value_head_dim"] = head_dim
    r.spec["linear_conv_kernel_dim"] = kernel
    r.spec["state_dtype"] = "float32"
    r.spec["conv_dtype"] = r.spec["torch_dtype"]
    r.notes.append(
        f"KDA state: {heads} heads of {head_dim}, conv kernel {kernel}; the state in float32,"
        " the conv tail in the model dtype (vLLM kda_state_dtype)"
    )


def _state(r: Reading) -> None:
    stated = r.config.get("model_max_length")
    if r.config.get("max_position_embeddings") is None and stated is not None:
        # vLLM derives 4,096 (the class default) but takes --max-model-len up to this
        r.spec["max_position_embeddings"] = whole(stated, "model_max_length", maximum=MAX_TOKENS)
        r.notes.append(
            f"max_position_embeddings {stated}: model_max_length, the longest --max-model-len"
            " vLLM accepts (without it vLLM serves KimiLinearConfig's default of 4,096)"
        )
    elif r.config.get("max_position_embeddings") is None:
        r.spec["max_position_embeddings"] = 4096
        r.notes.append("max_position_embeddings 4096: the KimiLinearConfig default (not in file)")
    if r.spec["layer_types"].count("full_attention") and r.spec.get("kv_lora_rank") is None:
        raise SpecError("", ["kv_lora_rank: required by the MLA layers (not in the file)"])
    if "linear_attention" in r.spec["layer_types"]:
        kda_state(r, *_kda_sizes(r))


def _kda(r: Reading, hidden: int) -> Count:
    """One KDA mixer (vLLM kimi_gdn_linear_attn.py): q, k, v (and with ``use_full_rank_gate``
    the gate) of ``num_heads x head_dim`` each, the beta projection to one value a head, the
    forget gate's f_a (to head_dim) and f_b (back), dt_bias per channel, one conv1d weight per
    q, k and v channel and kernel tap (no bias), A_log per head, without the full-rank gate
    the low-rank output gate g_a and g_b, the gated RMSNorm over head_dim, o_proj."""
    heads, head_dim, kernel = _kda_sizes(r)
    width = heads * head_dim
    full_rank = bool(_kda_config(r).get("use_full_rank_gate", False))
    low_rank = linear(hidden, head_dim) + linear(head_dim, width)
    gate = linear(hidden, width) if full_rank else low_rank
    return (
        linear(hidden, 3 * width)
        + linear(hidden, heads)
        + linear(hidden, head_dim)
        + linear(head_dim, width)
        + gate
        + plain(width + 3 * width * kernel + heads)
        + norm(head_dim)
        + linear(width, hidden)
    )


def _mla(r: Reading, hidden: int, heads: int) -> Count:
    """Kimi's MLA (vLLM kimi_k3 mla.py): q through the ``q_lora_rank`` latent and its norm
    when set, else one q_proj; the joint K/V latent with the rope key, its norm, the per-head
    K/V up-projection, with ``mla_use_output_gate`` a gate of heads x v_head_dim, o_proj."""
    v_dim = size(r, "v_head_dim")
    gate = linear(hidden, heads * v_dim) if r.get("mla_use_output_gate") else Count()
    return mla_attention(r, hidden, heads) + gate


def _ffn(r: Reading, hidden: int, i: int) -> Count:
    """Layer i's MLP: routed experts from ``first_k_dense_replace`` on, every
    ``moe_layer_freq``-th layer (a router with its fp32 correction bias, the shared experts
    as one MLP of ``num_shared_experts x moe_intermediate_size``), else a dense MLP."""
    num_experts = size(r, "num_experts", default=0, minimum=0)
    first = size(r, "first_k_dense_replace", default=0, minimum=0)
    if num_experts and i >= first and i % size(r, "moe_layer_freq", default=1) == 0:
        if r.get("routed_expert_hidden_size") is not None:
            raise SpecError("", ["routed_expert_hidden_size: latent MoE is not counted"])
        width = size(r, "moe_intermediate_size")
        shared = size(r, "num_shared_experts", default=0, minimum=0) * width
        return moe(hidden, width, num_experts, size(r, "num_experts_per_token"), shared, True)
    return mlp(hidden, size(r, "intermediate_size"))


def _count(r: Reading) -> Count:
    """Embeddings and an untied head, each layer's mixer (KDA or MLA), its MLP and two
    RMSNorms, the final norm. MTP layers (``num_nextn_predict_layers``) are not counted."""
    if r.get("attn_res_block_size") is not None:
        raise SpecError("", ["attn_res_block_size: attention residuals are not counted"])
    s = shapes(r)
    kda = _kda(r, s.hidden) if "linear_attention" in r.spec["layer_types"] else Count()
    mla = _mla(r, s.hidden, s.heads) if "full_attention" in r.spec["layer_types"] else Count()
    layers = Count()
    for i, kind in enumerate(r.spec["layer_types"]):
        mixer = kda if kind == "linear_attention" else mla
        layers += mixer + _ffn(r, s.hidden, i) + norm(s.hidden).times(2)
    return decoder(s, layers)


register(
    FAMILY,
    "kimi_linear",
    Rule(
        layers=_layers,
        extra=_MLA,
        defaults=_DEFAULTS,
        reads_head_dim=False,
        state=_state,
        parameters=_count,
    ),
    ("linear_attention", "mla_latent"),
    "Kimi Linear (vLLM kimi_k3, configs/kimi_linear.py): KDA on linear_attn_config.kda_layers"
    " (1-based; float32 state, conv tail in the model dtype), MLA latent elsewhere",
    architectures=("KimiLinearForCausalLM",),
)
