"""Yandex AliceAI (``alice_ai``): Kimi delta attention (KDA) and gated full attention as
``layer_types`` says, sigmoid-routed experts with a shared expert on every layer, block
attention residuals; served by vLLM 0.33 (alice_ai.py, AliceAIForCausalLM; not in vLLM 0.32).
Its config class ships with the checkpoint (remote code), so nothing is defaulted.

vLLM's alice_ai.py builds a ``linear_attention`` layer as Kimi Linear's KDA layer with
``linear_num_key_heads`` heads of ``linear_key_head_dim`` (it requires the value heads and dim
to match) and kernel ``linear_conv_kernel_dim``; its per-request state is ``kda_state_shape``:
a conv tail over q, k and v of heads x head_dim channels each, kernel - 1 deep, in the model
dtype, and a head_dim x head_dim state per head in float32 (``kda_state_dtype``). That is the
spec's gated delta net state with equal key and value heads, a float32 ``state_dtype`` and the
tail in ``conv_dtype``. A ``full_attention`` layer is Qwen3-Next's gated attention: it caches
``num_key_value_heads`` K/V heads of ``head_dim``. The attention residuals (a bank of block
sums per token in flight) are activations, not cache.

Worked example (32 KDA heads of 128, kernel 4, bf16): conv 3 x 4,096 x 3 = 36,864 values x
2 B = 73,728 B and state 32 x 128 x 128 = 524,288 values x 4 B = 2,097,152 B per KDA layer.
"""

from __future__ import annotations

from kvplan.errors import SpecError
from kvplan.importers.parameters import (
    Count,
    linear,
    moe,
    norm,
    plain,
    shapes,
    size,
)
from kvplan.importers.reading import Reading
from kvplan.importers.registry import register
from kvplan.importers.rules import Rule, layers_explicit

FAMILY = "alice_ai"

_KDA = ("linear_num_key_heads", "linear_key_head_dim", "linear_conv_kernel_dim")


def _layers_alice(r: Reading, n: int) -> None:
    if not layers_explicit(r, n):
        raise SpecError("", ["layer_types: required (vLLM alice_ai.py reads each layer's kind)"])
    unknown = set(r.spec["layer_types"]) - {"linear_attention", "full_attention"}
    if unknown:
        raise SpecError(
            "", [f"layer_types: {sorted(unknown)[0]}; allowed: linear_attention, full_attention"]
        )


def _kda_sizes(r: Reading) -> tuple[int, int, int]:
    heads, head_dim, kernel = (size(r, key) for key in _KDA)
    if size(r, "linear_num_value_heads") != heads or size(r, "linear_value_head_dim") != head_dim:
        raise SpecError(
            "",
            [
                "linear_num_value_heads, linear_value_head_dim: must equal the key heads and"
                " dim (vLLM alice_ai.py)"
            ],
        )
    return heads, head_dim, kernel


def _state_alice(r: Reading) -> None:
    if "linear_attention" not in r.spec["layer_types"]:
        return
    heads, head_dim, kernel = _kda_sizes(r)
    for key in ("key", "value"):
        r.spec[f"linear_num_{key}_heads"] = heads
        r.spec[f"linear_{key}_head_dim"] = head_dim
    r.spec["linear_conv_kernel_dim"] = kernel
    r.spec["state_dtype"] = "float32"
    r.spec["conv_dtype"] = r.spec["torch_dtype"]
    r.notes.append(
        f"KDA state: {heads} heads of {head_dim}, conv kernel {kernel}; the state in float32,"
        " the conv tail in the model dtype (vLLM kda_state_dtype)"
    )


def _kda(r: Reading, hidden: int) -> Count:
    """One KDA mixer as vLLM builds it for AliceAI (no full-rank gate): q, k, v of heads x
    head_dim, beta (one a head), the forget gate's f_a (to head_dim) and f_b (back), the output
    gate's g_a and g_b alike, dt_bias per channel, conv1d weights over q, k, v, A_log per
    head, the output RMSNorm over head_dim, o_proj."""
    heads, head_dim, kernel = _kda_sizes(r)
    width = heads * head_dim
    low_rank = linear(hidden, head_dim) + linear(head_dim, width)
    return (
        linear(hidden, 3 * width)
        + linear(hidden, heads)
        + low_rank.times(2)
        + plain(width + 3 * width * kernel + heads)
        + norm(head_dim)
        + linear(width, hidden)
    )


def _count_alice(r: Reading) -> Count:
    """vLLM alice_ai.py: embeddings and a separate head (it never ties), per layer the mixer
    (KDA, or gated attention: q and its gate, k, v, o, q/k norms of head_dim), the experts with
    a shared expert, its sigmoid gate (hidden -> 1) and a router with its correction bias, two
    RMSNorms, the residual projections and norms (mlp on every layer, attention from layer 1);
    the final norm and the final residual projection and norm. MTP layers are not counted."""
    s = shapes(r)
    q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
    gated = linear(s.hidden, 2 * q + 2 * kv) + linear(q, s.hidden) + norm(s.head_dim).times(2)
    kinds = r.spec["layer_types"]
    kda = _kda(r, s.hidden) if "linear_attention" in kinds else Count()
    ffn = moe(
        s.hidden,
        size(r, "moe_intermediate_size"),
        size(r, "num_experts"),
        size(r, "num_experts_per_tok"),
        size(r, "shared_expert_intermediate_size"),
        router_bias=True,
    ) + plain(s.hidden)
    layer = ffn + norm(s.hidden).times(4)
    mixers = kda.times(kinds.count("linear_attention")) + gated.times(kinds.count("full_attention"))
    residuals = plain(2 * s.hidden).times(s.layers - 1)
    outside = Count(2 * s.vocab * s.hidden) + plain(3 * s.hidden)
    return outside + mixers + layer.times(s.layers) + residuals


register(
    FAMILY,
    "alice_ai",
    Rule(layers=_layers_alice, state=_state_alice, parameters=_count_alice),
    ("full_attention", "linear_attention"),
    "AliceAI (vLLM 0.33 alice_ai.py): layer_types required; KDA on linear_attention (float32"
    " state, conv tail in the model dtype), gated full attention elsewhere; remote-code config",
    architectures=("AliceAIForCausalLM",),
)
