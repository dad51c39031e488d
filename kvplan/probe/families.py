"""The torch probe's model builders: one transformers config per family, with a spec's cache
geometry and tiny everything else.

Each builder keeps every dimension the cache depends on (layer kinds, KV heads and head dims,
windows, MLA dims, conv and SSM state dims, shared layers) and shrinks the rest (hidden and MLP
widths where the cache does not depend on them, vocabulary, experts). Where transformers sizes
a cached tensor from the hidden width (a Mamba1 mixer, Zamba2's shared attention, LFM2's
convolution) the builder keeps the width the spec gives. Nothing here imports torch: the
caller passes the transformers module in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from kvplan.errors import KvplanError
from kvplan.model.layers import (
    AttentionAndState,
    ChunkedLocalAttention,
    FullAttention,
    MLALatent,
    RecurrentState,
    SlidingWindowAttention,
)
from kvplan.model.spec import ModelSpec

#: spec ``model_type`` -> the transformers family the probe builds.
FAMILIES: dict[str, str] = {
    "llama": "llama",
    "mistral": "mistral",
    "qwen2": "qwen2",
    "qwen3": "qwen3",
    "gemma2": "gemma2",
    "gemma3": "gemma3_text",
    "gemma3_text": "gemma3_text",
    "gemma3n": "gemma3n_text",
    "gemma3n_text": "gemma3n_text",
    "gemma4": "gemma4_text",
    "gemma4_text": "gemma4_text",
    "gpt_oss": "gpt_oss",
    "deepseek_v3": "deepseek_v3",
    "kimi_k2": "deepseek_v3",
    "deepseek_v32": "deepseek_v32",
    "glm_moe_dsa": "glm_moe_dsa",
    "jamba": "jamba",
    "mamba": "mamba",
    "falcon_mamba": "falcon_mamba",
    "mamba2": "mamba2",
    "falcon_h1": "falcon_h1",
    "zamba2": "zamba2",
    "nemotron_h": "nemotron_h",
    "granitemoehybrid": "granitemoehybrid",
    "lfm2": "lfm2",
    "lfm2_moe": "lfm2_moe",
    "qwen3_next": "qwen3_next",
    "qwen3_5": "qwen3_5_text",
    "qwen3_5_text": "qwen3_5_text",
    "qwen3_5_moe": "qwen3_5_text",
    "qwen3_5_moe_text": "qwen3_5_text",
    "olmo_hybrid": "olmo_hybrid",
}

TINY_HIDDEN = 64
TINY_MLP = 64
TINY_VOCAB = 128

#: transformers family -> its config class.
CONFIG_CLASSES = {
    "llama": "LlamaConfig",
    "mistral": "MistralConfig",
    "qwen2": "Qwen2Config",
    "qwen3": "Qwen3Config",
    "gemma2": "Gemma2Config",
    "gemma3_text": "Gemma3TextConfig",
    "gemma3n_text": "Gemma3nTextConfig",
    "gemma4_text": "Gemma4TextConfig",
    "gpt_oss": "GptOssConfig",
    "deepseek_v3": "DeepseekV3Config",
    "deepseek_v32": "DeepseekV32Config",
    "glm_moe_dsa": "GlmMoeDsaConfig",
    "jamba": "JambaConfig",
    "mamba": "MambaConfig",
    "falcon_mamba": "FalconMambaConfig",
    "mamba2": "Mamba2Config",
    "falcon_h1": "FalconH1Config",
    "zamba2": "Zamba2Config",
    "nemotron_h": "NemotronHConfig",
    "granitemoehybrid": "GraniteMoeHybridConfig",
    "lfm2": "Lfm2Config",
    "lfm2_moe": "Lfm2MoeConfig",
    "qwen3_next": "Qwen3NextConfig",
    "qwen3_5_text": "Qwen3_5TextConfig",
    "olmo_hybrid": "OlmoHybridConfig",
}


def family_of(spec: ModelSpec) -> str:
    """The transformers family that builds ``spec``, or a KvplanError naming the supported ones."""
    family = FAMILIES.get(spec.model_type or "")
    if family is None:
        supported = ", ".join(sorted(set(FAMILIES)))
        raise KvplanError(
            f"{spec.name}: the probe cannot build model_type {spec.model_type!r}; supported:"
            f" {supported}"
        )
    return family


def build_config(spec: ModelSpec, transformers: Any, dtype: str, max_tokens: int) -> Any:
    """A transformers config with ``spec``'s cache geometry and tiny everything else."""
    family = family_of(spec)
    common: dict[str, Any] = {
        "vocab_size": TINY_VOCAB,
        "num_hidden_layers": spec.num_hidden_layers,
        "max_position_embeddings": max(spec.max_position_embeddings or 0, max_tokens + 1),
        "tie_word_embeddings": False,
        "use_cache": True,
        "dtype": dtype,
    }
    if family not in ("mamba", "falcon_mamba", "mamba2"):
        common["intermediate_size"] = TINY_MLP  # Mamba1 reads it as the mixer width
    builder = _BUILDERS.get(family, _attention_family)
    settings = builder(spec, family)
    cls = getattr(transformers, CONFIG_CLASSES[family])
    return cls(**(common | settings))


def _unshared_layers(spec: ModelSpec) -> tuple[Any, ...]:
    """The layers as built before KV sharing: shared layers keep their own kind here."""
    if not spec.num_kv_shared_layers:
        return spec.layers
    return replace(spec, num_kv_shared_layers=None).layers


def _layer_types(spec: ModelSpec) -> list[str]:
    kinds = []
    for layer in _unshared_layers(spec):
        if isinstance(layer, SlidingWindowAttention | ChunkedLocalAttention):
            kinds.append("sliding_attention")
        else:
            kinds.append("full_attention")
    return kinds


def _window(spec: ModelSpec) -> int | None:
    for layer in spec.layers:
        if isinstance(layer, SlidingWindowAttention):
            return layer.window
    return None


def _attention_heads(spec: ModelSpec) -> tuple[int, int]:
    """KV heads and head dim of the (first) attention layer; one query head per KV head keeps
    the hidden width tiny."""
    for layer in _unshared_layers(spec):
        match layer:
            case AttentionAndState(attention=attention):
                return attention.num_kv_heads, attention.head_dim
            case FullAttention():
                return layer.num_kv_heads, layer.head_dim
    return spec.kv_heads, spec.head_dim or 16


def _attention_family(spec: ModelSpec, family: str) -> dict[str, Any]:
    """The attention families: heads, and windows and layer kinds where the family has them."""
    kv, head_dim = _attention_heads(spec)
    heads: dict[str, Any] = {"num_attention_heads": kv, "num_key_value_heads": kv}
    if family != "qwen2":  # Qwen2 has no head_dim: its width sets it
        heads |= {"hidden_size": TINY_HIDDEN, "head_dim": head_dim}
    window = _window(spec)
    types = _layer_types(spec)
    match family:
        case "mistral":
            return heads | {"sliding_window": window}
        case "qwen2":
            return heads | {
                "hidden_size": kv * head_dim,
                "use_sliding_window": window is not None,
                "sliding_window": window,
                "max_window_layers": spec.max_window_layers or 0,
                "layer_types": types,
            }
        case "qwen3":
            return heads | {"sliding_window": window, "layer_types": types}
        case "gemma2" | "gemma3_text":
            return heads | {
                "sliding_window": window or 4096,
                "layer_types": types,
                "query_pre_attn_scalar": head_dim,
            }
        case "gpt_oss":
            return heads | {
                "sliding_window": window or 128,
                "layer_types": types,
                "num_local_experts": 2,
                "num_experts_per_tok": 1,
            }
    return heads  # llama


def _gemma_shared(spec: ModelSpec, family: str) -> dict[str, Any]:
    """Gemma 3n and 4: the last ``num_kv_shared_layers`` layers read an earlier layer's K and V
    (transformers gives them a ``DummyLayer``); Gemma 4's full layers have their own head dim
    and, with ``attention_k_eq_v``, KV heads; per-layer inputs shrunk to 8 wide."""
    kv, head_dim = _attention_heads(spec)
    n = spec.num_hidden_layers
    settings: dict[str, Any] = {
        "hidden_size": TINY_HIDDEN,
        "num_attention_heads": kv,
        "num_key_value_heads": kv,
        "head_dim": head_dim,
        "layer_types": _layer_types(spec),
        "sliding_window": _window(spec) or 512,
        "num_kv_shared_layers": spec.num_kv_shared_layers or 0,
        "vocab_size_per_layer_input": TINY_VOCAB,
        "hidden_size_per_layer_input": 8,
    }
    if family == "gemma3n_text":
        return settings | {
            "laurel_rank": 4,
            "altup_num_inputs": 2,
            "activation_sparsity_pattern": [0.0] * n,
        }
    # Gemma 4: the sliding layers' heads above, the full layers' from the spec's globals
    settings["global_head_dim"] = spec.global_head_dim or head_dim
    if spec.num_global_key_value_heads is not None:
        settings["attention_k_eq_v"] = True
        settings["num_global_key_value_heads"] = spec.num_global_key_value_heads
    return settings


def _mla(spec: ModelSpec, family: str) -> dict[str, Any]:
    """DeepSeek V3: the real latent and rope dims, every head, two tiny dense-only experts.
    DeepSeek-V3.2 and GLM-5 (DSA): also the sparse-attention indexer's key dim, with two
    indexer heads (the cache keeps one key a token whatever their number) and a small query
    rank, which their indexer reads."""
    mla = next(layer for layer in spec.layers if isinstance(layer, MLALatent))
    heads = spec.num_attention_heads
    indexer: dict[str, Any] = {}
    if family != "deepseek_v3":
        indexer = {
            "q_lora_rank": 16,
            "index_head_dim": mla.index_head_dim,
            "index_n_heads": 2,
            "index_topk": 8,
        }
    return indexer | {
        "hidden_size": TINY_HIDDEN,
        "num_attention_heads": heads,
        "num_key_value_heads": heads,
        "kv_lora_rank": mla.kv_lora_rank,
        "q_lora_rank": indexer.get("q_lora_rank"),
        "qk_rope_head_dim": mla.qk_rope_head_dim,
        "qk_nope_head_dim": spec.qk_nope_head_dim or 128,
        "v_head_dim": spec.v_head_dim or 128,
        "n_routed_experts": 2,
        "num_experts_per_tok": 1,
        "n_group": 1,
        "topk_group": 1,
        "first_k_dense_replace": spec.num_hidden_layers,
        "moe_intermediate_size": 32,
    }


def _jamba(spec: ModelSpec, family: str) -> dict[str, Any]:
    """Jamba: the real hidden width (the Mamba state depends on it) and attention period."""
    layers = spec.num_hidden_layers
    attn = [i for i, layer in enumerate(spec.layers) if isinstance(layer, FullAttention)]
    period = attn[1] - attn[0] if len(attn) > 1 else layers
    return {
        "hidden_size": spec.hidden_size,
        "num_attention_heads": spec.num_attention_heads,
        "num_key_value_heads": spec.kv_heads,
        "attn_layer_period": period,
        "attn_layer_offset": attn[0] if attn else layers,
        "num_experts": 1,
        "expert_layer_period": 1,
        "expert_layer_offset": 0,
        "use_mamba_kernels": False,
        "mamba_d_state": spec.mamba_d_state,
        "mamba_d_conv": spec.mamba_d_conv,
        "mamba_expand": spec.mamba_expand,
    }


def _mamba2_inner(spec: ModelSpec) -> int:
    if spec.mamba_n_heads is None or spec.mamba_d_head is None:
        raise KvplanError(f"{spec.name}: mamba_n_heads and mamba_d_head are needed for Mamba2")
    return spec.mamba_n_heads * spec.mamba_d_head


def _hidden_for(spec: ModelSpec, inner: int, width: int) -> tuple[int, int]:
    """A hidden width and an integer ``expand`` with ``expand x hidden = inner`` (the Mamba2
    mixers of Mamba2, Granite 4 and Zamba2 size it so): ``width`` when it divides ``inner``."""
    if inner % width:
        raise KvplanError(
            f"{spec.name}: the Mamba2 width {inner} is not a multiple of the hidden width {width}"
        )
    return width, inner // width


def _mamba(spec: ModelSpec, family: str) -> dict[str, Any]:
    """Mamba1 and Mamba2: a mixer of the spec's width (Mamba1 ``mamba_expand x hidden_size``,
    Mamba2 heads x head dim) over a tiny hidden width, ``expand`` making up the difference."""
    state = {"state_size": spec.mamba_d_state, "conv_kernel": spec.mamba_d_conv}
    if family != "mamba2":
        inner = (spec.mamba_expand or 0) * (spec.hidden_size or 0)
    else:
        inner = _mamba2_inner(spec)
        state |= {
            "num_heads": spec.mamba_n_heads,
            "head_dim": spec.mamba_d_head,
            "n_groups": spec.mamba_n_groups or 1,
        }
    hidden, expand = _hidden_for(spec, inner, TINY_HIDDEN if inner % TINY_HIDDEN == 0 else inner)
    return state | {"hidden_size": hidden, "expand": expand}


def _mamba_hybrid(spec: ModelSpec, family: str) -> dict[str, Any]:
    """Falcon-H1, Nemotron-H and Granite 4 (GraniteMoeHybrid): Mamba2 layers or mixers with the
    spec's state and tiny attention of the spec's heads."""
    kv, head_dim = _attention_heads(spec)
    inner = _mamba2_inner(spec)
    groups, d_state, d_conv = spec.mamba_n_groups or 1, spec.mamba_d_state, spec.mamba_d_conv
    kinds = [layer.kind for layer in spec.layers]
    attention = {"num_attention_heads": kv, "num_key_value_heads": kv}
    match family:
        case "falcon_h1":
            return attention | {
                "hidden_size": TINY_HIDDEN,
                "head_dim": head_dim,
                "mamba_d_ssm": inner,
                "mamba_n_heads": spec.mamba_n_heads,
                "mamba_d_head": spec.mamba_d_head,
                "mamba_n_groups": groups,
                "mamba_d_state": d_state,
                "mamba_d_conv": d_conv,
            }
        case "nemotron_h":
            blocks = {"mamba": "mamba", "full_attention": "attention"}
            return attention | {
                "hidden_size": TINY_HIDDEN,
                "head_dim": head_dim,
                "layers_block_type": [blocks.get(kind, "mlp") for kind in kinds],
                "mamba_num_heads": spec.mamba_n_heads,
                "mamba_head_dim": spec.mamba_d_head,
                "n_groups": groups,
                "ssm_state_size": d_state,
                "conv_kernel": d_conv,
                "use_mamba_kernels": False,
            }
    # granitemoehybrid: its attention's head dim is hidden / heads, its mixer expand x hidden
    hidden, expand = _hidden_for(spec, inner, kv * head_dim)
    return attention | {
        "hidden_size": hidden,
        "layer_types": ["mamba" if kind == "mamba" else "attention" for kind in kinds],
        "mamba_n_heads": spec.mamba_n_heads,
        "mamba_d_head": spec.mamba_d_head,
        "mamba_n_groups": groups,
        "mamba_d_state": d_state,
        "mamba_d_conv": d_conv,
        "mamba_expand": expand,
        "num_local_experts": 2,
        "num_experts_per_tok": 1,
        "shared_intermediate_size": TINY_MLP,
    }


def _zamba2(spec: ModelSpec, family: str) -> dict[str, Any]:
    """Zamba2: the real hidden width, since the shared attention's head dim is 2 x hidden /
    heads (it reads the hidden state concatenated with the embeddings), and every head a KV
    head; Mamba2 of ``expand x hidden``."""
    hidden, heads = spec.hidden_size or 0, spec.num_attention_heads
    kv, head_dim = _attention_heads(spec)
    if 2 * hidden != heads * head_dim or kv != heads:
        raise KvplanError(
            f"{spec.name}: Zamba2 attention is {heads} heads of 2 x hidden_size / heads;"
            f" the spec has {kv} KV heads of {head_dim}"
        )
    _, expand = _hidden_for(spec, _mamba2_inner(spec), hidden)
    return {
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "layers_block_type": [
            "hybrid" if isinstance(layer, AttentionAndState) else "mamba" for layer in spec.layers
        ],
        "mamba_d_state": spec.mamba_d_state,
        "mamba_d_conv": spec.mamba_d_conv,
        "mamba_expand": expand,
        "mamba_ngroups": spec.mamba_n_groups or 1,
        "n_mamba_heads": spec.mamba_n_heads,
        "use_mamba_kernels": False,
    }


def _lfm2(spec: ModelSpec, family: str) -> dict[str, Any]:
    """LFM2: the short convolution runs over the hidden width, so it is the spec's conv width
    and the attention's head dim is hidden / heads."""
    channels = spec.conv_dim or spec.hidden_size or 0
    kv, head_dim = _attention_heads(spec)
    if channels % head_dim or (channels // head_dim) % kv:
        raise KvplanError(
            f"{spec.name}: LFM2's attention takes hidden_size {channels} / heads as head dim;"
            f" {head_dim} with {kv} KV heads does not fit it"
        )
    settings: dict[str, Any] = {
        "hidden_size": channels,
        "num_attention_heads": channels // head_dim,
        "num_key_value_heads": kv,
        "layer_types": [
            "conv" if isinstance(layer, RecurrentState) else "full_attention"
            for layer in spec.layers
        ],
        "conv_L_cache": spec.conv_L_cache or 3,
    }
    if family == "lfm2_moe":  # every layer dense: no experts at all
        return settings | {"num_dense_layers": spec.num_hidden_layers}
    return settings | {"block_auto_adjust_ff_dim": False}


def _gated_delta(spec: ModelSpec, family: str) -> dict[str, Any]:
    """Qwen3-Next, Qwen3.5 and OLMo Hybrid: gated delta net layers with the spec's ``linear_*``
    sizes beside full attention; Qwen3-Next with two tiny experts."""
    kv, head_dim = _attention_heads(spec)
    settings: dict[str, Any] = {
        "num_attention_heads": kv,
        "num_key_value_heads": kv,
        "layer_types": [
            "linear_attention" if isinstance(layer, RecurrentState) else "full_attention"
            for layer in spec.layers
        ],
        "linear_num_key_heads": spec.linear_num_key_heads,
        "linear_num_value_heads": spec.linear_num_value_heads,
        "linear_key_head_dim": spec.linear_key_head_dim,
        "linear_value_head_dim": spec.linear_value_head_dim,
        "linear_conv_kernel_dim": spec.linear_conv_kernel_dim,
    }
    if family == "olmo_hybrid":  # no head_dim: the width sets it
        return settings | {"hidden_size": kv * head_dim, "pad_token_id": 0}
    settings |= {"hidden_size": TINY_HIDDEN, "head_dim": head_dim}
    if family == "qwen3_next":
        settings |= {
            "num_experts": 2,
            "num_experts_per_tok": 1,
            "moe_intermediate_size": 32,
            "shared_expert_intermediate_size": 32,
        }
    return settings


_BUILDERS: dict[str, Callable[[ModelSpec, str], dict[str, Any]]] = {
    "deepseek_v3": _mla,
    "deepseek_v32": _mla,
    "glm_moe_dsa": _mla,
    "jamba": _jamba,
    "mamba": _mamba,
    "falcon_mamba": _mamba,
    "mamba2": _mamba,
    "falcon_h1": _mamba_hybrid,
    "nemotron_h": _mamba_hybrid,
    "granitemoehybrid": _mamba_hybrid,
    "zamba2": _zamba2,
    "lfm2": _lfm2,
    "lfm2_moe": _lfm2,
    "qwen3_next": _gated_delta,
    "qwen3_5_text": _gated_delta,
    "olmo_hybrid": _gated_delta,
    "gemma3n_text": _gemma_shared,
    "gemma4_text": _gemma_shared,
}
