"""KV cache below the GPU: what each tier holds (``tier_capacity``) and whether reloading a
prefix from it beats recomputing it (``reload_vs_recompute``).

The tiers, as each engine sizes them (read in the engines' sources):

- vLLM ``--kv-offloading-size GiB --kv-offloading-backend native|lmcache``: the size is the
  total over all ranks; each of the ``TP x PP`` ranks gets ``size x 2^30 / ranks`` bytes
  (vllm-project/vllm ``vllm/config/kv_offloading.py``). Native: host blocks of the GPU block
  size (one KV cache group; ``vllm/v1/kv_offload/spec.py``: the offloaded block is the lcm of
  the groups' block sizes), ``num_blocks = bytes // (block bytes of all ranks)``
  (``vllm/v1/kv_offload/cpu/spec.py``). LMCache backend: ``max_local_cpu_size`` per rank.
- LMCache ``LMCACHE_MAX_LOCAL_CPU_SIZE`` (GiB per worker, default 5.0) and
  ``LMCACHE_MAX_LOCAL_DISK_SIZE`` (GiB per worker, default 0: no disk) in chunks of
  ``LMCACHE_CHUNK_SIZE`` = 256 tokens; each worker allocates ``size x 1024^3`` bytes
  (LMCache/LMCache ``lmcache/v1/config.py``, ``lmcache/v1/storage_backend/local_cpu_backend.py``,
  ``local_disk_backend.py``). Its GPU tier is vLLM's pool.
- SGLang HiCache: per rank ``int(--hicache-size x 10^9 // bytes per token)`` tokens, or without
  it ``int(device pool x --hicache-ratio)`` (default 2.0), then ``size // page + 1`` pages; it
  refuses to start when that exceeds the host's free memory less 10 GiB
  (sgl-project/sglang ``python/sglang/srt/mem_cache/memory_pool_host.py``, moved to
  ``mem_cache/pool_host/base.py``).
- llama.cpp ``--no-kv-offload``: the whole cache (its ``-c`` cells) in host memory.

Worked example (Llama 3.1 8B, bf16, TP 1): a token is 2 x 32 layers x 8 heads x 128 x 2 B =
131,072 B; ``--kv-offloading-size 10`` holds 10 x 2^30 / (16 x 131,072) = 5,120 blocks of 16 =
81,920 tokens; a 4,096-token prefix is 512 MiB, reloaded over PCIe Gen5 (64 GB/s) in 8.4 ms.

Only caches that keep every token are modelled (full attention, MLA): a sliding window or a
recurrent state is offloaded per KV cache group, which this module refuses rather than guess.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import TYPE_CHECKING

from kvplan.arguments import (
    as_bytes,
    as_fraction,
    as_int,
    as_optional_str,
    as_parallel,
    as_str,
    as_tokens,
    as_values,
)
from kvplan.errors import UnitError
from kvplan.units import GB, GiB, cdiv, format_bytes

if TYPE_CHECKING:
    from kvplan.hardware.gpus import GPU
    from kvplan.hardware.systems import System
    from kvplan.model.spec import ModelSpec
    from kvplan.speed.roofline import RankModel

__all__ = [
    "HICACHE_HOST_RESERVE_BYTES",
    "TIER_ENGINES",
    "BreakEven",
    "ReloadRow",
    "ReloadVsRecompute",
    "Tier",
    "TierCapacity",
    "TierLink",
    "reload_vs_recompute",
    "tier_capacity",
]

#: The engines whose tiers are sized here.
TIER_ENGINES = ("vllm", "sglang", "lmcache", "llamacpp")
#: vLLM's ``--kv-offloading-backend`` values.
OFFLOADING_BACKENDS = ("native", "lmcache")
#: SGLang keeps this much host memory free when it sizes HiCache (10 GiB).
HICACHE_HOST_RESERVE_BYTES = 10 * GiB
#: LMCache's default chunk and CPU size (GiB per worker).
LMCACHE_CHUNK_TOKENS = 256
LMCACHE_CPU_GIB = Fraction(5)
_MAX_GIB = Fraction(2**20)  # 1 PiB: no host or disk tier is larger
_DTYPE_ENGINE = {"vllm": "vllm", "lmcache": "vllm", "sglang": "sglang", "llamacpp": "llama.cpp"}


@dataclass(frozen=True, slots=True)
class Tier:
    """One tier in the engine's units: ``num_units`` of ``unit_tokens`` tokens, holding
    ``num_prefixes`` prefixes (each in whole units); ``rank_bytes`` one rank allocates,
    ``host_bytes`` taken from one node's host memory; ``link_bytes_per_s`` (0: none known)."""

    name: str
    unit_name: str
    unit_tokens: int
    num_units: int
    num_prefixes: int
    rank_bytes: int
    host_bytes: int
    link_bytes_per_s: int
    setting: str

    @property
    def tokens(self) -> int:
        return self.num_units * self.unit_tokens


@dataclass(frozen=True, slots=True)
class TierCapacity:
    """The tiers of ``engine``'s deployment of ``model`` on ``tensor_parallel_size`` GPUs of
    ``system``. ``token_bytes``: one token's KV, whole model (``bytes_per_token``);
    ``rank_token_bytes``: on one rank. ``host_memory_bytes``: the node's."""

    model: str
    gpu: str
    system: str
    engine: str
    tensor_parallel_size: int
    kv_dtype: str
    prefix_tokens: int
    token_bytes: int
    rank_token_bytes: int
    host_memory_bytes: int
    tiers: tuple[Tier, ...]

    @property
    def host_bytes(self) -> int:
        """Host memory all tiers take from one node."""
        return sum(t.host_bytes for t in self.tiers)


@dataclass(frozen=True, slots=True)
class TierLink:
    """A tier's link: ``bytes_per_s`` one direction, shared by ``shared_by`` GPUs that load
    at once (a node's disk by all its GPUs); 0 when not known."""

    tier: str
    bytes_per_s: int
    shared_by: int


@dataclass(frozen=True, slots=True)
class ReloadRow:
    """A prefix: its KV on one rank, seconds to recompute it and to reload it over each
    link (None: not known)."""

    prefix_tokens: int
    rank_bytes: int
    recompute_seconds: Fraction
    reload_seconds: tuple[Fraction | None, ...]


@dataclass(frozen=True, slots=True)
class BreakEven:
    """The shortest prefix reloaded over ``tier``'s link faster than recomputed (verdict
    ``from``), or None: ``always`` (from one token), ``never`` (up to the longest searched)
    or ``unknown`` (no link figure)."""

    tier: str
    prefix_tokens: int | None
    verdict: str


@dataclass(frozen=True, slots=True)
class ReloadVsRecompute:
    """Reload against recompute for ``model`` on one of ``tensor_parallel_size`` GPUs."""

    model: str
    gpu: str
    system: str
    tensor_parallel_size: int
    kv_dtype: str
    rank_token_bytes: int
    compute_efficiency: Fraction
    matmul_peak_flops: int
    max_tokens: int
    links: tuple[TierLink, ...]
    rows: tuple[ReloadRow, ...]
    break_even: tuple[BreakEven, ...]


def _choice(value: object, name: str, allowed: Sequence[str]) -> str:
    text = as_str(value, name, f"one of {', '.join(allowed)}")
    if text not in allowed:
        raise UnitError(f"{name}: {text!r} is not one of {', '.join(allowed)}")
    return text


def _gib(value: object, name: str, *, zero: bool = False) -> Fraction:
    """A size in GiB as the engines read it (a decimal: 5.0, 0.5); 0 only where ``zero``."""
    if zero and (value == "0" or (type(value) in (int, float, Fraction) and value == 0)):
        return Fraction(0)
    return as_fraction(value, name, high=_MAX_GIB)


def _resolve(spec: object, gpu: object, system: object) -> tuple[ModelSpec, GPU, System]:
    """The spec, GPU and the system whose links and host memory count: as given, or the
    first catalog system of the GPU, or for a GPU without one a node of 8 with no figures."""
    from kvplan.catalog.lookup import as_spec
    from kvplan.hardware.lookup import as_gpu
    from kvplan.hardware.systems import as_system, custom_system, system_for_gpu

    model, device = as_spec(spec), as_gpu(gpu)
    if system is None:
        found = system_for_gpu(device)
        return model, device, found if found is not None else custom_system(device, 8)
    return model, device, as_system(system)


def _rank_token_bytes(spec: ModelSpec, tp: int, engine: str, kv_cache_dtype: str | None) -> int:
    """One token's KV on one of ``tp`` ranks (heads split, at least one a rank; MLA whole).
    Refuses a cache that does not keep every token (sliding, chunked, recurrent state)."""
    from kvplan.model.dtypes import cache_dtypes

    dtypes = cache_dtypes(spec, engine, kv_cache_dtype=kv_cache_dtype)
    total = 0
    for layer, n in spec.layer_groups:
        if layer.state_bytes or layer.max_tokens not in (None, 0):
            raise UnitError(
                f"{spec.name}: {layer.kind} layers are offloaded per KV cache group, which"
                " kvplan tiers does not model; only full attention and MLA caches are"
            )
        shard = layer.shard(tp)
        total += n * (shard.k_token_bytes(dtypes.k) + shard.v_token_bytes(dtypes.v))
    if total == 0:
        raise UnitError(f"{spec.name} keeps no per-token KV cache; no tier holds any")
    return total


@dataclass(frozen=True, slots=True)
class _Deployment:
    spec: ModelSpec
    gpu: GPU
    system: System
    tp: int
    kv_cache_dtype: str | None
    rank_token_bytes: int
    prefix_tokens: int
    max_model_len: int
    host_memory_bytes: int

    @property
    def ranks_per_node(self) -> int:
        return min(self.tp, self.system.gpus_per_node)

    def tier(self, name: str, unit: tuple[str, int], num_units: int, setting: str) -> Tier:
        """A tier of ``num_units`` units of ``unit`` = (name, tokens), with what it takes."""
        unit_name, unit_tokens = unit
        rank_bytes = num_units * unit_tokens * self.rank_token_bytes
        links = {"cpu": self.system.host_link_bytes_per_s, "disk": self.system.disk_bytes_per_s}
        return Tier(
            name=name,
            unit_name=unit_name,
            unit_tokens=unit_tokens,
            num_units=num_units,
            num_prefixes=num_units // cdiv(self.prefix_tokens, unit_tokens),
            rank_bytes=rank_bytes,
            host_bytes=rank_bytes * self.ranks_per_node if name == "cpu" else 0,
            link_bytes_per_s=links.get(name, 0),
            setting=setting,
        )


def _vllm_gpu(d: _Deployment, utilization: Fraction) -> Tier:
    from kvplan.engines import vllm

    cfg = vllm.config(
        d.max_model_len,
        gpu_memory_utilization=utilization,
        kv_cache_dtype=d.kv_cache_dtype,
        tensor_parallel_size=d.tp,
    )
    pool = vllm.profile(d.spec, d.gpu, cfg)
    return d.tier("gpu", ("block", pool.block_size), pool.num_gpu_blocks, "vLLM's GPU pool")


def _vllm_tiers(
    d: _Deployment, utilization: Fraction, size: Fraction | None, backend: str
) -> list[Tier]:
    gpu = _vllm_gpu(d, utilization)
    if size is None:
        return [gpu]
    total_bytes = int(size * GiB)  # over all ranks; each rank gets total / ranks
    setting = f"--kv-offloading-size {float(size):g} --kv-offloading-backend {backend}"
    if backend == "lmcache":
        rank_bytes = total_bytes // d.tp
        chunk = LMCACHE_CHUNK_TOKENS * d.rank_token_bytes
        cpu = d.tier("cpu", ("chunk", LMCACHE_CHUNK_TOKENS), rank_bytes // chunk, setting)
        # LMCache pins its whole buffer up front: the host memory taken is the setting's
        return [gpu, replace(cpu, host_bytes=rank_bytes * d.ranks_per_node)]
    block_bytes = gpu.unit_tokens * d.rank_token_bytes * d.tp  # one block, all ranks
    return [gpu, d.tier("cpu", ("block", gpu.unit_tokens), total_bytes // block_bytes, setting)]


def _lmcache_tiers(
    d: _Deployment, utilization: Fraction, cpu_gib: Fraction, disk_gib: Fraction, chunk: int
) -> list[Tier]:
    tiers = [_vllm_gpu(d, utilization)]
    chunk_bytes = chunk * d.rank_token_bytes
    cpu_bytes = int(cpu_gib * GiB)
    setting = f"LMCACHE_MAX_LOCAL_CPU_SIZE={float(cpu_gib):g}"
    cpu = d.tier("cpu", ("chunk", chunk), cpu_bytes // chunk_bytes, setting)
    tiers.append(replace(cpu, host_bytes=cpu_bytes * d.ranks_per_node))  # pinned up front
    if disk_gib:
        disk_bytes = int(disk_gib * GiB)
        setting = f"LMCACHE_MAX_LOCAL_DISK_SIZE={float(disk_gib):g}"
        tiers.append(d.tier("disk", ("chunk", chunk), disk_bytes // chunk_bytes, setting))
    return tiers


def _sglang_tiers(d: _Deployment, ratio: Fraction, size_gb: int, page_size: int) -> list[Tier]:
    from kvplan.engines import sglang

    pool = sglang.kv_cache(
        d.spec, d.gpu, tp=d.tp, kv_cache_dtype=d.kv_cache_dtype, page_size=page_size
    )
    device = pool.kv_cache_tokens or 0
    gpu = d.tier("gpu", ("page", page_size), device // page_size, "SGLang's device pool")
    if size_gb:
        host = size_gb * GB // d.rank_token_bytes
        setting = f"--hicache-size {size_gb}"
    else:
        host = int(device * ratio)
        setting = f"--hicache-ratio {float(ratio):g}"
    num_pages = host // page_size + 1  # SGLang rounds up, one page more when aligned
    return [gpu, d.tier("cpu", ("page", page_size), num_pages, setting)]


def _llamacpp_tiers(d: _Deployment) -> list[Tier]:
    from kvplan.engines import llamacpp

    cache = d.kv_cache_dtype or "f16"
    result = llamacpp.kv_cache(
        d.spec, n_ctx=d.max_model_len, cache_type_k=cache, cache_type_v=cache
    )
    cells = result.kv_cache_tokens or 0
    tier = d.tier("cpu", ("cell", 1), cells, f"--no-kv-offload -c {d.max_model_len}")
    # llama.cpp's own bytes (its cache types' blocks, its padding), one process for the node
    return [replace(tier, rank_bytes=result.kv_cache_bytes, host_bytes=result.kv_cache_bytes)]


def _fits(d: _Deployment, engine: str, tiers: list[Tier]) -> None:
    """Refuse tiers that take more host memory than the node has (SGLang: less its 10 GiB
    reserve), naming the need, the supply, the largest setting that fits and the setting."""
    need = sum(t.host_bytes for t in tiers)
    reserve = HICACHE_HOST_RESERVE_BYTES if engine == "sglang" else 0
    supply = max(0, d.host_memory_bytes - reserve)
    if need <= supply:
        return
    cpu = next(t for t in tiers if t.name == "cpu")
    per_rank = supply // d.ranks_per_node
    largest = {
        "vllm": f"--kv-offloading-size {supply * d.tp // d.ranks_per_node // GiB} or less",
        "lmcache": f"LMCACHE_MAX_LOCAL_CPU_SIZE={per_rank // GiB} or less",
        "sglang": f"--hicache-size {max(0, per_rank - d.rank_token_bytes * 64) // GB} or less",
        "llamacpp": f"-c {supply // max(1, cpu.rank_bytes // max(1, cpu.num_units))} or less",
    }[engine]
    kept = f" after SGLang's {format_bytes(reserve)} reserve" if reserve else ""
    raise UnitError(
        f"{cpu.setting}: the host tier takes {format_bytes(need)} of the node's host memory,"
        f" {d.system.name} has {format_bytes(supply)}{kept}; {largest} fits"
        " (or give --host-memory)"
    )


def _deployment(
    spec: object,
    gpu: object,
    system: object,
    *,
    engine: str,
    sizes: tuple[object, object, object, object],
    kv_cache_dtype: object,
) -> _Deployment:
    """The checked deployment: ``sizes`` = (prefix tokens, max model len, TP, host memory)."""
    prefix, length, tp_size, host = sizes
    model, device, node = _resolve(spec, gpu, system)
    prefix_tokens = as_tokens(prefix, "prefix_tokens", minimum=1)
    tp = as_parallel(tp_size, "tensor_parallel_size")
    if engine == "llamacpp" and tp != 1:
        raise UnitError("tensor_parallel_size (-tp): llama.cpp keeps one host cache; give 1")
    kv = as_optional_str(kv_cache_dtype, "kv_cache_dtype")
    trained = model.max_position_embeddings or 32768
    max_len = trained if length is None else as_tokens(length, "max_model_len", minimum=1)
    host_bytes = node.host_memory_bytes if host is None else as_bytes(host, "host_memory_bytes")
    if host_bytes <= 0:
        raise UnitError(
            f"host_memory_bytes: no host memory known for {node.name}; give it (--host-memory)"
        )
    rank_bytes = _rank_token_bytes(model, tp, _DTYPE_ENGINE[engine], kv)
    return _Deployment(model, device, node, tp, kv, rank_bytes, prefix_tokens, max_len, host_bytes)


def tier_capacity(
    spec: ModelSpec | str,
    gpu: GPU | str,
    *,
    system: System | str | None = None,
    engine: str = "vllm",
    prefix_tokens: int | str = 4096,
    max_model_len: int | str | None = None,
    tensor_parallel_size: int = 1,
    kv_cache_dtype: str | None = None,
    gpu_memory_utilization: Fraction | float | str = Fraction(9, 10),
    kv_offloading_size: Fraction | float | str | None = None,
    kv_offloading_backend: str = "native",
    lmcache_max_local_cpu_size: Fraction | float | str = LMCACHE_CPU_GIB,
    lmcache_max_local_disk_size: Fraction | float | str = 0,
    lmcache_chunk_size: int = LMCACHE_CHUNK_TOKENS,
    hicache_ratio: Fraction | float | str = Fraction(2),
    hicache_size: int = 0,
    page_size: int = 1,
    host_memory_bytes: int | str | None = None,
) -> TierCapacity:
    """The tiers ``engine`` keeps the KV cache of ``spec`` in, on ``tensor_parallel_size``
    GPUs of ``system`` (default: the GPU's first catalog system): the GPU pool and the host
    (and LMCache's disk) tiers its settings give, each in the engine's units with the
    prefixes of ``prefix_tokens`` it holds and the host memory it takes from one node.

    ``kv_offloading_size`` (GiB over all ranks, vLLM), ``lmcache_max_local_*_size`` (GiB a
    rank), ``hicache_ratio`` and ``hicache_size`` (GB a rank, SGLang) as the engines take
    them; ``max_model_len`` the model's trained length by default (llama.cpp: its ``-c``).
    Raises UnitError when the tiers take more host memory than the node has
    (``host_memory_bytes`` replaces the system's), ArgumentTypeError for a wrong type.
    """
    from kvplan.model.estimator import bytes_per_token

    engine = _choice(engine, "engine", TIER_ENGINES)
    backend = _choice(kv_offloading_backend, "kv_offloading_backend", OFFLOADING_BACKENDS)
    utilization = as_fraction(gpu_memory_utilization, "gpu_memory_utilization")
    offload = None if kv_offloading_size is None else _gib(kv_offloading_size, "kv_offloading_size")
    cpu_gib = _gib(lmcache_max_local_cpu_size, "lmcache_max_local_cpu_size")
    disk_gib = _gib(lmcache_max_local_disk_size, "lmcache_max_local_disk_size", zero=True)
    chunk = as_int(lmcache_chunk_size, "lmcache_chunk_size", minimum=1, maximum=2**20)
    ratio = as_fraction(hicache_ratio, "hicache_ratio", high=Fraction(10**6))
    size_gb = as_int(hicache_size, "hicache_size", minimum=0, maximum=2**20)
    page = as_int(page_size, "page_size", minimum=1, maximum=2**20)
    sizes = (prefix_tokens, max_model_len, tensor_parallel_size, host_memory_bytes)
    d = _deployment(spec, gpu, system, engine=engine, sizes=sizes, kv_cache_dtype=kv_cache_dtype)
    match engine:
        case "vllm":
            tiers = _vllm_tiers(d, utilization, offload, backend)
        case "lmcache":
            tiers = _lmcache_tiers(d, utilization, cpu_gib, disk_gib, chunk)
        case "sglang":
            tiers = _sglang_tiers(d, ratio, size_gb, page)
        case _:
            tiers = _llamacpp_tiers(d)
    _fits(d, engine, tiers)
    return TierCapacity(
        model=d.spec.name,
        gpu=d.gpu.name,
        system=d.system.name,
        engine=engine,
        tensor_parallel_size=d.tp,
        kv_dtype=_dtype_name(d.spec, _DTYPE_ENGINE[engine], d.kv_cache_dtype),
        prefix_tokens=d.prefix_tokens,
        token_bytes=bytes_per_token(
            d.spec, _dtype_name(d.spec, _DTYPE_ENGINE[engine], d.kv_cache_dtype)
        ),
        rank_token_bytes=d.rank_token_bytes,
        host_memory_bytes=d.host_memory_bytes,
        tiers=tuple(tiers),
    )


def _dtype_name(spec: ModelSpec, engine: str, kv_cache_dtype: str | None) -> str:
    from kvplan.model.dtypes import cache_dtypes
    from kvplan.units import kv_dtype_name

    dtypes = cache_dtypes(spec, engine, kv_cache_dtype=kv_cache_dtype)
    return kv_dtype_name(dtypes.k, dtypes.v)


def _links(system: System, tp: int) -> tuple[TierLink, ...]:
    """Host memory over the GPU's link, the node's disk shared by all its GPUs (a node full
    of replicas, as ``kvplan simulate`` takes it), a remote pool."""
    return (
        TierLink("cpu", system.host_link_bytes_per_s, 1),
        TierLink("disk", system.disk_bytes_per_s, system.gpus_per_node),
        TierLink("remote", system.scale_out_bytes_per_s, 1),
    )


def _ladder(top: int, extra: Sequence[int]) -> list[int]:
    """256, 512, ... up to ``top`` (and ``top``), with the prefixes asked for."""
    doubling = (2**k for k in range(8, top.bit_length()))
    return sorted(t for t in {top, *extra, *doubling} if t <= top)


def reload_vs_recompute(
    spec: ModelSpec | str,
    gpu: GPU | str,
    *,
    system: System | str | None = None,
    tensor_parallel_size: int = 1,
    kv_cache_dtype: str | None = None,
    engine: str = "vllm",
    prefix_tokens: Sequence[int | str] | None = None,
    max_tokens: int | str | None = None,
    compute_efficiency: Fraction | float | str | None = None,
) -> ReloadVsRecompute:
    """For prefixes of 256, 512, ... tokens up to ``max_tokens`` (default the model's trained
    length) and those in ``prefix_tokens``: seconds to reload the prefix's KV on one rank over
    each tier's link (bytes / link bytes per second; a node's disk shared by its GPUs) and to
    recompute it (its prefill FLOPs on the rank, ``kvplan perf``'s ``prefill_bound``, at the
    GPU's matmul peak times ``compute_efficiency``, default 0.6). The weight read is left out
    of the recompute: a prefix recomputed rides in its prompt's prefill, which reads them anyway.

    ``break_even`` per tier: the shortest prefix whose reload is faster. Recompute seconds per
    token never fall as the prefix grows (attention is causal) and reload seconds per token
    are constant, so past that length reload stays faster.
    """
    from kvplan.answers.performance import efficiency
    from kvplan.speed.roofline import DEFAULT_COMPUTE_EFFICIENCY, matmul_peak, rank_model

    engine = _choice(engine, "engine", TIER_ENGINES)
    ce = efficiency(
        "compute_efficiency",
        DEFAULT_COMPUTE_EFFICIENCY if compute_efficiency is None else compute_efficiency,
    )
    model, device, node = _resolve(spec, gpu, system)
    tp = as_parallel(tensor_parallel_size, "tensor_parallel_size")
    kv = as_optional_str(kv_cache_dtype, "kv_cache_dtype")
    asked = _asked(prefix_tokens)
    trained = model.max_position_embeddings or 131072
    given = trained if max_tokens is None else as_tokens(max_tokens, "max_tokens", minimum=1)
    top = max([given, *asked])
    dtype_engine = _DTYPE_ENGINE[engine]
    token_bytes = _rank_token_bytes(model, tp, dtype_engine, kv)
    m = rank_model(model, tp, kv, None, None, dtype_engine)
    if not m.num_parameters:
        raise UnitError(f"{model.name}: no parameter count; recompute cannot be timed")
    links = _links(node, tp)
    timing = _Timing(m, device, ce, token_bytes, links)
    rows = tuple(timing.row(n) for n in _ladder(top, asked))
    return ReloadVsRecompute(
        model=model.name,
        gpu=device.name,
        system=node.name,
        tensor_parallel_size=tp,
        kv_dtype=_dtype_name(model, dtype_engine, kv),
        rank_token_bytes=token_bytes,
        compute_efficiency=ce,
        matmul_peak_flops=matmul_peak(device, m.weights_format)[1],
        max_tokens=top,
        links=links,
        rows=rows,
        break_even=tuple(timing.break_even(link, top) for link in links),
    )


def _asked(prefix_tokens: object) -> list[int]:
    if prefix_tokens is None:
        return []
    values = as_values(prefix_tokens, "prefix_tokens", "a sequence of token counts")
    return [as_tokens(v, f"prefix_tokens[{i}]", minimum=1) for i, v in enumerate(values)]


@dataclass(frozen=True, slots=True)
class _Timing:
    m: RankModel
    gpu: GPU
    ce: Fraction
    token_bytes: int
    links: tuple[TierLink, ...]

    def recompute(self, tokens: int) -> Fraction:
        from kvplan.speed.roofline import prefill_bound

        return prefill_bound(self.m, self.gpu, tokens, self.ce).compute_seconds / self.ce

    def reload(self, link: TierLink, tokens: int) -> Fraction | None:
        if not link.bytes_per_s:
            return None
        return Fraction(tokens * self.token_bytes * link.shared_by, link.bytes_per_s)

    def row(self, tokens: int) -> ReloadRow:
        return ReloadRow(
            prefix_tokens=tokens,
            rank_bytes=tokens * self.token_bytes,
            recompute_seconds=self.recompute(tokens),
            reload_seconds=tuple(self.reload(link, tokens) for link in self.links),
        )

    def faster(self, link: TierLink, tokens: int) -> bool:
        reload = self.reload(link, tokens)
        return reload is not None and reload < self.recompute(tokens)

    def break_even(self, link: TierLink, top: int) -> BreakEven:
        """The shortest prefix in [1, top] whose reload over ``link`` is faster (binary
        search: the answer's set is every length from it on, see reload_vs_recompute)."""
        if not link.bytes_per_s:
            return BreakEven(link.tier, None, "unknown")
        if self.faster(link, 1):
            return BreakEven(link.tier, None, "always")
        if not self.faster(link, top):
            return BreakEven(link.tier, None, "never")
        lo, hi = 1, top  # reload slower at lo, faster at hi
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if self.faster(link, mid) else (mid, hi)
        return BreakEven(link.tier, hi, "from")
