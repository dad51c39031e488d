"""StepFun Step 5 (``step5``): GQA with sliding and full layers, dense then MoE feed-forwards;
served by vLLM 0.33 (models/step5, Step5ForCausalLM; not in vLLM 0.32). Step5Config is vLLM's
(transformers_utils/configs/step5.py); transformers has none.

vLLM's step5 attention caches ``num_attention_groups`` K/V heads per layer; on the layers of
``attention_other_setting``'s ``attention_type`` that setting's groups, heads and head_dim; a
``sliding_attention`` layer slides over ``sliding_window`` (none stated: it attends fully) and
takes ``swa_num_attention_heads`` query heads; an absent head_dim is hidden_size over the
layer's query heads. ``layer_types_with_mtp`` (else ``layer_types``) also lists the MTP layers,
which are cut off; with neither, even layers slide and odd ones are full (Step5Attention).

vLLM 0.33 serves a checkpoint only with a ``sparse_config`` section. Enabled (the default), the
full layers run DSA: besides their K/V, a 256 B fp8 summary per eight tokens and a ring of one
KV page per request (sparse_summary_cache.py, csa_tail_ring.py). That cache is not modelled
here, so such a config is refused; ``sparse_config.enabled: false`` is read as plain GQA.

Worked example (48 layers, 8 groups of 5120 / 40 = 128, layer_types absent, window 4,096, bf16):
24 sliding and 24 full layers of 2 x 8 x 128 x 2 = 4,096 B a token: 196,608 B a token below
the window.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvplan.errors import SpecError
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
from kvplan.importers.reading import Reading, as_list, mapping, whole
from kvplan.importers.registry import register
from kvplan.importers.rules import UNIFORM_KINDS, Rule, check_kinds
from kvplan.model.limits import MAX_DIM, MAX_LAYERS

FAMILY = "step5"

# Step5Config defaults (vLLM transformers_utils/configs/step5.py) for the keys that size the
# cache or the weights.
_DEFAULTS = {
    "hidden_size": 5120,
    "intermediate_size": 13312,
    "num_attention_heads": 40,
    "num_attention_groups": 8,
    "num_hidden_layers": 48,
    "max_seq_len": 4096,
    "vocab_size": 65536,
    "moe_intermediate_size": 10240,
    "moe_num_experts": 16,
    "moe_top_k": 4,
    "tie_word_embeddings": False,
}

_KINDS = ("full_attention", "sliding_attention")


def _stated_kinds(r: Reading, n: int) -> list[str] | None:
    given = r.config.get("layer_types_with_mtp") or r.config.get("layer_types")
    if not given:
        return None
    kinds = as_list(given, "layer_types")
    if len(kinds) < n:
        raise SpecError("", [f"layer_types: has {len(kinds):,} entries but {n} layers"])
    check_kinds(kinds[:n], _KINDS)
    return [str(k) for k in kinds[:n]]


def _check_sparse(r: Reading) -> None:
    sparse = r.config.get("sparse_config")
    if sparse is None:
        raise SpecError("", ["sparse_config: required (vLLM 0.33 serves no dense-only Step 5)"])
    if mapping(sparse, "sparse_config").get("enabled", True) is not False:
        raise SpecError(
            "",
            [
                "sparse_config: Step 5's DSA cache (an fp8 summary per 8 tokens and a CSA ring"
                " beside each full layer's K/V) is not modelled; only enabled: false is read"
            ],
        )


def _groups(r: Reading) -> int | None:
    return r.get("num_attention_groups")  # type: ignore[no-any-return]


def _other(r: Reading) -> Mapping[str, Any]:
    return mapping(r.config.get("attention_other_setting"), "attention_other_setting")


def _listed(r: Reading, n: int) -> list[str]:
    """Each layer's kind as the config lists it (absent: even layers sliding)."""
    kinds = _stated_kinds(r, n)
    if kinds is None:
        return ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n)]
    return kinds


def _attention(r: Reading, kind: str) -> tuple[int, int, int]:
    """(query heads, K/V heads, head_dim) of a layer listed as ``kind``, as Step5DecoderLayer
    and Step5Attention pick them (the sliding heads only where a window is stated)."""
    other = _other(r)
    heads, groups, head_dim = r.get("num_attention_heads"), r.get("num_attention_groups"), None
    if other and other.get("attention_type") == kind:
        key = "attention_other_setting"
        heads = whole(
            other.get("num_attention_heads"), f"{key}.num_attention_heads", maximum=MAX_DIM
        )
        groups = whole(
            other.get("num_attention_groups"), f"{key}.num_attention_groups", maximum=MAX_DIM
        )
        head_dim = whole(other.get("head_dim"), f"{key}.head_dim", maximum=MAX_DIM)
    swa = r.config.get("swa_num_attention_heads")
    if kind == "sliding_attention" and swa is not None and r.config.get("sliding_window"):
        heads = whole(swa, "swa_num_attention_heads", maximum=MAX_DIM)
    heads = whole(heads, "num_attention_heads", maximum=MAX_DIM)
    groups = whole(groups, "num_attention_groups", maximum=MAX_DIM)
    head_dim = head_dim or r.config.get("head_dim")
    if head_dim is None:
        hidden = whole(r.get("hidden_size"), "hidden_size", maximum=MAX_DIM)
        if hidden % heads:
            raise SpecError("", [f"head_dim: required, {hidden} is not a multiple of {heads}"])
        head_dim = hidden // heads
    return heads, groups, whole(head_dim, "head_dim", maximum=MAX_DIM)


def _layers_step5(r: Reading, n: int) -> None:
    _check_sparse(r)
    listed = _listed(r, n)
    if r.config.get("layer_types_with_mtp") is None and r.config.get("layer_types") is None:
        r.notes.append("layer_types absent: even layers slide, odd ones full (Step5Attention)")
    window = r.config.get("sliding_window")
    if window is None:
        r.spec["layer_types"] = ["full_attention"] * n  # no window: every layer attends fully
    else:
        r.spec["layer_types"] = listed
        r.spec["sliding_window"] = window
    per_layer = [_attention(r, kind) for kind in listed]
    r.spec["num_key_value_heads_per_layer"] = [groups for _, groups, _ in per_layer]
    r.spec["head_dim_per_layer"] = [head_dim for _, _, head_dim in per_layer]
    r.notes.append(
        "K/V heads and head_dim per layer from num_attention_groups, attention_other_setting"
        " and swa_num_attention_heads (vLLM step5)"
    )


def _moe_layers(r: Reading, n: int) -> set[int]:
    """``moe_layers_enum`` (a comma list) or ``moe_layer_list``, else layers 1 to n - 1."""
    given = r.config.get("moe_layers_enum", r.config.get("moe_layer_list"))
    if given is None:
        return set(range(1, n))
    items = given.split(",") if isinstance(given, str) else as_list(given, "moe_layers_enum")
    stated = [int(i) if isinstance(i, str) and i.strip().isdigit() else i for i in items]
    # entries from n on are the MTP layers' (vLLM allows them), not counted here
    return {whole(i, "moe_layers_enum", 0, MAX_LAYERS) for i in stated if str(i).strip()}


def _count_step5(r: Reading) -> Count:
    """vLLM models/step5 (plain GQA layers): per layer q, k, v and o of the layer's heads,
    q/k RMSNorms of head_dim, with ``use_head_wise_attn_gate`` a gate of one value a query
    head, two RMSNorms; a dense MLP of ``intermediate_size`` on the layers that are not MoE,
    else ``moe_num_experts`` experts, a shared expert of ``share_expert_dim`` (default
    moe_intermediate_size x moe_top_k) and a router with its fp32 bias; final norm, head.
    MTP layers are not counted."""
    s = shapes(r)
    gate = flag(r, "use_head_wise_attn_gate")
    moe_layers = _moe_layers(r, s.layers)
    width, top_k = size(r, "moe_intermediate_size"), size(r, "moe_top_k")
    shared = size(r, "share_expert_dim", default=width * top_k)
    sparse = moe(s.hidden, width, size(r, "moe_num_experts"), top_k, shared, router_bias=True)
    dense = mlp(s.hidden, size(r, "intermediate_size"))
    layers = Count()
    for i, kind in enumerate(_listed(r, s.layers)):
        heads, groups, head_dim = _attention(r, kind)
        q, kv = heads * head_dim, groups * head_dim
        attention = linear(s.hidden, q + 2 * kv) + linear(q, s.hidden) + norm(head_dim).times(2)
        attention += linear(s.hidden, heads) if gate else Count()
        ffn = sparse if i in moe_layers else dense
        layers += attention + ffn + norm(s.hidden).times(2)
    return decoder(s, layers)


register(
    FAMILY,
    "step5",
    Rule(kv_heads=_groups, layers=_layers_step5, defaults=_DEFAULTS, parameters=_count_step5),
    UNIFORM_KINDS,
    "Step 5 (vLLM 0.33 models/step5): num_attention_groups K/V heads, attention_other_setting"
    " per type; sparse_config required, only enabled: false read (DSA cache not modelled)",
    architectures=("Step5ForCausalLM",),
)
