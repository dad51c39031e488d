"""Qwen4Exp (Qwen3.8-Flash-Next; vLLM 0.32 models/qwen4_exp/nvidia: ``Qwen4ExpForCausalLM``,
and ``Qwen4ExpForConditionalGeneration``, whose ``qwen4_exp`` config nests the text model in
``text_config`` beside a Qwen3-VL vision tower).

The layers of ``layer_types`` are gated delta nets (``linear_attention``) or, where the config
says ``full_attention`` or ``indexed_attention``, QSA attention (qsa.py): gated GQA whose cache
is a ``FullAttentionSpec`` of ``num_key_value_heads`` x ``head_dim``, plus its indexer's two
side caches (indexer_qsa.py, common/qsa_cache.py): one bf16 key of ``indexer_head_dim`` per
``indexer_compress_ratio`` tokens, and a ring of that many raw bf16 keys, each with its three
int64 MRoPE positions when the model uses MRoPE (``mrope_section``). Without the indexer keys
vLLM builds plain gated attention (Qwen3-Next's). Each one-based id of ``ple_layer_ids`` (a
linear layer) adds a PLE block (ple_layer.py): n-gram embedding tables, and a short
convolution over ``hc_count x hidden_size`` channels dilated by ``ngram_size``, whose tail of
``(ple_conv_kernel_size - 1) x ngram_size`` positions vLLM keeps per request in the model
dtype, whole on every rank (``is_kv_cache_tp_replicated``). The config class is transformers'
``Qwen4ExpTextConfig`` (configuration_qwen4_exp.py).
"""

from __future__ import annotations

from typing import Any

from kvplan.errors import SpecError
from kvplan.importers.families.qwen import LINEAR_KEYS, count_qwen3_5_vision
from kvplan.importers.parameters import (
    Count,
    gated_delta,
    linear,
    moe,
    norm,
    plain,
    shapes,
    size,
)
from kvplan.importers.reading import Reading, as_list, mapping, whole
from kvplan.importers.registry import register, register_wrapper
from kvplan.importers.rules import Rule
from kvplan.model.limits import MAX_DIM

FAMILY = "qwen4_exp"
_KINDS = ("linear_attention", "indexed_attention", "full_attention")
_INDEXER = (
    "indexer_n_heads",
    "indexer_kv_heads",
    "indexer_head_dim",
    "indexer_budget",
    "indexer_compress_ratio",
)

#: n-gram tables counted at most (each a prime to find): Qwen3.8-Flash-Next has 16.
_MAX_TABLES = 4096

#: Qwen4ExpTextConfig's values for the keys read here.
_DEFAULTS: dict[str, Any] = {
    "vocab_size": 248320,
    "hidden_size": 2048,
    "num_hidden_layers": 40,
    "num_attention_heads": 16,
    "num_key_value_heads": 2,
    "head_dim": 256,
    "max_position_embeddings": 32768,
    "linear_conv_kernel_dim": 4,
    "linear_key_head_dim": 128,
    "linear_value_head_dim": 128,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 32,
    "moe_intermediate_size": 512,
    "shared_expert_intermediate_size": 512,
    "num_experts_per_tok": 10,
    "num_experts": 512,
    "tie_word_embeddings": False,
    "hc_count": 4,
    "hc_lowrank": 320,
    "ple_conv_kernel_size": 4,
    "ngram_size": 3,
    "heads_per_ngram": 8,
    "ngram_vocab_size_base": 20_000_000,
    "make_ngram_vocab_size_divisible_by": 128,
    "full_attention_interval": 4,
}


def _has_indexer(r: Reading) -> bool:
    """All five indexer keys, or none (the config class refuses a partial set)."""
    given = [key for key in _INDEXER if r.config.get(key) is not None]
    if given and len(given) != len(_INDEXER):
        missing = [key for key in _INDEXER if key not in given]
        raise SpecError("", [f"{missing[0]}: required with the other QSA indexer keys"])
    if given and r.config["indexer_kv_heads"] != 1:
        raise SpecError("", ["indexer_kv_heads: must be 1 (Qwen4Exp's QSA has one key head)"])
    return bool(given)


def _ple_layers(r: Reading, kinds: list[str]) -> list[int]:
    """``ple_layer_ids`` (one-based) as 0-based layers, each a linear_attention layer."""
    ids = sorted(set(as_list(r.config.get("ple_layer_ids") or [], "ple_layer_ids")))
    layers = []
    for one_based in ids:
        layer = whole(one_based, "ple_layer_ids", 1, len(kinds)) - 1
        if kinds[layer] != "linear_attention":
            raise SpecError("", [f"ple_layer_ids: layer {one_based} is not linear_attention"])
        layers.append(layer)
    return layers


def _layers(r: Reading, n: int) -> None:
    given = r.config.get("layer_types")
    if given is None:
        every = whole(r.get("full_attention_interval"), "full_attention_interval")
        stated = ["linear_attention" if (i + 1) % every else "full_attention" for i in range(n)]
        r.notes.append(f"layer_types from full_attention_interval {every}")
    else:
        stated = as_list(given, "layer_types")
        if len(stated) != n:
            raise SpecError("", [f"layer_types: has {len(stated)} entries but {n} layers"])
    for i, kind in enumerate(stated):
        if kind not in _KINDS:
            raise SpecError("", [f"layer_types.{i}: {kind!r} is not one of {_KINDS}"])
    attention = "indexed_attention" if _has_indexer(r) else "full_attention"
    kinds = [k if k == "linear_attention" else attention for k in stated]
    r.spec["layer_types"] = kinds
    if attention == "indexed_attention":
        dim = whole(r.config["indexer_head_dim"], "indexer_head_dim", 1, MAX_DIM)
        ratio = whole(r.config["indexer_compress_ratio"], "indexer_compress_ratio", 2, MAX_DIM)
        rope = mapping(r.config.get("rope_parameters") or {}, "rope_parameters")
        r.spec |= {"index_head_dim": dim, "index_kpool": ratio}
        r.spec["index_rope_positions"] = rope.get("mrope_section") is not None
    ple = _ple_layers(r, kinds)
    if ple:
        hidden = whole(r.get("hidden_size"), "hidden_size", 1, MAX_DIM)
        tail = (size(r, "ple_conv_kernel_size") - 1) * size(r, "ngram_size")
        values = tail * _hc_count(r) * hidden
        if values > MAX_DIM:
            raise SpecError(
                "", [f"ple_conv_kernel_size: a PLE tail of {values:,} values, over {MAX_DIM:,}"]
            )
        r.spec["ple_layers"] = ple
        r.spec["ple_conv_values"] = values
    r.notes.append(
        f"layer_types: {kinds.count('linear_attention')} gated delta nets,"
        f" {len(kinds) - kinds.count('linear_attention')} {attention}; PLE on {len(ple)}"
    )


def _hc_count(r: Reading) -> int:
    """The hyper-connection streams: more than one (the config class), 64 at most here."""
    return whole(r.get("hc_count"), "hc_count", 2, 64)


def _state(r: Reading) -> None:
    # vLLM keeps the delta nets' and the PLE's conv tails in the model dtype (a float32 SSM
    # state beside them: mamba_ssm_dtype)
    r.spec["conv_dtype"] = r.spec["torch_dtype"]


def _hyper(width: int, hc: int, lowrank: int, inject: bool = True) -> Count:
    """A ``GatedResidual``: the grouped norm over ``hc`` streams, the low-rank mix down and up,
    and (between layers) the block-inject projection to ``hc`` weights."""
    return plain(width + 2 * width * lowrank + (hc * width if inject else 0))


def _next_prime(value: int) -> int:
    """The least prime above ``value`` (deterministic Miller-Rabin, exact below 3.3 x 10^24)."""
    candidate = value + 1
    while not _is_prime(candidate):
        candidate += 1
    return candidate


def _is_prime(n: int) -> bool:
    small = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41)
    if n in small:
        return True
    if n < 2 or any(n % p == 0 for p in small):
        return False
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    for a in small:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def ngram_rows(base: int, heads: int, tables: int, divisor: int) -> list[int]:
    """Each PLE layer's n-gram table rows: its ``heads`` tables take the next primes above
    ``base - 1`` after the earlier layers' (vLLM ``_make_vocab_layout``), summed and padded
    to ``divisor``. Qwen3.8-Flash-Next: 16 primes from 20,000,003 to 20,000,171, 320,001,446
    rows, 320,001,536 padded."""
    rows, prime = [], base - 1
    for _ in range(tables):
        total = 0
        for _ in range(heads):
            prime = _next_prime(prime)
            total += prime
        rows.append(-(-total // divisor) * divisor)
    return rows


def _ple(r: Reading, hidden: int, width: int, tables: int) -> Count:
    """Each PLE block: its n-gram table of ``ple_embed_dim / heads`` wide rows, key and value
    projections from ``ple_embed_dim``, three grouped norms and the depthwise conv."""
    if not tables:
        return Count()
    dim = size(r, "ple_embed_dim", default=hidden)
    heads = (size(r, "ngram_size", minimum=2) - 1) * size(r, "heads_per_ngram")
    if heads * tables > _MAX_TABLES:
        tables_given = f"{heads * tables} n-gram tables, over {_MAX_TABLES}"
        raise SpecError("", [f"heads_per_ngram: {tables_given}"])
    if dim % heads:
        raise SpecError("", [f"ple_embed_dim: {dim} is not a multiple of {heads} n-gram heads"])
    base = whole(r.get("ngram_vocab_size_base"), "ngram_vocab_size_base", 2, 10**18)
    divisor = size(r, "make_ngram_vocab_size_divisible_by")
    rows = ngram_rows(base, heads, tables, divisor)
    kernel = size(r, "ple_conv_kernel_size")
    block = linear(dim, width) + linear(dim, hidden) + plain(3 * width + width * kernel)
    return plain(sum(rows) * (dim // heads)) + block.times(tables)


def _count(r: Reading) -> Count:
    """The embeddings and untied head, the final hyper-connection mixer (no inject, no other
    norm); per layer two hyper-connections, the MoE block (routed experts, a shared expert and
    its one-output gate) and its mixer: a gated delta net, or QSA's gated GQA (q_proj doubled
    for the output gate, q/k norms) with the indexer's q/k projection and two norms; and the
    PLE blocks. The MTP layers are not counted."""
    s = shapes(r)
    hc, lowrank = _hc_count(r), size(r, "hc_lowrank")
    width = hc * s.hidden
    q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
    attention = linear(s.hidden, 2 * q + 2 * kv) + linear(q, s.hidden) + norm(s.head_dim).times(2)
    if r.spec["layer_types"].count("indexed_attention"):
        dim = size(r, "indexer_head_dim")
        attention += linear(s.hidden, (size(r, "indexer_n_heads") + 1) * dim)
        attention += norm(dim).times(2)
    keys = [size(r, key) for key in LINEAR_KEYS]
    delta = gated_delta(s.hidden, *keys)
    shared = size(r, "shared_expert_intermediate_size", default=0, minimum=0)
    ffn = moe(
        s.hidden,
        size(r, "moe_intermediate_size"),
        size(r, "num_experts"),
        size(r, "num_experts_per_tok"),
        shared,
    ) + plain(s.hidden if shared else 0)
    layers = Count()
    for kind in r.spec["layer_types"]:
        mixer = delta if kind == "linear_attention" else attention
        layers += mixer + ffn + _hyper(width, hc, lowrank).times(2)
    layers += _ple(r, s.hidden, width, len(r.spec.get("ple_layers") or ()))
    return s.embeddings() + layers + _hyper(width, hc, lowrank, inject=False)


_NOTE = (
    "Qwen4Exp (vLLM models/qwen4_exp): gated delta nets, and QSA attention with a bf16 key"
    " per indexer_compress_ratio tokens and a raw-key ring (indexed_attention); PLE conv tails"
)

register(
    FAMILY,
    "qwen4_exp_text",
    Rule(
        layers=_layers,
        extra=LINEAR_KEYS,
        defaults=_DEFAULTS,
        default_dtype="bfloat16",
        state=_state,
        parameters=_count,
    ),
    _KINDS,
    _NOTE,
    architectures=("Qwen4ExpForCausalLM",),
)
register_wrapper(
    FAMILY,
    "qwen4_exp",
    "qwen4_exp_text",
    _NOTE + "; the text model from text_config, with its Qwen3-VL vision tower",
    vision=count_qwen3_5_vision,
    architectures=("Qwen4ExpForConditionalGeneration",),
)
