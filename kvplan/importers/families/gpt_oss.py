"""gpt-oss 20B/120B: alternating sliding (128) and full layers, stated in ``layer_types``.

Every tensor but the MXFP4 experts is bfloat16, which the config does not always say.
"""

from __future__ import annotations

from kvplan.importers.registry import register
from kvplan.importers.rules import UNIFORM_KINDS, Rule

FAMILY = "gpt_oss"

register(
    FAMILY,
    "gpt_oss",
    Rule(default_dtype="bfloat16"),
    UNIFORM_KINDS,
    "sliding and full layers from layer_types; bfloat16 when the dtype is not stated",
)
