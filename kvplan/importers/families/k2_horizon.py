"""MBZUAI IFM K2 Horizon (``k2_horizon``, K2HorizonForCausalLM): GQA on every layer; on the
MoE layers of the MoVA models the values come from a routed mixture of value experts.

vLLM 0.32 (model_executor/models/k2_horizon.py) builds every layer's attention, plain
(``K2HorizonAttention``) or MoVA (``K2HorizonMoVAAttention``), on vLLM's ``Attention``: one K
and one V of ``num_key_value_heads x head_dim`` a token, as Llama's. MoVA's value experts each
project the hidden state to one V, and the routed mixture is what the layer caches: the
experts change the weights, not the cache. The config class ships with the checkpoint (remote
code; neither transformers nor vLLM has one), so every key is read from the file.

A layer is sparse (routed experts, and MoVA attention when ``mova_num_experts`` > 0) unless
``mlp_only_layers`` lists it, when ``num_experts`` > 0 and (i + 1) % ``decoder_sparse_step``
is 0.
"""

from __future__ import annotations

from kvplan.importers.parameters import (
    Count,
    decoder,
    flag,
    linear,
    mlp,
    moe,
    norm,
    plain,
    shapes,
    size,
)
from kvplan.importers.reading import Reading, as_list, whole
from kvplan.importers.registry import register
from kvplan.importers.rules import UNIFORM_KINDS, Rule

FAMILY = "k2_horizon"


def sparse_layers(r: Reading, n: int) -> list[bool]:
    """Whether each layer is sparse (vLLM ``K2HorizonDecoderLayer``)."""
    only = r.config.get("mlp_only_layers")
    listed = as_list(only, "mlp_only_layers") if only is not None else []
    dense = {whole(i, "mlp_only_layers", 0, n - 1) for i in listed}
    if not size(r, "num_experts", default=0, minimum=0):
        return [False] * n
    step = size(r, "decoder_sparse_step", default=1)
    return [i not in dense and (i + 1) % step == 0 for i in range(n)]


def _attention(r: Reading, mova: bool) -> Count:
    """q and k (and v unless MoVA) with ``attention_bias``, o_proj, the per-head q/k norms with
    ``query_key_norm``, the output gate with ``attention_gate_func``; MoVA: the value router
    (its bias with ``moe_gate_bias``) and ``mova_num_experts`` value experts of one V each."""
    s = shapes(r)
    q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
    bias = flag(r, "attention_bias")
    if mova:
        num_values = size(r, "mova_num_experts")
        gate_bias = num_values if flag(r, "moe_gate_bias") else 0
        qkv = linear(s.hidden, q + kv, bias) + plain(s.hidden * num_values + gate_bias)
        # the value experts: Linear weights a token uses mova_num_experts_per_tok of; vLLM
        # runs them beside the attention, not as FusedMoE experts that expert parallel splits
        value = s.hidden * kv
        unused = num_values - min(size(r, "mova_num_experts_per_tok"), num_values)
        qkv += Count(num_values * value, num_values * value, 0, unused * value)
    else:
        qkv = linear(s.hidden, q + 2 * kv, bias)
    norms = norm(q + kv) if flag(r, "query_key_norm") else Count()
    gate = linear(s.hidden, q) if r.get("attention_gate_func") is not None else Count()
    return qkv + linear(q, s.hidden, bias) + norms + gate


def _count(r: Reading) -> Count:
    """Embeddings (and the head unless tied), each layer's attention, its two grouped RMSNorms
    (one weight of hidden_size each), a dense MLP of ``intermediate_size`` or the routed
    experts (a router with its bias when ``moe_gate_bias``, ``num_shared_experts`` shared
    experts as one MLP), the final norm."""
    s = shapes(r)
    sparse = sparse_layers(r, s.layers)
    mova = bool(size(r, "mova_num_experts", default=0, minimum=0))
    dense = _attention(r, False) + mlp(s.hidden, size(r, "intermediate_size"))
    layers = Count()
    if any(sparse):
        width = size(r, "moe_intermediate_size")
        shared = size(r, "num_shared_experts", default=0, minimum=0) * width
        num_experts = size(r, "num_experts")
        experts = moe(s.hidden, width, num_experts, size(r, "num_experts_per_tok"), shared)
        experts += plain(num_experts if flag(r, "moe_gate_bias") else 0)
        layers = (_attention(r, mova) + experts).times(sum(sparse))
    layers += dense.times(s.layers - sum(sparse)) + norm(s.hidden).times(2 * s.layers)
    return decoder(s, layers)


register(
    FAMILY,
    "k2_horizon",
    Rule(parameters=_count),
    UNIFORM_KINDS,
    "K2 Horizon (vLLM k2_horizon.py): GQA read as llama on every layer; MoVA's value experts"
    " mix into one cached V, so they change the weights only",
    architectures=("K2HorizonForCausalLM",),
)
