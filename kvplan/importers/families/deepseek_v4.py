"""DeepSeek V4: a sliding latent window in every layer, compressed latents in most.

vLLM 0.32 (models/deepseek_v4/attention.py, compressor.py) reads ``compress_ratios``, one per
layer and then one per MTP layer: 0 keeps only the latent of the last ``sliding_window``
tokens; 4 adds one compressed latent per 4 tokens with the lightning indexer's fp8 key; 128
one per 128 tokens. Each compressing layer keeps the open group in an fp32 ring. The latent
is one vector of ``head_dim`` (512, its last ``qk_rope_head_dim`` RoPE), shared by the 64
query heads, so ``head_dim`` is read as the latent's width and no K/V heads are cached.
"""

from __future__ import annotations

from typing import Any

from kvplan.errors import SpecError
from kvplan.importers.parameters import Count, decoder, linear, moe, norm, plain, shapes, size
from kvplan.importers.reading import Reading, as_list, mapping, whole
from kvplan.importers.registry import register
from kvplan.importers.rules import Rule
from kvplan.model.sparse import COMPRESS_RATIOS

FAMILY = "deepseek_v4"


#: transformers' DeepseekV4Config: each layer type's ratio, where ``compress_rates`` is absent.
_RATES = {"sliding_attention": 0, "compressed_sparse_attention": 4}
_RATES |= {"heavily_compressed_attention": 128}


def _ratios_from_types(r: Reading, n: int) -> list[Any]:
    """transformers' form (vLLM 0.33 reads it): ``layer_types`` named by ratio through
    ``compress_rates``, without the MTP layers."""
    types = as_list(r.config.get("layer_types"), "layer_types")
    rates = _RATES | dict(mapping(r.config.get("compress_rates") or {}, "compress_rates"))
    unknown = sorted({str(t) for t in types} - set(rates))
    if unknown:
        allowed = ", ".join(sorted(rates))
        raise SpecError("", [f"layer_types: {unknown[0]} is not one of {allowed}"])
    r.notes.append("compress_ratios from layer_types and compress_rates")
    return [rates[t] for t in types]


def _layers(r: Reading, n: int) -> None:
    """Every layer ``compressed_attention``, with the first ``n`` of ``compress_ratios``."""
    given = r.config.get("compress_ratios")
    if given is not None:
        ratios = as_list(given, "compress_ratios")
    elif r.config.get("layer_types") is not None:
        ratios = _ratios_from_types(r, n)
    else:
        raise SpecError("", ["compress_ratios: required, or layer_types (one per layer)"])
    if len(ratios) < n:
        raise SpecError("", [f"compress_ratios: has {len(ratios)} entries but {n} layers"])
    for i, ratio in enumerate(ratios[:n]):
        if ratio not in COMPRESS_RATIOS or isinstance(ratio, bool):
            allowed = ", ".join(map(str, COMPRESS_RATIOS))
            raise SpecError("", [f"compress_ratios.{i}: must be one of {allowed}"])
    r.spec["layer_types"] = ["compressed_attention"] * n
    r.spec["compress_ratios"] = list(ratios[:n])
    r.spec["sliding_window"] = whole(r.get("sliding_window"), "sliding_window", 1, 1 << 24)
    if len(ratios) > n:
        r.notes.append(f"compress_ratios: the last {len(ratios) - n} (MTP layers) not read")


def _compressor(hidden: int, head_dim: int, ratio: int) -> Count:
    """One compressor (``DeepseekCompressor``): ape of ratio x coff x head_dim, the fused kv
    and gate projection to 2 x coff x head_dim (unquantized: no quant_config), its RMSNorm;
    coff 2 where ratio is 4."""
    coff = 2 if ratio == 4 else 1
    return plain(ratio * coff * head_dim + hidden * 2 * coff * head_dim) + norm(head_dim)


def _attention(r: Reading, hidden: int, heads: int, ratio: int) -> Count:
    """``DeepseekV4Attention``: wq_a and wkv fused, the q and kv norms, wq_b, the grouped
    output (wo_a from each group's heads to its o_lora_rank, then wo_b), the attention sink
    per head; a compressor where ratio > 1; the indexer (wq_b, weights_proj kept bf16, its
    own compressor of index_head_dim) where ratio is 4."""
    head_dim, q_rank = size(r, "head_dim"), size(r, "q_lora_rank")
    groups, o_rank = size(r, "o_groups"), size(r, "o_lora_rank")
    part = (
        linear(hidden, q_rank + head_dim)
        + norm(q_rank)
        + norm(head_dim)
        + linear(q_rank, heads * head_dim)
        + linear(heads * head_dim // groups, groups * o_rank)
        + linear(groups * o_rank, hidden)
        + plain(heads)
    )
    if ratio > 1:
        part += _compressor(hidden, head_dim, ratio)
    if ratio == 4:
        dim, index_heads = size(r, "index_head_dim"), size(r, "index_n_heads")
        part += linear(q_rank, index_heads * dim) + plain(hidden * index_heads)
        part += _compressor(hidden, dim, ratio)
    return part


def _count(r: Reading) -> Count:
    """Embeddings and head; per layer the attention of its ratio, a MoE (routed and shared
    experts, the router, its correction bias on all but the first ``num_hash_layers``,
    whose routing is a token table instead), two RMSNorms and the hyper-connection mixers
    (``hc_mult`` streams: fn of (2 + m) x m rows of m x hidden, base and scale, for attention
    and for the MoE); the final norm and the head's mixer. MTP layers are not counted."""
    s = shapes(r)
    m = size(r, "hc_mult")
    mix = (2 + m) * m
    width, num_experts = size(r, "moe_intermediate_size"), size(r, "n_routed_experts")
    shared = size(r, "n_shared_experts", default=0, minimum=0) * width
    active, hashed = size(r, "num_experts_per_tok"), size(r, "num_hash_layers", minimum=0)
    hyper = plain(mix * m * s.hidden + mix + 3).times(2)
    layers = Count()
    for i, ratio in enumerate(r.spec["compress_ratios"]):
        ffn = moe(s.hidden, width, num_experts, active, shared, router_bias=i >= hashed)
        layers += _attention(r, s.hidden, s.heads, ratio) + ffn + norm(s.hidden).times(2) + hyper
    return decoder(s, layers, norm(s.hidden) + plain(m * m * s.hidden + m + 1))


register(
    FAMILY,
    "deepseek_v4",
    Rule(
        layers=_layers,
        extra=("qk_rope_head_dim", "index_head_dim"),
        parameters=_count,
    ),
    ("compressed_attention",),
    "DeepSeek V4 (vLLM models/deepseek_v4/attention.py, compressor.py): per compress_ratios a"
    " 128-token latent window, a latent per 4 (plus the indexer's fp8 key) or 128 tokens, and"
    " fp32 compressor rings; fp8_ds_mla layout (584 B a latent)",
    architectures=("DeepseekV4ForCausalLM",),
)
