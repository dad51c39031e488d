"""The flags that make each engine hold a target: N requests of L tokens on a deployment.

Each engine is told in its own terms, from its own profile:

- vLLM: ``--kv-cache-memory`` = N x the blocks one request needs x the block bytes of a layer
  group (so hybrid models get vLLM's sliding reservation, not the ideal window), with
  ``--max-model-len L --max-num-seqs N``;
- SGLang: ``--max-total-tokens`` = N x L rounded up to the page, and the
  ``--mem-fraction-static`` that leaves room for the weights and that pool;
- llama.cpp: ``-c N x L -np N`` (one stream of L cells per sequence), the cache types, and the
  bytes the build allocates for them;
- TGI: ``--max-batch-total-tokens N x L --max-total-tokens L``.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from kvplan.engines import llamacpp, sglang, vllm
from kvplan.hardware import GPU
from kvplan.spec import ModelSpec
from kvplan.units import GiB, cdiv
from kvplan.weights import model_weights


@dataclass(frozen=True, slots=True)
class EngineFlags:
    """One engine's command-line flags for the target, and what they make it allocate."""

    engine: str
    flags: tuple[str, ...]
    kv_cache_bytes: int
    fits: bool
    note: str


def recommend(
    spec: ModelSpec,
    gpu: GPU,
    *,
    max_model_len: int,
    concurrency: int,
    tensor_parallel_size: int = 1,
    kv_cache_dtype: str | None = None,
    gpu_memory_utilization: Fraction = Fraction(9, 10),
) -> tuple[EngineFlags, ...]:
    """Per engine, the flags that hold ``concurrency`` requests of ``max_model_len`` tokens."""
    tp = tensor_parallel_size
    return (
        _vllm(spec, gpu, max_model_len, concurrency, tp, kv_cache_dtype, gpu_memory_utilization),
        _sglang(spec, gpu, max_model_len, concurrency, tp, kv_cache_dtype),
        _llamacpp(spec, gpu, max_model_len, concurrency, kv_cache_dtype),
        _tgi(max_model_len, concurrency, tp),
    )


def _vllm(
    spec: ModelSpec, gpu: GPU, length: int, n: int, tp: int, kv: str | None, util: Fraction
) -> EngineFlags:
    cfg = vllm.VllmConfig(
        max_model_len=length,
        gpu_memory_utilization=util,
        tensor_parallel_size=tp,
        kv_cache_dtype=kv,
        max_num_seqs=max(n, 1),
    )
    probe = vllm.profile(spec, gpu, cfg)
    # one more block than N requests need: vLLM keeps block 0 as its null block
    need = (n * probe.blocks_per_request + 1) * probe.page_bytes * probe.group_size
    overhead = probe.stages[-1].overhead
    used = overhead.weights_bytes + overhead.activation_bytes + overhead.non_torch_bytes + need
    fits = used <= gpu.memory_bytes
    flags = [f"--kv-cache-memory={need}", f"--max-model-len={length}", f"--max-num-seqs={n}"]
    if tp > 1:
        flags.append(f"--tensor-parallel-size={tp}")
    if kv:
        flags.append(f"--kv-cache-dtype={kv}")
    note = (
        f"{n} x {probe.blocks_per_request:,} blocks of {probe.page_bytes * probe.group_size:,} B;"
        f" with weights and overhead {used / GiB:.2f} GiB of {gpu.memory_bytes / GiB:.2f} GiB"
    )
    return EngineFlags("vllm", tuple(flags), need, fits, note)


def _sglang(spec: ModelSpec, gpu: GPU, length: int, n: int, tp: int, kv: str | None) -> EngineFlags:
    tokens = n * length
    cell = sglang.cell_size_bytes(spec, tp=tp, kv_cache_dtype=kv)
    pool = tokens * cell
    weights = cdiv(model_weights(spec).total_bytes, tp)
    # rest = free_after - free_before x (1 - f) = f x total - weights (nothing used before load):
    # the smallest f, to 3 decimals, whose rest holds the pool
    fraction = Fraction(cdiv((pool + weights) * 1000, gpu.memory_bytes), 1000)
    fits = fraction < 1
    flags = [f"--max-total-tokens={tokens}", f"--mem-fraction-static={float(fraction):.3f}"]
    if tp > 1:
        flags.append(f"--tp={tp}")
    if kv:
        flags.append(f"--kv-cache-dtype={kv}")
    note = f"{tokens:,} tokens x {cell:,} B per token = {pool / GiB:.2f} GiB per GPU"
    return EngineFlags("sglang", tuple(flags), pool, fits, note)


def _llamacpp(spec: ModelSpec, gpu: GPU, length: int, n: int, kv: str | None) -> EngineFlags:
    cache_type = {"fp8": "q8_0", "fp8_e4m3": "q8_0", "int8": "q8_0"}.get(kv or "", kv or "f16")
    result = llamacpp.kv_cache(
        spec, n_ctx=n * length, n_seq_max=n, cache_type_k=cache_type, cache_type_v=cache_type
    )
    flags = [f"-c {n * length}", f"-np {n}", f"-ctk {cache_type}", f"-ctv {cache_type}"]
    if cache_type != "f16":
        flags.append("-fa on")  # a quantized V cache needs flash attention
    note = f"{result.kv_cache_bytes / GiB:.2f} GiB of cache in the newest modelled build"
    return EngineFlags(
        "llama.cpp",
        tuple(flags),
        result.kv_cache_bytes,
        result.kv_cache_bytes <= gpu.memory_bytes,
        note,
    )


def _tgi(length: int, n: int, tp: int) -> EngineFlags:
    flags = [
        f"--max-batch-total-tokens={n * length}",
        f"--max-total-tokens={length}",
        f"--max-concurrent-requests={n}",
    ]
    if tp > 1:
        flags.append(f"--num-shard={tp}")
    return EngineFlags(
        "tgi",
        tuple(flags),
        0,
        True,
        "TGI checks the batch total against its warm-up; sizes not modelled here",
    )
