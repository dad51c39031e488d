"""gpt-oss 20B/120B: alternating sliding (128) and full layers, stated in ``layer_types``.

Every tensor but the MXFP4 experts is bfloat16, which the config does not always say.
"""

from __future__ import annotations

from kvplan.importers.parameters import Count, decoder, experts, mlp, norm, plain, shapes, size
from kvplan.importers.reading import Reading
from kvplan.importers.registry import register
from kvplan.importers.rules import UNIFORM_KINDS, Rule

FAMILY = "gpt_oss"


def _count_gpt_oss(r: Reading) -> Count:
    """Biased q, k, v, o plus one attention sink per head; a biased router; experts with
    biased gate_up and down projections (``intermediate_size`` each); two RMSNorms."""
    s = shapes(r)
    num_experts = size(r, "num_local_experts")
    active = size(r, "num_experts_per_tok", "experts_per_token", default=4)
    expert = mlp(s.hidden, size(r, "intermediate_size"), bias=True)
    layer = s.attention(True, True) + plain(s.heads) + norm(s.hidden).times(2)
    layer += experts(expert, num_experts, active) + plain((s.hidden + 1) * num_experts)
    return decoder(s, layer.times(s.layers))


register(
    FAMILY,
    "gpt_oss",
    Rule(default_dtype="bfloat16", parameters=_count_gpt_oss),
    UNIFORM_KINDS,
    "sliding and full layers from layer_types; bfloat16 when the dtype is not stated",
    architectures=("GptOssForCausalLM",),
)
