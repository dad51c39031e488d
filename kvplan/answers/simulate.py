"""``kvplan simulate TRACE``: a request trace replayed through vLLM's prefix cache on the pool
vLLM gives a deployment (kvplan.cache_sim.prefix), with lower tiers (host memory, local disk, a
remote pool) below it, each request held for the time the roofline gives its prefill and its
decode (kvplan.answers.performance, as ``kvplan perf`` estimates) plus its loads.

The service model, one request at a time: the input tokens found in no tier at the prefill
rate of the trace's mean prompt, each output token at the decode step of one sequence of that
length, and each block loaded from a tier its bytes over the tier's link. Batching would share
those steps; the model keeps requests in the pool as long as a lone request would stay, so it
errs toward more waiting, not fewer hits.

Tier links, per GPU, one direction: host memory over the system's ``host_link_bytes_per_s``
(PCIe or NVLink-C2C), disk at the node's ``disk_bytes_per_s`` shared by its GPUs, a remote pool
over ``scale_out_bytes_per_s`` (the catalog system of the GPU; kvplan.hardware.systems), unless
the caller gives the link. A block's bytes are those of one block of every KV cache group
(``page_bytes x group_size x num_groups``), what an offload moves for 16 tokens; the pool
is vLLM's blocks less its null block (from 0.32), over the groups a block of tokens takes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING

from kvplan.arguments import (
    as_fraction,
    as_instance,
    as_int,
    as_optional_int,
    as_optional_str,
    as_parallel,
    as_path,
    as_str,
    as_values,
)
from kvplan.cache_sim.formats import TRACE_FORMATS, detect_format, read_trace
from kvplan.cache_sim.prefix import LowerTier, PrefixCacheResult, simulate_prefix_cache
from kvplan.cache_sim.radix import simulate_radix_cache
from kvplan.cache_sim.trace import MOONCAKE_BLOCK_TOKENS, TraceRequest
from kvplan.errors import KvplanError, UnitError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from kvplan.hardware.gpus import GPU
    from kvplan.model.spec import ModelSpec

__all__ = ["TIER_NAMES", "CurvePoint", "TierSize", "TraceReplay", "hit_rate_curve", "replay_trace"]

#: the lower tiers a replay takes, top first
TIER_NAMES = ("host", "disk", "remote")
#: the sizes of a curve, as multiples of the tier's size asked
CURVE_MULTIPLES = (
    Fraction(0),
    Fraction(1, 8),
    Fraction(1, 4),
    Fraction(1, 2),
    Fraction(1),
    Fraction(2),
    Fraction(4),
)


@dataclass(frozen=True, slots=True)
class TierSize:
    """A lower tier asked for: ``host``, ``disk`` or ``remote``, its size in bytes for the
    GPU, and its link in bytes/s (None: the catalog system's for the GPU)."""

    name: str
    size_bytes: int
    bytes_per_s: int | None = None

    def __post_init__(self) -> None:
        as_str(self.name, "name")
        if self.name not in TIER_NAMES:
            raise UnitError(f"tier {self.name!r}: expected one of {', '.join(TIER_NAMES)}")
        as_int(self.size_bytes, "size_bytes")
        if self.bytes_per_s is not None:
            as_int(self.bytes_per_s, "bytes_per_s", minimum=1)


@dataclass(frozen=True, slots=True)
class TraceReplay:
    """A replay: the deployment's pool (blocks of ``block_tokens``, ``block_bytes`` each), the
    service rates (seconds a prefilled token, seconds a decode step, prefill FLOPs a token),
    the lower tiers with their links and the totals."""

    model: str
    gpu: str
    num_blocks: int
    block_tokens: int
    prefill_seconds_per_token: Fraction
    decode_seconds_per_token: Fraction
    prefill_flops_per_token: int
    result: PrefixCacheResult
    block_bytes: int = 0
    tiers: tuple[TierSize, ...] = ()
    engine: str = "vllm"

    @property
    def saved_flops(self) -> int:
        """Prefill FLOPs the GPU's hits and the tiers' loads spare, at the mean prompt's."""
        return self.result.reused_tokens * self.prefill_flops_per_token


@dataclass(frozen=True, slots=True)
class CurvePoint:
    """One replay of a curve: the size of the tier varied (bytes, blocks) and the totals."""

    size_bytes: int
    num_blocks: int
    result: PrefixCacheResult


@dataclass(frozen=True, slots=True)
class _Setup:
    """What every replay of one deployment shares: the pool, the rates, the tiers' links."""

    model: str
    gpu: str
    num_blocks: int
    block_tokens: int
    block_bytes: int
    prefill: Fraction
    decode: Fraction
    flops: int
    tiers: tuple[TierSize, ...]
    read: Callable[[], Iterator[TraceRequest]]
    trace_block_tokens: int
    engine: str = "vllm"

    def service_ms(self, request: TraceRequest, computed: int) -> int:
        seconds = computed * self.prefill + request.output_tokens * self.decode
        return -(-seconds.numerator * 1000 // seconds.denominator)

    def run(self, num_blocks: int, tiers: Sequence[TierSize]) -> PrefixCacheResult:
        lower = [
            LowerTier(
                t.name,
                t.size_bytes // self.block_bytes,
                Fraction(self.block_bytes, t.bytes_per_s or 1),
            )
            for t in tiers
        ]
        if self.engine == "sglang":
            return simulate_radix_cache(
                self.read(),
                num_pages=num_blocks,
                page_tokens=self.block_tokens,
                service_ms=self.service_ms,
                tiers=lower,
                trace_block_tokens=self.trace_block_tokens,
            )
        return simulate_prefix_cache(
            self.read(),
            num_blocks=num_blocks,
            block_tokens=self.block_tokens,
            service_ms=self.service_ms,
            tiers=lower,
            trace_block_tokens=self.trace_block_tokens,
        )


def _scan(read: Callable[[], Iterator[TraceRequest]]) -> tuple[int, int]:
    """The trace's mean input and its longest request (input and output), in tokens."""
    count = total = longest = 0
    for request in read():
        count += 1
        total += request.input_tokens
        longest = max(longest, request.input_tokens + request.output_tokens)
    return (total // count if count else 1), max(longest, 1)


def _format(path: str | Path, asked: str) -> str:
    """The trace's format: ``asked`` (``token-ids`` or ``token_ids`` alike), or its first
    line's for ``auto``."""
    name = as_str(asked, "trace_format").strip().lower().replace("-", "_")
    if name == "auto":
        return detect_format(path)
    if name not in TRACE_FORMATS:
        shown = ", ".join(f.replace("_", "-") for f in TRACE_FORMATS)
        raise UnitError(f"trace format {asked!r}: expected auto, {shown}")
    return name


def _links(gpu: GPU, tiers: Sequence[TierSize]) -> tuple[TierSize, ...]:
    """The tiers with their links: given, else the catalog system's for ``gpu``."""
    from kvplan.hardware.systems import system_for_gpu

    system = system_for_gpu(gpu)
    out = []
    for tier in tiers:
        if tier.bytes_per_s is None:
            rate = 0
            if system is not None:
                rate = {
                    "host": system.host_link_bytes_per_s,
                    "disk": system.disk_bytes_per_s // system.gpus_per_node,
                    "remote": system.scale_out_bytes_per_s,
                }[tier.name]
            if not rate:
                raise KvplanError(
                    f"tier {tier.name}: the catalog has no {tier.name} link for {gpu.name};"
                    f" give it (e.g. --link {tier.name}=64GB/s)"
                )
            tier = replace(tier, bytes_per_s=rate)
        out.append(tier)
    return tuple(out)


def _check_tiers(tiers: Sequence[TierSize]) -> None:
    """ArgumentTypeError unless ``tiers`` are TierSize values; UnitError unless each is given
    at most once, top first."""
    for tier in as_values(tiers, "tiers", "a sequence of TierSize"):
        as_instance(tier, TierSize, "tiers", "TierSize values")
    names = [t.name for t in tiers]
    if names != [n for n in TIER_NAMES if n in names]:
        raise UnitError(f"tiers: each at most once, in the order {', '.join(TIER_NAMES)}")


def _setup(
    spec: ModelSpec | str,
    gpu: GPU | str,
    path: str | Path,
    tiers: Sequence[TierSize],
    settings: tuple[Fraction | float | str | None, str | None, str | None, int],
    trace: tuple[str, str, int | None],
) -> _Setup:
    """What every replay of one deployment shares (``settings``: utilization, KV cache
    dtype, version, TP size; ``trace``: the format asked, the engine, SGLang's page size)."""
    from kvplan.answers.performance import perf
    from kvplan.catalog.lookup import as_spec
    from kvplan.engines import vllm
    from kvplan.hardware.lookup import as_gpu

    spec, gpu, path = as_spec(spec), as_gpu(gpu), as_path(path, "path")
    utilization, kv_cache_dtype, version, tp = settings
    if utilization is not None:
        utilization = as_fraction(utilization, "gpu_memory_utilization")
    kv_cache_dtype = as_optional_str(kv_cache_dtype, "kv_cache_dtype")
    version = as_optional_str(version, "version")
    tp = as_parallel(tp, "tensor_parallel_size")
    asked_settings = (utilization, kv_cache_dtype, version, tp)
    asked, engine, page_size = trace
    engine = as_str(engine, "engine")
    page_size = as_optional_int(page_size, "page_size", minimum=1, maximum=MOONCAKE_BLOCK_TOKENS)
    _check_tiers(tiers)
    if engine not in ("vllm", "sglang"):
        raise UnitError(f"engine {engine!r}: expected vllm or sglang")
    fmt = _format(path, asked)
    # the blocks the engine hashes or matches, as a token-id trace is named
    block = vllm.config(1).block_size if engine == "vllm" else page_size or 1
    trace_block = MOONCAKE_BLOCK_TOKENS if fmt == "mooncake" else block

    def read() -> Iterator[TraceRequest]:
        return read_trace(path, fmt, trace_block)

    mean, longest = _scan(read)
    length = min(longest, spec.max_position_embeddings or longest)
    if engine == "vllm":
        pool = _vllm_pool(spec, gpu, length, asked_settings)
    else:
        pool = _sglang_pool(spec, gpu, block, asked_settings)
    speed = perf(
        spec,
        gpu,
        context_tokens=mean,
        prompt_tokens=mean,
        tensor_parallel_size=tp,
        kv_cache_dtype=kv_cache_dtype,
        engine="vllm",
    )
    return _Setup(
        spec.name,
        gpu.name,
        pool[0],
        block,
        pool[1],
        speed.prefill.estimate_seconds / mean,
        speed.decode.estimate_seconds,
        speed.prefill.flops // mean,
        _links(gpu, tiers),
        read,
        trace_block,
        engine,
    )


_Settings = tuple[Fraction | None, str | None, str | None, int]


def _vllm_pool(spec: ModelSpec, gpu: GPU, length: int, settings: _Settings) -> tuple[int, int]:
    """vLLM's pool for requests of ``length`` tokens: blocks and the bytes of one on a
    rank."""
    from kvplan.engines import vllm

    utilization, kv_cache_dtype, version, tp = settings
    cfg = vllm.config(
        length,
        tensor_parallel_size=tp,
        gpu_memory_utilization=Fraction(9, 10) if utilization is None else utilization,
        kv_cache_dtype=kv_cache_dtype,
        version=vllm.resolve_version(version).line,
    )
    pool = vllm.profile(spec, gpu, cfg)
    return pool.fit_blocks // pool.num_groups, pool.page_bytes * pool.group_size * pool.num_groups


def _sglang_pool(spec: ModelSpec, gpu: GPU, page: int, settings: _Settings) -> tuple[int, int]:
    """SGLang's token pool in pages of ``page`` tokens (``mem_fraction_static`` its own
    unless given) and the KV bytes of one page on a rank (its ``cell_size``)."""
    from kvplan.engines import sglang

    utilization, kv_cache_dtype, version, tp = settings
    result = sglang.kv_cache(
        spec,
        gpu,
        tp=tp,
        mem_fraction_static=None if utilization is None else float(utilization),
        kv_cache_dtype=kv_cache_dtype,
        page_size=page,
        version=version,
    )
    tokens = result.kv_cache_tokens or 0
    if tokens < page:
        raise KvplanError(f"SGLang's pool for {spec.name} on {gpu.name} holds no page")
    return tokens // page, sglang.cell_size_bytes(spec, tp=tp, kv_cache_dtype=kv_cache_dtype) * page


def replay_trace(
    spec: ModelSpec | str,
    gpu: GPU | str,
    path: str | Path,
    *,
    gpu_memory_utilization: Fraction | float | str | None = None,
    kv_cache_dtype: str | None = None,
    version: str | None = None,
    tiers: Sequence[TierSize] = (),
    trace_format: str = "auto",
    engine: str = "vllm",
    page_size: int | None = None,
    tensor_parallel_size: int = 1,
) -> TraceReplay:
    """Replay the trace ``path`` through vLLM's prefix cache of ``spec`` on ``gpu`` (one GPU,
    its pool as ``vllm.profile`` gives it for the trace's longest request, at most the model's
    trained length) and the lower ``tiers`` below it (host, disk, remote, in that order).
    ``trace_format``: mooncake, token-ids, prefix-groups or auto (from the first line; see
    kvplan.cache_sim.formats). With ``tensor_parallel_size`` each rank holds its share of
    every block and loads it over its own link. ``engine`` sglang replays SGLang's radix cache
    (kvplan.cache_sim.radix) on its token pool in pages of ``page_size`` (default 1), its
    ``mem_fraction_static`` the utilization when given; its tiers are HiCache's. Raises
    SpecError naming the trace's line for a bad trace, KvplanError for a tier whose link the
    catalog lacks."""
    s = _setup(
        spec,
        gpu,
        path,
        tiers,
        (gpu_memory_utilization, kv_cache_dtype, version, tensor_parallel_size),
        (trace_format, engine, page_size),
    )
    result = s.run(s.num_blocks, s.tiers)
    return TraceReplay(
        s.model,
        s.gpu,
        s.num_blocks,
        s.block_tokens,
        s.prefill,
        s.decode,
        s.flops,
        result,
        s.block_bytes,
        s.tiers,
        s.engine,
    )


def hit_rate_curve(
    spec: ModelSpec | str,
    gpu: GPU | str,
    path: str | Path,
    *,
    gpu_memory_utilization: Fraction | float | str | None = None,
    kv_cache_dtype: str | None = None,
    version: str | None = None,
    tiers: Sequence[TierSize] = (),
    multiples: Sequence[Fraction] = CURVE_MULTIPLES,
    trace_format: str = "auto",
    engine: str = "vllm",
    page_size: int | None = None,
    tensor_parallel_size: int = 1,
) -> tuple[str, list[CurvePoint]]:
    """How the hit rate grows with the lowest tier's size (the GPU pool's when no tier is
    given; its multiples above 1 are pools no GPU of the kind holds, shown as what more memory
    would buy): the tier varied and one replay per multiple of its size."""
    s = _setup(
        spec,
        gpu,
        path,
        tiers,
        (gpu_memory_utilization, kv_cache_dtype, version, tensor_parallel_size),
        (trace_format, engine, page_size),
    )
    points = []
    for multiple in as_values(multiples, "multiples", "a sequence of Fractions"):
        if not isinstance(multiple, Fraction | int) or multiple < 0:
            raise UnitError("multiples: expected Fractions of at least 0")
        if s.tiers:
            last = s.tiers[-1]
            size = int(last.size_bytes * multiple)
            result = s.run(s.num_blocks, (*s.tiers[:-1], replace(last, size_bytes=size)))
            points.append(CurvePoint(size, size // s.block_bytes, result))
        elif multiple > 0:
            blocks = max(1, int(s.num_blocks * multiple))
            points.append(CurvePoint(blocks * s.block_bytes, blocks, s.run(blocks, ())))
    return (s.tiers[-1].name if s.tiers else "gpu"), points
