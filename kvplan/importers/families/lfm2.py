"""LFM2 and LFM2-MoE (Liquid AI): short-convolution layers (``conv``) with a few attention
layers, named by ``layer_types`` or, in older files, by ``full_attn_idxs``.

A ``conv`` layer keeps the last ``conv_L_cache - 1`` inputs of a depthwise convolution over
``conv_dim`` channels (vLLM's ``short_conv_state_shape``; transformers ``Lfm2Config``), in the
model dtype. The checkpoints are bfloat16, which the released files do not always state.
"""

from __future__ import annotations

from kvplan.errors import SpecError
from kvplan.importers.parameters import Count, decoder, linear, mlp, norm, plain, shapes, size
from kvplan.importers.reading import Reading
from kvplan.importers.registry import register
from kvplan.importers.rules import Rule, check_kinds

FAMILY = "lfm2"

_KINDS = {"conv": "short_conv", "full_attention": "full_attention"}


def layers_lfm2(r: Reading, n: int) -> None:
    given = r.config.get("layer_types")
    if isinstance(given, list) and given:
        if len(given) != n:
            raise SpecError(
                "", [f"layer_types: needs one of conv, full_attention for each of {n} layers"]
            )
        check_kinds(given, _KINDS)
        r.spec["layer_types"] = [_KINDS[k] for k in given]
        return
    # Lfm2Config: without layer_types, full_attn_idxs names the attention layers (all of them
    # when it is absent too)
    attention = r.config.get("full_attn_idxs")
    if attention is None:
        attention = list(range(n))
    if not isinstance(attention, list) or any(type(i) is not int for i in attention):
        raise SpecError("", ["full_attn_idxs: must be a list of layer indices"])
    r.spec["layer_types"] = ["full_attention" if i in attention else "short_conv" for i in range(n)]
    r.notes.append("layer_types from full_attn_idxs (the rest short_conv)")


def conv_state(r: Reading) -> None:
    r.spec["conv_L_cache"] = r.get("conv_L_cache")
    channels = r.config.get("conv_dim")
    if channels is not None and channels != r.spec.get("hidden_size"):
        r.spec["conv_dim"] = channels
    r.spec["state_dtype"] = r.spec["torch_dtype"]  # vLLM and transformers: the model dtype


def _ffn_width(r: Reading, hidden: int) -> int:
    """Lfm2MLP: with ``block_auto_adjust_ff_dim``, 2/3 of the stated width, times
    ``block_ffn_dim_multiplier``, rounded up to ``block_multiple_of`` (12,288 -> 8,192)."""
    width = size(r, "block_ff_dim", "intermediate_size")
    if r.get("block_auto_adjust_ff_dim") is False:
        return width
    width = int(2 * width / 3)
    multiplier = r.get("block_ffn_dim_multiplier")
    if multiplier is not None:
        width = int(multiplier * width)
    multiple = size(r, "block_multiple_of", default=256)
    return multiple * ((width + multiple - 1) // multiple)


def _count_lfm2(r: Reading) -> Count:
    """Attention layers (q, k, v, o and per-head q/k RMSNorms) or short convolutions
    (in_proj to 3 x conv_dim, a depthwise kernel, out_proj); a SwiGLU MLP and two RMSNorms
    each; the final norm."""
    s = shapes(r)
    channels = size(r, "conv_dim", default=s.hidden)
    kernel = size(r, "conv_L_cache", default=3)
    conv = linear(s.hidden, 3 * channels) + plain(channels * kernel) + linear(channels, s.hidden)
    attention = s.attention() + norm(s.head_dim).times(2)
    kinds = r.spec["layer_types"]
    num_conv = kinds.count("short_conv")
    mixers = conv.times(num_conv) + attention.times(len(kinds) - num_conv)
    ffn = mlp(s.hidden, _ffn_width(r, s.hidden)) + norm(s.hidden).times(2)
    return decoder(s, mixers + ffn.times(s.layers))


register(
    FAMILY,
    "lfm2",
    Rule(
        layers=layers_lfm2,
        state=conv_state,
        defaults={"conv_L_cache": 3, "tie_word_embeddings": True, "block_multiple_of": 256},
        default_dtype="bfloat16",
        parameters=_count_lfm2,
    ),
    ("full_attention", "short_conv"),
    "layer_types conv -> short_conv (or full_attn_idxs); conv_L_cache - 1 inputs kept; bfloat16",
    architectures=("Lfm2ForCausalLM",),
)
