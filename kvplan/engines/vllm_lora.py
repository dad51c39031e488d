"""vLLM's LoRA slots: the stacks ``--enable-lora --max-loras N --max-lora-rank R`` allocates
on each GPU when it wraps the model, before the KV pool is profiled.

Read for v0.32.0 (``lora/layers/base_linear.py``, ``column_parallel_linear.py``,
``row_parallel_linear.py``, ``vocab_parallel_embedding.py``, ``logits_processor.py``,
``lora/model_manager.py``, ``lora/utils.py``, ``v1/cudagraph_dispatcher.py``). The stacks are
made while the model loads, so they count in "Model loading took" and come out of the pool
byte for byte. In the LoRA dtype (``auto``: the model dtype), per wrapped module and slot:

- a column-parallel linear (``qkv_proj`` 3 slices, ``gate_up_proj`` 2): A ``(rank, in)`` a
  slice, B ``(out_slice / tp, rank)``; with KV heads fewer than TP, a rank keeps one KV head;
- a row-parallel linear (``o_proj``, ``down_proj``): A ``(rank, in / tp)``, B ``(out, rank)``;
- ``--fully-sharded-loras`` splits the column modules' A rank and the row modules' B output;
- ``embed_tokens``: A ``(vocab, rank)``, B ``(hidden, rank)``; ``lm_head`` (its logits
  processor): A ``(rank, hidden)``, B ``(vocab, rank)``, whole on every rank. vLLM wraps them
  by default only for model classes that list ``embedding_modules`` (Llama, Qwen3, Mixtral,
  Granite, ... not Mistral, Qwen2 or Gemma).

CUDA graphs are captured for no LoRA and for ``max_loras + 1`` active ones
(``cudagraph_specialize_lora``, on by default): twice the graphs.

Checked on the vLLM 0.32.0 CPU build (tests/data/vllm_lora_0.32.0.json): each stack's bytes
exact. Not modelled, refused by name: MoE experts (their own stacks per expert), MLA and
Mamba or linear-attention mixers (other linears). Not counted: Punica's index buffers (a few
bytes a batched token) and the shrink buffers of the forward (in the activation peak).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.arguments import as_flag, as_int
from kvplan.engines.sglang_lora import LORA_TARGET_MODULES, module_shape, packed_modules
from kvplan.errors import UnitError
from kvplan.model.dtypes import cache_dtypes
from kvplan.model.layers import FullAttention
from kvplan.model.spec import ModelSpec

__all__ = [
    "EMBEDDING_MODEL_TYPES",
    "LORA_CUDA_GRAPH_CASES",
    "MAX_LORA_RANKS",
    "VLLM_LORA_MODULES",
    "VllmLora",
    "lora_bytes",
    "lora_parts",
]

#: the ranks vLLM's --max-lora-rank accepts (``MaxLoRARanks``)
MAX_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
#: graphs are captured for 0 and for max_loras + 1 active LoRAs
LORA_CUDA_GRAPH_CASES = 2
#: config.json model types whose vLLM class lists ``embedding_modules`` (v0.32.0)
EMBEDDING_MODEL_TYPES = frozenset(
    {
        "apertus", "cohere", "cohere2", "deci", "ernie4_5", "exaone", "exaone4", "falcon_h1",
        "granite", "granitemoe", "granitemoehybrid", "granitemoeshared", "hyperclovax",
        "jamba", "lfm2", "lfm2_moe", "llama", "llama4_text", "minicpm", "mixtral", "nemotron",
        "nemotron_h", "phi3", "phimoe", "qwen3", "qwen3_5_text", "qwen3_moe", "solar",
        "telechat2",
    }
)  # fmt: skip
_EMBEDDINGS = ("embed_tokens", "lm_head")
#: the module names --lora-target-modules takes here (vLLM matches name suffixes)
VLLM_LORA_MODULES = (*(m for m in LORA_TARGET_MODULES if m != "all"), *_EMBEDDINGS)
_ROW = ("o_proj", "down_proj")


@dataclass(frozen=True)
class VllmLora:
    """``--max-loras``, ``--max-lora-rank``, ``--lora-target-modules`` (None: every module
    vLLM supports) and ``--fully-sharded-loras``."""

    max_loras: int = 1
    max_lora_rank: int = 16
    target_modules: tuple[str, ...] | None = None
    fully_sharded: bool = False

    def __post_init__(self) -> None:
        as_int(self.max_loras, "max_loras", minimum=1)
        as_flag(self.fully_sharded, "fully_sharded_loras")
        if self.max_lora_rank not in MAX_LORA_RANKS:
            raise UnitError(
                f"max_lora_rank: {self.max_lora_rank!r} is not a rank vLLM takes; allowed:"
                f" {', '.join(map(str, MAX_LORA_RANKS))}"
            )


def lora_bytes(spec: ModelSpec, lora: VllmLora, tp: int = 1) -> int:
    """Bytes of the LoRA stacks on one GPU of a ``tp``-way group (no pipeline stages).

    Llama 3.1 8B (bf16, vocab 128,256), 1 slot, rank 16, TP 1, a layer: qkv 3 x 16 x 4,096 +
    (4,096 + 2 x 1,024) x 16; o 16 x 4,096 + 4,096 x 16; gate_up 2 x 16 x 4,096 + 2 x 14,336
    x 16; down 16 x 14,336 + 4,096 x 16; then embed_tokens and lm_head 2 x (128,256 + 4,096)
    x 16 values; x 2 B.
    """
    layer, embed, lm_head = lora_parts(spec, lora, tp)
    return layer * spec.num_hidden_layers + embed + lm_head


def lora_parts(spec: ModelSpec, lora: VllmLora, tp: int = 1) -> tuple[int, int, int]:
    """Bytes on one GPU of one decoder layer's stacks, of ``embed_tokens``' (on the first
    pipeline stage) and of ``lm_head``'s (on the last); 0 where not wrapped."""
    as_int(tp, "tensor_parallel_size", minimum=1)
    _check_model(spec)
    modules, embeddings = _wrapped(spec, lora.target_modules)
    if embeddings and not spec.vocab_size:
        raise UnitError(f"enable_lora: {spec.name} states no vocab_size (embeddings wrapped)")
    rank = lora.max_lora_rank
    values = 0
    for module in sorted(modules):
        in_dim, out_dim, slices = module_shape(spec, module)
        if module in _ROW:
            b_out = _part(out_dim, tp, module) if lora.fully_sharded else out_dim
            values += rank * _part(in_dim, tp, module) + b_out * rank
        else:
            a_rank = _part(rank, tp, "max_lora_rank") if lora.fully_sharded else rank
            values += slices * a_rank * in_dim + _column_out(spec, module, tp) * rank
    # embed_tokens and lm_head: (vocab + hidden) x rank each, whole on every rank
    table = ((spec.vocab_size or 0) + (spec.hidden_size or 0)) * rank
    width = lora.max_loras * cache_dtypes(spec, "vllm").k.block_bytes
    return (
        values * width,
        table * width if "embed_tokens" in embeddings else 0,
        table * width if "lm_head" in embeddings else 0,
    )


def _check_model(spec: ModelSpec) -> None:
    if spec.num_expert_parameters or any(
        not isinstance(layer, FullAttention) for layer in spec.layers
    ):
        raise UnitError(
            "enable_lora: vLLM's LoRA slots are modelled for dense attention models (full,"
            f" sliding or chunked layers); {spec.name} has experts, MLA or state layers"
        )
    if not spec.hidden_size:
        raise UnitError(f"enable_lora: {spec.name} states no hidden_size")


def _wrapped(spec: ModelSpec, names: tuple[str, ...] | None) -> tuple[set[str], list[str]]:
    """The packed linear modules and the embedding modules vLLM wraps."""
    supported = spec.model_type in EMBEDDING_MODEL_TYPES
    if names is None:
        return packed_modules(["all"]), list(_EMBEDDINGS) if supported else []
    embeddings = [name for name in _EMBEDDINGS if name in names]
    if embeddings and not supported:
        raise UnitError(
            f"lora_target_modules {embeddings[0]}: vLLM wraps embeddings only for the model"
            f" types {', '.join(sorted(EMBEDDING_MODEL_TYPES))}; {spec.name} is"
            f" {spec.model_type or 'not stated'}"
        )
    linear = [name for name in names if name not in _EMBEDDINGS]
    wrong = [name[:40] for name in linear if name not in VLLM_LORA_MODULES]
    if wrong:
        raise UnitError(
            f"lora_target_modules {wrong[0]}: not a module kvplan models for vLLM; allowed:"
            f" {', '.join(VLLM_LORA_MODULES)}"
        )
    if embeddings and not linear:
        raise UnitError("lora_target_modules: name a linear module too (o_proj, qkv_proj, ...)")
    return packed_modules(linear), embeddings


def _column_out(spec: ModelSpec, module: str, tp: int) -> int:
    """A column module's output on one rank: q heads split, at least one KV head kept."""
    if module != "qkv_proj":
        return _part(module_shape(spec, module)[1], tp, module)
    head_dim = spec.head_dim or (spec.hidden_size or 0) // spec.num_attention_heads
    kv_heads = spec.num_key_value_heads or spec.num_attention_heads
    q_heads = _part(spec.num_attention_heads, tp, "num_attention_heads")
    return head_dim * (q_heads + 2 * max(1, kv_heads // tp))


def _part(value: int, tp: int, what: str) -> int:
    if value % tp:
        raise UnitError(f"{what}: {value} does not divide across tensor_parallel_size {tp}")
    return value // tp
