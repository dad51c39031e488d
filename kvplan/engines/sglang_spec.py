"""SGLang's speculative decoding as it touches memory: the draft worker's own token-to-KV pool.

Read for v0.5.3-v0.5.9 (``python/sglang/srt/model_executor/model_runner_kv_cache_mixin.py``,
``speculative/eagle_worker.py``). The target worker profiles its pool first, from its own
weights and cell size alone; the draft worker then loads its weights and takes the target's
``max_total_num_tokens`` as its own (``draft_runner_cache_size``; for a hybrid-SWA target the
adjusted full-layer count), with a cell of its own layers: ``num_nextn_predict_layers`` when its
config has one (NEXTN/MTP: the target's config, one layer for DeepSeek V3), else all its layers
(an EAGLE head: one). The draft pool therefore does not lower the target's token count; it
comes out of the headroom the automatic fraction reserves (+2 GiB for EAGLE-style drafts,
+6 GiB for STANDALONE, nothing for NGRAM, which has no draft model and no pool). The draft
worker prints its own ``KV Cache is allocated`` line.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.arguments import as_int
from kvplan.errors import UnitError
from kvplan.model.layers import LayerCache
from kvplan.model.spec import ModelSpec

__all__ = ["SPECULATIVE_ALGORITHMS", "Speculative", "speculative"]

SPECULATIVE_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM")


@dataclass(frozen=True, slots=True)
class Speculative:
    """A checked speculative setting: the algorithm, its counts, and the draft's cached layers
    (empty for NGRAM) with the spec whose dtype they take (the target's for its own MTP)."""

    algorithm: str
    num_steps: int | None
    eagle_topk: int | None
    num_draft_tokens: int | None
    draft: ModelSpec | None
    draft_layers: tuple[LayerCache, ...]


def _allowed() -> str:
    return ", ".join(SPECULATIVE_ALGORITHMS)


def speculative(
    target: ModelSpec,
    algorithm: str | None,
    *,
    num_steps: int | None = None,
    eagle_topk: int | None = None,
    num_draft_tokens: int | None = None,
    draft: ModelSpec | None = None,
) -> Speculative | None:
    """The speculative setting ``--speculative-algorithm`` and its counts describe, or None.

    NEXTN with ``draft`` None drafts with the target's own MTP layers (``mtp_layers``, the
    config's ``num_nextn_predict_layers``): that many of the target's first layer kind.
    EAGLE, EAGLE3 and STANDALONE need ``draft``; NGRAM takes none.
    """
    counts = {
        "speculative_num_steps": num_steps,
        "speculative_eagle_topk": eagle_topk,
        "speculative_num_draft_tokens": num_draft_tokens,
    }
    for name, value in counts.items():
        if value is not None:
            as_int(value, name, minimum=1)
    if algorithm is None:
        if draft is not None or any(v is not None for v in counts.values()):
            raise UnitError("speculative settings need speculative_algorithm: one of " + _allowed())
        return None
    name = algorithm.upper() if isinstance(algorithm, str) else ""
    if name not in SPECULATIVE_ALGORITHMS:
        raise UnitError(
            f"speculative_algorithm {str(algorithm)[:40]!r}: the SGLang profile models "
            + _allowed()
        )
    return Speculative(name, num_steps, eagle_topk, num_draft_tokens, *_draft(target, name, draft))


def _draft(
    target: ModelSpec, algorithm: str, draft: ModelSpec | None
) -> tuple[ModelSpec | None, tuple[LayerCache, ...]]:
    """The draft's spec and the layers its pool holds."""
    if algorithm == "NGRAM":
        if draft is not None:
            raise UnitError("speculative_draft_model: NGRAM drafts from its n-gram table, no model")
        return None, ()
    if draft is None and algorithm == "NEXTN":
        # the draft worker reads the target's config: num_nextn_predict_layers of its layers
        mtp: int | None = getattr(target, "mtp_layers", None)
        if not mtp:
            raise UnitError(
                f"speculative_algorithm NEXTN: {target.name} has no MTP layers"
                " (num_nextn_predict_layers); give speculative_draft_model"
            )
        layers = (target.layers[0],) * mtp
        return target, layers
    if draft is None:
        raise UnitError(f"speculative_algorithm {algorithm} needs speculative_draft_model")
    mtp = getattr(draft, "mtp_layers", None)
    # a draft whose config states num_nextn_predict_layers caches that many layers
    layers = (draft.layers[0],) * mtp if mtp else tuple(draft.layers)
    return draft, layers
