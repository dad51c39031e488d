"""Upstage Solar Pro (``solar``): a Llama decoder with skip connections between blocks
(``bskcn_*``), which mix hidden states and cache nothing. vLLM's solar.py reads
``num_key_value_heads`` (absent: one per head) and ``head_dim`` (absent: hidden_size / heads)
as Llama does; the config class ships with the checkpoint (remote code)."""

from __future__ import annotations

from kvplan.importers.registry import register
from kvplan.importers.rules import UNIFORM_KINDS, Rule

FAMILY = "solar"

register(
    FAMILY,
    "solar",
    Rule(),
    UNIFORM_KINDS,
    "Solar Pro: read as llama; the bskcn skip connections cache nothing (vLLM solar.py)",
    architectures=("SolarForCausalLM",),
)
