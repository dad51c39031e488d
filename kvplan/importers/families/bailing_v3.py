"""inclusionAI Ling / Ring 3.0 (``bailing_hybrid``, BailingMoeV3ForCausalLM): Kimi delta
attention (KDA) on most layers, MLA on the last layer of each ``layer_group_size`` group and on
the layers past the last whole group.

vLLM 0.32 (model_executor/models/bailing_moe_v3.py ``_is_kda_layer``) picks the kinds itself,
whatever ``layer_types`` the file states. A KDA layer keeps the state of
``_get_kda_state_shape_for_config``: ``num_attention_heads`` heads of ``head_dim``, a conv tail
over q, k and v of ``short_conv_kernel_size - 1`` positions in the model dtype and a
``head_dim x head_dim`` state per head in float32 (mamba_utils.py ``kda_state_dtype``); an MLA
layer caches one latent of ``kv_lora_rank + qk_rope_head_dim``.

``bailing_hybrid`` also names Ling / Ring 2.5 and 2.6 (BailingMoeV2_5ForCausalLM, lightning
attention instead of KDA): a config whose ``architectures`` names that class is read by its own
rule (``V25_RULE`` in bailing.py, ``register_class_rule``); any other class is refused here.
The defaults are transformers' BailingHybridConfig (configuration_bailing_hybrid.py), except
``head_dim``, which that class rewrites to ``qk_rope_head_dim`` after reading it while vLLM's
KDA reads the value as the file states it.
"""

from __future__ import annotations

from kvplan.errors import SpecError
from kvplan.importers.families.bailing import V25_CLASS, V25_RULE
from kvplan.importers.families.deepseek import mla_attention
from kvplan.importers.families.kimi_linear import kda_state
from kvplan.importers.parameters import Count, decoder, linear, mlp, moe, norm, plain, shapes, size
from kvplan.importers.reading import Reading, whole
from kvplan.importers.registry import register, register_class_rule
from kvplan.importers.rules import Rule
from kvplan.model.limits import MAX_DIM

FAMILY = "bailing_v3"

V3_CLASS = "BailingMoeV3ForCausalLM"

_MLA = ("kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")

# BailingHybridConfig's values (transformers 5.24) for the keys the cache and the count read;
# its attribute_map reads num_experts_per_token, num_expert_group and model_max_length too.
_DEFAULTS = {
    "vocab_size": 157184,
    "hidden_size": 2560,
    "intermediate_size": 6144,
    "moe_intermediate_size": 768,
    "num_hidden_layers": 42,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "num_shared_experts": 1,
    "num_experts": 512,
    "num_experts_per_tok": 8,
    "kv_lora_rank": 512,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "qk_nope_head_dim": 128,
    "first_k_dense_replace": 2,
    "max_position_embeddings": 262144,
    "head_dim": 128,
    "short_conv_kernel_size": 4,
    "layer_group_size": 6,
    "tie_word_embeddings": False,
}


def is_mla_layer(i: int, n: int, group: int) -> bool:
    """vLLM's ``_is_kda_layer`` negated: the last layer of each group of ``group`` layers, and
    every layer past the last whole group, run MLA (24 layers in groups of 4: 3, 7, ..., 23;
    22 in groups of 4: 3, 7, 11, 15, 19 and the tail 20, 21)."""
    return (i + 1) % group == 0 or i >= n // group * group


def _check_class(r: Reading) -> None:
    classes = r.config.get("architectures")
    named = [c for c in classes if isinstance(c, str)] if isinstance(classes, list) else []
    if named and V3_CLASS not in named:
        raise SpecError(
            "",
            [
                f"architectures: {', '.join(named)} is not read by the bailing_hybrid rules,"
                f" which read {V3_CLASS} (KDA + MLA) and {V25_CLASS} (lightning + MLA)"
            ],
        )


def _layers(r: Reading, n: int) -> None:
    _check_class(r)
    group = whole(r.get("layer_group_size"), "layer_group_size", maximum=n)
    r.spec["layer_types"] = [
        "full_attention" if is_mla_layer(i, n, group) else "linear_attention" for i in range(n)
    ]
    r.notes.append(
        f"layer_types from layer_group_size {group}: MLA on each group's last layer and past"
        " the last whole group, KDA elsewhere (vLLM bailing_moe_v3.py _is_kda_layer)"
    )


def _kda_sizes(r: Reading) -> tuple[int, int, int]:
    return (
        r.spec["num_attention_heads"],
        whole(r.get("head_dim"), "head_dim", maximum=MAX_DIM),
        whole(r.get("short_conv_kernel_size"), "short_conv_kernel_size", maximum=MAX_DIM),
    )


def _state(r: Reading) -> None:
    for key in _MLA:
        if key not in r.spec and (value := r.get(key)) is not None:
            r.spec[key] = value
    if r.config.get("max_position_embeddings") is None and "model_max_length" in r.config:
        # BailingHybridConfig reads max_position_embeddings as model_max_length
        r.spec["max_position_embeddings"] = r.config["model_max_length"]
        r.notes.append("max_position_embeddings from model_max_length")
    if r.config.get("no_kda_lora") is not True:
        raise SpecError("", ["no_kda_lora: vLLM 0.32 serves Bailing V3 only with true"])
    if "linear_attention" in r.spec["layer_types"]:
        kda_state(r, *_kda_sizes(r))


def _kda(r: Reading, hidden: int) -> Count:
    """One KDA mixer (vLLM ``BailingMoeV3KimiDeltaAttention``): q, k, v of heads x head_dim
    each and b (one value a head), the full-rank forget gate f_proj, dt_bias per channel,
    q/k/v conv1d (kernel taps, no bias), A_log per head, the output gate g_proj, the gated
    RMSNorm over head_dim, o_proj."""
    heads, head_dim, kernel = _kda_sizes(r)
    width = heads * head_dim
    return (
        linear(hidden, 3 * width + heads)
        + linear(hidden, width)
        + plain(width + 3 * width * kernel + heads)
        + linear(hidden, width)
        + norm(head_dim)
        + linear(width, hidden)
    )


def _mla(r: Reading, hidden: int, heads: int) -> Count:
    """One MLA mixer (vLLM ``BailingMoeV3MLAAttention``): q through the ``q_lora_rank`` latent
    and its norm when set, else one q_proj; the K/V latent with the rope key, its norm, kv_b;
    the output gate g_proj of ``gated_attention_proj_granularity_type`` (head_wise: one value
    a head, element_wise: heads x v_head_dim, else none); the output projection (dense)."""
    v_dim = size(r, "v_head_dim")
    gates = {"head_wise": heads, "element_wise": heads * v_dim}
    width = gates.get(str(r.config.get("gated_attention_proj_granularity_type")), 0)
    gate = linear(hidden, width) if width else Count()
    return mla_attention(r, hidden, heads) + gate


def _count(r: Reading) -> Count:
    """Embeddings and the head, each layer's mixer, two RMSNorms, a dense MLP on the first
    ``first_k_dense_replace`` layers and routed experts after them (a router with its fp32
    expert bias, ``num_shared_experts`` shared experts of
    ``moe_shared_expert_intermediate_size`` as one MLP), the final norm. MTP layers are not
    counted."""
    s = shapes(r)
    kinds = r.spec["layer_types"]
    kda = _kda(r, s.hidden) if "linear_attention" in kinds else Count()
    mla = _mla(r, s.hidden, s.heads) if "full_attention" in kinds else Count()
    first = size(r, "first_k_dense_replace", default=0, minimum=0)
    dense = mlp(s.hidden, size(r, "intermediate_size"))
    width = size(r, "moe_intermediate_size")
    num_shared = size(r, "num_shared_experts", "n_shared_experts", default=0, minimum=0)
    shared = num_shared * size(r, "moe_shared_expert_intermediate_size")
    num_experts = size(r, "num_experts", "num_local_experts")
    active = size(r, "num_experts_per_tok", "num_experts_per_token")
    sparse = moe(s.hidden, width, num_experts, active, shared, router_bias=True)
    layers = Count()
    for i, kind in enumerate(kinds):
        mixer = kda if kind == "linear_attention" else mla
        layers += mixer + (dense if i < first else sparse) + norm(s.hidden).times(2)
    return decoder(s, layers)


register(
    FAMILY,
    "bailing_hybrid",
    Rule(
        layers=_layers,
        extra=_MLA,
        defaults=_DEFAULTS,
        reads_head_dim=False,
        state=_state,
        parameters=_count,
    ),
    ("linear_attention", "mla_latent"),
    "Ling/Ring 3.0 (vLLM bailing_moe_v3.py): KDA (float32 state, conv tail in the model dtype)"
    " with MLA on each layer_group_size group's last layer and the tail",
    architectures=(V3_CLASS,),
)
register_class_rule(
    "bailing_hybrid",
    V25_CLASS,
    V25_RULE,
    ("linear_attention", "mla_latent"),
    "Ling/Ring 2.5 and 2.6 (vLLM bailing_moe_linear.py): lightning attention (state in the model"
    " dtype, no conv) with MLA where (i + 1) % layer_group_size == 0",
)
