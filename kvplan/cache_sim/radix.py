"""A request trace replayed through SGLang's radix cache (python/sglang/srt/mem_cache/
radix_cache.py) on its token pool.

As modelled here:

- the pool holds ``num_pages`` pages of ``page_tokens`` tokens (SGLang's ``--page-size``,
  default 1); the cached prefixes form a radix tree whose nodes are runs of pages, split where
  requests part (``_split_node``), each with a lock count (the running requests on it) and its
  last access;
- a request's hit is the longest run of its first full pages in the tree, leaving one input
  token to compute (``max_prefix_len = input_len - 1``); the nodes it passes are touched, the
  one split at its end too, and locked with their ancestors (``inc_lock_ref``) while it runs;
- admission is first come, first served: the head of the queue is admitted when the free pages
  and the unlocked (evictable) ones hold its input and output beyond the hit; to make room the
  tree evicts whole leaves, least recently accessed first, a parent becoming a leaf in its turn
  (``evict``), until enough pages are free;
- a request's full input pages join the tree when it is admitted, locked (its prefill caches
  them, ``cache_unfinished_req``); where the tree already holds them past a hit the one-token
  rule cut short, its copies are freed. When it finishes, ``service_ms`` after its admission,
  its own rest (output, a partial page; ``cache_finished_req``) becomes one leaf below them
  and its lock is dropped.

The pool's bookkeeping is per node, and nodes are runs inside one trace block, so a replay
costs one step per trace block a request passes and per node evicted.

Lower tiers (HiCache's host pool, ``--enable-hierarchical-cache`` with its write-through
policy, and storage below it) are kept as vLLM's are (kvplan.cache_sim.prefix): every full
input page a request holds is written to each tier when it is admitted and touched there last
page first; a hit runs on from the tree into each tier in turn, its pages loaded back
(``load_back``) over the tier's link and inserted into the tree like computed ones.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from kvplan.arguments import as_int
from kvplan.cache_sim.prefix import (
    LowerTier,
    PrefixCacheResult,
    ServiceModel,
    TierState,
    check_pool,
    drive,
    load_from,
    tier_states,
)
from kvplan.cache_sim.trace import (
    MOONCAKE_BLOCK_TOKENS,
    TraceRequest,
    full_blocks,
    reusable_blocks,
)

__all__ = ["simulate_radix_cache"]

_ROOT = -1


@dataclass(slots=True, eq=False)
class _Node:
    """A run of pages lo..hi-1 of one trace block (or, ``block`` < -1, a request's own tail),
    with its children keyed by (trace block, first place)."""

    block: int
    lo: int
    hi: int
    parent: _Node | None
    children: dict[tuple[int, int], _Node] = field(default_factory=dict)
    lock: int = 0
    access: int = 0

    @property
    def size(self) -> int:
        return self.hi - self.lo


@dataclass(slots=True)
class _Tree:
    """The radix tree and the pool: free pages, pages cached with no lock (evictable), the
    heap of leaves that may go (access, order, node; stale entries skipped), a clock."""

    free: int
    root: _Node = field(default_factory=lambda: _Node(_ROOT, 0, 0, None, lock=1))
    evictable: int = 0
    leaves: list[tuple[int, int, _Node]] = field(default_factory=list)
    clock: int = 0
    made: int = 0

    def touch(self, node: _Node) -> None:
        self.clock += 1
        node.access = self.clock
        if not node.children and not node.lock:
            self.made += 1
            heapq.heappush(self.leaves, (node.access, self.made, node))

    def split(self, node: _Node, at: int) -> _Node:
        """Split ``node`` at place ``at``: the new upper part is returned, ``node`` below."""
        parent = node.parent or self.root
        upper = _Node(node.block, node.lo, at, parent, lock=node.lock, access=node.access)
        del parent.children[(node.block, node.lo)]
        parent.children[(node.block, node.lo)] = upper
        node.lo, node.parent = at, upper
        upper.children[(node.block, at)] = node
        return upper

    def match(self, named: list[tuple[int, int]], left: int) -> list[_Node]:
        """The nodes of the longest cached run of ``named``'s pages, at most ``left``."""
        path: list[_Node] = []
        node = self.root
        for block, full in named:
            place = 0
            while place < full and left > 0:
                child = node.children.get((block, place))
                if child is None:
                    return path
                end = min(child.hi, full, place + left)
                if end < child.hi:
                    child = self.split(child, end)
                left -= end - place
                place, node = end, child
                path.append(child)
                self.touch(child)
            if place < full:
                return path
        return path

    def lock(self, node: _Node, by: int) -> None:
        """Lock (``by`` 1) or unlock (-1) ``node`` and its ancestors."""
        current: _Node | None = node
        while current is not None and current is not self.root:
            if by > 0 and not current.lock:
                self.evictable -= current.size
            current.lock += by
            if by < 0 and not current.lock:
                self.evictable += current.size
                if not current.children:
                    self.made += 1
                    heapq.heappush(self.leaves, (current.access, self.made, current))
            current = current.parent

    def evict(self, pages: int, result: PrefixCacheResult, keep: bool) -> None:
        """Free at least ``pages`` pages, whole leaves least recently accessed first."""
        while pages > 0 and self.leaves:
            access, _, node = heapq.heappop(self.leaves)
            parent = node.parent
            if node.children or node.lock or node.access != access or parent is None:
                continue
            if parent.children.get((node.block, node.lo)) is not node:
                continue
            del parent.children[(node.block, node.lo)]
            node.parent = None
            self.free += node.size
            self.evictable -= node.size
            pages -= node.size
            if node.block >= 0:
                result.evicted_blocks += node.size
                if keep:
                    result.evictions.extend(
                        (node.block, p) for p in range(node.hi - 1, node.lo - 1, -1)
                    )
            if parent is not self.root and not parent.children and not parent.lock:
                self.made += 1
                heapq.heappush(self.leaves, (parent.access, self.made, parent))

    def insert(self, named: list[tuple[int, int]], hit: int) -> _Node:
        """Insert a request's full input pages past its ``hit`` (the copies of runs cached
        elsewhere freed, as past a hit the one-token rule cut short); its last node."""
        node, walked = self.root, 0
        for block, full in named:
            place = 0
            while place < full:
                child = node.children.get((block, place))
                if child is None:
                    child = _Node(block, place, full, node)
                    node.children[(block, place)] = child
                    self.evictable += full - place
                    end = full
                else:
                    end = min(child.hi, full)
                    if end < child.hi:
                        child = self.split(child, end)
                    # past the hit, the request's own copy of a run now cached is freed
                    self.free += end - place - min(end - place, max(0, hit - walked))
                walked += end - place
                place, node = end, child
                self.touch(node)
        return node

    def add_tail(self, node: _Node, key: int, pages: int) -> None:
        """A finished request's own pages (output, a partial page): one leaf below ``node``."""
        if pages:
            leaf = _Node(key, 0, pages, node)
            node.children[(key, 0)] = leaf
            self.evictable += pages
            self.touch(leaf)


def simulate_radix_cache(
    requests: Iterable[TraceRequest],
    *,
    num_pages: int,
    page_tokens: int = 1,
    service_ms: ServiceModel,
    tiers: Sequence[LowerTier] = (),
    trace_block_tokens: int = MOONCAKE_BLOCK_TOKENS,
    keep_evictions: bool = False,
) -> PrefixCacheResult:
    """Replay ``requests`` (in arrival order) through SGLang's radix cache on ``num_pages``
    pages of ``page_tokens`` tokens (a divisor of the trace's blocks), each request held
    ``service_ms(request, computed_tokens)`` plus its loads from the lower ``tiers`` (sizes in
    pages) after admission (see the module docstring). Raises UnitError for a page size that
    does not divide the trace's blocks."""
    check_pool(num_pages, page_tokens, trace_block_tokens, ("num_pages", "page_tokens"))
    replay = _Replay(num_pages, page_tokens, trace_block_tokens // page_tokens, service_ms)
    replay.keep = keep_evictions
    replay.tiers = tier_states(tiers, replay.result)
    return drive(replay, requests)


@dataclass(slots=True)
class _Replay:
    num_pages: int
    page_tokens: int
    per: int
    service_ms: ServiceModel
    keep: bool = False
    tiers: list[TierState] = field(default_factory=list)
    tree: _Tree = field(init=False)
    result: PrefixCacheResult = field(default_factory=PrefixCacheResult)
    waiting: deque[TraceRequest] = field(default_factory=deque)
    # finish ms, order, the request's own tail pages, its last node in the tree
    running: list[tuple[int, int, int, _Node]] = field(default_factory=list)
    order: int = 0

    def __post_init__(self) -> None:
        self.tree = _Tree(self.num_pages)

    def step(self, now: int) -> None:
        tree = self.tree
        while self.running and self.running[0][0] <= now:
            _, order, tail, last = heapq.heappop(self.running)
            tree.add_tail(last, -2 - order, tail)
            tree.lock(last, -1)
        self.admit(now)

    def admit(self, now: int) -> None:
        tree, ps = self.tree, self.page_tokens
        while self.waiting:
            request = self.waiting[0]
            total = -(-(request.input_tokens + request.output_tokens) // ps)
            if total > self.num_pages:
                self.waiting.popleft()
                self.result.num_refused += 1
                continue
            named = full_blocks(request, ps, self.per)
            path = tree.match(named, reusable_blocks(request, ps))
            hit = sum(n.size for n in path)
            unlocked = sum(n.size for n in path if not n.lock)
            need = total - hit
            if need > tree.free + tree.evictable - unlocked:
                return
            self.waiting.popleft()
            last = path[-1] if path else tree.root
            tree.lock(last, 1)
            if need > tree.free:
                tree.evict(need - tree.free, self.result, self.keep)
            tree.free -= need
            loaded = self._load(request, named, hit)
            # the prefill's pages join the tree at once (cache_unfinished_req), locked
            cached = tree.insert(named, hit)
            tree.lock(cached, 1)
            tree.lock(last, -1)
            self._start(request, (hit, *loaded), total, cached, now)

    def _load(
        self, request: TraceRequest, named: list[tuple[int, int]], hit: int
    ) -> tuple[int, Fraction]:
        """The hit past the tree from each tier (their counts updated) and the request's
        pages written through: the pages loaded and the seconds their loads take."""
        at, left = (len(named), 0), reusable_blocks(request, self.page_tokens) - hit
        for index, (_, full) in enumerate(named):
            if hit < full:
                at = (index, hit)
                break
            hit -= full
        loaded = load_from(self.tiers, named, (at, left), self.page_tokens)
        for tier in self.tiers:
            tier.store(named)
        return loaded

    def _start(
        self,
        request: TraceRequest,
        reused: tuple[int, int, Fraction],
        total: int,
        last: _Node,
        now: int,
    ) -> None:
        """Count the admitted request (``reused``: its hit pages, the pages it loaded and
        their seconds) and run it."""
        result, ps = self.result, self.page_tokens
        hit, loaded, loads = reused
        result.num_requests += 1
        result.input_tokens += request.input_tokens
        result.hit_tokens += hit * ps
        result.wait_ms += now - request.timestamp_ms
        load_ms = -(-loads.numerator * 1000 // loads.denominator)
        result.load_ms += load_ms
        result.max_load_ms = max(result.max_load_ms, load_ms)
        computed = request.input_tokens - (hit + loaded) * ps
        took = as_int(self.service_ms(request, computed), "service_ms") + load_ms
        full = request.input_tokens // ps
        heapq.heappush(self.running, (now + took, self.order, total - full, last))
        self.order += 1
        result.peak_running = max(result.peak_running, len(self.running))
