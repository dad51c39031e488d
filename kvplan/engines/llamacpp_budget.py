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
  for a prompt ubatch and for one token). It is not modelled byte for byte here: the rule in
  ``compute_bytes_cpu`` is fitted to the recording and its error is stated there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvplan.engines.base import EngineResult
from kvplan.errors import UnitError

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from kvplan.importers.gguf_format import GGUFTensor
    from kvplan.spec import ModelSpec

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


def check_cache_types(type_k: str, type_v: str, *, flash_attn: bool) -> None:
    """Refuse what llama.cpp refuses at start: a quantized V cache without flash attention
    (``llama_init_from_model``: "quantized V cache requires flash_attn to be enabled")."""
    del type_k  # a quantized K alone is allowed
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


def compute_bytes_cpu(
    spec: ModelSpec,
    *,
    n_ctx: int,
    n_ubatch: int,
    n_seq_max: int = 1,
    flash_attn: bool = True,
    kv: EngineResult | None = None,
) -> int:
    """An estimate of the CPU compute buffer, fitted to the recording (``T = n_ubatch``):

    - the inputs, alive for the whole graph: one KV mask per cache part, ``cells x T`` per
      stream in f16 (2 B) with flash attention, f32 (4 B) without; 28 B a token of positions,
      output ids and KV indices;
    - without flash attention, the scores of the largest part, ``cells x T x heads x 4``;
    - the output phase: logits and four hidden states, ``T x (n_vocab + 4 x n_embd) x 4``;
    - MLA layers: the absorbed query and its output, ``2 x heads x T x (kv_lora + rope) x 4``.

    ``kv`` (a ``llamacpp.kv_cache`` result) gives each part's cells per stream; without it,
    ``n_ctx / n_seq_max`` cells of one part. Against the recording (27 cases, llama, qwen3,
    gemma2/3 with sliding windows, deepseek2 MLA, with and without flash attention): exact
    to the printed 0.0001 MiB for llama and qwen3 with flash attention (but -0.20 % with 3
    streams); the largest errors +3.67 % (deepseek2 MLA), +2.26 % (gemma3 without flash
    attention), -0.27 % (gemma2/3 SWA), +0.03 % (llama without flash attention);
    ``tests/test_llamacpp_oracle.py`` holds every case to 4 %.

    Not modelled: the routed experts' part of an MoE graph (qwen3moe). With flash attention
    the rule is -10.5 % (8 experts, 2 used, width 64, -ub 512 or 256), -53.9 % (4 used, width
    128) and +13.2 % (width 32, -ub 128) off the recording; without flash attention, where the
    scores dominate, +0.02 %. Measured per token beyond the inputs: 2,816, 7,424 and 1,792 B
    (llama.cpp's ``build_moe_ffn`` tensors, ``4 x used x width`` B each, reused by the graph
    allocator in a way not yet fitted).
    """
    from kvplan.layers import MLALatent

    t = n_ubatch
    embd = spec.hidden_size or 0
    vocab = spec.vocab_size or 0
    heads = spec.num_attention_heads or 1
    if kv is not None:
        log = kv.engine_log
        parts = [int(log[k]) for k in ("cells", "swa_cells") if isinstance(log.get(k), int)]
    else:
        parts = [n_ctx // max(1, n_seq_max)]
    mask_bytes = 2 if flash_attn else 4
    inputs = sum(cells * t * mask_bytes for cells in parts) + 28 * t
    scores = 0 if flash_attn else max(parts, default=0) * t * heads * 4
    output = t * (vocab + 4 * embd) * 4
    mla = next((layer for layer in spec.layers if isinstance(layer, MLALatent)), None)
    absorbed = 2 * heads * t * (mla.kv_lora_rank + mla.qk_rope_head_dim) * 4 if mla else 0
    return inputs + scores + output + absorbed
