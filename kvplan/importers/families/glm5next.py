"""GLM-5.3 (``glm5_next_text``, Glm5NextForCausalLM): Kimi delta attention (KDA) on the
``linear_attention`` layers, MLA with the kpool sparse indexer on the rest.

vLLM 0.32 (models/glm5next/common/model.py, attention.py, kda.py; config class transformers
5.24 models/glm5_next/configuration_glm5_next.py) builds, for a layer ``layer_types`` does not
mark ``linear_attention``, MLA attention with an ``Indexer`` whenever ``index_topk`` is set
(every such layer, whatever ``indexer_types`` says). Its cache, per request: the latent of
``kv_lora_rank + qk_rope_head_dim`` values a token (GLM-5.3 is NoPE: 512 + 0), one fp8 indexer
key of 128 + 4 B per ``index_kpool`` tokens (``Glm5NextIndexerCache``, ``tokens_per_state``),
and a ``CircularBufferSpec`` ring of 2 bf16 rows of ``index_head_dim`` for ``index_kpool``
slots (16 x 2 x 128 x 2 B = 8,192 B) without speculative decoding. A KDA layer keeps the state
Kimi Linear's does (``kda_state_shape``): conv 3 x 3 x 64 x 128 = 73,728 values in the model
dtype and 64 x 128 x 128 values in float32.
"""

from __future__ import annotations

from typing import Any

from kvplan.errors import SpecError
from kvplan.importers.families.kimi_linear import kda_state
from kvplan.importers.parameters import Count, decoder, linear, mlp, moe, norm, plain, shapes, size
from kvplan.importers.reading import Reading, as_list, whole
from kvplan.importers.registry import register
from kvplan.importers.rules import Rule
from kvplan.model.limits import MAX_DIM

FAMILY = "glm5next"

_MLA = ("kv_lora_rank", "q_lora_rank", "qk_nope_head_dim", "v_head_dim", "index_head_dim")

#: Glm5NextTextConfig's values for the keys the cache and the count read.
_DEFAULTS: dict[str, Any] = {
    "vocab_size": 154880,
    "hidden_size": 4096,
    "intermediate_size": 12288,
    "moe_intermediate_size": 2048,
    "num_hidden_layers": 45,
    "num_attention_heads": 64,
    "num_key_value_heads": 64,
    "n_shared_experts": 1,
    "n_routed_experts": 288,
    "num_experts_per_tok": 8,
    "kv_lora_rank": 512,
    "q_lora_rank": 1536,
    "qk_rope_head_dim": 0,
    "v_head_dim": 256,
    "qk_nope_head_dim": 256,
    "max_position_embeddings": 1048576,
    "index_topk": 2048,
    "index_head_dim": 128,
    "index_n_heads": 32,
    "index_kpool": 16,
    "linear_head_dim": 128,
    "linear_num_heads": 64,
    "linear_conv_kernel_dim": 4,
    "hc_mult": 4,
    "tie_word_embeddings": False,
}


def _layer_types(r: Reading, n: int) -> list[str]:
    """``layer_types`` as given (``full_attention`` read as ``indexed_attention``, as the
    config class does), else the class's default: KDA except every fourth layer."""
    given = r.config.get("layer_types")
    if given is None:
        return ["indexed_attention" if i % 4 == 3 else "linear_attention" for i in range(n)]
    kinds = as_list(given, "layer_types")
    if len(kinds) != n:
        raise SpecError("", [f"layer_types: has {len(kinds)} entries but {n} layers"])
    allowed = ("linear_attention", "indexed_attention", "full_attention")
    for i, kind in enumerate(kinds):
        if kind not in allowed:
            raise SpecError("", [f"layer_types.{i}: {kind!r} is not one of {allowed}"])
    return ["linear_attention" if k == "linear_attention" else "indexed_attention" for k in kinds]


def _layers(r: Reading, n: int) -> None:
    if "index_topk" in r.config and r.config["index_topk"] is None:
        raise SpecError("", ["index_topk: null (MLA without the indexer) is not modelled"])
    if whole(r.get("qk_rope_head_dim"), "qk_rope_head_dim", 0, MAX_DIM):
        raise SpecError("", ["qk_rope_head_dim: must be 0 (Glm5NextTextConfig is NoPE)"])
    kinds = _layer_types(r, n)
    r.spec["layer_types"] = kinds
    r.spec["index_kpool"] = whole(r.get("index_kpool"), "index_kpool", 2, MAX_DIM)
    for key in ("kv_lora_rank", "index_head_dim"):
        r.spec[key] = whole(r.get(key), key, 1, MAX_DIM)
    r.notes.append(
        f"layer_types: {kinds.count('linear_attention')} KDA layers, "
        f"{kinds.count('indexed_attention')} MLA with the kpool indexer (one fp8 key per"
        f" {r.spec['index_kpool']} tokens and a {r.spec['index_kpool']}-slot bf16 tail ring)"
    )


def _kda_sizes(r: Reading) -> tuple[int, int, int]:
    return (
        size(r, "linear_num_heads"),
        size(r, "linear_head_dim"),
        size(r, "linear_conv_kernel_dim"),
    )


def _state(r: Reading) -> None:
    if "linear_attention" in r.spec["layer_types"]:
        kda_state(r, *_kda_sizes(r))


def _kda(r: Reading, hidden: int) -> Count:
    """``Glm5NextLinearAttention``: the fused q, k, v, beta, f_a, g_a projection, f_b and
    g_b back to the heads, dt_bias per channel, the q, k and v conv weights, A_log per head,
    the gated output norm over head_dim, o_proj."""
    heads, head_dim, kernel = _kda_sizes(r)
    width = heads * head_dim
    return (
        linear(hidden, 3 * width + heads + 2 * head_dim)
        + linear(head_dim, width).times(2)
        + plain(width + 3 * width * kernel + heads)
        + norm(head_dim)
        + linear(width, hidden)
    )


def _mla(r: Reading, hidden: int, heads: int) -> Count:
    """``Glm5NextMLAAttention`` (NoPE): q through the ``q_lora_rank`` latent and its norm, the
    joint K/V latent and its norm, the per-head K/V up-projection, o_proj; and the indexer:
    wq_b to ``index_n_heads`` heads, the fused wk + weights projection, the key's LayerNorm
    (weight and bias), the kpool gate (head_dim x hidden) and its position table."""
    nope, v_dim = size(r, "qk_nope_head_dim"), size(r, "v_head_dim")
    q_rank, kv_rank = size(r, "q_lora_rank"), size(r, "kv_lora_rank")
    index_dim, index_heads = size(r, "index_head_dim"), size(r, "index_n_heads")
    pool = r.spec["index_kpool"]
    attention = (
        linear(hidden, q_rank + kv_rank)
        + norm(q_rank)
        + linear(q_rank, heads * nope)
        + norm(kv_rank)
        + linear(kv_rank, heads * (nope + v_dim))
        + linear(heads * v_dim, hidden)
    )
    indexer = (
        linear(q_rank, index_dim * index_heads)
        + linear(hidden, index_dim + index_heads)
        + norm(index_dim, bias=True)
        + plain(index_dim * hidden + pool * index_dim)
    )
    return attention + indexer


def _ffn(r: Reading, hidden: int, sparse: bool) -> Count:
    """The routed experts (a router, its correction bias under ``topk_method`` noaux_tc, the
    shared experts as one MLP of n_shared_experts x moe_intermediate_size), else a dense MLP."""
    if not sparse:
        return mlp(hidden, size(r, "intermediate_size"))
    width = size(r, "moe_intermediate_size")
    shared = size(r, "n_shared_experts", default=0, minimum=0) * width
    experts, active = size(r, "n_routed_experts"), size(r, "num_experts_per_tok")
    return moe(hidden, width, experts, active, shared, r.get("topk_method") == "noaux_tc")


def _mlp_types(r: Reading, n: int) -> list[bool]:
    """Which layers route experts: ``mlp_layer_types`` (``sparse``), else dense for the first
    three (the config class's default)."""
    given = r.config.get("mlp_layer_types")
    if given is None:
        return [i >= 3 for i in range(n)]
    kinds = as_list(given, "mlp_layer_types")
    if len(kinds) != n or not set(kinds) <= {"dense", "sparse"}:
        raise SpecError("", [f"mlp_layer_types: {n} entries of 'dense' or 'sparse' expected"])
    return [k == "sparse" for k in kinds]


def _count(r: Reading) -> Count:
    """Embeddings, untied head, final norm; per layer its mixer (KDA or MLA with the indexer),
    its MLP, two RMSNorms and with ``mhc`` the two fp32 hyper-connection mixers of
    (2 + hc_mult) x hc_mult rows over hc_mult x hidden, their bases and 3 scales each. Each
    of ``num_nextn_predict_layers`` MTP layers: enorm, hnorm, eh_proj (2 x hidden to hidden),
    the shared head's norm and an MLA block with the last layer's MLP, without mixers."""
    s = shapes(r)
    hc = size(r, "hc_mult") if r.get("mhc") else 0
    mix = (2 + hc) * hc
    mixers = plain(2 * (mix * hc * s.hidden + mix + 3)) if hc else Count()
    mla = _mla(r, s.hidden, s.heads)
    kda = _kda(r, s.hidden) if "linear_attention" in r.spec["layer_types"] else Count()
    routed = _mlp_types(r, s.layers)
    layers = Count()
    for i, kind in enumerate(r.spec["layer_types"]):
        mixer = kda if kind == "linear_attention" else mla
        layers += mixer + _ffn(r, s.hidden, routed[i]) + norm(s.hidden).times(2) + mixers
    num_mtp = size(r, "num_nextn_predict_layers", default=0, minimum=0)
    if num_mtp:
        block = mla + _ffn(r, s.hidden, routed[-1]) + norm(s.hidden).times(5)
        layers += (block + linear(2 * s.hidden, s.hidden)).times(num_mtp)
    return decoder(s, layers)


register(
    FAMILY,
    "glm5_next_text",
    Rule(
        layers=_layers,
        extra=_MLA,
        defaults=_DEFAULTS,
        reads_head_dim=False,
        state=_state,
        parameters=_count,
    ),
    ("linear_attention", "indexed_attention"),
    "GLM-5.3 (vLLM glm5next/common/model.py, attention.py, kda.py): KDA state on linear_attention"
    " layers; MLA latent, an fp8 indexer key per index_kpool tokens and a bf16 tail ring elsewhere",
    architectures=("Glm5NextForCausalLM",),
)
