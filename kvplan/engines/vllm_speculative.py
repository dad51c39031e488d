"""vLLM's ``--speculative-config``, as it changes the KV cache and the memory around it.

Read from vLLM's source for v0.24.0, v0.27.1, v0.29.0 and v0.32.0 (vllm/config/speculative.py,
vllm/config/vllm.py, vllm/v1/kv_cache_interface.py, vllm/v1/core/kv_cache_utils.py,
vllm/model_executor/layers/mamba/abstract.py and mamba_utils.py, the ``*_mtp.py`` models):

- The JSON names ``method`` (``mtp``, ``eagle``, ``eagle3``, ``draft_model``, ``ngram``,
  ``ngram_gpu``, ``suffix``; a model's own MTP name such as ``qwen3_5_mtp`` or
  ``deepseek_mtp`` is read as ``mtp``, as vLLM does; without a method a ``model`` is a
  ``draft_model``), ``num_speculative_tokens`` k and, for a separate drafter, ``model``.
- The drafter's attention layers join the target's in the cache spec, so they are paged and
  grouped like any other layer. ``mtp``: the checkpoint's own modules (``mtp_layers``: the
  config's ``mtp_num_hidden_layers`` or ``num_nextn_predict_layers``), each a decoder layer
  of the target's attention (Qwen3.5: full attention with the target's K/V heads; DeepSeek:
  an MLA latent); k above their count runs the same modules again and adds no layer.
  ``eagle``, ``eagle3``, ``draft_model``: every layer of the drafter's own config. The
  n-gram and suffix methods have no layers.
- Recurrent state (Mamba2, gated delta net, short conv): a request holds k more state blocks
  (``MambaSpec.num_speculative_blocks``), and each convolution tail keeps k more positions
  (``conv_kernel - 1 + num_spec``); Mamba1 and linear-attention states are unchanged.
- From v0.29.0, with more than one MTP module run (``min(mtp_layers, k) > 1``), sliding
  layers keep k - 1 more tokens below their window (``extra_retained_tokens``).
- The budget: the drafter's weights (an MTP module is taken as one of the target's decoder
  layers plus its ``2 x hidden -> hidden`` projection, the embeddings and head shared with
  the target as vLLM's proposer shares them; a separate drafter its own weights), and CUDA
  graphs for decode batches of ``1 + k`` tokens a request.

Not modelled, refused by name: the 0.20 and older lines (not read), pipeline parallelism with
a drafter, a drafter's own ``draft_tensor_parallel_size``, ``quantization`` or
``kv_cache_dtype``, and the methods ``medusa``, ``mlp_speculator``, ``dflash``, ``dspark``,
``extract_hidden_states`` and ``custom_class``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from kvplan.errors import UnitError
from kvplan.model.layers import (
    AttentionAndState,
    FullAttention,
    LayerCache,
    MLALatent,
    RecurrentState,
)
from kvplan.model.spec import ModelSpec

__all__ = [
    "METHODS",
    "SPECULATIVE_LINES",
    "Speculative",
    "draft_layers",
    "parse_speculative_config",
    "with_speculative_tail",
]

#: the methods modelled, as vLLM names them
METHODS = ("mtp", "eagle", "eagle3", "draft_model", "ngram", "ngram_gpu", "suffix")
#: methods whose drafter is a model of its own, named by ``model``
DRAFT_MODEL_METHODS = ("eagle", "eagle3", "draft_model")
#: vLLM's methods not modelled here
UNMODELLED = ("medusa", "mlp_speculator", "dflash", "dspark", "extract_hidden_states")
#: the lines whose speculative decoding was read (v0.21.0 on)
SPECULATIVE_LINES = ("0.24", "0.25", "0.27", "0.28", "0.29", "0.32", "0.33")
#: lines whose sliding layers keep k - 1 more tokens with several MTP modules (v0.29.0)
RETAINED_LINES = ("0.29", "0.32", "0.33")
#: the most speculative tokens taken (vLLM bounds none; released configs use 1 to 8)
MAX_SPECULATIVE_TOKENS = 64
#: keys vLLM takes that size nothing kvplan models
_IGNORED = (
    "prompt_lookup_max",
    "prompt_lookup_min",
    "disable_padded_drafter_batch",
    "rejection_sample_method",
    "draft_sample_method",
    "revision",
    "code_revision",
    "max_model_len",
    "enforce_eager",
    "suffix_decoding_max_tree_depth",
    "suffix_decoding_max_cached_requests",
    "suffix_decoding_max_spec_factor",
    "suffix_decoding_min_token_prob",
)
#: keys that change memory in ways not modelled
_REFUSED = (
    "draft_tensor_parallel_size",
    "tensor_parallel_size",
    "quantization",
    "kv_cache_dtype",
    "num_speculative_tokens_per_batch_size",
    "speculative_token_tree",
    "parallel_drafting",
)
_OPTION = "--speculative-config"


@dataclass(frozen=True, slots=True)
class Speculative:
    """A ``--speculative-config`` as vLLM resolves it: the method, k, and the drafter's spec
    for the methods that name a model (None otherwise)."""

    method: str
    num_speculative_tokens: int
    draft: ModelSpec | None = None

    @property
    def decode_query_len(self) -> int:
        """Tokens a request decodes in one step (``uniform_decode_query_len``): 1 + k."""
        return 1 + self.num_speculative_tokens


def parse_speculative_config(text: str, *, paths: bool = True) -> Speculative:
    """The JSON of ``--speculative-config``; a drafter's ``model`` is read by
    ``kvplan.catalog.lookup.load_model`` (``paths=False``: a name only, never a file, for a
    config found inside an input file). Raises UnitError naming the key and what is taken."""
    try:
        data = json.loads(text)
    except (TypeError, ValueError):
        raise UnitError(
            f"{_OPTION}: not JSON; write it as vLLM takes it, e.g."
            ' \'{"method": "mtp", "num_speculative_tokens": 3}\''
        ) from None
    if not isinstance(data, dict):
        raise UnitError(f"{_OPTION}: a JSON object is taken, not {type(data).__name__}")
    for key in data:
        if key in _REFUSED:
            raise UnitError(f"{_OPTION} {key}: not modelled (the drafter runs as the target does)")
        if key not in (*_IGNORED, "method", "num_speculative_tokens", "model"):
            taken = ", ".join(("method", "num_speculative_tokens", "model", *_IGNORED))
            raise UnitError(f"{_OPTION}: unknown key {str(key)[:40]!r}; taken: {taken}")
    method = _method(data.get("method"), data.get("model"))
    k = data.get("num_speculative_tokens")
    if k is not None and (
        not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_SPECULATIVE_TOKENS
    ):
        raise UnitError(
            f"{_OPTION} num_speculative_tokens {str(k)[:20]}: a whole number from 1 to"
            f" {MAX_SPECULATIVE_TOKENS}"
        )
    draft = _draft(method, data.get("model"), paths)
    if k is None and method != "mtp":
        raise UnitError(f"{_OPTION}: method {method} needs num_speculative_tokens")
    return Speculative(method, k or 0, draft)


def _method(method: Any, model: Any) -> str:
    if method is None:
        return "ngram" if model in ("ngram", "[ngram]") else "draft_model"
    if not isinstance(method, str):
        raise UnitError(f"{_OPTION} method: a string, one of {', '.join(METHODS)}")
    if method.endswith("_mtp"):
        return "mtp"  # vLLM's deprecated per-model names
    if method == "[ngram]":
        return "ngram"
    if method in UNMODELLED or method == "custom_class":
        raise UnitError(f"{_OPTION} method {method}: not modelled; modelled: {', '.join(METHODS)}")
    if method not in METHODS:
        raise UnitError(f"{_OPTION} method {method[:40]!r}: vLLM takes {', '.join(METHODS)}")
    return method


def _draft(method: str, model: Any, paths: bool) -> ModelSpec | None:
    if method not in DRAFT_MODEL_METHODS:
        return None
    if not isinstance(model, str) or not model.strip():
        raise UnitError(f"{_OPTION}: method {method} needs model, the drafter's name")
    from kvplan.catalog.lookup import load_model

    return load_model(model, paths=paths)


def with_default_tokens(speculative: Speculative, spec: ModelSpec) -> Speculative:
    """``mtp`` without num_speculative_tokens runs each module once: k = ``mtp_layers``."""
    if speculative.num_speculative_tokens:
        return speculative
    return replace(speculative, num_speculative_tokens=_mtp_layers(spec))


#: model types whose MTP drafter vLLM builds with a default count of modules when the config
#: names none (vllm/model_executor/models/qwen3_next_mtp.py: ``getattr(config,
#: "num_nextn_predict_layers", 1)``; Qwen3-Next's released config names none)
DEFAULT_MTP_LAYERS = {"qwen3_next": 1}


def _mtp_layers(spec: ModelSpec) -> int:
    if not spec.mtp_layers and spec.model_type in DEFAULT_MTP_LAYERS:
        return DEFAULT_MTP_LAYERS[spec.model_type]
    if not spec.mtp_layers:
        raise UnitError(
            f"{_OPTION} method mtp: {spec.name} names no multi-token-prediction layers"
            " (its config's num_nextn_predict_layers or mtp_num_hidden_layers; spec key"
            " mtp_layers)"
        )
    return spec.mtp_layers


def draft_layers(speculative: Speculative, spec: ModelSpec) -> tuple[LayerCache, ...]:
    """The drafter's cache layers, registered after the target's."""
    if speculative.draft is not None:
        return speculative.draft.layers
    if speculative.method != "mtp":
        return ()
    count = _mtp_layers(spec)
    attention = [
        layer.attention if isinstance(layer, AttentionAndState) else layer for layer in spec.layers
    ]
    for layer in reversed(attention):
        if type(layer) is FullAttention or (type(layer) is MLALatent and not layer.index_head_dim):
            return (layer,) * count
    raise UnitError(
        f"{_OPTION} method mtp: {spec.name}'s MTP layer keeps a cache other than full attention"
        " or an MLA latent: not modelled"
    )


def retained_tokens(speculative: Speculative, spec: ModelSpec, version: str) -> int:
    """Tokens sliding layers keep below their window: k - 1 with several MTP modules run."""
    if version not in RETAINED_LINES or speculative.method != "mtp":
        return 0
    k = speculative.num_speculative_tokens
    return k - 1 if min(_mtp_layers(spec), k) > 1 else 0


def with_speculative_tail(layer: LayerCache, spec: ModelSpec, k: int) -> LayerCache:
    """A recurrent layer whose convolution tail keeps ``k`` more positions."""
    if isinstance(layer, AttentionAndState):
        return replace(layer, state=_longer_tail(layer.state, spec, k))
    if isinstance(layer, RecurrentState):
        return _longer_tail(layer, spec, k)
    return layer


def _longer_tail(state: RecurrentState, spec: ModelSpec, k: int) -> RecurrentState:
    kernel = _conv_kernel(state, spec)
    if k == 0 or kernel is None or kernel <= 1:
        return state
    channels, rest = divmod(state.conv_values, kernel - 1)
    if rest:  # pragma: no cover - every builder counts channels x (kernel - 1)
        return state
    return replace(state, conv_values=channels * (kernel - 1 + k))


def _conv_kernel(layer: RecurrentState, spec: ModelSpec) -> int | None:
    """The convolution kernel of a state whose tail grows with k; None for the others."""
    match layer.kind:
        case "mamba" if spec.mamba_n_heads is not None:
            return spec.mamba_d_conv  # Mamba2 (mamba2_state_shape); Mamba1 keeps its tail
        case "short_conv":
            return spec.conv_L_cache or 3
        case "linear_attention":
            return spec.linear_conv_kernel_dim
    return None


def draft_weight_bytes(
    speculative: Speculative, spec: ModelSpec, layers_bytes: int, model_dtype_bytes: int
) -> int:
    """The drafter's weights on one GPU before tensor parallelism: an MTP module per
    ``mtp_layers`` (one decoder layer of ``layers_bytes / num_hidden_layers`` and its
    ``2 x hidden x hidden`` projection in the model dtype), or a drafter's own weights."""
    if speculative.method != "mtp":
        return 0  # a separate drafter's are its spec's (kvplan.engines.vllm)
    hidden = spec.hidden_size or 0
    layer = layers_bytes // max(1, spec.num_hidden_layers)
    return _mtp_layers(spec) * (layer + 2 * hidden * hidden * model_dtype_bytes)


def check_line(version: str, pipeline_parallel_size: int) -> None:
    """Refuse a line or a deployment whose speculative decoding is not modelled."""
    if version not in SPECULATIVE_LINES:
        raise UnitError(
            f"{_OPTION}: not modelled for vLLM's {version} release line (modelled for:"
            f" {', '.join(SPECULATIVE_LINES)})"
        )
    if pipeline_parallel_size > 1:
        raise UnitError(f"{_OPTION} with --pipeline-parallel-size > 1: not modelled")
