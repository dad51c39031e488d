"""Mamba (Mamba1), Falcon Mamba and Mamba2: every layer a state-space mixer, no attention.

Each layer keeps a fixed state per sequence and nothing per token. Mamba1 (vLLM mamba.py,
``mamba1_state_shape``): a conv tail of ``intermediate_size x (conv_kernel - 1)`` values and an
SSM state of ``intermediate_size x state_size``. Mamba2 (vLLM mamba2.py): a conv tail over
``expand x hidden_size + 2 x n_groups x state_size`` channels and ``num_heads x head_dim x
state_size`` SSM values. vLLM keeps both in the model dtype unless told otherwise.

These configs name no attention heads; the spec needs the field, so it is 1 and no layer reads it.
"""

from __future__ import annotations

from kvplan.errors import SpecError
from kvplan.importers.parameters import (
    Count,
    decoder,
    flag,
    linear,
    mamba2,
    norm,
    plain,
    shapes,
    size,
)
from kvplan.importers.reading import Reading
from kvplan.importers.registry import register
from kvplan.importers.rules import Rule, mamba2_state

FAMILY = "mamba"

#: MambaConfig / FalconMambaConfig defaults (transformers configuration_mamba.py and
#: configuration_falcon_mamba.py) for the keys that size the state and the weights.
_MAMBA1 = {
    "num_attention_heads": 1,
    "hidden_size": 768,
    "num_hidden_layers": 32,
    "state_size": 16,
    "expand": 2,
    "conv_kernel": 4,
    "vocab_size": 50280,
    "tie_word_embeddings": True,
}

#: Mamba2Config defaults (transformers configuration_mamba2.py).
_MAMBA2 = {
    "num_attention_heads": 1,
    "num_heads": 128,
    "head_dim": 64,
    "hidden_size": 4096,
    "num_hidden_layers": 64,
    "state_size": 128,
    "expand": 2,
    "conv_kernel": 4,
    "n_groups": 8,
    "vocab_size": 32768,
    "tie_word_embeddings": False,
}

_NO_ATTENTION = "no attention layer: num_attention_heads 1 only fills the spec's field"


def _inner_mamba1(r: Reading) -> int:
    """The mixer width vLLM reads, ``intermediate_size``: as stated (Falcon Mamba 7B states
    8,192 beside ``expand`` 16, and the stated width wins), else ``expand x hidden_size``."""
    hidden = size(r, "hidden_size")
    if r.config.get("intermediate_size") is not None:
        return size(r, "intermediate_size")
    return size(r, "expand") * hidden


def _layers_state(r: Reading, n: int) -> None:
    r.spec["layer_types"] = ["mamba"] * n
    r.notes.append(_NO_ATTENTION)


def _state_mamba1(r: Reading) -> None:
    hidden, inner = size(r, "hidden_size"), _inner_mamba1(r)
    if inner % hidden:
        # the spec sizes a Mamba1 state from mamba_expand x hidden_size
        raise SpecError(
            "", [f"intermediate_size: {inner} is not a multiple of hidden_size {hidden}"]
        )
    r.spec["mamba_expand"] = inner // hidden
    r.spec["mamba_d_state"] = size(r, "state_size")
    r.spec["mamba_d_conv"] = size(r, "conv_kernel")
    r.spec["state_dtype"] = r.spec["torch_dtype"]  # vLLM: the model dtype unless told


def _state_mamba2(r: Reading) -> None:
    heads, head_dim = size(r, "num_heads"), size(r, "head_dim")
    inner = size(r, "expand") * size(r, "hidden_size")
    if heads * head_dim != inner:
        # vLLM sizes the conv tail from expand x hidden_size, the spec from heads x head_dim
        raise SpecError(
            "",
            [
                f"num_heads: {heads} x head_dim {head_dim} is not expand x hidden_size {inner};"
                " kvplan's Mamba2 state needs them equal"
            ],
        )
    groups, state, conv = (size(r, k) for k in ("n_groups", "state_size", "conv_kernel"))
    mamba2_state(r, heads=heads, head_dim=head_dim, groups=groups, state=state, conv=conv)


def _count_mamba1(r: Reading) -> Count:
    """Per layer a Mamba1 mixer (in_proj to x and z, conv1d, x_proj to dt/B/C, dt_proj with
    bias, A_log, D, out_proj; Falcon Mamba's extra norms carry no weights) and one RMSNorm;
    the final norm."""
    s = shapes(r)
    inner, state = _inner_mamba1(r), size(r, "state_size")
    kernel = size(r, "conv_kernel")
    rank = r.get("time_step_rank")
    rank = -(-s.hidden // 16) if rank in (None, "auto") else size(r, "time_step_rank")
    bias = flag(r, "use_bias")
    conv = inner * kernel + (inner if flag(r, "use_conv_bias", default=True) else 0)
    mixer = (
        linear(s.hidden, 2 * inner, bias)
        + plain(conv)
        + linear(inner, rank + 2 * state)
        + linear(rank, inner, True)
        + plain(inner * state + inner)
        + linear(inner, s.hidden, bias)
    )
    return decoder(s, (mixer + norm(s.hidden)).times(s.layers))


def _count_mamba2(r: Reading) -> Count:
    """Per layer a Mamba2 mixer and one RMSNorm; the final norm."""
    s = shapes(r)
    mixer = mamba2(
        s.hidden,
        size(r, "num_heads"),
        size(r, "head_dim"),
        size(r, "n_groups"),
        size(r, "state_size"),
        size(r, "conv_kernel"),
        flag(r, "use_conv_bias", default=True),
        flag(r, "use_bias"),
    )
    return decoder(s, (mixer + norm(s.hidden)).times(s.layers))


_MAMBA1_RULE = Rule(
    layers=_layers_state,
    state=_state_mamba1,
    defaults=_MAMBA1,
    reads_head_dim=False,
    parameters=_count_mamba1,
)
_MAMBA1_NOTES = (
    "every layer Mamba1 (transformers MambaConfig/FalconMambaConfig, vLLM mamba.py): state of"
    " intermediate_size (absent: expand x hidden_size) channels; model-dtype state"
)

register(
    FAMILY,
    "mamba",
    _MAMBA1_RULE,
    ("mamba",),
    _MAMBA1_NOTES,
    architectures=("MambaForCausalLM",),
)
register(
    FAMILY,
    "falcon_mamba",
    _MAMBA1_RULE,
    ("mamba",),
    _MAMBA1_NOTES,
    architectures=("FalconMambaForCausalLM",),
)
register(
    FAMILY,
    "mamba2",
    Rule(
        layers=_layers_state,
        state=_state_mamba2,
        defaults=_MAMBA2,
        reads_head_dim=False,
        parameters=_count_mamba2,
    ),
    ("mamba",),
    "every layer Mamba2 (transformers Mamba2Config, vLLM mamba2.py): num_heads x head_dim"
    " must equal expand x hidden_size; model-dtype state",
    architectures=("Mamba2ForCausalLM",),
)
