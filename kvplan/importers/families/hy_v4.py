"""Tencent HY V4 (``hy_v4``, HYV4ForCausalLM): MLA on every layer, with DeepSeek-style sparse
attention's lightning indexer on some of them, hyper-connections (iHC) and MoE.

vLLM 0.32 (models/hy_v4/nvidia/attention.py ``HYV4MLAAttention``; config class
transformers_utils/configs/hy_v4.py, registered ahead of transformers') caches one MLA latent of
``kv_lora_rank + qk_rope_head_dim`` in every layer. A layer whose ``layer_types`` entry is a
sparse kind (``deepseek_sparse_attention``, ``sparse_attention``, ``sparse``,
``indexed_attention``) is sparse; a sparse layer builds an indexer, and its fp8 key cache of
``index_head_dim`` values plus a 4 B scale per 128 (``DeepseekV32IndexerCache``), unless
``indexer_types`` marks it ``shared`` (it reuses the last full layer's top-k). vLLM's config
class leaves ``layer_types`` unset by default: then no layer is sparse. Its ``indexer_types``
default is ``full`` on layer 0 and every layer i with (i - 1) % 4 == 0, ``shared`` elsewhere.

The spec gives each layer its indexer key in ``index_dim_per_layer`` (0: none) when only some
layers keep one. Gated MLA, the learnable sinks and iHC change the weights, not the cache.
"""

from __future__ import annotations

from kvplan.errors import SpecError
from kvplan.importers.families.deepseek import mla_attention
from kvplan.importers.parameters import Count, decoder, linear, mlp, moe, norm, plain, shapes, size
from kvplan.importers.reading import Reading, as_list, whole
from kvplan.importers.registry import register
from kvplan.importers.rules import Rule
from kvplan.model.limits import MAX_DIM

FAMILY = "hy_v4"

_MLA = ("kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")

#: The ``layer_types`` entries vLLM's HY V4 reads as sparse attention (attention.py).
SPARSE_TYPES = ("sparse_attention", "sparse", "indexed_attention", "deepseek_sparse_attention")

# vLLM's HYV4Config values for the keys the cache and the count read.
_DEFAULTS = {
    "vocab_size": 120832,
    "hidden_size": 2816,
    "intermediate_size": 6912,
    "moe_intermediate_size": 768,
    "num_hidden_layers": 34,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "max_position_embeddings": 262144,
    "tie_word_embeddings": False,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "num_experts_per_tok": 8,
    "q_lora_rank": 1536,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 192,
    "qk_rope_head_dim": 64,
    "v_head_dim": 256,
    "index_topk": 2048,
    "index_head_dim": 128,
    "index_n_heads": 16,
    "enable_ihc": True,
    "hc_mult": 4,
    "gated_mla": True,
    "gating_type": "elementwise",
    "learnable_sink": True,
}


def _entries(r: Reading, key: str, n: int) -> list[object] | None:
    given = r.config.get(key)
    if given is None:
        return None
    entries = as_list(given, key)
    if len(entries) != n:
        raise SpecError("", [f"{key}: has {len(entries):,} entries but {n} layers"])
    return entries


def indexer_layers(r: Reading, n: int) -> list[bool]:
    """Whether each layer builds an indexer (and caches its key): a sparse ``layer_types``
    entry, not ``shared`` in ``indexer_types``. Raises SpecError naming the key for a list
    of the wrong length or an ``indexer_types`` entry other than full and shared."""
    kinds = _entries(r, "layer_types", n) or [None] * n
    shared = _entries(r, "indexer_types", n)
    if shared is None:
        shared = ["full" if i == 0 or (i - 1) % 4 == 0 else "shared" for i in range(n)]
    bad = [i for i, t in enumerate(shared) if t not in ("full", "shared")]
    if bad:
        raise SpecError("", [f"indexer_types.{bad[0]}: must be full or shared"])
    if r.get("index_topk") is None:
        return [False] * n
    return [kinds[i] in SPARSE_TYPES and shared[i] == "full" for i in range(n)]


def _layers(r: Reading, n: int) -> None:
    r.spec["layer_types"] = ["full_attention"] * n
    indexed = indexer_layers(r, n)
    if not any(indexed):
        r.notes.append("no layer keeps an indexer key: no sparse layer_types entry")
        return
    dim = whole(r.get("index_head_dim"), "index_head_dim", maximum=MAX_DIM)
    if all(indexed):
        r.spec["index_head_dim"] = dim
    else:
        r.spec["index_dim_per_layer"] = [dim if on else 0 for on in indexed]
    r.notes.append(
        f"indexer key of {dim} on {sum(indexed)} of {n} layers: sparse layer_types entries"
        " whose indexer_types entry is full (vLLM hy_v4 attention.py)"
    )


def _state(r: Reading) -> None:
    for key in _MLA:
        if key not in r.spec and (value := r.get(key)) is not None:
            r.spec[key] = value
    if r.spec.get("kv_lora_rank") is None or r.spec.get("qk_rope_head_dim") is None:
        raise SpecError("", ["kv_lora_rank, qk_rope_head_dim: required by HY V4's MLA"])


def _mla(r: Reading, hidden: int, heads: int) -> Count:
    """One ``HYV4MLAAttention``: q through the ``q_lora_rank`` latent and its norm when set,
    else q_proj; the K/V latent with the rope key, its norm, kv_b, o_proj; with
    ``gated_mla`` the linear_gate (heads x v_head_dim elementwise, heads headwise); with
    ``learnable_sink`` one sink a head."""
    v_dim = size(r, "v_head_dim")
    gate = Count()
    if r.get("gated_mla"):
        per_head = {"elementwise": v_dim, "headwise": 1}.get(str(r.get("gating_type")))
        if per_head is None:
            raise SpecError("", ["gating_type: must be elementwise or headwise"])
        gate = linear(hidden, heads * per_head)
    sink = plain(heads if r.get("learnable_sink") else 0)
    return mla_attention(r, hidden, heads) + gate + sink


def _indexer(r: Reading, hidden: int) -> Count:
    """The lightning indexer (attention.py ``Indexer``): wq_b from the q latent to
    ``index_n_heads`` heads of ``index_head_dim``, wk and weights_proj (one key, one weight a
    head) fused, the key's LayerNorm (weight and bias)."""
    dim, heads = size(r, "index_head_dim"), size(r, "index_n_heads")
    q_rank = size(r, "q_lora_rank")
    return linear(q_rank, heads * dim) + linear(hidden, dim + heads) + norm(dim, bias=True)


def _hc(r: Reading, hidden: int) -> Count:
    """One iHC boundary (hc.py ``HYV4HCPreLayer``): hc_fn from hc_mult x hidden to
    2 x hc_mult mixes, its 2 scales and 2 x hc_mult biases; the post layer has none."""
    mult = size(r, "hc_mult")
    return plain(mult * hidden * 2 * mult + 2 + 2 * mult)


def _mlp_kinds(r: Reading, n: int) -> list[object]:
    default: list[object] = ["dense", *["sparse"] * (n - 1)]
    return _entries(r, "mlp_layer_types", n) or default


def _count(r: Reading) -> Count:
    """Embeddings and the head, each layer's MLA (with its indexer where built), two
    RMSNorms, two iHC boundaries with ``enable_ihc``, a dense MLP or the routed experts
    (a router, ``n_shared_experts`` shared ones as one MLP, the fp32 expert bias) as
    ``mlp_layer_types`` says (default: layer 0 dense), the iHC head and the final norm. The
    MTP layers (``num_nextn_predict_layers``) are not counted."""
    s = shapes(r)
    indexed = indexer_layers(r, s.layers)
    ihc = bool(r.get("enable_ihc"))
    base = _mla(r, s.hidden, s.heads) + norm(s.hidden).times(2)
    if ihc:
        base += _hc(r, s.hidden).times(2)
    width = size(r, "moe_intermediate_size")
    shared = size(r, "n_shared_experts", default=0, minimum=0) * width
    routed = size(r, "n_routed_experts", "num_local_experts")
    experts = moe(s.hidden, width, routed, size(r, "num_experts_per_tok"), shared, True)
    dense = mlp(s.hidden, size(r, "intermediate_size"))
    layers = Count()
    for i, kind in enumerate(_mlp_kinds(r, s.layers)):
        index = _indexer(r, s.hidden) if indexed[i] else Count()
        layers += base + index + (dense if kind == "dense" else experts)
    mult = size(r, "hc_mult") if ihc else 0
    head = plain(mult * s.hidden * mult + mult + 1) if ihc else Count()
    return decoder(s, layers + head)


register(
    FAMILY,
    "hy_v4",
    Rule(
        layers=_layers,
        extra=_MLA,
        defaults=_DEFAULTS,
        reads_head_dim=False,
        state=_state,
        parameters=_count,
    ),
    ("mla_latent",),
    "HY V4 (vLLM models/hy_v4, configs/hy_v4.py): MLA latent on every layer, plus the"
    " indexer's fp8 key on sparse layer_types layers whose indexer_types entry is full",
    architectures=("HYV4ForCausalLM",),
)
