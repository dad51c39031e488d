"""Falcon-H1 (TII): attention and a Mamba2 mixer side by side in every layer.

Each layer keeps the K and V of its attention (``num_key_value_heads`` of ``head_dim``) and a
Mamba2 state: a conv tail over ``mamba_d_ssm + 2 x mamba_n_groups x mamba_d_state`` channels
and ``mamba_n_heads x mamba_d_head x mamba_d_state`` SSM values (vLLM falcon_h1.py,
``get_mamba_state_shape_from_config``; transformers ``FalconH1Config``). ``mamba_d_ssm`` is the
mixer width: absent, the class default 1,024; null, ``mamba_expand x hidden_size``.
"""

from __future__ import annotations

from kvplan.errors import SpecError
from kvplan.importers.parameters import Count, decoder, flag, linear, mlp, norm, plain, shapes, size
from kvplan.importers.reading import Reading, whole
from kvplan.importers.registry import register
from kvplan.importers.rules import Rule, mamba2_state
from kvplan.model.limits import MAX_DIM

FAMILY = "falcon_h1"

#: FalconH1Config's defaults for the keys that size the cache and the weights.
_DEFAULTS = {
    "num_key_value_heads": 8,
    "mamba_d_ssm": 1024,
    "mamba_n_heads": 128,
    "mamba_d_head": "auto",
    "mamba_n_groups": 1,
    "mamba_d_state": 256,
    "mamba_d_conv": 4,
    "mamba_expand": 2,
    "mamba_conv_bias": True,
    "mamba_proj_bias": False,
    "mamba_rms_norm": False,
    "projectors_bias": False,
    "attention_bias": False,
    "mlp_bias": False,
    "tie_word_embeddings": False,
}


def _d_ssm(r: Reading) -> int:
    """The mixer width: ``mamba_d_ssm`` as stated (or the class default), null meaning
    ``mamba_expand x hidden_size`` (FalconH1Config.__post_init__)."""
    if "mamba_d_ssm" in r.config and r.config["mamba_d_ssm"] is None:
        return size(r, "mamba_expand") * size(r, "hidden_size")
    return size(r, "mamba_d_ssm")


def _d_head(r: Reading, d_ssm: int, heads: int) -> int:
    value = r.get("mamba_d_head")
    if value == "auto":
        return d_ssm // heads
    return whole(value, "mamba_d_head", maximum=MAX_DIM)


def _layers(r: Reading, n: int) -> None:
    r.spec["layer_types"] = ["attention_mamba"] * n


def _mamba_state(r: Reading) -> None:
    d_ssm = _d_ssm(r)
    heads = size(r, "mamba_n_heads")
    d_head = _d_head(r, d_ssm, heads)
    if heads * d_head != d_ssm:
        # the spec sizes the conv tail from heads x head dim; vLLM from mamba_d_ssm
        raise SpecError(
            "",
            [
                f"mamba_d_ssm: {d_ssm} is not mamba_n_heads {heads} x mamba_d_head {d_head};"
                " kvplan's Mamba2 state needs them equal"
            ],
        )
    groups, state, conv = (size(r, k) for k in ("mamba_n_groups", "mamba_d_state", "mamba_d_conv"))
    mamba2_state(r, heads=heads, head_dim=d_head, groups=groups, state=state, conv=conv)


def _count(r: Reading) -> Count:
    """Per layer: attention (q, k, v, o), a Mamba2 mixer (in_proj to z, x, B, C, dt; conv1d;
    dt_bias, A_log, D; the gated RMSNorm when ``mamba_rms_norm``; out_proj, biased by
    ``projectors_bias``), a SwiGLU MLP and two RMSNorms; the final norm."""
    s = shapes(r)
    d_ssm = _d_ssm(r)
    heads = size(r, "mamba_n_heads")
    groups, state = size(r, "mamba_n_groups"), size(r, "mamba_d_state")
    conv_dim = d_ssm + 2 * groups * state
    kernel = size(r, "mamba_d_conv")
    mixer = (
        linear(s.hidden, d_ssm + conv_dim + heads, flag(r, "mamba_proj_bias"))
        + plain(conv_dim * kernel + (conv_dim if flag(r, "mamba_conv_bias") else 0))
        + plain(3 * heads)
        + (norm(d_ssm) if flag(r, "mamba_rms_norm") else Count())
        + linear(d_ssm, s.hidden, flag(r, "projectors_bias"))
    )
    bias = flag(r, "attention_bias")
    ffn = mlp(s.hidden, size(r, "intermediate_size"), bias=flag(r, "mlp_bias"))
    layer = s.attention(bias, bias) + mixer + ffn + norm(s.hidden).times(2)
    return decoder(s, layer.times(s.layers))


register(
    FAMILY,
    "falcon_h1",
    Rule(
        layers=_layers,
        state=_mamba_state,
        defaults=_DEFAULTS,
        default_dtype="bfloat16",
        parameters=_count,
    ),
    ("attention_mamba",),
    "every layer attention_mamba (transformers FalconH1Config, vLLM falcon_h1.py): Mamba2 over"
    " mamba_d_ssm (absent: 1024), model-dtype state; bfloat16 when unstated",
    architectures=("FalconH1ForCausalLM",),
)
