"""Tele-FLM / FLM-2 (``TeleFLM``, remote code; vLLM teleflm.py): vLLM's TeleFLMForCausalLM is
its LlamaForCausalLM with muP's logit scale (``use_mup``, ``output_mult / mup_scale_factor``),
which changes the logits, not the cache or the weights.

So the cache and the count are Llama's: ``num_key_value_heads`` K/V heads (absent: every
head) of ``head_dim`` (absent: hidden_size / heads), a gated MLP, two RMSNorms a layer.
"""

from __future__ import annotations

from kvplan.importers.registry import register
from kvplan.importers.rules import UNIFORM_KINDS, Rule

FAMILY = "teleflm"

register(
    FAMILY,
    "TeleFLM",
    Rule(),
    UNIFORM_KINDS,
    "Tele-FLM (vLLM teleflm.py, a LlamaForCausalLM with muP logit scaling): read as llama",
    architectures=("TeleFLMForCausalLM",),
)
