"""A request trace replayed through vLLM's prefix cache on one pool of KV blocks, with optional
lower tiers (host memory, disk, a remote pool) below it.

vLLM's block pool (vllm/v1/core/block_pool.py, kv_cache_manager.py) as modelled here:

- the pool holds ``num_blocks`` blocks of ``block_tokens`` tokens; a free block sits in one
  queue, least recently freed first, whether or not it still holds a cached prefix block;
- a request's full input blocks are named by their prefix (here: the trace block that holds
  them and their place in it, so two requests share a block when the trace says their prefixes
  match over it); its hit is the longest run of its first blocks the pool holds, in use or free,
  leaving at least one input token to compute (``get_computed_blocks``);
- admission is first come, first served: the request at the head of the queue is admitted when
  the free queue holds the blocks it needs for its input and output beyond the hit (its hit
  blocks that sit in the free queue leave it); its new blocks are all taken at once from the
  front of the free queue (``get_new_blocks``), a block taken there that still held a prefix
  block evicting it, and then its full input blocks are named (``cache_full_blocks``; a name
  still cached elsewhere, past a hit cut short by the one-token rule, is not named twice);
- a request keeps its blocks until it finishes, ``service_ms`` after its admission; then they
  go back to the end of the free queue, its last block first (so a prefix's tail is evicted
  before its head), and stay cached until taken.

Lower tiers (vLLM's OffloadingConnector with its LRU manager, vllm/v1/kv_offload/; LMCache's
local CPU and disk backends; SGLang's HiCache host pool with write-through) as modelled here:
each tier holds ``num_blocks`` blocks of the pool's size; every full input block a request
holds is written to every tier when it runs (write-through, so the tiers include what the GPU
holds), and touched there last block first, so the request's first block is the most recent
(the LRU manager's ``touch`` walks the hashes reversed); a tier full evicts its least recently
touched block. A request's hit continues from where the GPU's ends into the first tier, then
the next: those blocks are loaded, each over the tier's link in ``seconds_per_block``, added to
the request's service time.

How it stays fast: a full pool of 16-token blocks would be touched once a block. Here every
state is kept per trace block: how many of its first blocks the pool holds (a prefix, because a
block is freed no earlier than the blocks after it in every request that holds it), which runs
of them sit in the free queue, how many each running request holds; each tier likewise keeps a
count per trace block in LRU order. A request costs one step per trace block and per run
evicted, so a replay is linear in the trace's blocks of 512 tokens, not its 16-token blocks,
and memory grows with the distinct trace blocks cached.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Protocol

from kvplan.arguments import as_int, as_str
from kvplan.cache_sim.trace import (
    MOONCAKE_BLOCK_TOKENS,
    TraceRequest,
    full_blocks,
    reusable_blocks,
)
from kvplan.errors import UnitError

__all__ = ["LowerTier", "PrefixCacheResult", "TierResult", "simulate_prefix_cache"]

#: a request's service time in ms: (the request, the input tokens it computes) -> ms
ServiceModel = Callable[[TraceRequest, int], int]
Name = tuple[int, int]  # (the trace block id, the block's place in it)
_ANON = -1  # the key of blocks that hold no name (output, a partial block, a second copy)
Run = tuple[int, int, int]  # (trace block id, first place, end place) of a request's hit


@dataclass(frozen=True, slots=True)
class LowerTier:
    """A tier below the GPU: its name, its size in blocks of the pool's block size, and the
    time one block takes to load from it to the GPU (seconds)."""

    name: str
    num_blocks: int
    seconds_per_block: Fraction = Fraction(0)

    def __post_init__(self) -> None:
        as_str(self.name, "name")
        as_int(self.num_blocks, "num_blocks", minimum=0)
        if not isinstance(self.seconds_per_block, Fraction | int) or self.seconds_per_block < 0:
            raise UnitError("seconds_per_block: expected a Fraction of at least 0")


@dataclass(slots=True)
class TierResult:
    """One lower tier's totals: input tokens it supplied (the hit past the tiers above), blocks
    loaded to the GPU, blocks written to it, blocks it evicted."""

    name: str
    num_blocks: int
    hit_tokens: int = 0
    loaded_blocks: int = 0
    stored_blocks: int = 0
    evicted_blocks: int = 0


@dataclass(slots=True)
class PrefixCacheResult:
    """A replay's totals: requests served and refused (longer than the pool), input tokens,
    those found cached on the GPU, blocks evicted from the GPU's cache, the most requests
    running at once, the time requests waited for blocks and spent loading from lower tiers
    (ms, summed, and the most one request spent loading), and each lower tier's totals."""

    num_requests: int = 0
    num_refused: int = 0
    input_tokens: int = 0
    hit_tokens: int = 0
    evicted_blocks: int = 0
    peak_running: int = 0
    wait_ms: int = 0
    load_ms: int = 0
    max_load_ms: int = 0
    tiers: list[TierResult] = field(default_factory=list)
    evictions: list[Name] = field(default_factory=list)  # in order, when kept

    @property
    def reused_tokens(self) -> int:
        """Input tokens not prefilled: found on the GPU or loaded from a lower tier."""
        return self.hit_tokens + sum(t.hit_tokens for t in self.tiers)

    @property
    def computed_tokens(self) -> int:
        """Input tokens prefilled: found in no tier."""
        return self.input_tokens - self.reused_tokens

    @property
    def hit_ratio(self) -> float:
        """The GPU's hit ratio in tokens."""
        return self.hit_tokens / self.input_tokens if self.input_tokens else 0.0

    @property
    def reuse_ratio(self) -> float:
        """The hit ratio of all tiers together, in tokens."""
        return self.reused_tokens / self.input_tokens if self.input_tokens else 0.0


def extend_hit(
    held: Mapping[int, int], named: Sequence[tuple[int, int]], at: tuple[int, int], left: int
) -> tuple[tuple[int, int], list[Run]]:
    """Continue a hit from ``at`` (index into ``named``, place in that trace block) over the
    blocks ``held`` has (trace block -> its first blocks held), at most ``left`` blocks: the
    new position and the runs found."""
    index, place = at
    runs: list[Run] = []
    while index < len(named) and left > 0:
        block, full = named[index]
        have = min(held.get(block, 0), full, place + left)
        if have <= place:
            break
        runs.append((block, place, have))
        left -= have - place
        if have < full:
            return (index, have), runs
        index, place = index + 1, 0
    return (index, place), runs


@dataclass(slots=True)
class _Pool:
    """The GPU's blocks: ``fresh`` never used; the free queue of runs ``[block, lo, hi]`` (the
    trace block's places lo..hi-1, or ``_ANON`` with hi-lo unnamed blocks), oldest first, and
    each trace block's runs there, newest last; how many first blocks of each trace block are
    cached; how many running requests hold how many of them."""

    fresh: int
    queue: OrderedDict[int, list[int]] = field(default_factory=OrderedDict)
    runs: dict[int, deque[int]] = field(default_factory=dict)
    cached: dict[int, int] = field(default_factory=dict)
    holders: dict[int, dict[int, int]] = field(default_factory=dict)
    queued: int = 0
    next_run: int = 0

    @property
    def num_free(self) -> int:
        return self.fresh + self.queued

    def most_held(self, block: int) -> int:
        holders = self.holders.get(block)
        return max(holders) if holders else 0

    def push(self, block: int, lo: int, hi: int) -> None:
        """Free places lo..hi-1 of ``block`` to the end of the queue."""
        self.queue[self.next_run] = [block, lo, hi]
        if block != _ANON:
            ids = self.runs.get(block)
            if ids is None:
                self.runs[block] = deque((self.next_run,))
            else:
                ids.append(self.next_run)
        self.next_run += 1
        self.queued += hi - lo

    def unqueue(self, block: int, end: int) -> None:
        """Take places up to ``end`` of ``block`` out of the free queue (a hit on them)."""
        ids = self.runs.get(block)
        while ids:
            run = self.queue[ids[-1]]
            if run[1] >= end:
                return
            if run[2] <= end:
                self.queued -= run[2] - run[1]
                del self.queue[ids.pop()]
            else:
                self.queued -= end - run[1]
                run[1] = end
                return
        self.runs.pop(block, None)

    def hold(self, block: int, count: int) -> None:
        holders = self.holders.get(block)
        if holders is None:
            self.holders[block] = {count: 1}
        else:
            holders[count] = holders.get(count, 0) + 1

    def release(self, block: int, count: int) -> None:
        """A running request lets go of ``block``'s first ``count`` places; those no other
        request holds go to the end of the free queue."""
        holders = self.holders[block]
        before = max(holders)
        holders[count] -= 1
        if not holders[count]:
            del holders[count]
        after = max(holders) if holders else 0
        if not holders:
            del self.holders[block]
        if after < before:
            self.push(block, after, before)

    def take(self, count: int, result: PrefixCacheResult, keep: bool) -> None:
        """Take ``count`` blocks: fresh ones first, then the queue's front, evicting names."""
        fresh = min(self.fresh, count)
        self.fresh -= fresh
        count -= fresh
        while count:
            key, run = next(iter(self.queue.items()))
            block, lo, hi = run
            took = min(count, hi - lo)
            count -= took
            self.queued -= took
            run[2] = hi - took
            if block != _ANON:
                self.cached[block] -= took
                result.evicted_blocks += took
                if keep:
                    result.evictions.extend((block, p) for p in range(hi - 1, hi - took - 1, -1))
            if run[2] == run[1]:
                del self.queue[key]
                if block != _ANON:
                    ids = self.runs[block]
                    ids.popleft()
                    if not ids:
                        del self.runs[block]
                    if not self.cached[block]:
                        del self.cached[block]


@dataclass(slots=True)
class TierState:
    """A lower tier: each trace block's first blocks held, least recently touched first."""

    spec: LowerTier
    result: TierResult
    lru: OrderedDict[int, int] = field(default_factory=OrderedDict)
    used: int = 0

    def store(self, named: Sequence[tuple[int, int]]) -> None:
        """Write a request's full blocks (those missing) and touch them, last first."""
        lru = self.lru
        for block, full in reversed(named):
            old = lru.pop(block, 0)
            lru[block] = max(old, full)
            if full > old:
                self.used += full - old
                self.result.stored_blocks += full - old
        over = self.used - self.spec.num_blocks
        while over > 0:
            block, count = next(iter(lru.items()))
            took = min(count, over)
            over -= took
            self.used -= took
            self.result.evicted_blocks += took
            if took == count:
                del lru[block]
            else:
                lru[block] = count - took


def check_pool(
    units: int, unit_tokens: int, trace_block_tokens: int, names: tuple[str, str]
) -> None:
    """UnitError unless a pool of ``units`` units of ``unit_tokens`` tokens (its parameters'
    ``names``) is at least one unit and its unit divides the trace's blocks."""
    as_int(units, names[0], minimum=1)
    as_int(unit_tokens, names[1], minimum=1)
    as_int(trace_block_tokens, "trace_block_tokens", minimum=1)
    if trace_block_tokens % unit_tokens:
        raise UnitError(
            f"{names[1]} {unit_tokens}: must divide the trace's {trace_block_tokens}-token blocks"
        )


def tier_states(tiers: Sequence[LowerTier], result: PrefixCacheResult) -> list[TierState]:
    """The replay's state of each lower tier, its totals kept in ``result``."""
    for tier in tiers:
        if not isinstance(tier, LowerTier):
            raise UnitError("tiers: expected LowerTier values")
    states = [TierState(t, TierResult(t.name, t.num_blocks)) for t in tiers]
    result.tiers = [t.result for t in states]
    return states


def load_from(
    tiers: Sequence[TierState],
    named: Sequence[tuple[int, int]],
    reached: tuple[tuple[int, int], int],
    unit_tokens: int,
) -> tuple[int, Fraction]:
    """Run a hit on from ``reached`` (its position, the units it may still cover) through
    each tier in turn, counting what each supplies: the units loaded and their seconds."""
    at, left = reached
    found_all, seconds = 0, Fraction(0)
    for tier in tiers:
        at, runs = extend_hit(tier.lru, named, at, left)
        found = sum(hi - lo for _, lo, hi in runs)
        left -= found
        found_all += found
        tier.result.hit_tokens += found * unit_tokens
        tier.result.loaded_blocks += found
        seconds += found * tier.spec.seconds_per_block
    return found_all, seconds


class _Steps(Protocol):
    running: list[Any]
    waiting: deque[TraceRequest]
    result: PrefixCacheResult

    def step(self, now: int) -> None: ...

    def admit(self, now: int) -> None: ...


def drive(replay: _Steps, requests: Iterable[TraceRequest]) -> PrefixCacheResult:
    """Feed ``requests`` in arrival order to ``replay``: every finish before an arrival frees
    its blocks and the queue moves at each one; then the rest finish."""
    for request in requests:
        while replay.running and replay.running[0][0] <= request.timestamp_ms:
            replay.step(replay.running[0][0])
        replay.waiting.append(request)
        replay.admit(request.timestamp_ms)
    while replay.running:
        replay.step(replay.running[0][0])
    return replay.result


def simulate_prefix_cache(
    requests: Iterable[TraceRequest],
    *,
    num_blocks: int,
    block_tokens: int = 16,
    service_ms: ServiceModel,
    tiers: Sequence[LowerTier] = (),
    trace_block_tokens: int = MOONCAKE_BLOCK_TOKENS,
    keep_evictions: bool = False,
) -> PrefixCacheResult:
    """Replay ``requests`` (in arrival order) through a pool of ``num_blocks`` blocks of
    ``block_tokens`` tokens (a divisor of the trace's ``trace_block_tokens``-token blocks) and
    the lower ``tiers`` below it, top first, each request held ``service_ms(request,
    computed_tokens)`` plus its loads after admission (see the module docstring).
    ``keep_evictions`` records each name the GPU evicts, in order. Raises UnitError for a block
    size that does not divide the trace's or a pool under one block."""
    check_pool(num_blocks, block_tokens, trace_block_tokens, ("num_blocks", "block_tokens"))
    replay = _Replay(num_blocks, block_tokens, trace_block_tokens // block_tokens, service_ms)
    replay.keep = keep_evictions
    replay.tiers = tier_states(tiers, replay.result)
    return drive(replay, requests)


@dataclass(slots=True)
class _Replay:
    """One replay's state: the pool, the tiers, the queue of requests waiting, the running
    ones (finish ms, arrival order, the trace blocks' places they hold, their unnamed blocks)
    and the totals."""

    num_blocks: int
    block_tokens: int
    per: int  # pool blocks a trace block
    service_ms: ServiceModel
    keep: bool = False
    tiers: list[TierState] = field(default_factory=list)
    pool: _Pool = field(init=False)
    result: PrefixCacheResult = field(default_factory=PrefixCacheResult)
    waiting: deque[TraceRequest] = field(default_factory=deque)
    running: list[tuple[int, int, list[tuple[int, int]], int]] = field(default_factory=list)
    order: int = 0

    def __post_init__(self) -> None:
        self.pool = _Pool(self.num_blocks)

    def step(self, now: int) -> None:
        """Finish every request due by ``now``, then admit what then fits."""
        pool = self.pool
        while self.running and self.running[0][0] <= now:
            _, _, held, unnamed = heapq.heappop(self.running)
            if unnamed:
                pool.push(_ANON, 0, unnamed)
            for block, count in reversed(held):
                pool.release(block, count)
        self.admit(now)

    def admit(self, now: int) -> None:
        """Admit the waiting requests, first come first served, while the head fits."""
        pool, bs = self.pool, self.block_tokens
        while self.waiting:
            request = self.waiting[0]
            total = -(-(request.input_tokens + request.output_tokens) // bs)
            if total > self.num_blocks:
                self.waiting.popleft()
                self.result.num_refused += 1
                continue
            named = full_blocks(request, bs, self.per)
            at, hits = extend_hit(pool.cached, named, (0, 0), reusable_blocks(request, bs))
            hit = sum(hi for _, _, hi in hits)
            in_queue = sum(max(0, hi - pool.most_held(b)) for b, _, hi in hits)
            if total - hit > pool.num_free - in_queue:
                return
            self.waiting.popleft()
            self._start(request, named, hits, (at, hit), total, now)

    def _start(
        self,
        request: TraceRequest,
        named: list[tuple[int, int]],
        hits: list[Run],
        reached: tuple[tuple[int, int], int],
        total: int,
        now: int,
    ) -> None:
        pool, result, bs = self.pool, self.result, self.block_tokens
        for block, _, hi in hits:
            pool.unqueue(block, hi)
        at, hit = reached
        left = reusable_blocks(request, bs) - hit
        loaded, loads = load_from(self.tiers, named, (at, left), bs)
        pool.take(total - hit, result, self.keep)
        held = self._name(named, {block: hi for block, _, hi in hits})
        for tier in self.tiers:
            tier.store(named)
        reused = hit + loaded
        result.num_requests += 1
        result.input_tokens += request.input_tokens
        result.hit_tokens += hit * bs
        result.wait_ms += now - request.timestamp_ms
        load_ms = -(-loads.numerator * 1000 // loads.denominator)
        result.load_ms += load_ms
        result.max_load_ms = max(result.max_load_ms, load_ms)
        took = as_int(self.service_ms(request, request.input_tokens - reused * bs), "service_ms")
        unnamed = total - sum(count for _, count in held)
        heapq.heappush(self.running, (now + took + load_ms, self.order, held, unnamed))
        self.order += 1
        result.peak_running = max(result.peak_running, len(self.running))

    def _name(self, named: list[tuple[int, int]], hit: dict[int, int]) -> list[tuple[int, int]]:
        """Name the request's new full blocks and hold them with its hit: the places of each
        trace block it holds named. Past a hit the one-token rule cut short, the name is
        still cached in another block: that block stays the named one, the request's copy is
        unnamed (the cut leaves one block of the last trace block, the rest being cached)."""
        pool, held = self.pool, []
        for block, full in named:
            count = hit.get(block, 0)
            if pool.cached.get(block, 0) <= count:
                count = full
                pool.cached[block] = full
            if count:
                pool.hold(block, count)
                held.append((block, count))
        return held
