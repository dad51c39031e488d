"""The model spec: a frozen view of the KV-relevant part of a model's config.

Keys follow Hugging Face ``config.json`` names, so the KV-relevant subset of a real config is
itself a valid spec and every number can be checked against its source line by line. Unknown
keys are rejected. ``load_spec`` reads a YAML (or JSON) file; ``parse_spec`` takes a mapping.

``ModelSpec`` is a frozen dataclass. What a file may hold is checked by a pydantic model built
from these fields on first use (``kvplan.model.spec_schema``: strict integers, the bounds below,
unknown keys, every problem with its line), so a command that reads only bundled specs, which
the test suite validates that way, never imports pydantic and starts in a fraction of the
time. Each field's type is one of the names below (``Dim``, ``Tokens``...): a plain ``int`` or
``str`` here, a bounded strict type in the schema.

A spec resolves once, when built, into its per-layer cache schedule (``spec.layers``): a
tuple of frozen ``kvplan.model.layers`` objects, and the same grouped by identical layers
(``spec.layer_groups``), which is what the estimator iterates over.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any

from kvplan.arguments import as_optional_str, as_path, as_str
from kvplan.errors import SpecError
from kvplan.model.layers import (
    AttentionAndState,
    ChunkedLocalAttention,
    FullAttention,
    LayerCache,
    LayerKind,
    LayerTerm,
    MLALatent,
    NoCache,
    SharedKV,
    SlidingWindowAttention,
    layer_term,
    with_attention_conv,
)
from kvplan.model.limits import (
    MAX_LAYERS,
    Count,
    Dim,
    Flag,
    Layers,
    Name,
    Parameters,
    Text,
    Tokens,
    WeightBytes,
)
from kvplan.model.multimodal import Multimodal
from kvplan.model.sparse import SPARSE_KINDS, sparse_layer
from kvplan.model.spec_dtypes import canonical_dtype as _canonical_dtype
from kvplan.model.spec_dtypes import model_dtype as _model_dtype
from kvplan.model.states import linear_state, mamba_state, short_conv_state
from kvplan.units import DType, resolve_dtype
from kvplan.validation import check_kind, read_yaml


def _key(description: str, default: Any = MISSING, **bounds: int) -> Any:
    """A spec field: its description (docs/spec.md, the JSON Schema) and any length bounds."""
    return field(default=default, metadata={"description": description, **bounds})


@dataclass(frozen=True, kw_only=True)
class StoredWeights:
    """Weight bytes as one file stores them, split as the engines place them: the token
    embedding (llama.cpp keeps it on the host), each decoder layer, and the output side (the
    head, 0 when tied, plus the final norm and other tensors outside the layers)."""

    embedding_bytes: WeightBytes = _key("The token embedding's bytes.")
    layers_bytes: tuple[WeightBytes, ...] = _key("Each decoder layer's bytes.")
    output_bytes: WeightBytes = _key("The output head, final norm and other bytes.")
    format: Name = _key("What the file calls its weight format (Q4_K_M...).")


@dataclass(frozen=True, kw_only=True)
class ModelSpec:
    """A model's KV-cache geometry and metadata. All sizes are integers; see docs/spec.md.

    Built by ``load_spec``/``parse_spec`` (checked as a file is) or ``ModelSpec(...)`` (the
    same check); ``ModelSpec.from_checked`` skips it for values checked already."""

    name: Name = _key("Canonical short name; a bundled spec's file name.", min_length=1)
    hf_id: Name | None = _key("Hugging Face repo id the numbers come from.", None)
    aliases: tuple[Name, ...] = _key("Other names that resolve to this spec.", ())
    source: Text | None = _key("Where each number came from.", None)
    model_type: Name | None = _key("config.json `model_type`.", None)
    num_hidden_layers: Layers = _key("Decoder layers, of every kind.")
    hidden_size: Dim | None = _key(
        "Model width; gives head_dim = hidden_size / num_attention_heads.",
        None,
    )
    num_attention_heads: Dim = _key("Query heads.")
    num_key_value_heads: Dim | None = _key(
        "KV heads (GQA/MQA); absent means num_attention_heads (MHA).",
        None,
    )
    head_dim: Dim | None = _key("K head dim; absent means hidden_size / num_attention_heads.", None)
    v_head_dim: Dim | None = _key(
        "V head dim when it differs from K's (MLA: the decompressed V).",
        None,
    )
    torch_dtype: Text = _key(
        "Model dtype (float32, float16, bfloat16); the default KV cache dtype.",
    )
    max_position_embeddings: Tokens | None = _key("Longest context the model is trained for.", None)
    layer_types: tuple[LayerKind, ...] | None = _key(
        "Explicit per-layer kinds, one per layer (Hugging Face `layer_types`).",
        None,
        max_length=MAX_LAYERS,
    )
    layer_types_pattern: tuple[LayerKind, ...] | None = _key(
        "Compact form: a list of kinds repeated from layer 0 to fill all layers.",
        None,
        min_length=1,
        max_length=MAX_LAYERS,
    )
    sliding_window: Tokens | None = _key(
        "Window of sliding layers; alone (no layer kinds given), every layer slides.",
        None,
    )
    use_sliding_window: Flag | None = _key("Qwen2: false means sliding_window is ignored.", None)
    max_window_layers: Count | None = _key(
        "Qwen2: with use_sliding_window, layers from this index on slide.",
        None,
    )
    attention_chunk_size: Tokens | None = _key(
        "Chunk of chunked local attention layers (Llama 4).",
        None,
    )
    num_kv_shared_layers: Count | None = _key(
        "Gemma 3n/4: the last this many layers reuse the K and V of the last earlier"
        " layer of their kind and keep no cache.",
        None,
    )
    num_key_value_heads_per_layer: tuple[Dim, ...] | None = _key(
        "KV heads of each layer when they differ (DeciLM block_configs, OpenELM);"
        " one per layer, overriding num_key_value_heads.",
        None,
        max_length=MAX_LAYERS,
    )
    head_dim_per_layer: tuple[Dim, ...] | None = _key(
        "K and V head dim of each layer when they differ; one per layer.",
        None,
        max_length=MAX_LAYERS,
    )
    global_head_dim: Dim | None = _key(
        "Gemma 4: head dim of the full_attention layers (others: head_dim).",
        None,
    )
    num_global_key_value_heads: Dim | None = _key(
        "Gemma 4: KV heads of the full_attention layers.",
        None,
    )
    kv_lora_rank: Dim | None = _key(
        "MLA latent rank; with it, attention layers cache one latent.",
        None,
    )
    qk_rope_head_dim: Dim | None = _key("MLA decoupled RoPE key dims.", None)
    qk_nope_head_dim: Dim | None = _key("MLA per-head non-RoPE dims.", None)
    q_lora_rank: Dim | None = _key("MLA query rank (no cache).", None)
    index_head_dim: Dim | None = _key(
        "DeepSeek-V3.2: the sparse-attention indexer's key dim, cached in fp8 with"
        " an fp32 scale per 128 values beside each MLA latent.",
        None,
    )
    index_dim_per_layer: tuple[Count, ...] | None = _key(
        "Each MLA layer's indexer key dim, 0 where the layer keeps none (HY V4's shared-indexer"
        " layers); one per layer, overriding index_head_dim.",
        None,
        max_length=MAX_LAYERS,
    )
    index_kpool: Count | None = _key(
        "Tokens per indexer key of an indexed_attention layer: GLM-5.3's fp8 key a pool,"
        " Qwen4Exp's bf16 compressed key (indexer_compress_ratio).",
        None,
    )
    index_rope_positions: Flag | None = _key(
        "Qwen4Exp: the QSA ring keeps each raw key's 3 int64 MRoPE positions beside it.", None
    )
    ple_layers: tuple[Count, ...] | None = _key(
        "Qwen4Exp: the linear_attention layers (0-based) that also keep the PLE conv tail.",
        None,
        max_length=MAX_LAYERS,
    )
    ple_conv_values: Dim | None = _key(
        "Qwen4Exp: values of one PLE conv tail, in the conv tail's dtype, whole on every rank.",
        None,
    )
    compress_ratios: tuple[Count, ...] | None = _key(
        "DeepSeek V4: each compressed_attention layer's tokens per compressed entry"
        " (0: the sliding window only).",
        None,
        max_length=MAX_LAYERS,
    )
    mamba_d_state: Dim | None = _key("Mamba SSM state size.", None)
    mamba_d_conv: Dim | None = _key("Mamba convolution kernel.", None)
    mamba_expand: Dim | None = _key("Mamba1: d_inner = mamba_expand x hidden_size.", None)
    mamba_n_heads: Dim | None = _key("Mamba2 heads.", None)
    mamba_d_head: Dim | None = _key("Mamba2 head dim.", None)
    mamba_n_groups: Dim | None = _key("Mamba2 B/C groups.", None)
    linear_num_key_heads: Dim | None = _key("Gated delta net K heads.", None)
    linear_num_value_heads: Dim | None = _key("Gated delta net V heads.", None)
    linear_key_head_dim: Dim | None = _key("Gated delta net K dim.", None)
    linear_value_head_dim: Dim | None = _key("Gated delta net V dim.", None)
    linear_conv_kernel_dim: Dim | None = _key("Gated delta net convolution kernel.", None)
    conv_L_cache: Dim | None = _key(
        "LFM2: short_conv kernel (absent: 3, as Lfm2Config); each such layer keeps"
        " kernel - 1 positions.",
        None,
    )
    conv_dim: Dim | None = _key(
        "LFM2: channels of the short convolution (absent: hidden_size).",
        None,
    )
    attention_conv_kernel: Dim | None = _key(
        "Inkling: each attention layer also keeps kernel - 1 positions of a short conv over"
        " K, V and its two outputs: 2 x kv_heads x head_dim + 2 x hidden_size channels.",
        None,
    )
    state_dtype: Text = _key("dtype of recurrent state.", "float32")
    conv_dtype: Text | None = _key(
        "dtype of a recurrent layer's convolution tail when not state_dtype (Kimi delta"
        " attention, Nemotron-H Puzzle's Mamba2: the model dtype, beside a float32 state).",
        None,
    )
    mtp_layers: Count | None = _key(
        "Multi-token-prediction modules the checkpoint carries beside num_hidden_layers (its"
        " config's num_nextn_predict_layers or mtp_num_hidden_layers): the draft layers of"
        " vLLM's --speculative-config method mtp. Not in num_parameters.",
        None,
    )
    num_parameters: Parameters | None = _key("Total parameters.", None)
    num_active_parameters: Parameters | None = _key("Parameters active per token (MoE).", None)
    num_expert_parameters: Parameters | None = _key(
        "Parameters in the routed experts (MoE): what expert parallelism splits across ranks.", None
    )
    weight_dtype: Text | None = _key(
        "Checkpoint weight format when not torch_dtype (fp8, mxfp4, ...).", None
    )
    num_quantized_parameters: Parameters | None = _key(
        "Parameters stored in weight_dtype (e.g. MoE experts); the rest are in"
        " torch_dtype. Absent: all of them.",
        None,
    )
    vocab_size: Dim | None = _key("Vocabulary size.", None)
    intermediate_size: Dim | None = _key(
        "MLP width (dense layers; per expert for MoE models that set only it).", None
    )
    tie_word_embeddings: Flag | None = _key(
        "Input embedding and output head share one matrix.", None
    )
    stored_weight_bytes: StoredWeights | None = _key(
        "Weight bytes exactly as a file stores them (a GGUF tensor table): used"
        " as they are unless a dtype or quantization re-formats the weights.",
        None,
    )
    multimodal: Multimodal | None = _key(
        "A multimodal model's encoder: modalities, parameters, dtype and the most tokens an"
        " item yields (the keys: docs/spec.md, kvplan.model.multimodal).",
        None,
    )

    # Resolved once, when built (not fields: not compared, dumped or hashed).
    _layers: tuple[LayerCache, ...] = field(init=False, repr=False, compare=False)
    _groups: tuple[tuple[LayerCache, int], ...] = field(init=False, repr=False, compare=False)
    _terms: dict[tuple[str, str], tuple[LayerTerm, ...]] = field(
        init=False, repr=False, compare=False
    )
    _resolved_from: str | None = field(init=False, repr=False, compare=False)
    _provenance: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        from kvplan.model.spec_schema import check_spec

        checked: ModelSpec = check_spec(self)  # raises SpecError naming the field, as a file
        for name in (*_DEFAULTS, "_layers", "_groups", "_terms", "_resolved_from", "_provenance"):
            object.__setattr__(self, name, getattr(checked, name))

    @classmethod
    def from_checked(cls, values: Mapping[str, Any]) -> ModelSpec:
        """A spec of values checked already (a bundled spec, which the test suite validates
        as a file; a schema's output): no type or bound checks, only the layer schedule,
        which raises ValueError naming the field when the keys do not fit together. Lists
        become tuples and a ``stored_weight_bytes`` mapping a ``StoredWeights``."""
        unknown = values.keys() - _DEFAULTS.keys()
        if unknown:
            raise ValueError(f"{sorted(unknown)[0]}: unknown key")
        spec = object.__new__(cls)
        for name, default in _DEFAULTS.items():
            value = values.get(name, default)
            if value is MISSING:
                raise ValueError(f"{name}: required key is missing")
            if isinstance(value, list):
                value = tuple(value)
            elif name == "stored_weight_bytes" and isinstance(value, Mapping):
                value = _stored_from_checked(value)
            object.__setattr__(spec, name, value)
        spec._resolve()
        return spec

    def model_dump(
        self, *, mode: str = "python", exclude_none: bool = False, exclude_defaults: bool = False
    ) -> dict[str, Any]:
        """The fields as a dict, in declaration order; ``mode="json"`` gives lists for tuples.
        (The names and options are pydantic's, which earlier releases' ``ModelSpec`` was.)"""
        return _dump(self, _DEFAULTS, mode, exclude_none, exclude_defaults)

    def model_copy(self, *, update: Mapping[str, Any] | None = None) -> ModelSpec:
        """A copy with ``update`` applied as given, unchecked, and the same layer schedule
        and provenance (pydantic's ``model_copy``): for keys that do not change the cache,
        such as the weight format a name gives."""
        copy = object.__new__(ModelSpec)
        copy.__dict__.update(self.__dict__)
        copy.__dict__.update(update or {})
        return copy

    @classmethod
    def model_validate(cls, data: object) -> ModelSpec:
        """``parse_spec(data)``: kept for callers of the pydantic-era name."""
        return parse_spec(data)

    def _resolve(self) -> None:
        """Canonical dtype names, then the per-layer schedule (ValueError naming the field)."""
        set_ = object.__setattr__
        set_(self, "torch_dtype", _model_dtype(self.torch_dtype))
        set_(self, "state_dtype", _canonical_dtype(self.state_dtype, "state_dtype"))
        for key in ("weight_dtype", "conv_dtype"):
            if getattr(self, key) is not None:
                set_(self, key, _canonical_dtype(getattr(self, key), key))
        kv, heads = self.num_key_value_heads, self.num_attention_heads
        if kv is not None and (kv > heads or heads % kv):
            # GQA shares each KV head by heads / kv query heads: it must be a whole number.
            relation = "is more than" if kv > heads else "does not divide"
            raise ValueError(f"num_key_value_heads: {kv} {relation} num_attention_heads {heads}")
        stored = self.stored_weight_bytes
        if stored is not None and len(stored.layers_bytes) != self.num_hidden_layers:
            raise ValueError(
                f"stored_weight_bytes.layers_bytes: {len(stored.layers_bytes)} entries for"
                f" {self.num_hidden_layers} layers (num_hidden_layers)"
            )
        conv = self.attention_conv_kernel, self.hidden_size, self.conv_dtype or self.torch_dtype
        layers = self._shared(tuple(self._layer_for(i, k) for i, k in enumerate(self._kinds())))
        layers = tuple(with_attention_conv(x, *conv[:2], resolve_dtype(conv[2])) for x in layers)
        counts: dict[LayerCache, int] = {}
        for layer in layers:
            counts[layer] = counts.get(layer, 0) + 1
        set_(self, "_layers", layers)
        set_(self, "_groups", tuple(counts.items()))
        set_(self, "_terms", {})
        set_(self, "_resolved_from", None)
        set_(self, "_provenance", ())

    @property
    def resolved_from(self) -> str | None:
        """The name the user typed when it was read as a variant of this spec, else None."""
        return self._resolved_from

    @property
    def provenance(self) -> tuple[str, ...]:
        """How the spec was reached, one line each: how a typed name was read, which figures
        were computed rather than read (a parameter count from the config's shapes). Empty for
        a spec asked for by its own name or path."""
        return self._provenance

    def with_provenance(self, *lines: str, resolved_from: str | None = None) -> ModelSpec:
        """A copy carrying more provenance lines (and the typed name, when given); the cache
        geometry and every field stay as they are."""
        copy = self.model_copy()
        object.__setattr__(copy, "_provenance", (*self._provenance, *lines))
        typed = resolved_from if resolved_from is not None else self._resolved_from
        object.__setattr__(copy, "_resolved_from", typed)
        return copy

    @property
    def layers(self) -> tuple[LayerCache, ...]:
        """The resolved cache of every layer, in layer order."""
        return self._layers

    @property
    def layer_groups(self) -> tuple[tuple[LayerCache, int], ...]:
        """Identical layers grouped, in order of first appearance: ``(layer, num_layers)``."""
        return self._groups

    def layer_terms(self, k_dtype: DType, v_dtype: DType) -> tuple[LayerTerm, ...]:
        """Each layer group with its per-layer costs in these dtypes (memoised per dtype pair)."""
        key = (k_dtype.name, v_dtype.name)
        memo = self._terms
        terms = memo.get(key)
        if terms is None:
            terms = tuple(layer_term(layer, n, k_dtype, v_dtype) for layer, n in self._groups)
            memo[key] = terms
        return terms

    def layer_runs(self) -> tuple[tuple[int, int, LayerCache], ...]:
        """Consecutive identical layers: ``(first_index, last_index, layer)``, for display."""
        runs: list[tuple[int, int, LayerCache]] = []
        for i, layer in enumerate(self._layers):
            if runs and runs[-1][2] == layer:
                runs[-1] = (runs[-1][0], i, layer)
            else:
                runs.append((i, i, layer))
        return tuple(runs)

    @property
    def kv_heads(self) -> int:
        """KV heads of the attention layers (``num_attention_heads`` when not stated)."""
        return self.num_key_value_heads or self.num_attention_heads

    def _kinds(self) -> tuple[str, ...]:
        n = self.num_hidden_layers
        for key in ("num_key_value_heads_per_layer", "head_dim_per_layer", "index_dim_per_layer"):
            given = getattr(self, key)
            if given is not None and len(given) != n:
                raise ValueError(f"{key}: has {len(given)} entries but num_hidden_layers is {n}")
        return self._layer_kinds()

    def _shared(self, layers: tuple[LayerCache, ...]) -> tuple[LayerCache, ...]:
        """The last ``num_kv_shared_layers`` layers read the cache of the last earlier layer of
        their kind (vLLM's ``kv_sharing_target_layer_name``); one without such a layer keeps
        its own, as vLLM does."""
        shared = self.num_kv_shared_layers or 0
        n = len(layers)
        if shared >= n:
            raise ValueError(f"num_kv_shared_layers: {shared} leaves none of the {n} layers")
        first = n - shared
        earlier = {type(layer) for layer in layers[:first]}
        return tuple(
            SharedKV() if i >= first and type(layer) in earlier else layer
            for i, layer in enumerate(layers)
        )

    def _layer_kinds(self) -> tuple[str, ...]:
        n = self.num_hidden_layers
        if self.layer_types is not None and self.layer_types_pattern is not None:
            raise ValueError("layer_types and layer_types_pattern: give one of them, not both")
        if self.layer_types is not None:
            if len(self.layer_types) != n:
                raise ValueError(
                    f"layer_types: has {len(self.layer_types)} entries but num_hidden_layers is {n}"
                )
            return self.layer_types
        if self.layer_types_pattern is not None:
            p = self.layer_types_pattern
            return tuple(p[i % len(p)] for i in range(n))
        if self.sliding_window is not None and self.use_sliding_window is not False:
            # Mistral: every layer slides. Qwen2 with use_sliding_window: from max_window_layers.
            first = (self.max_window_layers or 0) if self.use_sliding_window else 0
            return tuple("full_attention" if i < first else "sliding_attention" for i in range(n))
        if self.attention_chunk_size is not None:
            return ("chunked_attention",) * n
        return ("full_attention",) * n

    def _layer_for(self, i: int, kind: str) -> LayerCache:
        match kind:
            case "full_attention" if self.kv_lora_rank is not None:
                if self.qk_rope_head_dim is None:
                    raise ValueError("qk_rope_head_dim: required with kv_lora_rank (MLA)")
                index = d[i] if (d := self.index_dim_per_layer) else self.index_head_dim or 0
                return MLALatent(self.kv_lora_rank, self.qk_rope_head_dim, index)
            case "full_attention":
                heads = self.num_global_key_value_heads or self._kv_heads(i)
                return FullAttention(heads, *self._head_dims(i, self.global_head_dim))
            case "sliding_attention":
                if self.sliding_window is None:
                    raise ValueError("sliding_window: required by sliding_attention layers")
                return SlidingWindowAttention(
                    self._kv_heads(i), *self._head_dims(i), window=self.sliding_window
                )
            case "chunked_attention":
                if self.attention_chunk_size is None:
                    raise ValueError("attention_chunk_size: required by chunked_attention layers")
                return ChunkedLocalAttention(
                    self._kv_heads(i), *self._head_dims(i), chunk=self.attention_chunk_size
                )
            case "mamba":
                return mamba_state(self)
            case "linear_attention":
                return linear_state(self, i)
            case "short_conv":
                return short_conv_state(self)
            case kind if kind in SPARSE_KINDS:
                return sparse_layer(self, i, kind)
            case "attention_mamba":
                attention = FullAttention(self._kv_heads(i), *self._head_dims(i))
                return AttentionAndState(attention, mamba_state(self))
            case _:
                return NoCache()

    def _kv_heads(self, i: int) -> int:
        per_layer = self.num_key_value_heads_per_layer
        return self.kv_heads if per_layer is None else per_layer[i]

    def _head_dims(self, i: int = 0, override: int | None = None) -> tuple[int, int]:
        if override is not None:
            return override, override
        if self.head_dim_per_layer is not None:
            return self.head_dim_per_layer[i], self.head_dim_per_layer[i]
        head_dim = self.head_dim
        if head_dim is None:
            if self.hidden_size is None:
                raise ValueError("head_dim: required when hidden_size is not given")
            if self.hidden_size % self.num_attention_heads:
                raise ValueError(
                    f"head_dim: required, since hidden_size {self.hidden_size} is not a multiple"
                    f" of num_attention_heads {self.num_attention_heads}"
                )
            head_dim = self.hidden_size // self.num_attention_heads
        return head_dim, self.v_head_dim or head_dim


def _field_defaults(cls: type) -> dict[str, Any]:
    return {f.name: f.default for f in fields(cls) if f.init}


#: Every spec key, in order, with its default (``MISSING`` when required).
_DEFAULTS = _field_defaults(ModelSpec)
_STORED_DEFAULTS = _field_defaults(StoredWeights)
#: The spec keys, for hints and the docs.
SPEC_KEYS = tuple(_DEFAULTS)


def _stored_from_checked(values: Mapping[str, Any]) -> StoredWeights:
    """``StoredWeights`` of checked values (``ModelSpec.from_checked``'s counterpart)."""
    stored = object.__new__(StoredWeights)
    for name in _STORED_DEFAULTS:
        value = values[name]
        object.__setattr__(stored, name, tuple(value) if isinstance(value, list) else value)
    return stored


def _dump(
    obj: object, names: Mapping[str, Any], mode: str, exclude_none: bool, exclude_defaults: bool
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, default in names.items():
        value = getattr(obj, name)
        if (exclude_none and value is None) or (exclude_defaults and value == default):
            continue
        if isinstance(value, StoredWeights):
            value = _dump(value, _STORED_DEFAULTS, mode, exclude_none, exclude_defaults)
        elif mode == "json" and isinstance(value, tuple):
            value = list(value)
        out[name] = value
    return out


def parse_spec(data: object, path: str = "<spec>", text: str | None = None) -> ModelSpec:
    """Validate a mapping (a parsed YAML or config.json) into a ModelSpec.

    Raises SpecError naming ``path``, the field and, when ``text`` is the file's YAML, the line
    (ArgumentTypeError, a TypeError, when ``path`` or ``text`` is no str).
    """
    as_str(path, "path", "a str naming the spec in errors")
    as_optional_str(text, "text", "the file's YAML text (a str) or None")
    if not isinstance(data, Mapping):
        kind = "empty" if data is None else f"a {type(data).__name__}"
        raise SpecError(path, [f"a spec must be a mapping of keys to values, this is {kind}"])
    check_kind(dict(data), path, _DEFAULTS, "docs/spec.md")
    if "name" not in data:
        data = {"name": Path(path).stem, **data}
    from kvplan.model.spec_schema import validated_spec

    spec: ModelSpec = validated_spec(ModelSpec, data, path, text)
    return spec


def load_spec(path: str | Path) -> ModelSpec:
    """Read and validate a spec file (YAML; JSON is YAML too). Raises SpecError
    (ArgumentTypeError, a TypeError, for a ``path`` that is neither a str nor a Path)."""
    data, text = read_yaml(as_path(path, "path"))
    return parse_spec(data, str(path), text)
