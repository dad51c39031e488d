"""An independent count of KV-cache bytes per token at bfloat16, from a raw config.json alone.

Written from the model families' published attention shapes, not from kvplan: nothing here
imports kvplan. One token of one sequence at a short context (every sliding or chunked layer
still inside its window) adds, per layer:

- standard attention: K and V, ``2 x kv_heads x head_dim x 2 B``; Llama 3.1 8B, 32 layers of
  8 K/V heads of 128: 32 x 2 x 8 x 128 x 2 = 131,072 B;
- MLA (DeepSeek V2/V3 and kin): one latent of ``kv_lora_rank + qk_rope_head_dim`` values
  (no factor 2: K and V are both rebuilt from it), ``(512 + 64) x 2 = 1,152 B``;
- a state layer (Mamba, linear attention, short convolution) or a layer without attention:
  0 B, since its state does not grow with the context.

``reference(config)`` returns the bytes, or a string saying why the reference cannot tell
("unknown: ..."); it never guesses for an architecture it does not know.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

BF16_BYTES = 2
Config = Mapping[str, Any]


class Unknown(Exception):
    """The reference cannot say (an architecture or a layout it does not know)."""


def _first(c: Config, *keys: str) -> Any:
    for key in keys:
        if c.get(key) is not None:
            return c[key]
    return None


def _int(c: Config, *keys: str) -> int:
    value = _first(c, *keys)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise Unknown(f"{'/'.join(keys)} not a whole number ({value!r})")
    return value


def _layers(c: Config) -> int:
    return _int(c, "num_hidden_layers", "n_layer", "num_layers", "n_layers")


def _heads(c: Config) -> int:
    return _int(c, "num_attention_heads", "n_head", "n_heads", "num_heads")


def _head_dim(c: Config) -> int:
    stated = _first(c, "head_dim", "kv_channels", "attention_head_dim")
    if stated is not None:
        return _int(c, "head_dim", "kv_channels", "attention_head_dim")
    hidden = _int(c, "hidden_size", "n_embd", "d_model")
    heads = _heads(c)
    if hidden % heads:
        raise Unknown(f"hidden size {hidden} not a multiple of {heads} heads")
    return hidden // heads


def _kv_heads(c: Config) -> int:
    stated = _first(c, "num_key_value_heads", "n_head_kv", "num_kv_heads", "n_kv_heads")
    if stated is not None:
        return _int(c, "num_key_value_heads", "n_head_kv", "num_kv_heads", "n_kv_heads")
    if c.get("multi_query") is True:
        return 1
    return _heads(c)


def _kv_layer(kv_heads: int, head_dim: int) -> int:
    """Bytes one token adds to one standard-attention layer: K and V."""
    return 2 * kv_heads * head_dim * BF16_BYTES


def standard(c: Config) -> int:
    """Every layer full (or windowed) attention of the same shape."""
    return _layers(c) * _kv_layer(_kv_heads(c), _head_dim(c))


def _with_defaults(c: Config, defaults: Config) -> Config:
    return {**defaults, **{k: v for k, v in c.items() if v is not None}}


def mla(c: Config, num_layers: int | None = None) -> int:
    """DeepSeek-style latent attention: one compressed latent plus the shared RoPE key."""
    latent = _int(c, "kv_lora_rank") + _int(c, "qk_rope_head_dim")
    return (_layers(c) if num_layers is None else num_layers) * latent * BF16_BYTES


def mla_sparse(c: Config) -> int:
    """MLA plus DeepSeek Sparse Attention's lightning-indexer key, one per token and layer.

    The DeepSeek-V3.2 report keeps the indexer keys in FP8: ``index_head_dim`` bytes and one
    fp32 scale per 128 values. V3.2 (61 layers, index_head_dim 128): 61 x (1,152 + 132) =
    78,324 B. A model whose layers share top-k indices (index_topk_freq, index_topk_pattern)
    keeps fewer keys; the reference does not model that.
    """
    if c.get("index_topk_freq") is not None or c.get("index_topk_pattern") is not None:
        raise Unknown("indexer keys shared across layers (index_topk_freq/index_topk_pattern)")
    dim = _int(c, "index_head_dim")
    return mla(c) + _layers(c) * (dim + 4 * -(-dim // 128))


# --- families whose K/V shape is spelled differently ---------------------------------------


def falcon(c: Config) -> int:
    # FalconConfig: new_decoder_architecture uses num_kv_heads; else multi_query (default
    # True) shares one K/V head; else one per attention head.
    heads = _heads(c)
    if c.get("new_decoder_architecture"):
        kv = _int(c, "num_kv_heads") if c.get("num_kv_heads") is not None else heads
    elif c.get("multi_query", True):
        kv = 1
    else:
        kv = heads
    return _layers(c) * _kv_layer(kv, _head_dim(c))


def gpt_bigcode(c: Config) -> int:
    # GPTBigCodeConfig: multi_query defaults to True (one K/V head).
    kv = 1 if c.get("multi_query", True) else _heads(c)
    return _layers(c) * _kv_layer(kv, _head_dim(c))


def chatglm(c: Config) -> int:
    # ChatGLM/GLM-4 (remote code): multi_query_group_num K/V groups of kv_channels each.
    kv = _int(c, "multi_query_group_num") if c.get("multi_query_attention") else _heads(c)
    return _layers(c) * _kv_layer(kv, _head_dim(c))


def dbrx(c: Config) -> int:
    attn = c.get("attn_config") or {}
    kv = attn.get("kv_n_heads", 1) if isinstance(attn, Mapping) else 1
    if not isinstance(kv, int):
        raise Unknown("attn_config.kv_n_heads not a whole number")
    return _layers(c) * _kv_layer(kv, _head_dim(c))


def mpt(c: Config) -> int:
    attn = c.get("attn_config") or {}
    kv = attn.get("kv_n_heads") if isinstance(attn, Mapping) else None
    heads = _heads(c)
    if isinstance(attn, Mapping) and attn.get("attn_type") == "multiquery_attention":
        kv = 1
    return _layers(c) * _kv_layer(kv if isinstance(kv, int) else heads, _head_dim(c))


def opt(c: Config) -> int:
    # OPT's attention projects K and V to the full hidden size: one K/V per attention head,
    # whatever num_key_value_heads a file may carry.
    return _layers(c) * _kv_layer(_heads(c), _head_dim(c))


def refined_web(c: Config) -> int:
    # Falcon's remote-code RW configs: n_head_kv groups when stated, else multi_query (one
    # K/V head), else one per head (RWConfig defaults multi_query to False).
    if c.get("n_head_kv") is not None:
        kv = _int(c, "n_head_kv")
    else:
        kv = 1 if c.get("multi_query") else _heads(c)
    return _layers(c) * _kv_layer(kv, _head_dim(c))


def gemma4(c: Config) -> int:
    """Gemma 4: sliding layers use num_key_value_heads x head_dim, full layers
    num_global_key_value_heads x global_head_dim (Gemma4TextConfig: global_head_dim 512; the
    global K/V heads apply when attention_k_eq_v); the last num_kv_shared_layers layers reuse
    an earlier layer's cache and add nothing. K and V are both cached."""
    kinds = c.get("layer_types")
    if not isinstance(kinds, list):
        raise Unknown("gemma4 without layer_types")
    local = _kv_layer(_kv_heads(c), _int(c, "head_dim"))
    g_dim = c.get("global_head_dim") or 512
    g_kv = c.get("num_global_key_value_heads") if c.get("attention_k_eq_v") else None
    full = _kv_layer(g_kv if isinstance(g_kv, int) else _kv_heads(c), g_dim)
    shared = c.get("num_kv_shared_layers") or 0
    own = kinds[: len(kinds) - shared]
    return sum(full if k == "full_attention" else local for k in own)


def openelm(c: Config) -> int:
    kvs, dim = c.get("num_kv_heads"), _int(c, "head_dim")
    if not isinstance(kvs, list):
        raise Unknown("num_kv_heads not a per-layer list")
    return sum(_kv_layer(int(kv), dim) for kv in kvs)


def decilm(c: Config) -> int:
    # Nemotron-NAS (Llama-3.x-Nemotron Super/Ultra): block_configs per layer; an attention
    # block shares one K/V head among n_heads_in_group query heads; no_op/replace_with_linear
    # blocks cache nothing.
    blocks, heads, dim = c.get("block_configs"), _heads(c), _head_dim(c)
    if not isinstance(blocks, list):
        raise Unknown("block_configs not a list")
    total = 0
    for block in blocks:
        attn = block.get("attention", {})
        if attn.get("no_op") or attn.get("replace_with_linear"):
            continue
        group = attn.get("n_heads_in_group")
        if not isinstance(group, int) or group <= 0 or heads % group:
            raise Unknown(f"attention.n_heads_in_group {group!r}")
        total += _kv_layer(heads // group, dim)
    return total


# --- hybrids: only the attention layers hold a growing cache --------------------------------

ATTENTION_KINDS = {
    "full_attention",
    "sliding_attention",
    "chunked_attention",
    "attention",
    "full",
    "sliding",
    "global",
    "local",
    "hybrid",
}
STATE_KINDS = {"linear_attention", "mamba", "mamba2", "conv", "recurrent", "linear"}


def _count_kinds(kinds: list[Any]) -> int:
    n = 0
    for kind in kinds:
        if kind in ATTENTION_KINDS:
            n += 1
        elif kind not in STATE_KINDS:
            raise Unknown(f"layer kind {kind!r}")
    return n


def _by_layer_types(c: Config) -> int | None:
    kinds = c.get("layer_types")
    if not isinstance(kinds, list):
        return None
    return _count_kinds(kinds) * _kv_layer(_kv_heads(c), _head_dim(c))


def typed_layers(c: Config) -> int:
    """layer_types names each layer; a model without the list is all attention."""
    counted = _by_layer_types(c)
    return standard(c) if counted is None else counted


def hybrid_layer_types(c: Config) -> int:
    """A hybrid that must name its layers (LFM2, Granite 4 hybrid, Qwen3-Next / Qwen3.5)."""
    counted = _by_layer_types(c)
    if counted is not None:
        return counted
    idxs = c.get("full_attn_idxs")
    if isinstance(idxs, list):
        return len(idxs) * _kv_layer(_kv_heads(c), _head_dim(c))
    interval = c.get("full_attention_interval")
    if isinstance(interval, int) and interval > 0:
        n = sum(1 for i in range(_layers(c)) if (i + 1) % interval == 0)
        return n * _kv_layer(_kv_heads(c), _head_dim(c))
    raise Unknown("hybrid without layer_types")


NEMOTRON_H_BLOCKS = {"attention": 1, "full_attention": 1, "mamba": 0, "linear_attention": 0}


def nemotron_h(c: Config) -> int:
    # hybrid_override_pattern: '*' attention, 'M' Mamba-2, '-' MLP, 'E' MoE; newer releases
    # name each block in layers_block_type instead ('attention', 'mamba', 'moe', 'mlp').
    pattern, blocks = c.get("hybrid_override_pattern"), c.get("layers_block_type")
    if isinstance(pattern, str):
        n = pattern.count("*")
    elif isinstance(blocks, list):
        unknown = [b for b in blocks if b not in NEMOTRON_H_BLOCKS and b not in ("moe", "mlp")]
        if unknown:
            raise Unknown(f"layers_block_type kind {unknown[0]!r}")
        n = sum(NEMOTRON_H_BLOCKS.get(b, 0) for b in blocks)
    else:
        raise Unknown("neither hybrid_override_pattern nor layers_block_type")
    return n * _kv_layer(_kv_heads(c), _head_dim(c))


def jamba(c: Config) -> int:
    period, offset = _int(c, "attn_layer_period"), _int(c, "attn_layer_offset")
    n = sum(1 for i in range(_layers(c)) if i % period == offset)
    return n * _kv_layer(_kv_heads(c), _head_dim(c))


def minimax(c: Config) -> int:
    # MiniMax-Text-01: attn_type_list, 1 softmax attention, 0 lightning (linear) attention.
    kinds = c.get("attn_type_list")
    if isinstance(kinds, list):
        return sum(1 for k in kinds if k == 1) * _kv_layer(_kv_heads(c), _head_dim(c))
    return typed_layers(c)


def _zamba_kinds(c: Config, default: list[str]) -> list[str]:
    kinds = c.get("layers_block_type")
    if kinds is None:
        return default
    if not isinstance(kinds, list) or not set(kinds) <= {"mamba", "hybrid", "linear_attention"}:
        raise Unknown("layers_block_type of names the reference does not know")
    return kinds


def zamba(c: Config) -> int:
    """Zamba: each "hybrid" layer runs the shared attention block on the hidden state
    concatenated with the embeddings, so its heads are 2 x hidden_size / num_attention_heads
    wide (ZambaConfig); the Mamba layers cache no K/V. ZambaConfig's default layout: two
    Mamba layers, a hybrid one, then hybrid where i % attn_layer_period == attn_layer_offset."""
    n = _layers(c)
    period, offset = _int(c, "attn_layer_period"), _int(c, "attn_layer_offset")
    rest = ["hybrid" if i % period == offset else "mamba" for i in range(n - 3)]
    kinds = _zamba_kinds(c, ["mamba", "mamba", "hybrid", *rest])
    dim = _int(c, "attention_head_dim") if c.get("attention_head_dim") else None
    dim = dim or 2 * _int(c, "hidden_size") // _heads(c)
    return kinds.count("hybrid") * _kv_layer(_kv_heads(c), dim)


def zamba2(c: Config) -> int:
    """Zamba 2: as Zamba, but Zamba2Config always sets the head width to 2 x hidden_size /
    num_attention_heads, whatever attention_head_dim the file states."""
    default = ["mamba"] + (["mamba"] * 5 + ["hybrid"]) * 7 + ["mamba"] * 4 + ["hybrid"]
    kinds = _zamba_kinds(c, default + ["mamba"] * 3 + ["hybrid"] + ["mamba"] * 2)
    dim = 2 * _int(c, "hidden_size") // _heads(c)
    return kinds.count("hybrid") * _kv_layer(_kv_heads(c), dim)


def state_only(c: Config) -> int:
    """Mamba, RWKV: a fixed state per sequence, nothing per token."""
    return 0


def kimi_linear(c: Config) -> int:
    la = c.get("linear_attn_config")
    if not isinstance(la, Mapping) or not isinstance(la.get("full_attn_layers"), list):
        raise Unknown("no linear_attn_config.full_attn_layers")
    return mla(c, len(la["full_attn_layers"]))


def _text(c: Config) -> Config:
    """The language model of a wrapper (text_config, or llm_config), else the config."""
    for key in ("text_config", "llm_config", "language_config"):
        inner = c.get(key)
        if isinstance(inner, Mapping) and inner:
            return inner
    return c


# Gemma 3's text_config may leave out what Gemma3TextConfig supplies.
GEMMA3_TEXT_DEFAULTS: Config = {
    "num_hidden_layers": 26,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 256,
}


def gemma3(c: Config) -> int:
    return standard(_with_defaults(c, GEMMA3_TEXT_DEFAULTS))


def gemma(c: Config) -> int:
    """Gemma 1-3 text models: GemmaConfig, Gemma2Config and Gemma3TextConfig all default
    head_dim to 256 rather than hidden_size / num_attention_heads."""
    return typed_layers(_with_defaults(c, {"head_dim": 256}))


Formula = Callable[[Config], int]

STANDARD_TYPES = (
    "llama",
    "mistral",
    "mixtral",
    "qwen2",
    "qwen2_moe",
    "qwen3",
    "qwen3_moe",
    "phi3",
    "phimoe",
    "phi",
    "starcoder2",
    "cohere",
    "cohere2",
    "olmo",
    "olmo2",
    "olmo3",
    "olmoe",
    "granite",
    "granitemoe",
    "granitemoeshared",
    "stablelm",
    "internlm",
    "internlm2",
    "internlm3",
    "baichuan",
    "deepseek",
    "exaone",
    "exaone4",
    "glm",
    "glm4",
    "glm4_moe",
    "hunyuan_v1_dense",
    "hunyuan_v1_moe",
    "ernie4_5",
    "ernie4_5_moe",
    "smollm3",
    "arcee",
    "seed_oss",
    "minicpm",
    "nemotron",
    "gpt_neox",
    "gptj",
    "gpt2",
    "bloom",
    "qwen",
    "apertus",
    "qwen2_vl",
    "qwen2_5_vl",
    "gpt_oss",
    "llama4_text",
    "mistral3_text",
    "dots1",
    "bailing_moe",
    "xverse",
    "yi",
    "solar",
    "orion",
    "gpt_neo",
    "persimmon",
    "stablelm_epoch",
    "codegen",
    "aquila",
    "mimo",
    "helium",
    "minimax_m2",
    "falcon_h1",
    "llava",
    "qwen3_vl_text",
    "qwen3_vl_moe_text",
    "ministral",
)

FORMULAS: dict[str, Formula] = dict.fromkeys(STANDARD_TYPES, standard)
FORMULAS.update(
    {
        "falcon": falcon,
        "gpt_bigcode": gpt_bigcode,
        "chatglm": chatglm,
        "dbrx": dbrx,
        "mpt": mpt,
        "openelm": openelm,
        "nemotron-nas": decilm,
        "deci_lm": decilm,
        "deepseek_v2": mla,
        "deepseek_v3": mla,
        "deepseek_v32": mla_sparse,
        "kimi_k2": mla,
        "glm_moe_dsa": mla_sparse,
        "kimi_linear": kimi_linear,
        "opt": opt,
        "RefinedWeb": refined_web,
        "RefinedWebModel": refined_web,
        "gemma4_text": gemma4,
        "gemma3_text": gemma,
        "gemma": gemma,
        "gemma2": gemma,
        "gemma3": gemma3,
        "cohere2": typed_layers,
        "lfm2": hybrid_layer_types,
        "lfm2_moe": hybrid_layer_types,
        "granitemoehybrid": hybrid_layer_types,
        "qwen3_next": hybrid_layer_types,
        "qwen3_5_text": hybrid_layer_types,
        "qwen3_5_moe_text": hybrid_layer_types,
        "nemotron_h": nemotron_h,
        "jamba": jamba,
        "zamba": zamba,
        "zamba2": zamba2,
        "minimax": minimax,
        "mamba": state_only,
        "mamba2": state_only,
        "falcon_mamba": state_only,
        "rwkv": state_only,
        "rwkv5": state_only,
        "rwkv6": state_only,
    }
)

# A wrapper whose language model sits in text_config: the model type to read it as.
WRAPPERS: dict[str, str] = {
    "gemma3": "gemma3",
    "llama4": "llama4_text",
    "mistral3": "mistral3_text",
    "llava": "llava",
    "llava_next": "llava",
    "qwen3_vl": "qwen3_vl_text",
    "qwen3_vl_moe": "qwen3_vl_moe_text",
    "qwen3_5": "qwen3_5_text",
    "qwen3_5_moe": "qwen3_5_moe_text",
    "kimi_vl": "deepseek_v3",
    "kimi_k25": "deepseek_v3",
    "kimi_k3": "kimi_linear",
    "gemma4": "gemma4_text",
}


def model_type(c: Config) -> str:
    value = c.get("model_type")
    return value if isinstance(value, str) else "(none)"


def reference(c: Config) -> int | str:
    """KV bytes per token at bfloat16 and a short context, or "unknown: <why>"."""
    outer = model_type(c)
    try:
        if outer in WRAPPERS:
            inner = _text(c)
            kind = WRAPPERS[outer]
            if inner is c and kind == "gemma3":
                return "unknown: gemma3 wrapper without text_config"
            return FORMULAS[kind](inner if inner is not c else c)
        formula = FORMULAS.get(outer)
        if formula is None:
            return f"unknown: model_type {outer!r} not in the reference"
        return formula(c)
    except Unknown as e:
        return f"unknown: {e}"
