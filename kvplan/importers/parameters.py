"""Parameter counts from a config's shapes, for a model folder without weights.

Every tensor of a transformers checkpoint has a shape the config determines, so its total is
plain integer arithmetic: embeddings, per layer the attention (or Mamba, or linear-attention)
mixer, the MLP or the experts, the norms, and the output head unless it is tied. The family
modules (``kvplan.importers.families``) hold each model's layout, built from the parts here,
following the transformers ``modeling_<model_type>.py`` module by module; vision towers of
multimodal wrappers are counted too, as their checkpoints hold them.

A ``Count`` also keeps what a quantized checkpoint stores in its own format: the Linear
weights of the decoder layers (fp8, AWQ, GPTQ) and, among them, the routed experts' (MXFP4),
plus the expert parameters a token does not use (total minus active, for MoE).

Worked example (Llama 3.2 1B, tied embeddings, 16 layers of hidden 2048, 32 heads of 64,
8 K/V heads, MLP 8192):
  embeddings 128256 x 2048 = 262,668,288
  per layer  q/o 2 x 2048 x 2048 + k/v 2 x 2048 x 512 + MLP 3 x 2048 x 8192 + 2 norms x 2048
             = 8,388,608 + 2,097,152 + 50,331,648 + 4,096 = 60,821,504; x 16 = 973,144,064
  final norm 2,048: total 1,235,814,400, the checkpoint's safetensors total.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kvplan.errors import SpecError
from kvplan.importers.reading import Config, Reading, whole
from kvplan.model.limits import MAX_DIM


@dataclass(frozen=True, slots=True)
class Count:
    """Parameters of a part of a model.

    ``linear``: Linear weights of the decoder layers (what fp8/int4 checkpoints quantize; not
    embeddings, head, norms, biases or routers); ``experts``: the routed experts' share of
    them (what MXFP4 checkpoints quantize); ``inactive``: expert parameters a token skips.
    """

    total: int = 0
    linear: int = 0
    experts: int = 0
    inactive: int = 0

    def __add__(self, other: Count) -> Count:
        return Count(
            self.total + other.total,
            self.linear + other.linear,
            self.experts + other.experts,
            self.inactive + other.inactive,
        )

    def times(self, n: int) -> Count:
        """``n`` copies (``n`` identical layers)."""
        return Count(self.total * n, self.linear * n, self.experts * n, self.inactive * n)


#: A family's count: the reading of its text config (the mapped spec in ``r.spec``).
Counter = Callable[[Reading], Count]
#: A multimodal wrapper's vision tower and projector: (the wrapper's config, text hidden size).
VisionCounter = Callable[[Config, int], Count]


def total(parts: list[Count]) -> Count:
    """The sum of ``parts``."""
    out = Count()
    for part in parts:
        out = out + part
    return out


# --- reading sizes ----------------------------------------------------------------------------


def size(r: Reading, *keys: str, default: int | None = None, minimum: int = 1) -> int:
    """The first of ``keys`` the config states (or the rule's default, else ``default``), as a
    bounded integer. Raises SpecError naming the key when absent or not a size."""
    value = r.get(*keys)
    if value is None:
        value = default
    if value is None:
        raise SpecError("", [f"{keys[0]}: required to count the parameters"])
    return whole(value, keys[0], minimum=minimum, maximum=MAX_DIM)


def flag(r: Reading, *keys: str, default: bool = False) -> bool:
    """The first of ``keys`` the config states, read as a boolean."""
    value = r.get(*keys)
    return default if value is None else bool(value)


def sub(r: Reading, key: str, defaults: Mapping[str, Any] | None = None) -> Reading:
    """A reading of the nested config ``key`` (DBRX's ``ffn_config``, a ``vision_config``)."""
    value = r.config.get(key)
    nested = value if isinstance(value, Mapping) else {}
    return Reading(f"{r.model_type}.{key}", nested, defaults or {}, notes=r.notes)


@dataclass(frozen=True, slots=True)
class Shapes:
    """The sizes every family shares, from the mapped spec."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    tied: bool

    def embeddings(self) -> Count:
        """Input embeddings, and the output head unless tied."""
        return Count(self.vocab * self.hidden * (1 if self.tied else 2))

    def attention(self, qkv_bias: bool = False, out_bias: bool = False) -> Count:
        """q, k, v and o projections (GQA/MQA/MHA)."""
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        return total(
            [
                linear(self.hidden, q + 2 * kv, qkv_bias),
                linear(q, self.hidden, out_bias),
            ]
        )


def shapes(r: Reading) -> Shapes:
    """The shared sizes of ``r.spec``; SpecError when the config leaves one out."""
    s = r.spec
    for key in ("hidden_size", "vocab_size"):
        if s.get(key) is None:
            raise SpecError("", [f"{key}: required to count the parameters"])
    hidden = whole(s["hidden_size"], "hidden_size", maximum=MAX_DIM)
    heads = s["num_attention_heads"]
    kv = s.get("num_key_value_heads") or heads
    head_dim = s.get("head_dim") or hidden // heads
    return Shapes(
        layers=s["num_hidden_layers"],
        hidden=hidden,
        heads=heads,
        kv_heads=whole(kv, "num_key_value_heads", maximum=MAX_DIM),
        head_dim=whole(head_dim, "head_dim", maximum=MAX_DIM),
        vocab=whole(s["vocab_size"], "vocab_size", maximum=MAX_DIM),
        tied=bool(s.get("tie_word_embeddings")),
    )


# --- parts ------------------------------------------------------------------------------------


def linear(fan_in: int, fan_out: int, bias: bool = False) -> Count:
    """One Linear layer (a decoder-layer weight an fp8 or int4 checkpoint quantizes)."""
    weight = fan_in * fan_out
    return Count(weight + (fan_out if bias else 0), weight)


def plain(num: int) -> Count:
    """Parameters kept in the model dtype: norms, routers, biases, embeddings, gates."""
    return Count(num)


def norm(width: int, bias: bool = False) -> Count:
    """An RMSNorm (a weight) or a LayerNorm (weight and bias)."""
    return Count(width * (2 if bias else 1))


def mlp(hidden: int, width: int, gated: bool = True, bias: bool = False) -> Count:
    """A feed-forward block: gate, up and down projections (gated) or up and down."""
    ins = [linear(hidden, width, bias) for _ in range(2 if gated else 1)]
    return total([*ins, linear(width, hidden, bias)])


def experts(expert: Count, num_experts: int, num_active: int) -> Count:
    """``num_experts`` routed experts of ``expert`` each, ``num_active`` used per token."""
    return Count(
        expert.total * num_experts,
        expert.linear * num_experts,
        expert.linear * num_experts,
        expert.total * (num_experts - min(num_active, num_experts)),
    )


def mamba2(
    hidden: int,
    num_heads: int,
    head_dim: int,
    num_groups: int,
    state: int,
    conv_kernel: int,
    conv_bias: bool = True,
    proj_bias: bool = False,
) -> Count:
    """A Mamba2 mixer: in_proj (z, x, B, C, dt), depthwise conv1d over x, B, C, dt bias,
    A_log and D per head, a gated RMSNorm, out_proj."""
    inner = num_heads * head_dim
    conv_dim = inner + 2 * num_groups * state
    return total(
        [
            linear(hidden, inner + conv_dim + num_heads, proj_bias),
            plain(conv_dim * conv_kernel + (conv_dim if conv_bias else 0)),
            plain(3 * num_heads),
            norm(inner),
            linear(inner, hidden, proj_bias),
        ]
    )


def gated_delta(
    hidden: int, key_heads: int, value_heads: int, key_dim: int, value_dim: int, conv_kernel: int
) -> Count:
    """A gated delta net mixer (Qwen3-Next): in_proj of q, k, v, z and of b, a; conv1d over
    q, k, v without bias; dt bias and A_log per value head; a gated RMSNorm; out_proj."""
    keys, values = key_heads * key_dim, value_heads * value_dim
    return total(
        [
            linear(hidden, 2 * keys + 2 * values),
            linear(hidden, 2 * value_heads),
            plain((2 * keys + values) * conv_kernel),
            plain(2 * value_heads),
            norm(value_dim),
            linear(values, hidden),
        ]
    )


def moe(
    hidden: int,
    width: int,
    num_experts: int,
    num_active: int,
    shared_width: int = 0,
    router_bias: bool = False,
) -> Count:
    """Routed gated experts of ``width``, a shared expert of ``shared_width`` (0: none) and
    the router (its bias: DeepSeek V3's ``e_score_correction_bias``)."""
    routed = experts(mlp(hidden, width), num_experts, num_active)
    shared = mlp(hidden, shared_width) if shared_width else Count()
    return routed + shared + plain(num_experts * hidden + (num_experts if router_bias else 0))


def vision(part: Count) -> Count:
    """A vision tower's parameters: counted, never among the quantized Linear weights."""
    return Count(part.total)


#: A multimodal model's ``multimodal`` spec block (kvplan.model.multimodal) from its whole
#: config.json and the text spec mapped so far (``hidden_size``, ``torch_dtype``).
MultimodalReader = Callable[[Config, Mapping[str, Any]], dict[str, Any]]
_MULTIMODAL: dict[str, MultimodalReader] = {}


def register_multimodal(model_type: str, reader: MultimodalReader) -> None:
    """Read the ``multimodal`` block of configs whose top-level ``model_type`` is this."""
    _MULTIMODAL[model_type] = reader


def multimodal_block(config: Config) -> MultimodalReader | None:
    """The reader of the ``multimodal`` block for ``config``'s top-level model_type, if any."""
    model_type = config.get("model_type")
    return _MULTIMODAL.get(model_type) if isinstance(model_type, str) else None


def encoder_block(
    spec: Mapping[str, Any], encoder: Count, tokens: Mapping[str, int]
) -> dict[str, Any]:
    """A ``multimodal`` block: the modalities of ``tokens`` (``image_tokens``...), the
    ``encoder``'s parameters, and its dtype: the model's, as engines load the whole checkpoint
    in one dtype (a ``vision_config`` may say float32 where the weights are bfloat16)."""
    modalities = [m for m in ("image", "video", "audio") if any(k.startswith(m) for k in tokens)]
    return {
        "modalities": modalities,
        "encoder_parameters": encoder.total,
        "encoder_dtype": spec["torch_dtype"],
        **tokens,
    }


def decoder(s: Shapes, layers: Count, final_norm: Count | None = None) -> Count:
    """Embeddings (and head), the stacked ``layers`` and the final norm (default RMSNorm)."""
    return s.embeddings() + layers + (norm(s.hidden) if final_norm is None else final_norm)


# --- the Llama-shaped default -----------------------------------------------------------------


def count_llama(r: Reading) -> Count:
    """Llama, Mistral, Granite 3, InternLM2, Phi-3/4: GQA (``attention_bias``/``bias`` on q, k,
    v and o), a gated MLP (``mlp_bias``), two RMSNorms a layer; MoE when the config names
    experts (Mixtral's ``num_local_experts``)."""
    s = shapes(r)
    bias = flag(r, "attention_bias", "bias")
    inter = size(r, "intermediate_size")
    num_experts = size(r, "num_local_experts", default=0, minimum=0)
    if num_experts:
        ffn = moe(s.hidden, inter, num_experts, size(r, "num_experts_per_tok", default=2))
    else:
        ffn = mlp(s.hidden, inter, bias=flag(r, "mlp_bias"))
    layer = s.attention(bias, bias) + ffn + norm(s.hidden).times(2)
    return decoder(s, layer.times(s.layers))


# --- quantized checkpoints --------------------------------------------------------------------


def quantized_format(quant: Config, count: Count) -> tuple[str, int] | None:
    """The weight format a ``quantization_config`` names and how many parameters it holds,
    as safetensors headers would show them: fp8 and int4/int8 (AWQ, GPTQ) on the decoder's
    Linear weights, MXFP4 on the routed experts. None for a method not known here."""
    method = str(quant.get("quant_method", "")).lower()
    bits = quant.get("bits", 4)
    if method == "fp8":
        return "fp8_e4m3", count.linear
    if method == "mxfp4":
        return "mxfp4", count.experts
    if method == "nvfp4":
        return "nvfp4", count.linear
    if method in ("awq", "gptq") and bits in (4, 8, None):
        return ("int8" if bits == 8 else "int4"), count.linear
    return None
