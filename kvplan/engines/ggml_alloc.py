"""ggml's graph allocator (``ggml_gallocr``, ``ggml/src/ggml-alloc.c``) replayed over a graph of
tensor sizes, so a compute buffer is computed, not fitted.

A graph holds its tensors in the order ``ggml_build_forward_expand`` visits them: the input
leafs, allocated first, and the nodes, each after its sources. A node takes over a source's
memory when its op can work in place (``ggml_op_can_inplace``), the layouts match and it is
that source's last reader; a tensor is freed after its last reader, a view's base once no
view of it is read any more; outputs are never freed; blocks are 32 B aligned and taken best
fit among the freed ones, else from the end, which grows the buffer. The buffer is the end of
the highest block ever taken. kvplan.engines.llamacpp_compute builds llama.cpp's graphs on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod

__all__ = ["Graph", "graph_peak_bytes"]

#: ``ggml_op_can_inplace``: the ops whose result may take over a source's memory
_INPLACE = frozenset(
    {"add", "mul", "div", "rms_norm", "rope", "soft_max", "clamp", "scale", "sigmoid", "fill"}
)
#: the CPU buffer's alignment (``TENSOR_ALIGNMENT``)
_ALIGNMENT = 32


@dataclass(slots=True)
class _Tensor:
    num_bytes: int
    srcs: tuple[int, ...]
    op: str = "leaf"
    shape: tuple[int, ...] = ()
    base: int | None = None  # the tensor a view looks into; -1: outside the compute buffer
    output: bool = False


@dataclass(slots=True)
class Graph:
    """The nodes of a graph in execution order and the input leafs, allocated first."""

    tensors: list[_Tensor] = field(default_factory=list)
    leafs: list[int] = field(default_factory=list)
    nodes: list[int] = field(default_factory=list)

    def leaf(self, num_bytes: int) -> int:
        self.tensors.append(_Tensor(num_bytes, ()))
        self.leafs.append(len(self.tensors) - 1)
        return len(self.tensors) - 1

    def op(
        self, op: str, shape: tuple[int, ...], *srcs: int, output: bool = False, width: int = 4
    ) -> int:
        """A new tensor of ``shape`` (f32 or i32: ``width`` 4 B) computed from ``srcs``
        (weights, outside the buffer, left out)."""
        self.tensors.append(_Tensor(width * prod(shape), srcs, op, shape, output=output))
        self.nodes.append(len(self.tensors) - 1)
        return len(self.tensors) - 1

    def view(self, *srcs: int, into: int | None = None) -> int:
        """A view (reshape, permute, view) of ``srcs[0]``, or of ``into`` when given: -1 for a
        tensor outside the buffer (the cache, or a write into it by ``set_rows`` reading
        ``srcs``), a tensor of the buffer for a ``set_rows`` into it."""
        base = into if into is not None else self.tensors[srcs[0]].base
        base = srcs[0] if base is None else base
        self.tensors.append(_Tensor(0, srcs, "view", base=base))
        self.nodes.append(len(self.tensors) - 1)
        return len(self.tensors) - 1


class _Allocator:
    """``ggml_dyn_tallocr``: best fit among the free blocks before the last, else the last
    (which grows the buffer); freed blocks merge with their neighbours."""

    def __init__(self) -> None:
        self.free: list[list[int]] = [[0, 1 << 62]]
        self.max_bytes = 0

    def alloc(self, num_bytes: int) -> int:
        size = -(-num_bytes // _ALIGNMENT) * _ALIGNMENT
        fits = [i for i, (_, s) in enumerate(self.free[:-1]) if s >= size]
        # among equal sizes the last one wins (``<=`` in the scan)
        best = max(fits, key=lambda i: (-self.free[i][1], i)) if fits else len(self.free) - 1
        offset, block = self.free[best]
        self.free[best] = [offset + size, block - size]
        if block == size:
            del self.free[best]
        self.max_bytes = max(self.max_bytes, offset + size)
        return offset

    def release(self, offset: int, num_bytes: int) -> None:
        size = -(-num_bytes // _ALIGNMENT) * _ALIGNMENT
        blocks = self.free
        for i, (start, length) in enumerate(blocks):
            if start + length == offset:
                blocks[i][1] += size
                if i + 1 < len(blocks) and sum(blocks[i]) == blocks[i + 1][0]:
                    blocks[i][1] += blocks.pop(i + 1)[1]
                return
            if offset + size == start:
                blocks[i] = [offset, length + size]
                if i > 0 and sum(blocks[i - 1]) == offset:
                    blocks[i - 1][1] += blocks.pop(i)[1]
                return
        blocks.insert(sum(1 for b in blocks if b[0] < offset), [offset, size])


def graph_peak_bytes(graph: Graph) -> int:
    """The buffer ``ggml_gallocr_reserve`` sizes for ``graph`` (``ggml-alloc.c``): leafs first,
    then each node after its sources, in place of a source it alone still reads when the op
    allows it and the layouts match, and each tensor freed after its last reader (a view's
    base once no view of it is read any more); outputs are never freed."""
    ts = graph.tensors
    children = [0] * len(ts)
    views = [0] * len(ts)
    offset: dict[int, int] = {}  # the tensors allocated and not yet freed
    heap = _Allocator()

    def allocate(i: int) -> None:
        t = ts[i]
        if i in offset or t.base is not None or t.op == "view":
            return
        if t.op in _INPLACE:
            for p in t.srcs:
                parent = ts[p]
                own = p in offset and parent.base is None and not parent.output
                if own and parent.shape == t.shape and children[p] == 1 and views[p] == 0:
                    offset[i] = offset.pop(p)
                    return
        offset[i] = heap.alloc(t.num_bytes)

    for i in graph.leafs:
        allocate(i)
    for i in graph.nodes:
        base = ts[i].base
        if base is not None and base >= 0:
            views[base] += 1
        for p in ts[i].srcs:
            children[p] += 1
    for i in graph.nodes:
        allocate(i)
        for p in ts[i].srcs:
            children[p] -= 1
            if children[p] or views[p]:
                continue
            base = ts[p].base
            if base is not None:
                if base < 0:
                    continue
                views[base] -= 1
                p = base
                if views[p] or children[p]:
                    continue
            if p in offset and not ts[p].output:
                heap.release(offset.pop(p), ts[p].num_bytes)
    return heap.max_bytes
