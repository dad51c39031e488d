"""IBM Granite 3 (dense, read as Llama) and Granite 4 hybrids (Mamba2 + attention), whose
configs state ``layer_types``; a hybrid without it is refused rather than guessed."""

from __future__ import annotations

from kvplan.errors import SpecError
from kvplan.importers.reading import Reading
from kvplan.importers.registry import register
from kvplan.importers.rules import MAMBA_KEYS, UNIFORM_KINDS, Rule, layers_explicit

FAMILY = "granite"


def _layers_hybrid_granite(r: Reading, n: int) -> None:
    if not layers_explicit(r, n):
        raise SpecError("", ["layer_types: required for granitemoehybrid"])


register(FAMILY, "granite", Rule(), UNIFORM_KINDS, "read as llama")
register(
    FAMILY,
    "granitemoehybrid",
    Rule(layers=_layers_hybrid_granite, extra=MAMBA_KEYS),
    ("full_attention", "mamba"),
    "Mamba2 and attention layers from layer_types (required); mamba_* state",
)
