"""Capacity planning: what fits on a deployment, solved in exact integers.

Per GPU: ``floor(total x utilization) - weights - overhead = KV pool`` (or ``kv_cache_memory``
given directly). The pool is paged: each KV layer stores ``block_size`` tokens per page, and a
request holds whole pages, as many as its layer kinds need (a sliding layer at most its window
plus one, a recurrent layer a fixed state). Tensor parallelism shards weights and KV heads;
pipeline parallelism splits layers into stages, and the tightest stage sets the answer.

Every answer is checked by construction: a reported maximum fits and one more does not.

Worked example (Llama 3.1 8B, bf16, one H100 SXM at utilization 0.9, 2 GiB overhead):
usable = floor(85,029,027,840 x 0.9) = 76,526,125,056 B; weights 16,060,522,496 B; pool =
76,526,125,056 - 16,060,522,496 - 2,147,483,648 = 58,318,118,912 B. A block is 16 tokens x
131,072 B = 2,097,152 B, so 27,808 blocks = 444,928 tokens: 54 requests of 8,192 tokens.

Modules, in the order a plan flows through them:

- ``deployment``: the settings (``Deployment``), their defaults and the overhead estimate;
- ``pool``: each pipeline stage's pool and what one request takes from it (``StagePlan``);
- ``solve``: one deployment and one question -> ``Plan`` (``result``), with the verdict
  (``verdict``) and, for a mix of lengths, its concurrency (``mix``);
- ``search``: the smallest deployment holding a number of requests;
- ``api``: ``plan``, reading its arguments as the command line does.
"""

from __future__ import annotations

from kvplan.planner.api import plan
from kvplan.planner.deployment import (
    DEFAULT_BLOCK_SIZE,
    DEFAULT_MAX_NUM_BATCHED_TOKENS,
    DEFAULT_MAX_NUM_SEQS,
    DEFAULT_UTILIZATION,
    Deployment,
    Overhead,
    estimate_overhead,
    given_overhead,
    parse_utilization,
)
from kvplan.planner.pool import StagePlan
from kvplan.planner.result import LengthMix, Plan
from kvplan.planner.search import MAX_SEARCH_PP, MAX_SEARCH_TP, valid_tensor_parallel_sizes

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "DEFAULT_MAX_NUM_BATCHED_TOKENS",
    "DEFAULT_MAX_NUM_SEQS",
    "DEFAULT_UTILIZATION",
    "MAX_SEARCH_PP",
    "MAX_SEARCH_TP",
    "Deployment",
    "LengthMix",
    "Overhead",
    "Plan",
    "StagePlan",
    "estimate_overhead",
    "given_overhead",
    "parse_utilization",
    "plan",
    "valid_tensor_parallel_sizes",
]
