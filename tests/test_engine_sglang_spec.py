"""SGLang's speculative draft pool: the target's token count, the draft's own layers."""

import pytest

from kvplan.catalog.lookup import as_spec
from kvplan.engines.sglang import kv_cache
from kvplan.errors import UnitError

LLAMA = as_spec("llama-3.1-8b")


def test_ngram_reserves_nothing_and_has_no_pool() -> None:
    base = kv_cache("llama-3.1-8b", "h100")
    ngram = kv_cache("llama-3.1-8b", "h100", speculative_algorithm="NGRAM")
    assert ngram.kv_cache_bytes == base.kv_cache_bytes


def test_standalone_draft_pool() -> None:
    # draft llama-3.1-8b itself: same cell (131,072 B), same tokens, (tokens + 1) rows
    target = kv_cache("llama-3.1-8b", "h100", mem_fraction_static=0.8)
    spec = kv_cache(
        "llama-3.1-8b", "h100", mem_fraction_static=0.8, speculative_algorithm="STANDALONE",
        speculative_draft_model=LLAMA,
    )  # fmt: skip
    tokens = target.kv_cache_tokens
    assert spec.kv_cache_tokens == tokens
    assert spec.kv_cache_bytes == 2 * (tokens + 1) * 131_072
    assert len(spec.log_lines) == 2


def test_unknown_algorithm_refused() -> None:
    with pytest.raises(UnitError, match="speculative_algorithm 'MEDUSA'"):
        kv_cache("llama-3.1-8b", "h100", speculative_algorithm="MEDUSA")


def test_eagle_needs_draft() -> None:
    with pytest.raises(UnitError, match="needs speculative_draft_model"):
        kv_cache("llama-3.1-8b", "h100", speculative_algorithm="EAGLE")
