"""Inkling (vLLM 0.32 models/inkling/nvidia: ``InklingForCausalLM``, and
``InklingForConditionalGeneration`` whose ``inkling_mm_model`` config nests the text model in
``text_config`` beside its audio and vision towers).

Each decoder layer attends with relative-position logits: a full layer (``num_key_value_heads``
of ``head_dim``) or, for the ids in ``local_layer_ids``, a window of ``sliding_window_size``
tokens with its own ``swa_*`` heads (attention.py: a ``FullAttentionSpec`` or a
``SlidingWindowSpec``). Every layer also runs a short convolution of ``sconv_kernel_size``
over four streams: K and V after the projection, and the attention and MLP outputs over the
hidden width (model.py ``InklingDecoderLayer``; vLLM builds it whatever ``use_sconv`` says).
Its tail is kept per request: ``kernel - 1`` positions of ``2 x kv_heads x head_dim +
2 x hidden_size`` bf16 channels, the spec's ``attention_conv_kernel``. vLLM pages that tail as
a second ``SlidingWindowSpec`` a layer of ``kernel``-token blocks, the four streams packed into
one head padded to a power of two (sconv_swa_attn.py), beside attention pages of another size.

The config class (configs.py ``InklingModelConfig``) reads the Hugging Face format too:
``moe_intermediate_size`` is the experts' width and ``intermediate_size`` then the dense MLP's;
``conv_kernel_size`` stands for ``sconv_kernel_size`` (4 when neither is given).
"""

from __future__ import annotations

from kvplan.errors import SpecError
from kvplan.importers.parameters import Count, experts, linear, mlp, norm, plain, shapes, size
from kvplan.importers.reading import Reading, as_list, whole
from kvplan.importers.registry import register, register_wrapper
from kvplan.importers.rules import Rule
from kvplan.model.limits import MAX_DIM

FAMILY = "inkling"
_KINDS = ("full_attention", "sliding_attention")

#: InklingModelConfig's values for the keys read here (vLLM configs.py).
_DEFAULTS = {
    "vocab_size": 201024,
    "hidden_size": 1536,
    "num_hidden_layers": 16,
    "num_attention_heads": 12,
    "num_key_value_heads": 4,
    "sliding_window_size": 512,
    "d_rel": 16,
    "rel_extent": 1024,
}


def _local_ids(r: Reading, n: int) -> set[int]:
    ids = as_list(r.config.get("local_layer_ids") or [], "local_layer_ids")
    for i, layer in enumerate(ids):
        if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < n:
            raise SpecError("", [f"local_layer_ids.{i}: {layer!r} is not a layer index 0-{n - 1}"])
    return set(ids)


def _dims(r: Reading, local: bool) -> tuple[int, int, int]:
    """Query heads, KV heads and head dim of a full (``local`` False) or windowed layer."""
    heads = whole(r.get("num_attention_heads"), "num_attention_heads", 1, MAX_DIM)
    kv = whole(r.get("num_key_value_heads"), "num_key_value_heads", 1, MAX_DIM)
    hidden = whole(r.get("hidden_size"), "hidden_size", 1, MAX_DIM)
    head_dim = whole(r.get("head_dim") or hidden // heads, "head_dim", 1, MAX_DIM)
    if not local:
        return heads, kv, head_dim
    swa_heads = whole(
        r.get("swa_num_attention_heads") or heads, "swa_num_attention_heads", 1, MAX_DIM
    )
    swa_kv = whole(r.get("swa_num_key_value_heads") or kv, "swa_num_key_value_heads", 1, MAX_DIM)
    return swa_heads, swa_kv, whole(r.get("swa_head_dim") or head_dim, "swa_head_dim", 1, MAX_DIM)


def _kernel(r: Reading) -> int:
    kernel = r.get("sconv_kernel_size", "conv_kernel_size")
    return 4 if kernel is None else whole(kernel, "sconv_kernel_size", 2, MAX_DIM)


def _layers(r: Reading, n: int) -> None:
    local = _local_ids(r, n)
    kinds = ["sliding_attention" if i in local else "full_attention" for i in range(n)]
    r.spec["layer_types"] = kinds
    dims = [_dims(r, i in local) for i in range(n)]
    r.spec["num_key_value_heads_per_layer"] = [kv for _, kv, _ in dims]
    if len({d for _, _, d in dims}) > 1:
        r.spec["head_dim_per_layer"] = [d for _, _, d in dims]
    if local:
        r.spec["sliding_window"] = whole(
            r.get("sliding_window_size"), "sliding_window_size", 1, MAX_DIM
        )
    kernel = _kernel(r)
    r.spec["attention_conv_kernel"] = kernel
    if r.spec.get("max_position_embeddings") is None and r.get("model_max_length") is not None:
        r.spec["max_position_embeddings"] = r.get("model_max_length")
    r.notes.append(
        f"layer_types: {len(local)} layers in local_layer_ids slide over sliding_window_size"
        f" with the swa_* heads, {n - len(local)} full; every layer keeps {kernel - 1}"
        " positions of its short conv over K, V and the attention and MLP outputs (vLLM"
        " models/inkling/nvidia/model.py)"
    )


def _widths(r: Reading) -> tuple[int, int]:
    """The dense MLP's width and an expert's (the HF format swaps the names)."""
    moe_width = r.get("moe_intermediate_size")
    dense = r.get("dense_intermediate_size")
    if moe_width is not None and dense is None:
        dense, moe_width = r.get("intermediate_size"), moe_width
    else:
        moe_width = r.get("intermediate_size")
        dense = dense if dense is not None else moe_width
    return whole(dense, "dense_intermediate_size", 1, MAX_DIM), whole(
        moe_width, "intermediate_size", 1, MAX_DIM
    )


def _attention(r: Reading, hidden: int, local: bool) -> Count:
    """qkvr (q, k, v and the relative-logit queries), wo, the relative table, q/k norms, the
    K and V convolutions, and the layer's two RMSNorms (attention.py, model.py)."""
    heads, kv, head_dim = _dims(r, local)
    d_rel = whole(r.get("d_rel"), "d_rel", 1, MAX_DIM)
    extent = whole(
        r.get("sliding_window_size" if local else "rel_extent"), "rel_extent", 1, MAX_DIM
    )
    qkvr = linear(
        hidden, heads * head_dim + 2 * kv * head_dim + d_rel * heads, bool(r.get("q_bias"))
    )
    out = linear(heads * head_dim, hidden, bool(r.get("o_bias")))
    kernel = _kernel(r)
    convs = plain(kernel * (2 * kv * head_dim + 2 * hidden))
    return (
        qkvr + out + plain(d_rel * extent) + norm(head_dim).times(2) + convs + norm(hidden).times(2)
    )


def _ffn(r: Reading, hidden: int, dense: bool) -> Count:
    dense_width, width = _widths(r)
    if dense:
        return mlp(hidden, dense_width)
    routed = size(r, "n_routed_experts")
    shared = size(r, "n_shared_experts", default=0, minimum=0)
    active = size(r, "num_experts_per_tok", default=1)
    gate = plain((routed + shared) * hidden + (routed if r.get("use_gate_bias") else 0))
    scales = plain(2 if r.get("use_global_scale") else 0)  # the gate's and the MLP's
    return (
        experts(mlp(hidden, width), routed, active)
        + mlp(hidden, width).times(shared)
        + gate
        + scales
    )


def _count(r: Reading) -> Count:
    """vLLM model.py: the padded-vocabulary embedding (and its norm), each layer's attention
    and MLP (dense before ``dense_mlp_idx``, else routed experts with shared sinks), the final
    norm and the untied head."""
    s = shapes(r)
    vocab = whole(r.get("padded_vocab_size") or s.vocab, "padded_vocab_size", 1, MAX_DIM)
    local = _local_ids(r, s.layers)
    first_moe = size(r, "dense_mlp_idx", default=0, minimum=0)
    layers = Count()
    for i in range(s.layers):
        dense = i < first_moe or not r.get("n_routed_experts")
        layers += _attention(r, s.hidden, i in local) + _ffn(r, s.hidden, dense)
    embed_norm = norm(s.hidden) if r.get("use_embed_norm") else Count()
    head = 1 if r.get("tie_word_embeddings") else 2
    return plain(head * vocab * s.hidden) + embed_norm + layers + norm(s.hidden)


_NOTE = (
    "Inkling (vLLM models/inkling): full or windowed (local_layer_ids) relative attention,"
    " each layer keeping a short-conv tail over K, V and its two outputs (attention_conv)"
)

for _text_type in ("inkling_model", "inkling_text"):
    register(
        FAMILY,
        _text_type,
        Rule(layers=_layers, defaults=_DEFAULTS, default_dtype="bfloat16", parameters=_count),
        ("attention_conv",),
        _NOTE,
        architectures=("InklingForCausalLM",) if _text_type == "inkling_model" else (),
    )
register_wrapper(
    FAMILY,
    "inkling_mm_model",
    "inkling_model",
    _NOTE + "; the text model from text_config (its audio and vision towers are not counted)",
    architectures=("InklingForConditionalGeneration",),
)
