"""GLM-4 (``glm4``, ``glm4_moe``: Llama-shaped keys), GLM-4.7-Flash (``glm4_moe_lite``: MLA),
GLM-5 (``glm_moe_dsa``: DeepSeek V3.2's MLA with the sparse-attention indexer) and ChatGLM,
which calls its K/V groups ``multi_query_group_num`` (used when
``multi_query_attention``) and its head dim ``kv_channels``."""

from __future__ import annotations

from kvplan.importers.families.deepseek import INDEX_KEYS, MLA_KEYS, count_dsa, count_mla, dsa_state
from kvplan.importers.parameters import (
    Count,
    decoder,
    flag,
    linear,
    mlp,
    moe,
    norm,
    shapes,
    size,
)
from kvplan.importers.reading import Reading
from kvplan.importers.registry import register
from kvplan.importers.rules import UNIFORM_KINDS, Rule

FAMILY = "glm"


def _kv_heads_chatglm(r: Reading) -> int | None:
    if r.config.get("multi_query_attention"):
        kv = r.config.get("multi_query_group_num")
        r.notes.append(f"num_key_value_heads {kv}: multi_query_group_num")
        return kv
    return None


def _count_chatglm(r: Reading) -> Count:
    """Fused query_key_value (``add_qkv_bias``), dense and a gated MLP of ``ffn_hidden_size``
    (``add_bias_linear``), two RMSNorms (LayerNorms without ``rmsnorm``), untied output."""
    s = shapes(r)
    q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
    bias = flag(r, "add_bias_linear")
    layer = linear(s.hidden, q + 2 * kv, flag(r, "add_qkv_bias")) + linear(q, s.hidden, bias)
    layer += mlp(s.hidden, size(r, "ffn_hidden_size"), bias=bias)
    one_norm = norm(s.hidden, bias=not flag(r, "rmsnorm", default=True))
    last = one_norm if flag(r, "post_layer_norm", default=True) else Count()
    return decoder(s, (layer + one_norm.times(2)).times(s.layers), last)


def _glm4_attention(r: Reading) -> Count:
    """GLM-4 attention: q, k, v biases (``attention_bias``) but none on o; q/k norms of
    head_dim with ``use_qk_norm``."""
    s = shapes(r)
    layer = s.attention(flag(r, "attention_bias"), False)
    return layer + (norm(s.head_dim).times(2) if flag(r, "use_qk_norm") else Count())


def _count_glm4(r: Reading) -> Count:
    """GLM-4-0414: four RMSNorms a layer (before and after attention and MLP)."""
    s = shapes(r)
    layer = _glm4_attention(r) + mlp(s.hidden, size(r, "intermediate_size"))
    return decoder(s, (layer + norm(s.hidden).times(4)).times(s.layers))


def _count_glm4_moe(r: Reading) -> Count:
    """GLM-4.5: dense MLP on the first ``first_k_dense_replace`` layers, then routed experts,
    ``n_shared_experts`` shared ones and a router with its correction bias. The
    multi-token-prediction layers are not counted."""
    s = shapes(r)
    base = _glm4_attention(r) + norm(s.hidden).times(2)
    dense = base + mlp(s.hidden, size(r, "intermediate_size"))
    width = size(r, "moe_intermediate_size")
    shared = size(r, "n_shared_experts", default=0, minimum=0) * width
    num_experts, active = size(r, "n_routed_experts"), size(r, "num_experts_per_tok")
    sparse = base + moe(s.hidden, width, num_experts, active, shared, router_bias=True)
    first = min(size(r, "first_k_dense_replace", default=0, minimum=0), s.layers)
    return decoder(s, dense.times(first) + sparse.times(s.layers - first))


register(
    FAMILY,
    "chatglm",
    Rule(kv_heads=_kv_heads_chatglm, parameters=_count_chatglm),
    UNIFORM_KINDS,
    "K/V heads from multi_query_group_num, head_dim from kv_channels",
    architectures=("ChatGLMModel", "ChatGLMForConditionalGeneration"),
)
register(
    FAMILY,
    "glm4",
    Rule(parameters=_count_glm4),
    UNIFORM_KINDS,
    "read as llama",
    architectures=("Glm4ForCausalLM",),
)
register(
    FAMILY,
    "glm4_moe",
    Rule(parameters=_count_glm4_moe),
    UNIFORM_KINDS,
    "read as llama; the experts share one cache",
    architectures=("Glm4MoeForCausalLM",),
)

# GLM-4.7-Flash (configuration_glm4_moe_lite.py): DeepSeek V3's MLA and MoE layout; vLLM's
# glm4_moe_lite.py caches one latent of kv_lora_rank + qk_rope_head_dim per layer. The class
# makes the first layer dense (mlp_layer_types) and its router always carries the
# e_score_correction_bias (noaux_tc).
_GLM4_MOE_LITE = {
    "vocab_size": 154880,
    "kv_lora_rank": 512,
    "q_lora_rank": 768,
    "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 192,
    "v_head_dim": 256,
    "n_routed_experts": 64,
    "n_shared_experts": 1,
    "num_experts_per_tok": 4,
    "moe_intermediate_size": 1536,
    "first_k_dense_replace": 1,
    "topk_method": "noaux_tc",
    "max_position_embeddings": 202752,
    "tie_word_embeddings": False,
}


def _mla_defaults(r: Reading) -> None:
    """The MLA ranks the file leaves to Glm4MoeLiteConfig."""
    for key in MLA_KEYS:
        if key not in r.spec:
            value = r.get(key)
            if value is not None:
                r.spec[key] = value


register(
    FAMILY,
    "glm4_moe_lite",
    Rule(
        extra=MLA_KEYS,
        reads_head_dim=False,
        defaults=_GLM4_MOE_LITE,
        state=_mla_defaults,
        parameters=count_mla,
    ),
    ("mla_latent",),
    "GLM-4.7-Flash: MLA like DeepSeek V3 (kv_lora_rank + qk_rope_head_dim, no factor 2)",
    architectures=("Glm4MoeLiteForCausalLM",),
)

# GLM-5 / 5.1 (configuration_glm_moe_dsa.py): DeepSeek V3.2's sparse attention (vLLM serves
# GlmMoeDsaForCausalLM with deepseek_v32's model), so each layer caches the MLA latent and the
# indexer's fp8 key. GlmMoeDsaConfig's values for the keys the cache and the count read.
_GLM_MOE_DSA = {
    "vocab_size": 154880,
    "kv_lora_rank": 512,
    "q_lora_rank": 2048,
    "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 192,
    "v_head_dim": 256,
    "index_head_dim": 128,
    "index_n_heads": 32,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "num_experts_per_tok": 8,
    "moe_intermediate_size": 2048,
    "first_k_dense_replace": 3,
    "max_position_embeddings": 202752,
    "tie_word_embeddings": False,
}

register(
    FAMILY,
    "glm_moe_dsa",
    Rule(
        extra=(*MLA_KEYS, *INDEX_KEYS),
        reads_head_dim=False,
        defaults=_GLM_MOE_DSA,
        state=dsa_state,
        parameters=count_dsa,
    ),
    ("mla_latent",),
    "GLM-5 (configuration_glm_moe_dsa.py; vLLM deepseek_v32): MLA latent plus the indexer's"
    " fp8 key of index_head_dim; shared-indexer layers (index_topk_freq) are refused",
    architectures=("GlmMoeDsaForCausalLM",),
)
