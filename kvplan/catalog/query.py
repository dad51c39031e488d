"""Choosing and ordering bundled models for ``kvplan models``: a text filter, a cache kind, a
family, and a sort key. Pure selection over ``kvplan.catalog.lookup.list_models``; no arithmetic
beyond the bytes per token the estimator gives each spec.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.model.spec import ModelSpec

#: ``--kind`` words and the layer kind each selects.
KIND_WORDS = {
    "full": "full_attention",
    "sliding": "sliding_attention",
    "chunked": "chunked_attention",
    "mla": "mla_latent",
    "mamba": "mamba",
    "linear": "linear_attention",
}

#: ``--sort`` keys.
SORT_KEYS = ("name", "params", "kv")


@dataclass(frozen=True, slots=True)
class CatalogRow:
    """One bundled model as ``kvplan models`` lists it: the spec, its importer family (the
    rules module of its ``model_type``; the model_type itself when none maps it) and the KV
    bytes one token adds at a short context."""

    spec: ModelSpec
    family: str
    bytes_per_token: int


@dataclass(frozen=True, slots=True)
class CatalogQuery:
    """What to list: ``text`` (a case-insensitive substring of the name, Hugging Face id, an
    alias, the family or the model_type), ``kind`` (a ``KIND_WORDS`` key: at least one layer
    of that kind), ``family`` (exact, case-insensitive), ``sort`` (a ``SORT_KEYS`` entry;
    ties by name) and ``reverse``."""

    text: str | None = None
    kind: str | None = None
    family: str | None = None
    sort: str = "name"
    reverse: bool = False

    @property
    def is_filtered(self) -> bool:
        """True when any filter is set (the order alone is not a filter)."""
        return bool(self.text or self.kind or self.family)


def family_of(model_type: str | None) -> str:
    """The importer family that maps ``model_type`` (``qwen3_moe`` -> ``qwen``); the model_type
    itself when none does, and ``""`` when the spec names none."""
    if not model_type:
        return ""
    import kvplan.importers  # noqa: F401  (loads every family's rules)
    from kvplan.importers.registry import list_architectures

    families = {a.model_type: a.family for a in list_architectures()}
    return families.get(model_type, model_type)


def known_families() -> list[str]:
    """Every family name the importer registers, sorted."""
    import kvplan.importers  # noqa: F401
    from kvplan.importers.registry import list_architectures

    return sorted({a.family for a in list_architectures()})


def catalog_rows() -> list[CatalogRow]:
    """Every bundled model, sorted by name."""
    from kvplan.catalog.lookup import list_models
    from kvplan.model.estimator import bytes_per_token

    return [
        CatalogRow(spec, family_of(spec.model_type), bytes_per_token(spec))
        for spec in list_models()
    ]


def _kinds(spec: ModelSpec) -> set[str]:
    return {layer.kind for layer, _ in spec.layer_groups}


def _matches(row: CatalogRow, query: CatalogQuery) -> bool:
    spec = row.spec
    if query.kind is not None and KIND_WORDS[query.kind] not in _kinds(spec):
        return False
    if query.family and query.family.lower() not in {row.family, spec.model_type or ""}:
        return False
    if not query.text:
        return True
    texts = (spec.name, spec.hf_id or "", *spec.aliases, row.family, spec.model_type or "")
    needle = query.text.strip().lower()
    return any(needle in t.lower() for t in texts)


def select(rows: list[CatalogRow], query: CatalogQuery) -> list[CatalogRow]:
    """The rows ``query`` keeps, in its order. Models without a parameter count sort after
    every counted one (before them with ``reverse``)."""
    kept = sorted((r for r in rows if _matches(r, query)), key=lambda r: r.spec.name)
    match query.sort:
        case "params":
            kept.sort(key=lambda r: (r.spec.num_parameters is None, r.spec.num_parameters or 0))
        case "kv":
            kept.sort(key=lambda r: r.bytes_per_token)
        case _:
            pass
    if query.reverse:
        kept.reverse()
    return kept
