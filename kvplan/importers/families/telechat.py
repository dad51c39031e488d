"""China Telecom TeleChat 2 (``telechat``) and TeleChat 3 (``telechat3``).

TeleChat 2's remote-code config keeps GPT-era names (``n_layer``, ``n_head``,
``ffn_hidden_size``); vLLM's telechat2.py maps them onto its Llama model, which reads
``num_key_value_heads`` (absent: one per head) and head_dim ``hidden_size / n_head``. The
checkpoint fuses K and V into one ``key_value`` projection and biases only the attention output
and the MLP's down projection. TeleChat 3 is a plain Llama (vLLM serves TeleChat3ForCausalLM
with its llama model); only its ``telechat3-yarn`` rope name differs, which sizes no cache.
"""

from __future__ import annotations

from kvplan.importers.parameters import Count, decoder, linear, norm, shapes, size
from kvplan.importers.reading import Reading
from kvplan.importers.registry import register
from kvplan.importers.rules import UNIFORM_KINDS, Rule

FAMILY = "telechat"


def _count_telechat2(r: Reading) -> Count:
    """TeleChat 2 (modeling_telechat.py): query, fused key_value, dense (biased) projections;
    gate and up without bias, down with bias; two RMSNorms a layer; ln_f."""
    s = shapes(r)
    inter = size(r, "ffn_hidden_size", "intermediate_size")
    q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
    attention = linear(s.hidden, q + 2 * kv) + linear(q, s.hidden, True)
    ffn = linear(s.hidden, 2 * inter) + linear(inter, s.hidden, True)
    layer = attention + ffn + norm(s.hidden).times(2)
    return decoder(s, layer.times(s.layers))


register(
    FAMILY,
    "telechat",
    Rule(parameters=_count_telechat2),
    UNIFORM_KINDS,
    "TeleChat 2: n_layer, n_head; num_key_value_heads (absent: one per head), head_dim"
    " hidden_size / n_head (remote-code config; vLLM telechat2.py reads it as llama)",
    architectures=("TeleChat2ForCausalLM",),
)
register(
    FAMILY,
    "telechat3",
    Rule(),
    UNIFORM_KINDS,
    "TeleChat 3: read as llama (vLLM serves TeleChat3ForCausalLM with its llama model)",
    architectures=("TeleChat3ForCausalLM",),
)
