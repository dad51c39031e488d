"""Phi-2, Phi-3 and Phi-4: Llama-shaped keys; Phi-2 unties its embeddings by default, and a
Phi-3 ``sliding_window`` slides every layer."""

from __future__ import annotations

from kvplan.importers.registry import register
from kvplan.importers.rules import UNIFORM_KINDS, Rule

FAMILY = "phi"

register(
    FAMILY,
    "phi",
    Rule(defaults={"tie_word_embeddings": False}),
    UNIFORM_KINDS,
    "Phi-2: untied embeddings by default",
)
register(FAMILY, "phi3", Rule(), UNIFORM_KINDS, "a stated sliding_window slides every layer")
