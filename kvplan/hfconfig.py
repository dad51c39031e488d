"""Hugging Face ``config.json`` (or a model folder) -> a kvplan spec.

Each supported ``model_type`` is mapped by the rules its transformers config class and modeling
code apply, including the quirks that make a naive reading wrong:

- Falcon 7B says ``multi_query: true``: one shared K/V head, not 71.
- Qwen2 configs carry a ``sliding_window`` that ``use_sliding_window: false`` switches off.
- Gemma 3 nests its text model in ``text_config`` and leaves defaults out of the file (no
  ``max_position_embeddings``, often no ``sliding_window_pattern``): the config class defaults
  apply, and the spec says which values came from a default.
- DBRX keeps its KV heads in ``attn_config.kv_n_heads``; ChatGLM calls them
  ``multi_query_group_num`` and its head dim ``kv_channels``.
- Hybrids state their layer kinds in their own ways: ``attn_layer_period``/``attn_layer_offset``
  (Jamba), ``hybrid_override_pattern`` (Nemotron-H), ``full_attention_interval`` (Qwen3-Next),
  ``no_rope_layers`` (Llama 4 chunked attention), ``attn_type_list`` (MiniMax).

An unmapped ``model_type`` is refused, never guessed. From a folder, the safetensors headers
(the 8-byte length and the JSON header, never the tensors) give the exact parameter count and
its formats; ``model.safetensors.index.json`` alone gives it when every tensor has one dtype.

Config files are third-party input: a value of the wrong type or range (``attn_config: "x"``,
``attn_layer_period: 0``, ``torch_dtype: ["bfloat16"]``, a shape of strings) is a SpecError
naming the file and the key, never a guess and never a traceback.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvplan.errors import SpecError
from kvplan.files import is_file, is_folder, read_bytes, read_head, read_text
from kvplan.spec import MAX_DIM, MAX_LAYERS, MAX_PARAMETERS, ModelSpec, parse_spec
from kvplan.units import abbreviate

CONFIG_NAME = "config.json"
INDEX_NAME = "model.safetensors.index.json"

Config = Mapping[str, Any]

# Values a config class supplies when the file leaves the key out, per model_type; only keys
# that change the cache or the weights. (transformers configuration_<model>.py defaults.)
_DEFAULTS: dict[str, dict[str, Any]] = {
    "gemma3_text": {
        "num_hidden_layers": 26,
        "hidden_size": 2304,
        "num_attention_heads": 8,
        "intermediate_size": 9216,
        "max_position_embeddings": 131072,
        "head_dim": 256,
        "sliding_window": 4096,
        "num_key_value_heads": 4,
        "vocab_size": 262208,
        "tie_word_embeddings": True,
    },
    "gemma2": {"head_dim": 256, "sliding_window": 4096, "tie_word_embeddings": True},
    "gemma": {"head_dim": 256, "tie_word_embeddings": True},
    "falcon": {"max_position_embeddings": 2048, "tie_word_embeddings": True},
    "gpt2": {"tie_word_embeddings": True},
    "opt": {"tie_word_embeddings": True},
    "phi": {"tie_word_embeddings": False},
    "mistral": {"sliding_window": 4096},
    "llama4_text": {"attention_chunk_size": 8192, "no_rope_layer_interval": 4},
    "qwen3_next": {"full_attention_interval": 4},
}

# Model dtype when the file has no torch_dtype/dtype: transformers loads float32 by default
# (GPT-2 era checkpoints are float32); gpt-oss keeps every non-expert tensor in bfloat16, and
# MiniMax-Text-01 ships bfloat16 weights without saying so in its config.
_DEFAULT_DTYPE = {
    "gpt_oss": "bfloat16",
    "minimax": "bfloat16",
    "minimax_text_01": "bfloat16",
}

# Wrappers whose text model sits in a nested config.
_NESTED = ("text_config", "llm_config", "language_config")


@dataclass
class _Reading:
    """What one config yields: the spec keys and how each non-obvious one was derived."""

    model_type: str
    config: Config
    spec: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def get(self, *keys: str) -> Any:
        """The first of ``keys`` the file states (not null), else the config class default."""
        for key in keys:
            if self.config.get(key) is not None:
                return self.config[key]
        for key in keys:
            default = _DEFAULTS.get(self.model_type, {}).get(key)
            if default is not None:
                self.notes.append(
                    f"{key} {json.dumps(default)}: the {self.model_type} default (not in file)"
                )
                return default
        return None


@dataclass(frozen=True, slots=True)
class WeightCount:
    """Parameters of a checkpoint, read from safetensors headers or the index."""

    num_parameters: int
    num_quantized_parameters: int
    weight_dtype: str | None
    dtypes: dict[str, int]
    how: str


@dataclass(frozen=True, slots=True)
class Imported:
    """An imported spec: the validated spec, its mapping (for YAML) and the derivation notes."""

    spec: ModelSpec
    data: dict[str, Any]
    notes: tuple[str, ...]
    config_path: str


def _whole(value: Any, key: str, minimum: int = 1, maximum: int = MAX_LAYERS) -> int:
    """``value`` as an int in ``[minimum, maximum]``; SpecError naming ``key`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise SpecError(
            "",
            [f"{key}: must be an integer from {minimum} to {maximum:,}, got {abbreviate(value)}"],
        )
    return value


def _mapping(value: Any, key: str) -> Mapping[str, Any]:
    """``value`` when it is a JSON object (absent: empty); SpecError naming ``key`` otherwise."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise SpecError("", [f"{key}: must be an object, got {abbreviate(value)}"])
    return value


def _list(value: Any, key: str) -> list[Any]:
    if not isinstance(value, list):
        raise SpecError("", [f"{key}: must be a list, got {abbreviate(value)}"])
    return value


# --- the mapping, one rule set per model_type --------------------------------------------------


def _kv_heads_default(r: _Reading) -> int | None:
    return r.get("num_key_value_heads")  # type: ignore[no-any-return]


def _kv_heads_falcon(r: _Reading) -> int | None:
    heads = r.get("num_attention_heads", "n_head")
    if r.config.get("new_decoder_architecture"):
        kv = r.get("num_kv_heads", "n_head_kv")
        r.notes.append(f"num_key_value_heads {kv}: num_kv_heads (new_decoder_architecture)")
        return kv  # type: ignore[no-any-return]
    if r.config.get("multi_query", True):
        r.notes.append("num_key_value_heads 1: multi_query shares one K/V head")
        return 1
    return heads  # type: ignore[no-any-return]


def _kv_heads_chatglm(r: _Reading) -> int | None:
    if r.config.get("multi_query_attention"):
        kv = r.config.get("multi_query_group_num")
        r.notes.append(f"num_key_value_heads {kv}: multi_query_group_num")
        return kv
    return None


def _kv_heads_dbrx(r: _Reading) -> int | None:
    kv = _mapping(r.config.get("attn_config"), "attn_config").get("kv_n_heads")
    r.notes.append(f"num_key_value_heads {kv}: attn_config.kv_n_heads")
    return kv


def _kv_heads_mha(r: _Reading) -> int | None:
    return None  # every head keeps its own K and V


def _pattern_every(
    r: _Reading, n: int, is_attention: Callable[[int], bool], other: str, why: str
) -> None:
    kinds = ["full_attention" if is_attention(i) else other for i in range(n)]
    r.spec["layer_types"] = kinds
    r.notes.append(f"layer_types from {why}")


def _layers_explicit(r: _Reading, n: int) -> bool:
    """Use ``layer_types`` when the file states it (transformers >= 4.53 writes it)."""
    names = {
        "full_attention": "full_attention",
        "attention": "full_attention",
        "sliding_attention": "sliding_attention",
        "chunked_attention": "chunked_attention",
        "linear_attention": "linear_attention",
        "mamba": "mamba",
    }
    given = r.config.get("layer_types")
    if given is None:
        return False
    if not _list(given, "layer_types"):
        return False
    if len(given) != n:
        raise SpecError("", [f"layer_types: has {len(given):,} entries but {n} layers"])
    unknown = next((k for k in given if not isinstance(k, str) or k not in names), None)
    if unknown is not None:
        raise SpecError(
            "",
            [f"layer_types: unknown kind {abbreviate(unknown)}; allowed: {', '.join(names)}"],
        )
    kinds = [names[k] for k in given]
    r.spec["layer_types"] = kinds
    if "sliding_attention" in kinds:
        r.spec["sliding_window"] = r.get("sliding_window")
    if "chunked_attention" in kinds:
        r.spec["attention_chunk_size"] = r.get("attention_chunk_size")
    return True


def _layers_uniform(r: _Reading, n: int) -> None:
    if _layers_explicit(r, n):
        return
    window = r.config.get("sliding_window")
    if window is not None:
        r.spec["sliding_window"] = window
        r.notes.append(f"every layer slides: sliding_window {window}")


def _layers_mistral(r: _Reading, n: int) -> None:
    if _layers_explicit(r, n):
        return
    # MistralConfig defaults sliding_window to 4096 when the key is absent; null means none.
    window = r.config["sliding_window"] if "sliding_window" in r.config else r.get("sliding_window")
    if window is not None:
        r.spec["sliding_window"] = window


def _layers_qwen2(r: _Reading, n: int) -> None:
    window = r.config.get("sliding_window")
    use = bool(r.config.get("use_sliding_window", False))
    if window is not None and not use:
        r.notes.append(f"sliding_window {window} inactive: use_sliding_window is false")
    if _layers_explicit(r, n):
        return
    if window is not None:
        r.spec["sliding_window"] = window
        r.spec["use_sliding_window"] = use
        if r.config.get("max_window_layers") is not None:
            r.spec["max_window_layers"] = r.config["max_window_layers"]


def _layers_gemma2(r: _Reading, n: int) -> None:
    r.spec["sliding_window"] = r.get("sliding_window")
    if _layers_explicit(r, n):
        return
    r.spec["layer_types_pattern"] = ["sliding_attention", "full_attention"]
    r.notes.append("layer_types_pattern: even layers slide, odd layers are global (Gemma 2)")


def _layers_gemma3(r: _Reading, n: int) -> None:
    r.spec["sliding_window"] = r.get("sliding_window")
    if _layers_explicit(r, n):
        return
    every = r.config.get("sliding_window_pattern")
    if every is None:
        every = 6
        r.notes.append("sliding_window_pattern 6: the gemma3_text default (not in file)")
    every = _whole(every, "sliding_window_pattern", maximum=n)
    r.spec["layer_types_pattern"] = ["sliding_attention"] * (every - 1) + ["full_attention"]


def _layers_llama4(r: _Reading, n: int) -> None:
    if _layers_explicit(r, n):
        return
    chunk = r.get("attention_chunk_size")
    no_rope = _list(r.config.get("no_rope_layers") or [], "no_rope_layers")
    if no_rope:
        rope = [bool(x) for x in no_rope]
        why = "no_rope_layers"
    else:
        every = _whole(r.get("no_rope_layer_interval"), "no_rope_layer_interval")
        rope = [(i + 1) % every != 0 for i in range(n)]
        why = f"no_rope_layer_interval {every} (no_rope_layers empty)"
    if chunk is None:
        return
    r.spec["attention_chunk_size"] = chunk
    # RoPE layers attend within their chunk; NoPE layers are global.
    r.spec["layer_types"] = ["chunked_attention" if x else "full_attention" for x in rope]
    r.notes.append(f"layer_types from {why}: RoPE layers chunked ({chunk}), NoPE layers full")


def _layers_jamba(r: _Reading, n: int) -> None:
    if _layers_explicit(r, n):
        return
    period = _whole(r.config.get("attn_layer_period", 8), "attn_layer_period")
    offset = _whole(r.config.get("attn_layer_offset", 4), "attn_layer_offset", minimum=0)
    _pattern_every(
        r,
        n,
        lambda i: i % period == offset,
        "mamba",
        f"attn_layer_period {period}, attn_layer_offset {offset}",
    )


def _layers_nemotron_h(r: _Reading, n: int) -> None:
    pattern = r.config.get("hybrid_override_pattern")
    if not isinstance(pattern, str) or len(pattern) != n:
        raise SpecError("", [f"hybrid_override_pattern: needs one character per layer ({n})"])
    kinds = {"M": "mamba", "*": "full_attention", "-": "no_cache", "E": "no_cache"}
    bad = sorted(set(pattern) - set(kinds))
    if bad:
        raise SpecError(
            "", [f"hybrid_override_pattern: unknown layer {bad[0]!r}; allowed: M, *, -, E"]
        )
    r.spec["layer_types"] = [kinds[c] for c in pattern]
    r.notes.append("layer_types from hybrid_override_pattern (M mamba, * attention, -/E none)")


def _layers_qwen3_next(r: _Reading, n: int) -> None:
    if _layers_explicit(r, n):
        return
    every = _whole(r.get("full_attention_interval"), "full_attention_interval")
    _pattern_every(
        r,
        n,
        lambda i: (i + 1) % every == 0,
        "linear_attention",
        f"full_attention_interval {every}",
    )


def _layers_minimax(r: _Reading, n: int) -> None:
    if _layers_explicit(r, n):
        return
    kinds = r.config.get("attn_type_list")
    if not isinstance(kinds, list) or len(kinds) != n:
        raise SpecError("", [f"attn_type_list: needs one entry per layer ({n})"])
    _pattern_every(
        r, n, lambda i: bool(kinds[i]), "linear_attention", "attn_type_list (1 softmax, 0 linear)"
    )


def _layers_hybrid_granite(r: _Reading, n: int) -> None:
    if not _layers_explicit(r, n):
        raise SpecError("", ["layer_types: required for granitemoehybrid"])


@dataclass(frozen=True, slots=True)
class _Rules:
    kv_heads: Callable[[_Reading], int | None] = _kv_heads_default
    layers: Callable[[_Reading, int], None] = _layers_uniform
    extra: tuple[str, ...] = ()  # keys copied as they are


_MLA = ("kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")
_MAMBA = (
    "mamba_d_state",
    "mamba_d_conv",
    "mamba_expand",
    "mamba_n_heads",
    "mamba_d_head",
    "mamba_n_groups",
)
_LINEAR = (
    "linear_num_key_heads",
    "linear_num_value_heads",
    "linear_key_head_dim",
    "linear_value_head_dim",
    "linear_conv_kernel_dim",
)

RULES: dict[str, _Rules] = {
    "llama": _Rules(),
    "mistral": _Rules(layers=_layers_mistral),
    "mixtral": _Rules(),
    "qwen2": _Rules(layers=_layers_qwen2),
    "qwen2_moe": _Rules(layers=_layers_qwen2),
    "qwen3": _Rules(layers=_layers_qwen2),
    "qwen3_moe": _Rules(layers=_layers_qwen2),
    "qwen3_next": _Rules(layers=_layers_qwen3_next, extra=_LINEAR),
    "gemma": _Rules(),
    "gemma2": _Rules(layers=_layers_gemma2),
    "gemma3_text": _Rules(layers=_layers_gemma3),
    "phi": _Rules(),
    "phi3": _Rules(),
    "falcon": _Rules(kv_heads=_kv_heads_falcon),
    "gpt2": _Rules(kv_heads=_kv_heads_mha),
    "opt": _Rules(kv_heads=_kv_heads_mha),
    "deepseek_v2": _Rules(extra=_MLA),
    "deepseek_v3": _Rules(extra=_MLA),
    "kimi_k2": _Rules(extra=_MLA),
    "gpt_oss": _Rules(),
    "llama4_text": _Rules(layers=_layers_llama4),
    "jamba": _Rules(layers=_layers_jamba, extra=_MAMBA),
    "nemotron_h": _Rules(layers=_layers_nemotron_h),
    "granitemoehybrid": _Rules(layers=_layers_hybrid_granite, extra=_MAMBA),
    "granite": _Rules(),
    "minimax": _Rules(layers=_layers_minimax),
    "minimax_text_01": _Rules(layers=_layers_minimax),
    "glm4": _Rules(),
    "glm4_moe": _Rules(),
    "chatglm": _Rules(kv_heads=_kv_heads_chatglm),
    "cohere": _Rules(),
    "dbrx": _Rules(kv_heads=_kv_heads_dbrx),
    "olmo2": _Rules(),
    "starcoder2": _Rules(),
    "internlm2": _Rules(),
}
# Wrappers whose text model is in text_config: the inner model_type decides.
_WRAPPERS = {"gemma3": "gemma3_text", "llama4": "llama4_text", "mistral3": "mistral"}


def supported_model_types() -> list[str]:
    """Every model_type ``import_config`` maps (wrappers included), sorted."""
    return sorted({*RULES, *_WRAPPERS})


def spec_from_config(config: Config, path: str = CONFIG_NAME) -> tuple[dict[str, Any], list[str]]:
    """A spec mapping from a parsed ``config.json``, and the notes on how it was derived.

    Raises SpecError naming ``path`` for an unmapped model_type or a malformed config.
    """
    try:
        return _map(config)
    except SpecError as e:
        raise SpecError(path, e.problems) from None
    except (TypeError, ValueError, AttributeError, ArithmeticError, RecursionError) as e:
        # A value of a type or range no rule above anticipated: refused, never a traceback.
        raise SpecError(path, [f"malformed config: {str(e)[:200]}"]) from None


def _map(config: Config) -> tuple[dict[str, Any], list[str]]:
    if not isinstance(config, Mapping):
        raise SpecError("", ["a config.json must be a JSON object"])
    stated = config.get("model_type")
    outer_type = stated if isinstance(stated, str) else None
    notes: list[str] = []
    text: Config = config
    model_type = outer_type
    for key in _NESTED:
        inner = config.get(key)
        if isinstance(inner, Mapping) and (outer_type in _WRAPPERS or outer_type not in RULES):
            text = inner
            model_type = inner.get("model_type") or _WRAPPERS.get(str(outer_type))
            notes.append(f"text model from {key} (top-level model_type {outer_type})")
            break
    if not isinstance(model_type, str) or model_type not in RULES:
        shown = abbreviate(model_type if isinstance(model_type, str) else stated)
        raise SpecError(
            "",
            [
                f"model_type: {shown} is not an architecture kvplan can import; supported:"
                f" {', '.join(supported_model_types())}; write a spec by hand instead"
                " (docs/spec.md lists its keys)"
            ],
        )
    r = _Reading(model_type, text, notes=notes)
    rules = RULES[model_type]
    n = r.get("num_hidden_layers", "n_layer", "num_layers", "n_layers")
    heads = r.get("num_attention_heads", "n_head", "n_heads")
    hidden = r.get("hidden_size", "n_embd", "d_model")
    if n is None or heads is None:
        raise SpecError("", ["num_hidden_layers, num_attention_heads: required in the config"])
    n = _whole(n, "num_hidden_layers")  # bounded before any rule builds a per-layer list
    heads = _whole(heads, "num_attention_heads", maximum=MAX_DIM)
    s = r.spec
    s["model_type"] = model_type
    s["num_hidden_layers"] = n
    if hidden is not None:
        s["hidden_size"] = hidden
    s["num_attention_heads"] = heads
    kv = rules.kv_heads(r)
    if kv is not None:
        s["num_key_value_heads"] = kv
    head_dim = r.get("head_dim", "kv_channels", "attention_head_dim")
    if head_dim is not None and model_type not in ("deepseek_v2", "deepseek_v3", "kimi_k2"):
        s["head_dim"] = head_dim
    s["torch_dtype"] = _model_dtype(r, config)
    max_len = r.get("max_position_embeddings", "n_positions", "max_seq_len", "seq_length")
    if max_len is not None:
        s["max_position_embeddings"] = max_len
    rules.layers(r, n)
    for key in rules.extra:
        if text.get(key) is not None:
            s[key] = text[key]
    _renamed_state(r)
    for key, names in (
        ("vocab_size", ("vocab_size", "padded_vocab_size")),
        ("intermediate_size", ("intermediate_size", "ffn_dim", "n_inner", "ffn_hidden_size")),
        ("tie_word_embeddings", ("tie_word_embeddings",)),
    ):
        value = r.get(*names)
        if value is None and key == "tie_word_embeddings":
            value = config.get("tie_word_embeddings")
        if value is not None:
            s[key] = value
    return s, r.notes


def _renamed_state(r: _Reading) -> None:
    """Mamba2 keys under Nemotron-H's names, and MiniMax lightning attention as linear state."""
    c, s = r.config, r.spec
    if r.model_type == "nemotron_h":
        for ours, theirs in (
            ("mamba_d_state", "ssm_state_size"),
            ("mamba_d_conv", "conv_kernel"),
            ("mamba_expand", "expand"),
            ("mamba_n_heads", "mamba_num_heads"),
            ("mamba_d_head", "mamba_head_dim"),
            ("mamba_n_groups", "n_groups"),
        ):
            if c.get(theirs) is not None:
                s[ours] = c[theirs]
    if r.model_type in ("minimax", "minimax_text_01"):
        # Lightning attention keeps one head_dim x head_dim state per head and no conv tail:
        # a gated-delta-style state with K and V heads equal and a kernel of 1.
        heads, dim = s["num_attention_heads"], s.get("head_dim")
        s.update(
            linear_num_key_heads=heads,
            linear_num_value_heads=heads,
            linear_key_head_dim=dim,
            linear_value_head_dim=dim,
            linear_conv_kernel_dim=1,
        )
        r.notes.append(f"linear attention state: {heads} heads x {dim} x {dim}, no conv")


def _model_dtype(r: _Reading, config: Config) -> str:
    for source in (r.config, config):
        for key in ("torch_dtype", "dtype"):
            value = source.get(key)
            if isinstance(value, str):
                return value
            if value is not None:  # a list would otherwise fall back to float32
                raise SpecError("", [f"{key}: must be a dtype name, got {abbreviate(value)}"])
    dtype = _DEFAULT_DTYPE.get(r.model_type, "float32")
    r.notes.append(f"torch_dtype {dtype}: not in the file")
    return dtype


# --- safetensors ----------------------------------------------------------------------------

# Bytes per element of each safetensors dtype; packed sub-byte formats are counted below.
_ST_WIDTH = {
    "F64": 8,
    "I64": 8,
    "U64": 8,
    "F32": 4,
    "I32": 4,
    "U32": 4,
    "F16": 2,
    "BF16": 2,
    "I16": 2,
    "U16": 2,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "I8": 1,
    "U8": 1,
    "BOOL": 1,
}
_OVERHEAD = ("_scales", "_scale", "weight_scale_inv", ".scales", ".qzeros", ".g_idx", "_zero_point")
_HEADER_LIMIT = 100 * 2**20
_DTYPE_NAME = re.compile(r"[A-Z][A-Z0-9_]{0,15}")
#: Dimensions of one tensor, and the largest dimension: far beyond any checkpoint.
_MAX_RANK = 16
_MAX_DIM = 2**48


def read_safetensors_header(path: Path) -> dict[str, Any]:
    """The JSON header of a .safetensors file: the 8-byte little-endian length, then JSON.

    Reads the header only, never the tensors. Raises SpecError naming the file when it is not
    a regular file, not safetensors, or a tensor's dtype or shape is malformed.
    """
    head = read_head(path, 8)
    if len(head) < 8:
        raise SpecError(str(path), ["not a safetensors file: shorter than 8 bytes"])
    (length,) = struct.unpack("<Q", head)
    if length > _HEADER_LIMIT:
        raise SpecError(str(path), [f"not a safetensors file: header of {length:,} B"])
    raw = read_bytes(path, offset=8, num_bytes=length)
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, ValueError, RecursionError):  # JSONDecodeError is a ValueError
        header = None
    if len(raw) < length or not isinstance(header, dict):
        raise SpecError(str(path), ["not a safetensors file: the header is not a JSON object"])
    try:
        for name, info in header.items():
            if name != "__metadata__":
                _tensor(name, info)
    except SpecError as e:
        raise SpecError(str(path), [f"not a safetensors file: {e.problems[0]}"]) from None
    return header


def _tensor(name: str, info: Any) -> tuple[str, int]:
    """A header entry's dtype and element count; SpecError naming the tensor when malformed."""
    shown = name if len(name) <= 80 else name[:77] + "..."
    if not isinstance(info, Mapping):
        raise SpecError("", [f"{shown}: must be an object with dtype and shape"])
    dtype, shape = info.get("dtype"), info.get("shape")
    if not isinstance(dtype, str) or not _DTYPE_NAME.fullmatch(dtype):
        raise SpecError("", [f"{shown}: dtype {abbreviate(dtype)} is not a safetensors dtype"])
    if not isinstance(shape, list) or len(shape) > _MAX_RANK:
        raise SpecError("", [f"{shown}: shape must be a list of at most {_MAX_RANK} sizes"])
    numel = 1
    for dim in shape:
        if isinstance(dim, bool) or not isinstance(dim, int) or not 0 <= dim <= _MAX_DIM:
            raise SpecError("", [f"{shown}: shape {abbreviate(dim)} is not a size"])
        numel *= dim
    return dtype, numel


def count_parameters(
    headers: Mapping[str, Mapping[str, Any]], quant: Config, how: str = "safetensors headers"
) -> WeightCount:
    """Parameters per format from safetensors headers (name -> {dtype, shape}).

    Scales, zero points and group indices are storage, not parameters. MXFP4 ``*_blocks``
    hold two 4-bit values a byte; GPTQ/AWQ ``qweight`` packs 32 / bits values an int32.
    Raises SpecError for a malformed entry or ``quantization_config``.
    """
    quant = _mapping(quant, "quantization_config")
    method = str(quant.get("quant_method", "")).lower()
    bits = quant.get("bits", 4)
    bits = 4 if bits is None else _whole(bits, "quantization_config.bits", maximum=32)
    dtypes: dict[str, int] = {}
    quantized = 0
    for name, info in headers.items():
        if name == "__metadata__" or name.endswith(_OVERHEAD):
            continue
        dtype, numel = _tensor(name, info)
        if name.endswith("_blocks") and dtype == "U8":
            numel, dtype = numel * 2, "MXFP4"
            quantized += numel
        elif name.endswith(".qweight") and dtype == "I32":
            numel, dtype = numel * 32 // bits, f"INT{bits}"
            quantized += numel
        elif dtype.startswith("F8_"):
            quantized += numel
        dtypes[dtype] = dtypes.get(dtype, 0) + numel
    total = sum(dtypes.values())
    if total > MAX_PARAMETERS:
        raise SpecError("", [f"safetensors headers: {total:,} parameters, over {MAX_PARAMETERS:,}"])
    return WeightCount(
        num_parameters=total,
        num_quantized_parameters=quantized,
        weight_dtype=_weight_dtype(method, bits) if quantized else None,
        dtypes=dict(sorted(dtypes.items())),
        how=how,
    )


def _weight_dtype(method: str, bits: int) -> str | None:
    if method in ("gptq", "awq"):
        return "int4" if bits == 4 else "int8" if bits == 8 else None
    return {"fp8": "fp8_e4m3", "mxfp4": "mxfp4", "nvfp4": "nvfp4"}.get(method)


def weights_in_folder(folder: Path, config: Config, torch_dtype: str) -> WeightCount | None:
    """The checkpoint's parameters, from shard headers, else from the index's total_size when
    the checkpoint is unquantized (one dtype); None when the folder has neither."""
    shards = sorted(folder.glob("*.safetensors"))
    quant = _mapping(config.get("quantization_config"), "quantization_config")
    if shards:
        headers: dict[str, Any] = {}
        for shard in shards:
            headers.update(read_safetensors_header(shard))
        return count_parameters(headers, quant, f"safetensors headers of {len(shards)} file(s)")
    index = folder / INDEX_NAME
    if not is_file(index):
        return None
    data = _read_json(index)
    try:
        metadata = _mapping(data.get("metadata"), "metadata")
        total = metadata.get("total_size")
        if total is not None:
            _whole(total, "metadata.total_size", maximum=MAX_PARAMETERS * 8)
    except SpecError as e:
        raise SpecError(str(index), e.problems) from None
    width = {"float32": 4, "float16": 2, "bfloat16": 2}.get(torch_dtype)
    if not isinstance(total, int) or quant or width is None or total % width:
        return None
    return WeightCount(
        total // width,
        0,
        None,
        {torch_dtype: total // width},
        f"{INDEX_NAME} total_size {total:,} B / {width} B",
    )


# --- files ----------------------------------------------------------------------------------


def _read_json(path: Path) -> dict[str, Any]:
    text = read_text(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise SpecError(str(path), [f"malformed JSON: {e.msg}"], [e.lineno]) from None
    except RecursionError:
        raise SpecError(str(path), ["malformed JSON: nested too deeply"]) from None
    except ValueError:  # Python reads at most 4,300 digits of an integer
        raise SpecError(
            str(path), ["malformed JSON: an integer of more than 4,300 digits"]
        ) from None
    if not isinstance(data, dict):
        raise SpecError(str(path), ["must be a JSON object"])
    return data


def is_hf_config(path: Path) -> bool:
    """True for a model folder or a transformers config.json (not a kvplan spec in JSON)."""
    if is_folder(path):
        return True
    if path.suffix != ".json" or not is_file(path):
        return False
    if path.name == CONFIG_NAME:
        return True
    try:
        data = json.loads(read_text(path))
    except (SpecError, ValueError, RecursionError):  # the spec reader reports the problem
        return False
    return isinstance(data, dict) and any(
        k in data for k in ("architectures", "transformers_version", *_NESTED)
    )


def import_config(path: str | Path, name: str | None = None, hf_id: str | None = None) -> Imported:
    """Read a config.json, or a model folder holding one, into a validated spec.

    From a folder the safetensors headers (or the index) add the exact parameter count, its
    formats and, with ``quantization_config``, how many parameters are quantized.
    """
    path = Path(path)
    folder = path if is_folder(path) else None
    config_path = path / CONFIG_NAME if folder else path
    if folder is not None and not is_file(config_path):
        raise SpecError(str(path), [f"{CONFIG_NAME}: not in this folder"])
    shown = str(config_path)
    config = _read_json(config_path)
    data, notes = spec_from_config(config, shown)
    if folder is not None:
        try:
            count = weights_in_folder(folder, config, data["torch_dtype"])
        except SpecError as e:
            raise SpecError(e.path or shown, e.problems, e.lines) from None
        if count is not None:
            _add_weights(data, notes, count)
    try:
        quant = _mapping(config.get("quantization_config"), "quantization_config")
    except SpecError as e:
        raise SpecError(shown, e.problems) from None
    if quant and "weight_dtype" not in data:
        notes.append(f"quantization_config {quant.get('quant_method')}: weights not counted")
    label = name or (hf_id.rsplit("/", 1)[-1].lower() if hf_id else _default_name(path, config))
    ordered: dict[str, Any] = {"name": label}
    hub = hf_id or config.get("_name_or_path")
    if isinstance(hub, str) and hub.count("/") == 1 and not hub.startswith((".", "/")):
        ordered["hf_id"] = hub
    origin = f"{hf_id} {CONFIG_NAME}" if hf_id else shown
    ordered["source"] = f"imported from {origin}" + (f"; {'; '.join(notes)}" if notes else "")
    ordered.update(data)
    spec = parse_spec(ordered, shown)
    return Imported(spec, ordered, tuple(notes), origin)


def _add_weights(data: dict[str, Any], notes: list[str], count: WeightCount) -> None:
    data["num_parameters"] = count.num_parameters
    if count.weight_dtype is not None and count.num_quantized_parameters:
        data["weight_dtype"] = count.weight_dtype
        data["num_quantized_parameters"] = count.num_quantized_parameters
    formats = ", ".join(f"{k} {v:,}" for k, v in count.dtypes.items())
    notes.append(f"num_parameters {count.num_parameters:,} from {count.how} ({formats})")


def _default_name(path: Path, config: Config) -> str:
    """The folder's name (``models/Llama-3.1-8B/config.json`` -> ``llama-3.1-8b``), or the
    file's stem when it is not called config.json."""
    if is_folder(path) or path.name == CONFIG_NAME:
        folder = path if is_folder(path) else path.parent
        stem = folder.resolve().name
    else:
        stem = path.stem
    return (stem or str(config.get("model_type", "imported"))).lower()


# --- output -----------------------------------------------------------------------------------


def spec_yaml(imported: Imported) -> str:
    """The imported spec as YAML: a comment with each derivation, then the keys in spec order
    (lists of layer kinds on one line, as in the bundled specs)."""
    import yaml

    lines = [f"# Imported from {imported.config_path} by kvplan import."]
    lines += [f"# - {note}" for note in imported.notes]
    body = yaml.safe_dump(
        imported.data, sort_keys=False, default_flow_style=None, width=100, allow_unicode=True
    )
    return "\n".join(lines) + "\n" + body


HUB_HINT = (
    "--hub needs huggingface_hub, which kvplan does not install by default:"
    " pip install 'kvplan[hub]'"
)


def download_from_hub(repo_id: str, revision: str | None = None) -> Path:
    """Download ``config.json`` (and the safetensors index when the repo has one, never the
    weights) into the Hugging Face cache; returns the folder. Raises HubUnavailableError."""
    from kvplan.errors import HubUnavailableError

    try:
        from huggingface_hub import hf_hub_download
        from huggingface_hub.errors import EntryNotFoundError
    except ImportError:
        raise HubUnavailableError(HUB_HINT) from None
    try:
        config = hf_hub_download(repo_id, CONFIG_NAME, revision=revision)
    except Exception as e:  # the hub raises many kinds: offline, gated, missing repo
        raise HubUnavailableError(f"--hub {repo_id}: cannot download {CONFIG_NAME}: {e}") from None
    try:
        hf_hub_download(repo_id, INDEX_NAME, revision=revision)
    except EntryNotFoundError:
        pass  # single-file checkpoints have no index; the parameter count stays unknown
    except Exception as e:
        raise HubUnavailableError(f"--hub {repo_id}: cannot download {INDEX_NAME}: {e}") from None
    return Path(config).parent
