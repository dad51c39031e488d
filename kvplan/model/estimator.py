"""Spec + context + batch + cache dtype -> Estimate: exact bytes, by layer kind and by K and V.

The ideal cache: each layer keeps exactly what its kind needs (a sliding layer its window, an
MLA layer one latent, a recurrent layer its state), with no paging, padding or allocator
rounding. Engine profiles add those on top; this is the number they all start from.
"""

from __future__ import annotations

from typing import NamedTuple

from kvplan.arguments import as_instance, as_int, as_optional_str, as_tokens
from kvplan.model import dtypes as _dtypes
from kvplan.model.layers import LayerCache, LayerTerm
from kvplan.model.spec import ModelSpec
from kvplan.units import DType, format_count, kv_dtype_name


class LayerBreakdown(NamedTuple):
    """Bytes of one group of identical layers, for the whole batch."""

    kind: str
    num_layers: int
    tokens_retained: int
    k_bytes: int
    v_bytes: int
    state_bytes: int
    layer: LayerCache

    @property
    def bytes(self) -> int:
        """K + V + recurrent state, for every layer of the group and every sequence."""
        return self.k_bytes + self.v_bytes + self.state_bytes


class Estimate(NamedTuple):
    """The KV cache of ``batch_size`` sequences of ``context_tokens`` tokens each.

    ``kv_cache_bytes``: total bytes, recurrent state included.
    ``bytes_per_token``: what one more token of one sequence adds at this context (sliding
    and chunked layers past their window add nothing; recurrent state never grows).
    ``breakdown`` is derived on access from ``terms``, so that sweeps which read only the
    totals do not pay for it. (A NamedTuple, not a dataclass: it is built a few hundred
    thousand times a second in sweeps, and a frozen dataclass costs several times more.)
    """

    model: str
    context_tokens: int
    batch_size: int
    k_dtype: DType
    v_dtype: DType
    kv_cache_bytes: int
    bytes_per_token: int
    terms: tuple[LayerTerm, ...]

    @property
    def kv_dtype(self) -> str:
        """The cache dtype, ``k/v`` when K and V differ (``q8_0/q4_0``)."""
        return kv_dtype_name(self.k_dtype, self.v_dtype)

    @property
    def breakdown(self) -> tuple[LayerBreakdown, ...]:
        """Bytes per group of identical layers, for the whole batch, in layer order."""
        rows = []
        for t in self.terms:
            limit = t.max_tokens
            kept = self.context_tokens if limit is None else min(self.context_tokens, limit)
            pooled = t.pool_bytes * (kept // t.tokens_per_pool)  # counted with K (GLM-5.3)
            kept //= t.tokens_per_entry  # a compressed layer keeps one entry per such tokens
            sequences = t.num_layers * self.batch_size
            rows.append(
                LayerBreakdown(
                    t.layer.kind,
                    t.num_layers,
                    kept,
                    (t.k_token_bytes * kept + pooled) * sequences,
                    t.v_token_bytes * kept * sequences,
                    t.state_bytes * sequences,
                    t.layer,
                )
            )
        return tuple(rows)

    @property
    def k_bytes(self) -> int:
        return sum(b.k_bytes for b in self.breakdown)

    @property
    def v_bytes(self) -> int:
        return sum(b.v_bytes for b in self.breakdown)

    @property
    def state_bytes(self) -> int:
        return sum(b.state_bytes for b in self.breakdown)


def cache_dtypes(
    spec: ModelSpec,
    kv_dtype: str | None = None,
    k_dtype: str | None = None,
    v_dtype: str | None = None,
) -> tuple[DType, DType]:
    """The K and V cache dtypes of the ideal engine (``kvplan.model.dtypes.cache_dtypes``)."""
    as_optional_str(kv_dtype, "kv_dtype", "a dtype's name such as 'bfloat16', or None")
    found = _dtypes.cache_dtypes(spec, kv_cache_dtype=kv_dtype, k_dtype=k_dtype, v_dtype=v_dtype)
    return found.k, found.v


def estimate(
    spec: ModelSpec | str,
    context_tokens: int | str,
    *,
    batch_size: int = 1,
    kv_dtype: str | None = None,
    k_dtype: str | None = None,
    v_dtype: str | None = None,
) -> Estimate:
    """The ideal KV cache of ``batch_size`` sequences, each holding ``context_tokens`` tokens.

    ``spec`` is a ModelSpec or a model name; ``context_tokens`` an int or a token string
    (``32K``). ``kv_dtype`` sets both K and V (default: the dtype the model is served in,
    ``kvplan.model.dtypes``); ``k_dtype``/``v_dtype`` override one side, as llama.cpp's
    ``-ctk``/``-ctv`` do. Raises UnitError for a bad argument.
    """
    if not isinstance(spec, ModelSpec):
        # A name, for a library caller: the catalog, above this module, reads it.
        from kvplan.catalog.lookup import as_spec

        spec = as_spec(spec)
    if type(context_tokens) is not int or context_tokens < 0:
        context_tokens = as_tokens(context_tokens, "context_tokens")
    if type(batch_size) is not int or batch_size < 1:
        batch_size = as_int(batch_size, "batch_size", minimum=1)
    k, v = cache_dtypes(spec, kv_dtype, k_dtype, v_dtype)
    terms = spec.layer_terms(k, v)
    total = 0
    per_token = 0
    for _, num_layers, k_token, v_token, state, limit, per_entry, pool, per_pool in terms:
        if pool:
            # a second growing part of whole pools (GLM-5.3: 132 B per 16 tokens), on layers
            # that keep every token: one more token adds a whole pool or none of it
            total += pool * (context_tokens // per_pool) * num_layers
            if (context_tokens + 1) % per_pool == 0:
                per_token += pool * num_layers
        if per_entry > 1:
            # DeepSeek V4: one entry per per_entry tokens, once the group is whole, so one
            # more token adds a whole entry or nothing (exact integers, no 584 / 128 B)
            total += (k_token + v_token) * (context_tokens // per_entry) * num_layers
            if (context_tokens + 1) % per_entry == 0:
                per_token += (k_token + v_token) * num_layers
        elif limit is None or context_tokens < limit:
            total += (k_token + v_token) * context_tokens * num_layers
            per_token += (k_token + v_token) * num_layers
        else:
            total += (k_token + v_token) * limit * num_layers
        total += state * num_layers
    return Estimate(
        spec.name, context_tokens, batch_size, k, v, total * batch_size, per_token, terms
    )


def bytes_per_token(
    spec: ModelSpec | str, kv_dtype: str | None = None, *, context_tokens: int | str = 0
) -> int:
    """KV/token: the bytes one more token of one sequence adds to the cache at
    ``context_tokens`` (default 0, a short context: every attention layer counts). A sliding
    or chunked layer adds nothing once the context reaches its window; recurrent state never
    grows. Gemma 3 27B in bfloat16 (10 full and 52 sliding layers of 16 x 128 K and V values,
    window 1024): 62 x 8,192 = 507,904 B at a short context, 10 x 8,192 = 81,920 B at 128K."""
    return estimate(spec, context_tokens, kv_dtype=kv_dtype).bytes_per_token


def explain(est: Estimate) -> list[str]:
    """The estimate worked as a textbook example: each layer group, then the sum."""
    as_instance(est, Estimate, "est", "an Estimate (what estimate returns)")
    sequences = format_count(est.batch_size, "sequence")
    lines = [
        f"KV cache of {est.model}: {format_count(est.context_tokens, 'token')} x {sequences},"
        f" K in {est.k_dtype.name}, V in {est.v_dtype.name}"
    ]
    for row in est.breakdown:
        layers = format_count(row.num_layers, "layer")
        layer_bytes = row.bytes // (row.num_layers * est.batch_size)
        formula = row.layer.formula(est.context_tokens, est.k_dtype, est.v_dtype)
        lines.append(f"{row.kind} ({row.layer.describe()}), {layers}:")
        lines.append(f"  one layer, one sequence: {formula} = {layer_bytes:,} B")
        lines.append(f"  x {layers} x {sequences} = {row.bytes:,} B")
    terms = " + ".join(f"{row.bytes:,}" for row in est.breakdown) or "0"
    lines.append(f"total: {terms} = {est.kv_cache_bytes:,} B")
    return lines
