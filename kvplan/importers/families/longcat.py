"""Meituan LongCat-Flash (``longcat_flash``; LongcatFlashForCausalLM and its n-gram embedding
variant LongcatFlashNgramForCausalLM).

Each of the ``num_layers`` decoder layers runs two MLA attentions (vLLM longcat_flash.py,
``FlashDecoderLayer``: ``self_attn.0`` and ``self_attn.1``), each caching one latent of
``kv_lora_rank + qk_rope_head_dim`` values a token. LongcatFlashConfig counts them the same
way (``num_hidden_layers`` is ``2 * num_layers``), so the spec has 2 x num_layers MLA layers.
The n-gram variant changes the input embeddings only: the same cache.
"""

from __future__ import annotations

from kvplan.errors import SpecError
from kvplan.importers.families.deepseek import MLA_KEYS, mla_attention
from kvplan.importers.parameters import (
    Count,
    decoder,
    experts,
    mlp,
    norm,
    plain,
    shapes,
    size,
)
from kvplan.importers.reading import Reading, whole
from kvplan.importers.registry import register
from kvplan.importers.rules import Rule

FAMILY = "longcat"

# LongcatFlashConfig's values (configuration_longcat_flash.py) for the keys read.
_LONGCAT_FLASH = {
    "num_layers": 28,
    "hidden_size": 6144,
    "num_attention_heads": 64,
    "vocab_size": 131072,
    "max_position_embeddings": 131072,
    "ffn_hidden_size": 12288,
    "q_lora_rank": 1536,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "moe_topk": 12,
    "n_routed_experts": 512,
    "zero_expert_num": 256,
    "expert_ffn_hidden_size": 2048,
    "tie_word_embeddings": False,
}


def _layers_longcat(r: Reading, n: int) -> None:
    """Two MLA caches per decoder layer: ``num_hidden_layers`` becomes 2 x ``num_layers``
    (vLLM builds ``num_layers`` decoder layers whatever ``num_hidden_layers`` says)."""
    num_layers = whole(r.get("num_layers"), "num_layers")
    r.spec["num_hidden_layers"] = whole(2 * num_layers, "num_layers")
    r.notes.append(f"num_hidden_layers {2 * num_layers}: 2 MLA attentions x num_layers")


def _mla_defaults(r: Reading) -> None:
    for key in MLA_KEYS:
        if key not in r.spec and (value := r.get(key)) is not None:
            r.spec[key] = value


def _count_longcat(r: Reading) -> Count:
    """Per decoder layer: two MLA attentions, four RMSNorms, two gated MLPs of
    ``ffn_hidden_size`` and one MoE of ``n_routed_experts`` experts of
    ``expert_ffn_hidden_size`` (``moe_topk`` chosen among them and ``zero_expert_num``
    parameter-free zero experts), whose router scores and biases every expert, zero ones too.
    The n-gram embedding tables are not counted (SpecError)."""
    if r.get("ngram_vocab_size_ratio") is not None:
        raise SpecError("", ["ngram_vocab_size_ratio: the n-gram embeddings are not counted"])
    s = shapes(r)
    num_layers = s.layers // 2
    attention = mla_attention(r, s.hidden, s.heads)
    dense = mlp(s.hidden, size(r, "ffn_hidden_size", "intermediate_size"))
    num_experts = size(r, "n_routed_experts")
    routed = experts(
        mlp(s.hidden, size(r, "expert_ffn_hidden_size", "moe_intermediate_size")),
        num_experts,
        size(r, "moe_topk"),
    )
    scored = num_experts + size(r, "zero_expert_num", default=0, minimum=0)
    router = plain(scored * s.hidden + scored)
    layer = (attention + dense).times(2) + norm(s.hidden).times(4) + routed + router
    return decoder(s, layer.times(num_layers))


register(
    FAMILY,
    "longcat_flash",
    Rule(
        layers=_layers_longcat,
        extra=MLA_KEYS,
        defaults=_LONGCAT_FLASH,
        reads_head_dim=False,
        state=_mla_defaults,
        parameters=_count_longcat,
    ),
    ("mla_latent",),
    "LongCat-Flash (configuration_longcat_flash.py; vLLM longcat_flash.py): two MLA latents"
    " per decoder layer, so 2 x num_layers layers of kv_lora_rank + qk_rope_head_dim",
    architectures=("LongcatFlashForCausalLM", "LongcatFlashNgramForCausalLM"),
)
