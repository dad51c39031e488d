"""The fixed per-sequence states of recurrent layers, built from a spec's keys: Mamba1 and
Mamba2, LFM2's short convolution, the gated delta net (with Qwen4Exp's PLE tail)."""

from __future__ import annotations

from typing import Protocol

from kvplan.model.layers import RecurrentState
from kvplan.units import resolve_dtype


class StateKeys(Protocol):
    """The spec keys these states read (``kvplan.model.spec.ModelSpec`` has them all)."""

    @property
    def mamba_d_state(self) -> int | None: ...
    @property
    def mamba_d_conv(self) -> int | None: ...
    @property
    def mamba_n_heads(self) -> int | None: ...
    @property
    def mamba_d_head(self) -> int | None: ...
    @property
    def mamba_n_groups(self) -> int | None: ...
    @property
    def mamba_expand(self) -> int | None: ...
    @property
    def hidden_size(self) -> int | None: ...
    @property
    def conv_dtype(self) -> str | None: ...
    @property
    def conv_L_cache(self) -> int | None: ...
    @property
    def conv_dim(self) -> int | None: ...
    @property
    def linear_num_key_heads(self) -> int | None: ...
    @property
    def linear_num_value_heads(self) -> int | None: ...
    @property
    def linear_key_head_dim(self) -> int | None: ...
    @property
    def linear_value_head_dim(self) -> int | None: ...
    @property
    def linear_conv_kernel_dim(self) -> int | None: ...
    @property
    def ple_conv_values(self) -> int | None: ...
    @property
    def state_dtype(self) -> str: ...
    @property
    def ple_layers(self) -> tuple[int, ...] | None: ...


def mamba_state(spec: StateKeys) -> RecurrentState:
    """A ``mamba`` layer's state: Mamba2 when ``mamba_n_heads`` is given, else Mamba1."""
    d_state, d_conv = spec.mamba_d_state, spec.mamba_d_conv
    if d_state is None or d_conv is None:
        raise ValueError("mamba_d_state, mamba_d_conv: required by mamba layers")
    if spec.mamba_n_heads is not None or spec.mamba_d_head is not None:
        # Mamba2: the conv state covers x, B and C; the SSM state is heads x head_dim x state.
        if spec.mamba_n_heads is None or spec.mamba_d_head is None:
            raise ValueError("mamba_n_heads, mamba_d_head: Mamba2 layers need both")
        d_inner = spec.mamba_n_heads * spec.mamba_d_head
        groups = spec.mamba_n_groups or 1
        conv = (d_inner + 2 * groups * d_state) * (d_conv - 1)
        ssm = d_inner * d_state
    else:
        # Mamba1: d_inner channels, each with a conv tail and a d_state-wide state.
        if spec.mamba_expand is None or spec.hidden_size is None:
            raise ValueError("mamba_expand, hidden_size: required by Mamba1 layers")
        d_inner = spec.mamba_expand * spec.hidden_size
        conv = d_inner * (d_conv - 1)
        ssm = d_inner * d_state
    tail = None if spec.conv_dtype is None else resolve_dtype(spec.conv_dtype)
    return RecurrentState("mamba", conv, ssm, resolve_dtype(spec.state_dtype), tail)

def short_conv_state(spec: StateKeys) -> RecurrentState:
    """LFM2's ``short_conv`` layer: the tail of a depthwise convolution."""
    kernel = spec.conv_L_cache or 3  # Lfm2Config's default
    channels = spec.conv_dim or spec.hidden_size
    if channels is None:
        raise ValueError("conv_dim: required by short_conv layers without hidden_size")
    # a depthwise convolution over conv_dim channels keeps its last kernel - 1 inputs
    conv = channels * (kernel - 1)
    return RecurrentState("short_conv", conv, 0, resolve_dtype(spec.state_dtype))

def linear_state(spec: StateKeys, i: int) -> RecurrentState:
    """Layer ``i``'s gated-delta-net state, with the PLE tail on a ``ple_layers`` layer."""
    nk, nv = spec.linear_num_key_heads, spec.linear_num_value_heads
    dk, dv = spec.linear_key_head_dim, spec.linear_value_head_dim
    kernel = spec.linear_conv_kernel_dim
    if nk is None or nv is None or dk is None or dv is None or kernel is None:
        raise ValueError(
            "linear_num_key_heads, linear_num_value_heads, linear_key_head_dim,"
            " linear_value_head_dim, linear_conv_kernel_dim: required by linear_attention"
        )
    # Gated delta net: a conv tail over q, k and v, and a dk x dv state per value head.
    conv = (2 * nk * dk + nv * dv) * (kernel - 1)
    state, conv_dtype = resolve_dtype(spec.state_dtype), spec.conv_dtype
    tail = None if conv_dtype is None else resolve_dtype(conv_dtype)
    if i not in (spec.ple_layers or ()):
        return RecurrentState("linear_attention", conv, nv * dk * dv, state, tail)
    if spec.ple_conv_values is None:
        raise ValueError("ple_conv_values: required with ple_layers")
    ple = spec.ple_conv_values
    return RecurrentState("linear_attention", conv, nv * dk * dv, state, tail, ple)
