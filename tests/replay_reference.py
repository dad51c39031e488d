"""A plain, block-by-block replay of vLLM's prefix cache, kept as the tests' reference for
kvplan.cache_sim.prefix (which keeps its state per trace block to run fast): both must give the
same hits, evictions and waits. One GPU pool, no lower tiers.

vLLM's block pool (vllm/v1/core/block_pool.py, kv_cache_manager.py) as modelled here:

- the pool holds ``num_blocks`` blocks of ``block_tokens`` tokens; a free block sits in one
  queue, least recently freed first, whether or not it still holds a cached prefix block;
- a request's full input blocks are named by their prefix (here: the Mooncake block that holds
  them and their place in it, so two requests share a block when the trace says their prefixes
  match over it); its hit is the longest run of its first blocks the pool holds, in use or free,
  leaving at least one input token to compute (``get_computed_blocks``);
- admission is first come, first served: the request at the head of the queue is admitted when
  the free queue holds the blocks it needs for its input and output beyond the hit (its hit
  blocks that sit in the free queue leave it); new blocks come from the front of the free queue,
  and a block taken there that still held a prefix block evicts it;
- a request keeps its blocks until it finishes, ``service_ms`` after its admission; then they
  go back to the end of the free queue, its last block first (so a prefix's tail is evicted
  before its head), and stay cached until taken.

The service time is the caller's model of one request (a function of the request and the
tokens it computes). Each block is touched a bounded number of times, so a replay is linear in
the blocks of the trace; the pool's bookkeeping grows with ``num_blocks``, the cache map with the
distinct blocks cached at once.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from kvplan.arguments import as_int
from kvplan.cache_sim.trace import MOONCAKE_BLOCK_TOKENS, TraceRequest, reusable_blocks
from kvplan.errors import UnitError

__all__ = ["simulate_prefix_cache"]

#: a request's service time in ms: (the request, the input tokens it computes) -> ms
ServiceModel = Callable[[TraceRequest, int], int]
Name = tuple[int, int]  # (the Mooncake block id, the block's place in it)


def block_names(request: TraceRequest, block_tokens: int) -> Iterator[Name]:
    """The names of ``request``'s full input blocks of ``block_tokens`` tokens, in order."""
    per = MOONCAKE_BLOCK_TOKENS // block_tokens
    for index in range(request.input_tokens // block_tokens):
        yield request.block_ids[index // per], index % per


@dataclass(slots=True)
class PrefixCacheResult:
    """A replay's totals: requests served and refused (longer than the pool), input tokens,
    those found cached, blocks evicted from the cache, the most requests running at once, and
    the time requests waited for blocks (ms, summed)."""

    num_requests: int = 0
    num_refused: int = 0
    input_tokens: int = 0
    hit_tokens: int = 0
    evicted_blocks: int = 0
    peak_running: int = 0
    wait_ms: int = 0
    evictions: list[Name] = field(default_factory=list)  # in order, when kept

    @property
    def computed_tokens(self) -> int:
        """Input tokens prefilled: not found in the cache."""
        return self.input_tokens - self.hit_tokens

    @property
    def hit_ratio(self) -> float:
        return self.hit_tokens / self.input_tokens if self.input_tokens else 0.0


@dataclass(slots=True)
class _Pool:
    """The free queue: ``fresh`` blocks never used at its front (slots ``used`` on), then the
    freed ones (slot -> its cached name or None) in the order freed; what each name is cached
    in, and each slot's users."""

    fresh: int
    free: OrderedDict[int, Name | None] = field(default_factory=OrderedDict)
    cached: dict[Name, int] = field(default_factory=dict)
    names: dict[int, Name] = field(default_factory=dict)
    users: dict[int, int] = field(default_factory=dict)
    used: int = 0

    @property
    def num_free(self) -> int:
        return self.fresh + len(self.free)

    def hit(self, names: list[Name]) -> list[int]:
        out = []
        for name in names:
            slot = self.cached.get(name)
            if slot is None:
                break
            out.append(slot)
        return out

    def take(self, result: PrefixCacheResult, keep: bool) -> int:
        if self.fresh:
            self.fresh -= 1
            self.used += 1
            return self.used - 1
        slot, name = self.free.popitem(last=False)
        if name is not None:
            if self.cached.get(name) == slot:
                del self.cached[name]
            del self.names[slot]
            result.evicted_blocks += 1
            if keep:
                result.evictions.append(name)
        return slot


def simulate_prefix_cache(
    requests: Iterable[TraceRequest],
    *,
    num_blocks: int,
    block_tokens: int = 16,
    service_ms: ServiceModel,
    keep_evictions: bool = False,
) -> PrefixCacheResult:
    """Replay ``requests`` (in arrival order) through a pool of ``num_blocks`` blocks of
    ``block_tokens`` tokens (a divisor of the trace's 512-token blocks), each request held
    ``service_ms(request, computed_tokens)`` after admission (see the module docstring).
    ``keep_evictions`` records each evicted block's name in order. Raises UnitError for a
    block size that does not divide 512 or a pool under one block."""
    as_int(num_blocks, "num_blocks", minimum=1)
    as_int(block_tokens, "block_tokens", minimum=1)
    if MOONCAKE_BLOCK_TOKENS % block_tokens:
        raise UnitError(
            f"block_tokens {block_tokens}: must divide the trace's {MOONCAKE_BLOCK_TOKENS}-token"
            " blocks"
        )
    replay = _Replay(num_blocks, block_tokens, service_ms, keep_evictions)
    for request in requests:
        # every finish before this arrival frees blocks, and the queue moves at each one
        while replay.running and replay.running[0][0] <= request.timestamp_ms:
            replay.step(replay.running[0][0])
        replay.waiting.append(request)
        replay.admit(request.timestamp_ms)
    while replay.running:  # the rest finish; the queue moves at each finish
        replay.step(replay.running[0][0])
    return replay.result


@dataclass(slots=True)
class _Replay:
    """One replay's state: the pool, the queue of requests waiting, the running ones
    (finish ms, arrival order, their blocks) and the totals."""

    num_blocks: int
    block_tokens: int
    service_ms: ServiceModel
    keep: bool
    pool: _Pool = field(init=False)
    result: PrefixCacheResult = field(default_factory=PrefixCacheResult)
    waiting: deque[TraceRequest] = field(default_factory=deque)
    running: list[tuple[int, int, list[int]]] = field(default_factory=list)
    order: int = 0

    def __post_init__(self) -> None:
        self.pool = _Pool(self.num_blocks)

    def step(self, now: int) -> None:
        """Finish every request due by ``now``, then admit what then fits."""
        pool = self.pool
        while self.running and self.running[0][0] <= now:
            _, _, slots = heapq.heappop(self.running)
            for slot in reversed(slots):
                pool.users[slot] -= 1
                if not pool.users[slot]:
                    del pool.users[slot]
                    pool.free[slot] = pool.names.get(slot)
        self.admit(now)

    def admit(self, now: int) -> None:
        """Admit the waiting requests, first come first served, while the head fits."""
        pool, bs = self.pool, self.block_tokens
        while self.waiting:
            request = self.waiting[0]
            names = list(block_names(request, bs))
            total = -(-(request.input_tokens + request.output_tokens) // bs)
            if total > self.num_blocks:
                self.waiting.popleft()
                self.result.num_refused += 1
                continue
            hits = pool.hit(names[: reusable_blocks(request, bs)])
            in_queue = sum(1 for slot in hits if slot in pool.free)
            if total - len(hits) > pool.num_free - in_queue:
                return
            self.waiting.popleft()
            self._start(request, names, hits, total, now)

    def _start(
        self, request: TraceRequest, names: list[Name], hits: list[int], total: int, now: int
    ) -> None:
        pool, result = self.pool, self.result
        for slot in hits:
            pool.free.pop(slot, None)
            pool.users[slot] = pool.users.get(slot, 0) + 1
        slots = list(hits)
        taken = [pool.take(result, self.keep) for _ in range(len(hits), total)]
        for index, slot in enumerate(taken, start=len(hits)):
            pool.users[slot] = 1
            if index < len(names) and names[index] not in pool.cached:
                # a full input block is cached once computed (a name already cached in
                # another block, past a hit cut short, keeps that block)
                pool.cached[names[index]] = slot
                pool.names[slot] = names[index]
            slots.append(slot)
        hit_tokens = len(hits) * self.block_tokens
        result.num_requests += 1
        result.input_tokens += request.input_tokens
        result.hit_tokens += hit_tokens
        result.wait_ms += now - request.timestamp_ms
        took = as_int(self.service_ms(request, request.input_tokens - hit_tokens), "service_ms")
        heapq.heappush(self.running, (now + took, self.order, slots))
        self.order += 1
        result.peak_running = max(result.peak_running, len(self.running))
