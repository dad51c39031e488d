"""llama-server's draft model (``-md``): a second model and context beside the target.

Read in llama.cpp 0c1e570 (the source inside llama-cpp-python 0.3.36):
``common_base_params_to_speculative`` (common/speculative.cpp) copies the target's parameters
for the draft's context and replaces only the model, its layers on the GPUs (``-ngld``), its
devices and its cache types (``-ctkd``/``-ctvd``, f16 by default); so the draft's context has
the target's ``-c`` (every slot's cells), ``-np``, ``-ub``, flash attention and unified or
per-stream cache. tools/server/server-context.cpp builds one draft context for all slots.
``--draft-max`` (3) bounds the tokens drafted a step, which go in the logical batch
(``-b``): it sizes no buffer. The draft's weights, cache and compute
buffers come on top of the target's on each device (``add_draft``).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.arguments import as_int, as_str
from kvplan.errors import UnitError
from kvplan.model.spec import ModelSpec

__all__ = ["DEFAULT_DRAFT_MAX", "VOCAB_MAX_SIZE_DIFFERENCE", "LlamaCppDraft"]

#: llama-server's ``--draft-max`` default (common.h ``n_max``)
DEFAULT_DRAFT_MAX = 3
#: the largest vocabulary difference llama.cpp accepts between target and draft
VOCAB_MAX_SIZE_DIFFERENCE = 128


@dataclass(frozen=True, slots=True)
class LlamaCppDraft:
    """``-md MODEL`` with ``-ngld`` (None: every layer, as ``-ngl``), ``-ctkd``/``-ctvd`` and
    ``--draft-max``; ``spec`` is the draft model's spec, ``model`` as typed."""

    spec: ModelSpec
    model: str
    n_gpu_layers: int | None = None
    type_k: str = "f16"
    type_v: str = "f16"
    draft_max: int = DEFAULT_DRAFT_MAX

    def __post_init__(self) -> None:
        as_str(self.model, "model", "the draft model as typed")
        if self.n_gpu_layers is not None:
            as_int(self.n_gpu_layers, "n_gpu_layers", minimum=0, maximum=100_000)
        as_int(self.draft_max, "draft_max", minimum=1, maximum=1024)

    def check(self, target: ModelSpec) -> None:
        """UnitError for a draft llama-server refuses beside ``target``: vocabularies that
        differ by more than ``SPEC_VOCAB_MAX_SIZE_DIFFERENCE`` tokens
        (``common_speculative_are_compatible``; the token texts it also compares are not in a
        spec)."""
        dft, tgt = self.spec.vocab_size, target.vocab_size
        if dft and tgt and abs(dft - tgt) > VOCAB_MAX_SIZE_DIFFERENCE:
            raise UnitError(
                f"-md {self.model[:60]}: its vocabulary ({dft:,} tokens) differs from"
                f" {target.name}'s ({tgt:,}) by more than {VOCAB_MAX_SIZE_DIFFERENCE}; llama-server"
                " refuses the pair"
            )
