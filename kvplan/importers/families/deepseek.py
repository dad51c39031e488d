"""DeepSeek V2/V3/R1 and Kimi K2: multi-head latent attention (MLA).

Each layer caches one compressed latent of ``kv_lora_rank`` plus the shared RoPE key of
``qk_rope_head_dim``, not K and V per head: no factor 2 and no heads. The MLA ranks are copied
as they are; ``head_dim`` is not read, since the latent replaces it.
"""

from __future__ import annotations

from kvplan.importers.registry import register
from kvplan.importers.rules import Rule

FAMILY = "deepseek"

_MLA = ("kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")
_RULE = Rule(extra=_MLA, reads_head_dim=False)
_NOTES = "MLA: one latent of kv_lora_rank + qk_rope_head_dim per layer (no factor 2)"

for _type in ("deepseek_v2", "deepseek_v3", "kimi_k2"):
    register(FAMILY, _type, _RULE, ("mla_latent",), _NOTES)
