"""llama.cpp's buffers on the CPU backend: model, KV, output and compute, as it prints them.

Read in llama.cpp at commit 0c1e570 (llama-cpp-python 0.3.36) and checked byte for byte
against that build's printed sizes (``tests/data/llamacpp_oracle_0c1e570.json``):

- **model** (``src/llama-model.cpp``, ``llama-model-loader.cpp``): every tensor goes to one
  buffer type. With ``--mmap`` (the default) the CPU tensors are not copied: the
  ``CPU_Mapped`` buffer is the file span from the first such tensor's offset to the end of the
  last (``get_mapping_range``), padding between tensors included. Without mmap they are copied
  into a ``CPU`` buffer of ``sum(PAD(nbytes, 32))`` (``ggml_backend_alloc_ctx_tensors``). On
  x86 CPUs with AVX2, 2-D weights fed to matrix products whose type has a repacked layout
  (Q4_0, Q4_K, IQ4_NL, MXFP4; Q2_K needs AVX-512) and whose ``ne[1]`` is a multiple of 8, and
  3-D routed expert tensors of those types (``MUL_MAT_ID``, ``supports_op``), are
  copied into a ``CPU_REPACK`` buffer of the same padded size (``ggml-cpu/repack.cpp``,
  ``ggml_repack_get_optimal_repack_type``); the token embedding (read by ``get_rows``) never
  is. Tensor offsets follow the table order, each padded to ``general.alignment`` (32 B), as
  every GGUF writer lays them out.
- **KV**: one buffer per cache part (main, sliding-window, recurrent), its K plus V bytes
  (``llama-kv-cache.cpp``: one context per buffer type, tensors padded to 32 B, which the
  rows of every cache type already are).
- **output** (``llama_context::output_reserve``): ``n_vocab x max(n_outputs, n_seq_max) x 4``
  bytes of f32 logits, reserved at start for ``n_seq_max`` outputs; embeddings add
  ``n_embd x n_seq_max x 4`` when enabled. On CPU it is the ``CPU`` buffer; with a GPU it is
  that device's pinned host buffer (``CUDA_Host``).
- **compute**: the peak of the graph allocator over the reserved graphs (``graph_reserve``
  for a prompt ubatch and for one token; the prompt's is the larger). ``compute_bytes_cpu``
  builds the prompt graph and replays ``ggml-alloc.c`` over it
  (``llamacpp_compute.cpu_graph_bytes``): exact to the byte for llama, qwen2, qwen3, qwen3moe,
  gemma2/3 and deepseek2 (MLA, dense and routed layers), with and without flash attention;
  other graphs fall back to a fitted rule whose error is stated there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kvplan.engines.base import EngineResult
from kvplan.errors import UnitError

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from kvplan.engines.llamacpp_compute import MoE
    from kvplan.importers.gguf_format import GGUFTensor
    from kvplan.model.spec import ModelSpec

__all__ = [
    "REPACK_TYPES_AVX2",
    "Buffer",
    "LlamaCppResult",
    "buffer_mib",
    "check_cache_types",
    "compute_bytes_cpu",
    "cpu_buffers",
    "kv_buffers",
    "model_buffers",
    "moe_from_gguf",
    "output_bytes",
    "tensor_offsets",
]

#: ggml weight types llama.cpp repacks on an x86 CPU with AVX2 (and without AVX-512)
REPACK_TYPES_AVX2 = frozenset({"Q4_0", "Q4_K", "IQ4_NL", "MXFP4"})
#: 3-D expert tensors, fed to ``MUL_MAT_ID``, which the repacked buffer also serves
_EXPERTS = re.compile(r"\.ffn_(up|down|gate|gate_up)_(ch|)exps\.weight$").search
#: ggml's tensor alignment in CPU buffers (``TENSOR_ALIGNMENT``)
_TENSOR_ALIGNMENT = 32
#: the kinds of buffer llama.cpp allocates, as ``engine_log.buffers`` names them
KINDS = ("model", "kv", "output", "compute")


@dataclass(frozen=True, slots=True)
class Buffer:
    """One buffer llama.cpp allocates: the device or buffer type as it names it (``CPU``,
    ``CPU_Mapped``, ``CPU_REPACK``, ``CUDA0``...), its kind (``KINDS``) and exact bytes."""

    device: str
    kind: str
    bytes: int

    def to_dict(self) -> dict[str, str | int]:
        return {"device": self.device, "kind": self.kind, "bytes": self.bytes}


def _pad(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def buffer_mib(num_bytes: int) -> str:
    """Bytes as llama.cpp prints a buffer size: ``%8.2f`` MiB, without the padding."""
    return f"{num_bytes / 1024 / 1024:.2f}"


def tensor_offsets(tensors: Sequence[GGUFTensor], alignment: int = 32) -> list[int]:
    """Each tensor's offset in the data section: table order, each padded to ``alignment``."""
    offsets = []
    offset = 0
    for tensor in tensors:
        offsets.append(offset)
        offset += _pad(tensor.num_bytes, alignment)
    return offsets


def _repacked(tensor: GGUFTensor, repack_types: frozenset[str]) -> bool:
    return (
        tensor.ggml_type in repack_types
        and (
            len(tensor.shape) == 2 or (len(tensor.shape) == 3 and _EXPERTS(tensor.name) is not None)
        )
        and tensor.shape[1] % 8 == 0
        and tensor.name.endswith(".weight")
        and not tensor.name.startswith("token_embd")
    )


def model_buffers(
    tensors: Sequence[GGUFTensor],
    *,
    use_mmap: bool = True,
    repack_types: Iterable[str] = REPACK_TYPES_AVX2,
    alignment: int = 32,
) -> list[Buffer]:
    """The model buffers of a model wholly on the CPU backend (see the module docstring).

    ``repack_types``: the weight types this CPU repacks (``REPACK_TYPES_AVX2``; empty for a
    CPU without AVX2, or ARM's own set). Tensors of split files are not modelled here.
    """
    if any(t.part for t in tensors):
        raise UnitError("llama.cpp model buffers: split GGUF files are not modelled")
    repack = frozenset(repack_types)
    offsets = tensor_offsets(tensors, alignment)
    plain = [(t, o) for t, o in zip(tensors, offsets, strict=True) if not _repacked(t, repack)]
    packed = [t for t in tensors if _repacked(t, repack)]
    buffers: list[Buffer] = []
    if packed:
        size = sum(_pad(t.num_bytes, _TENSOR_ALIGNMENT) for t in packed)
        buffers.append(Buffer("CPU_REPACK", "model", size))
    if plain and use_mmap:
        first = min(o for _, o in plain)
        last = max(o + t.num_bytes for t, o in plain)
        buffers.append(Buffer("CPU_Mapped", "model", last - first))
    elif plain:
        size = sum(_pad(t.num_bytes, _TENSOR_ALIGNMENT) for t, _ in plain)
        buffers.append(Buffer("CPU", "model", size))
    return buffers


def output_bytes(n_vocab: int, n_seq_max: int = 1, *, n_embd: int = 0) -> int:
    """Bytes of the output buffer reserved at start: f32 logits (and embeddings when
    ``n_embd`` is given) for ``n_seq_max`` outputs."""
    if n_vocab < 1 or n_seq_max < 1 or n_embd < 0:
        raise UnitError("llama.cpp output buffer: n_vocab and n_seq_max must be at least 1")
    return (n_vocab + n_embd) * n_seq_max * 4


def kv_buffers(result: EngineResult, device: str = "CPU") -> list[Buffer]:
    """One KV buffer per cache part of a ``llamacpp.kv_cache`` result (main, SWA, recurrent)."""
    log = result.engine_log
    buffers = []
    for prefix in ("", "swa_", "recurrent_"):
        k = log.get(f"{prefix}k_bytes")
        v = log.get(f"{prefix}v_bytes")
        if isinstance(k, int) and isinstance(v, int) and k + v:
            buffers.append(Buffer(device, "kv", k + v))
    return buffers


def check_cache_types(type_k: str, type_v: str, *, flash_attn: bool, mla: bool = False) -> None:
    """Refuse what llama.cpp refuses at start (``llama_init_from_model``): a quantized V cache
    without flash attention ("quantized V cache requires flash_attn to be enabled"), and on an
    MLA model (``mla``: its V is a view of the K cache) K and V caches of different types
    ("model does not support different K and V cache types"). A quantized K alone is
    allowed."""
    if mla and type_k.lower() != type_v.lower():
        raise UnitError(
            f"-ctk {type_k} -ctv {type_v}: llama.cpp refuses different K and V cache types"
            " on an MLA model (its V is read from the K cache; give both the same type)"
        )
    if not flash_attn and type_v.lower() not in ("f32", "f16", "bf16"):
        raise UnitError(
            f"-ctv {type_v}: llama.cpp refuses a quantized V cache without flash attention"
            " (use -fa on, or -ctv f16)"
        )


@dataclass(frozen=True, slots=True)
class LlamaCppResult(EngineResult):
    """A llama.cpp cache result with every buffer llama.cpp allocates (``engine_log.buffers``
    in JSON): model, KV and output buffers exact on the CPU backend."""

    buffers: tuple[Buffer, ...] = ()


def cpu_buffers(
    result: EngineResult,
    tensors: Sequence[GGUFTensor],
    *,
    n_vocab: int,
    n_seq_max: int,
    use_mmap: bool = True,
    repack_types: Iterable[str] = REPACK_TYPES_AVX2,
) -> LlamaCppResult:
    """``result`` (from ``llamacpp.kv_cache``) with the model, KV and output buffers of a run
    wholly on the CPU backend (the compute buffer is not included: see the module docstring)."""
    buffers = (
        *model_buffers(tensors, use_mmap=use_mmap, repack_types=repack_types),
        *kv_buffers(result),
        Buffer("CPU", "output", output_bytes(n_vocab, n_seq_max)),
    )
    return LlamaCppResult(
        engine=result.engine,
        engine_version=result.engine_version,
        kv_cache_bytes=result.kv_cache_bytes,
        num_blocks=result.num_blocks,
        block_size=result.block_size,
        kv_cache_tokens=result.kv_cache_tokens,
        engine_log=result.engine_log,
        log_lines=result.log_lines,
        buffers=buffers,
    )


def moe_from_gguf(metadata: Mapping[str, Any], tensor_names: Iterable[str] = ()) -> MoE | None:
    """The routed experts a GGUF file declares in its metadata (and, for deepseek2's selection
    bias, its tensor names), ``MoE(0, 0, 0)`` for a count of 0; ``None`` without an expert
    count, or with widths that differ between layers."""
    arch = str(metadata.get("general.architecture"))
    count = metadata.get(f"{arch}.expert_count")
    used = metadata.get(f"{arch}.expert_used_count", 0)
    width = metadata.get(f"{arch}.expert_feed_forward_length", 0)
    if isinstance(width, (list, tuple)):
        width = width[0] if len(set(width)) == 1 else None
    if not isinstance(count, int) or not isinstance(used, int) or not isinstance(width, int):
        return None
    from kvplan.engines.llamacpp_compute import MoE

    if not count:
        return MoE(0, 0, 0)
    key = {k.removeprefix(f"{arch}."): v for k, v in metadata.items() if k.startswith(arch)}
    scale = float(key.get("expert_weights_scale", 0.0))
    if arch != "deepseek2":  # qwen3moe's router: softmax, normalised weights
        return MoE(count, used, width, weights_scale=scale)
    groups = (int(key.get("expert_group_count", 0)), int(key.get("expert_group_used_count", 0)))
    bias = any(name.endswith(".exp_probs_b.bias") for name in tensor_names)
    shared, lead = (
        int(key.get("expert_shared_count", 0)),
        int(key.get("leading_dense_block_count", 0)),
    )
    sigmoid, norm = key.get("expert_gating_func") == 2, bool(key.get("expert_weights_norm", False))
    return MoE(count, used, width, shared, lead, sigmoid, bias, norm, scale, groups)


def compute_bytes_cpu(
    spec: ModelSpec,
    *,
    n_ctx: int,
    n_ubatch: int,
    n_seq_max: int = 1,
    flash_attn: bool = True,
    kv: EngineResult | None = None,
    moe: MoE | None = None,
) -> int:
    """The CPU compute buffer: the peak of ggml's graph allocator over the prompt graph.

    ``n_ctx`` is the padded context llama.cpp prints; ``kv`` (a ``llamacpp.kv_cache`` result)
    gives each cache part's cells per stream and the streams (without it, ``n_ctx /
    n_seq_max`` cells of one full-attention part in ``n_seq_max`` streams); ``moe`` the routed
    experts of an MoE file, as ``moe_from_gguf`` reads them from its header
    (``MoE(0, 0, 0)`` for a deepseek2 file without experts).

    Where ``llamacpp_compute.cpu_graph_bytes`` builds the graph (llama, qwen2, qwen3, qwen3moe,
    gemma2/3 with sliding windows, deepseek2 MLA with dense and routed layers; any -ub, -np,
    -fa, every cache type: an f32 cache's casts, a quantized one's Hadamard rotations) the
    result is exact: every one of the 109 recorded cases it runs, to the byte, 29 of them
    qwen3moe (experts 4-16, used 1-8, width 32-256, n_embd 64-256, -ub 128-512, -fa on and
    off), 27 deepseek2 (6 MoE with V2 and V3 routers, with and without a query rank) and 43
    with caches other than f16.
    Elsewhere (other families, an MoE without ``moe``, recurrent layers) a rule fitted to the
    dense cases answers:

    - the inputs, alive for the whole graph: one KV mask per cache part, ``cells x T`` per
      stream in f16 (2 B) with flash attention, f32 (4 B) without; 28 B a token of positions,
      output ids and KV indices;
    - without flash attention, the scores of the largest part, ``cells x T x heads x 4``;
    - the output phase: logits and four hidden states, ``T x (n_vocab + 4 x n_embd) x 4``;
    - MLA layers: the absorbed query and its output, ``2 x heads x T x (kv_lora + rope) x 4``.

    On the recorded graphs it was +3.67 % (deepseek2 MLA), +2.26 % (gemma3 without flash
    attention), -0.27 % (gemma2/3 SWA: each extra cache part's 16 B a token of indices), exact
    for llama and qwen3 with flash attention and one stream; on qwen3moe -54 % .. +13 %
    (which is why ``moe`` matters); its error on graphs not recorded is not measured.
    """
    from kvplan.engines.llamacpp_compute import cpu_graph_bytes
    from kvplan.model.layers import MLALatent

    t = n_ubatch
    log = kv.engine_log if kv is not None else {}
    streams = log.get("streams", n_seq_max)
    cells = {"full": n_ctx // max(1, n_seq_max)} if kv is None else {}
    for kind, key in (("full", "cells"), ("swa", "swa_cells")):
        if isinstance(log.get(key), int):
            cells[kind] = int(log[key])
    if isinstance(streams, int):
        exact = cpu_graph_bytes(
            spec,
            cells=cells,
            streams=streams,
            n_tokens=min(n_ctx, n_ubatch),
            flash_attn=flash_attn,
            moe=moe,
            cache_types=(str(log.get("type_k", "f16")), str(log.get("type_v", "f16"))),
        )
        if exact is not None:
            return exact
    embd = spec.hidden_size or 0
    vocab = spec.vocab_size or 0
    heads = spec.num_attention_heads or 1
    parts = [int(log[k]) for k in ("cells", "swa_cells") if isinstance(log.get(k), int)]
    parts = parts or [n_ctx // max(1, n_seq_max)]
    mask_bytes = 2 if flash_attn else 4
    inputs = sum(cells * t * mask_bytes for cells in parts) + 28 * t
    scores = 0 if flash_attn else max(parts, default=0) * t * heads * 4
    output = t * (vocab + 4 * embd) * 4
    mla = next((layer for layer in spec.layers if isinstance(layer, MLALatent)), None)
    absorbed = 2 * heads * t * (mla.kv_lora_rank + mla.qk_rope_head_dim) * 4 if mla else 0
    return inputs + scores + output + absorbed
