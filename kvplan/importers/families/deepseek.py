"""DeepSeek V2/V3/R1, V3.2 and Kimi K2: multi-head latent attention (MLA); DeepSeek MoE (V1).

Each layer caches one compressed latent of ``kv_lora_rank`` plus the shared RoPE key of
``qk_rope_head_dim``, not K and V per head: no factor 2 and no heads. The MLA ranks are copied
as they are; ``head_dim`` is not read, since the latent replaces it.

DeepSeek V3.2 (``deepseek_v32``) adds the sparse-attention indexer, whose fp8 key of
``index_head_dim`` values (and its scales) every layer caches beside the latent.

DeepSeek V1 (``deepseek``, DeepSeek-MoE and DeepSeek-LLM under remote code) has plain
GQA/MHA attention: vLLM's deepseek_v2.py serves DeepseekForCausalLM with its non-MLA
attention for this model_type, ``num_key_value_heads`` K/V heads of hidden_size / heads.
"""

from __future__ import annotations

from kvplan.errors import SpecError
from kvplan.importers.parameters import (
    Count,
    decoder,
    linear,
    mlp,
    moe,
    norm,
    plain,
    shapes,
    size,
)
from kvplan.importers.reading import Reading, whole
from kvplan.importers.registry import register, register_wrapper
from kvplan.importers.rules import UNIFORM_KINDS, Rule

FAMILY = "deepseek"

_MLA = ("kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")


def _mla(r: Reading, hidden: int, heads: int) -> Count:
    """MLA projections: q (through the ``q_lora_rank`` latent and its norm when set), the
    joint K/V latent with the RoPE key, its norm, the per-head K/V up-projection, o."""
    nope, rope = size(r, "qk_nope_head_dim"), size(r, "qk_rope_head_dim")
    v_dim, kv_rank = size(r, "v_head_dim"), size(r, "kv_lora_rank")
    q_dim = heads * (nope + rope)
    if r.get("q_lora_rank") is None:
        q = linear(hidden, q_dim)
    else:
        q_rank = size(r, "q_lora_rank")
        q = linear(hidden, q_rank) + norm(q_rank) + linear(q_rank, q_dim)
    kv = linear(hidden, kv_rank + rope) + norm(kv_rank) + linear(kv_rank, heads * (nope + v_dim))
    return q + kv + linear(heads * v_dim, hidden)


def mla_attention(r: Reading, hidden: int, heads: int) -> Count:
    """MLA's projections and norms (``_mla``), for families that pair them with other MLPs."""
    return _mla(r, hidden, heads)


def count_deepseek_moe(r: Reading, attention: Count) -> Count:
    """Layers of ``attention`` (with two RMSNorms); dense MLP on the first
    ``first_k_dense_replace`` layers, then every ``moe_layer_freq``-th layer routed experts
    plus ``n_shared_experts`` shared ones (one MLP of their joint width) and a router, with
    V3's ``e_score_correction_bias`` (noaux_tc). MTP layers are not counted."""
    s = shapes(r)
    base = attention + norm(s.hidden).times(2)
    dense = base + mlp(s.hidden, size(r, "intermediate_size"))
    num_experts = size(r, "n_routed_experts", default=0, minimum=0)
    if not num_experts:
        return decoder(s, dense.times(s.layers))
    width = size(r, "moe_intermediate_size")
    first = size(r, "first_k_dense_replace", default=0, minimum=0)
    every = size(r, "moe_layer_freq", default=1)
    shared = size(r, "n_shared_experts", default=0, minimum=0) * width
    active = size(r, "num_experts_per_tok")
    bias = r.get("topk_method") == "noaux_tc"
    sparse = base + moe(s.hidden, width, num_experts, active, shared, bias)
    num_sparse = sum(1 for i in range(first, s.layers) if i % every == 0)
    return decoder(s, sparse.times(num_sparse) + dense.times(s.layers - num_sparse))


def count_mla(r: Reading) -> Count:
    """MLA attention in DeepSeek V2/V3's layer layout (``count_deepseek_moe``)."""
    s = shapes(r)
    return count_deepseek_moe(r, _mla(r, s.hidden, s.heads))


def _count_deepseek_v1(r: Reading) -> Count:
    """DeepSeek V1: bias-free GQA/MHA in DeepSeek V2's MoE layer layout."""
    return count_deepseek_moe(r, shapes(r).attention())


def _count_deepseek(r: Reading) -> Count:
    """MLA attention, then ``count_deepseek_moe``'s dense and expert layers."""
    return count_mla(r)


#: What an MLA model's rule copies into the spec (GLM-4.7-Flash reads them too).
MLA_KEYS = _MLA

#: DeepSeek V3.2's sparse-attention indexer: one key of ``index_head_dim`` values a token.
INDEX_KEYS = ("index_head_dim",)


def _indexer(r: Reading, hidden: int) -> Count:
    """The lightning indexer of one layer: wq_b from the q latent to ``index_n_heads`` heads
    of ``index_head_dim``, wk to one key, its LayerNorm (weight and bias), weights_proj to
    one weight per head (vLLM deepseek_v32/attention.py, ``DeepseekV32Indexer``)."""
    dim, heads = size(r, "index_head_dim"), size(r, "index_n_heads")
    q_rank = size(r, "q_lora_rank")
    # weights_proj stays bf16 in the fp8 checkpoints: a plain weight, not a quantized Linear
    return (
        linear(q_rank, heads * dim)
        + linear(hidden, dim)
        + norm(dim, bias=True)
        + plain(hidden * heads)
    )


def count_dsa(r: Reading) -> Count:
    """DeepSeek sparse attention (V3.2, GLM-5): MLA with an indexer on every layer, then
    ``count_deepseek_moe``'s dense and expert layers."""
    s = shapes(r)
    return count_deepseek_moe(r, _mla(r, s.hidden, s.heads) + _indexer(r, s.hidden))


def _layers_without_indexer(r: Reading, n: int) -> list[int]:
    """The layers vLLM builds without an indexer of their own (they reuse an earlier layer's
    top-k): ``index_topk_pattern`` "S" entries, else every layer i with
    max(i - ``index_skip_topk_offset`` + 1, 0) % ``index_topk_freq`` != 0 (defaults 2 and 1:
    none). vLLM deepseek_v32/attention.py, ``DeepseekV32Attention``."""
    pattern = r.config.get("index_topk_pattern")
    if pattern is not None:
        if not isinstance(pattern, (str, list)):
            raise SpecError("", ["index_topk_pattern: must be a string or a list"])
        return [i for i in range(min(n, len(pattern))) if pattern[i] == "S"]
    freq = whole(r.config.get("index_topk_freq", 1), "index_topk_freq")
    offset = whole(r.config.get("index_skip_topk_offset", 2), "index_skip_topk_offset", 0)
    return [i for i in range(n) if max(i - offset + 1, 0) % freq]


def dsa_state(r: Reading) -> None:
    """The MLA ranks and ``index_head_dim`` the file leaves to its config class; refuses a
    model whose indexer skips layers, since a spec's ``index_head_dim`` is every layer's."""
    for key in (*_MLA, *INDEX_KEYS):
        if key not in r.spec and (value := r.get(key)) is not None:
            r.spec[key] = value
    n = r.spec["num_hidden_layers"]
    skipped = _layers_without_indexer(r, n)
    if skipped:
        raise SpecError(
            "",
            [
                f"index_topk_freq/index_topk_pattern: {len(skipped)} of the {n} layers keep no"
                " indexer key of their own (shared top-k), which a spec cannot express:"
                " index_head_dim applies to every MLA layer"
            ],
        )


# DeepseekV32Config's values for the keys the cache and the count read.
_DEEPSEEK_V32 = {
    "kv_lora_rank": 512,
    "q_lora_rank": 1536,
    "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 128,
    "v_head_dim": 128,
    "index_head_dim": 128,
    "index_n_heads": 64,
    "first_k_dense_replace": 3,
    "max_position_embeddings": 163840,
}

_RULE = Rule(extra=_MLA, reads_head_dim=False, parameters=_count_deepseek)
_NOTES = "MLA: one latent of kv_lora_rank + qk_rope_head_dim per layer (no factor 2)"

# Kimi K2's config.json names DeepSeek V3's class: vLLM serves it with that model. Mistral
# Large 3 ships Mistral's params.json, which vLLM (transformers_utils/configs/mistral.py) maps
# onto deepseek_v3 keys with the class MistralLarge3ForCausalLM, a DeepseekV3ForCausalLM.
for _type, _classes in (
    ("deepseek_v2", ("DeepseekV2ForCausalLM",)),
    ("deepseek_v3", ("DeepseekV3ForCausalLM", "MistralLarge3ForCausalLM")),
    ("kimi_k2", ("DeepseekV3ForCausalLM",)),
):
    register(FAMILY, _type, _RULE, ("mla_latent",), _NOTES, architectures=_classes)
register(
    FAMILY,
    "deepseek_v32",
    Rule(
        extra=(*_MLA, *INDEX_KEYS),
        defaults=_DEEPSEEK_V32,
        reads_head_dim=False,
        state=dsa_state,
        parameters=count_dsa,
    ),
    ("mla_latent",),
    "DeepSeek V3.2 (configuration_deepseek_v32.py; vLLM deepseek_v32/attention.py): MLA latent"
    " plus the indexer's fp8 key of index_head_dim (default 128) + a 4 B scale per 128",
    architectures=("DeepseekV32ForCausalLM",),
)
register(
    FAMILY,
    "deepseek",
    Rule(reads_head_dim=False, parameters=_count_deepseek_v1),
    UNIFORM_KINDS,
    "DeepSeek V1: num_key_value_heads of hidden_size / heads (vLLM deepseek_v2.py, no MLA)",
    architectures=("DeepseekForCausalLM",),
)
register_wrapper(
    FAMILY,
    "kimi_k25",
    "kimi_k2",
    "Kimi K2.5 with vision (vLLM: KimiK25ForConditionalGeneration): DeepSeek V3 in text_config;"
    " the vision tower is not counted",
    engines=("vllm",),
)


# A.X K1 (configuration_axk1.py; vLLM AXK1.py): DeepSeek V3's MLA and MoE layout, with one more
# RMSNorm after each MoE block (post_mlp_layernorm). AXK1Config's values for the keys read;
# the router keeps its correction bias unless topk_method says otherwise (vLLM's default).
_AXK1 = {
    "num_hidden_layers": 61,
    "num_attention_heads": 64,
    "hidden_size": 7168,
    "vocab_size": 163840,
    "intermediate_size": 18432,
    "moe_intermediate_size": 2048,
    "kv_lora_rank": 512,
    "q_lora_rank": 1536,
    "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 128,
    "v_head_dim": 128,
    "n_routed_experts": 192,
    "n_shared_experts": 1,
    "num_experts_per_tok": 8,
    "first_k_dense_replace": 1,
    "topk_method": "noaux_tc",
    "max_position_embeddings": 32768,
    "tie_word_embeddings": False,
}


def _axk1_state(r: Reading) -> None:
    """The MLA ranks the file leaves to AXK1Config; refuses qk dims of 0, which vLLM serves
    with plain multi-head attention instead of MLA."""
    for key in _MLA:
        if key not in r.spec and (value := r.get(key)) is not None:
            r.spec[key] = value
    if not r.spec.get("qk_rope_head_dim") and not r.spec.get("qk_nope_head_dim"):
        raise SpecError("", ["qk_nope_head_dim, qk_rope_head_dim: 0 selects MHA, not MLA"])


def _count_axk1(r: Reading) -> Count:
    """``count_mla`` plus the post_mlp_layernorm of every MoE layer."""
    s = shapes(r)
    first = min(size(r, "first_k_dense_replace", default=0, minimum=0), s.layers)
    return count_mla(r) + norm(s.hidden).times(s.layers - first)


register(
    FAMILY,
    "axk1",
    Rule(
        extra=_MLA,
        defaults=_AXK1,
        reads_head_dim=False,
        state=_axk1_state,
        parameters=_count_axk1,
    ),
    ("mla_latent",),
    "A.X K1 (configuration_axk1.py; vLLM AXK1.py): MLA like DeepSeek V3, one latent of"
    " kv_lora_rank + qk_rope_head_dim per layer (no factor 2)",
    architectures=("AXK1ForCausalLM",),
)
