"""MiniCPM 1/2/4 (``minicpm``: plain GQA) and MiniCPM3, multi-head latent attention that vLLM
caches as plain K and V per head.

MiniCPM3's attention projects through DeepSeek-style latents (``q_lora_rank``,
``kv_lora_rank``), but vLLM's ``MiniCPM3Attention`` (minicpm3.py) expands the latent to full
keys of ``qk_nope_head_dim + qk_rope_head_dim`` per head and pads the values of
``v_head_dim`` to that width before its ``Attention``, which keeps ``num_attention_heads``
K/V heads. So the cache is multi-head attention of head_dim ``qk_nope + qk_rope``: MiniCPM3-4B,
40 heads of 64 + 32 = 96, caches 2 x 40 x 96 values a layer, not the 256 + 32 latent.
"""

from __future__ import annotations

from kvplan.importers.parameters import Count, decoder, linear, mlp, moe, norm, shapes, size
from kvplan.importers.reading import Reading
from kvplan.importers.registry import register
from kvplan.importers.rules import UNIFORM_KINDS, Rule, kv_heads_mha

FAMILY = "minicpm"


def _expanded_heads(r: Reading) -> None:
    nope, rope = size(r, "qk_nope_head_dim"), size(r, "qk_rope_head_dim")
    r.spec["head_dim"] = nope + rope
    r.notes.append(
        f"head_dim {nope + rope}: qk_nope_head_dim {nope} + qk_rope_head_dim {rope}; vLLM caches"
        " full K and V (V padded to it) for every head, not the latent"
    )


def _count_minicpm3(r: Reading) -> Count:
    """MiniCPM3: q through the ``q_lora_rank`` latent and its RMSNorm, the joint K/V latent
    with the RoPE key, its RMSNorm, the per-head K/V up-projection, o; a gated MLP; two
    RMSNorms a layer."""
    s = shapes(r)
    nope, rope = size(r, "qk_nope_head_dim"), size(r, "qk_rope_head_dim")
    v_dim, kv_rank, q_rank = size(r, "v_head_dim"), size(r, "kv_lora_rank"), size(r, "q_lora_rank")
    q = linear(s.hidden, q_rank) + norm(q_rank) + linear(q_rank, s.heads * (nope + rope))
    kv = linear(s.hidden, kv_rank + rope) + norm(kv_rank)
    kv += linear(kv_rank, s.heads * (nope + v_dim))
    attention = q + kv + linear(s.heads * v_dim, s.hidden)
    layer = attention + mlp(s.hidden, size(r, "intermediate_size")) + norm(s.hidden).times(2)
    return decoder(s, layer.times(s.layers))


register(
    FAMILY,
    "minicpm3",
    # MiniCPM3's config class leaves tie_word_embeddings to PretrainedConfig: True.
    Rule(
        kv_heads=kv_heads_mha,
        defaults={"tie_word_embeddings": True},
        reads_head_dim=False,
        state=_expanded_heads,
        parameters=_count_minicpm3,
    ),
    ("full_attention",),
    "MiniCPM3: MLA expanded by vLLM to heads x (qk_nope + qk_rope) for K and for V",
    architectures=("MiniCPM3ForCausalLM",),
)


def _count_minicpm(r: Reading) -> Count:
    """MiniCPM 1/2/4 (modeling_minicpm.py): bias-free GQA of head_dim hidden_size / heads, a
    gated MLP or ``num_experts`` gated experts behind a bias-free router; two RMSNorms a layer;
    tied embeddings unless the file says otherwise."""
    s = shapes(r)
    inter = size(r, "intermediate_size")
    num_experts = size(r, "num_experts", default=0, minimum=0)
    if num_experts:
        ffn = moe(s.hidden, inter, num_experts, size(r, "num_experts_per_tok", default=2))
    else:
        ffn = mlp(s.hidden, inter)
    layer = s.attention() + ffn + norm(s.hidden).times(2)
    return decoder(s, layer.times(s.layers))


register(
    FAMILY,
    "minicpm",
    # The remote-code MiniCPMConfig leaves tie_word_embeddings to PretrainedConfig: True.
    Rule(
        defaults={"tie_word_embeddings": True},
        reads_head_dim=False,
        parameters=_count_minicpm,
    ),
    UNIFORM_KINDS,
    "MiniCPM 1/2/4: num_key_value_heads, head_dim hidden_size / heads as vLLM minicpm.py"
    " computes it (a stated head_dim is not read); experts share one cache",
    architectures=("MiniCPMForCausalLM",),
)
