"""HRM-Text (``hrm_text``): a hierarchical recurrent model whose two stacks of
``num_layers_per_stack`` layers run ``H_cycles x (L_cycles + 1)`` times a token.

Every run of a layer attends with a KV cache of its own (vLLM 0.32 hrm_text.py: one attention
slot a recurrence step and layer), so the cache holds ``num_layers_per_stack x H_cycles x
(L_cycles + 1)`` full-attention layers. HrmTextConfig writes that total into
``num_hidden_layers`` and keeps the stack depth in ``num_layers_per_stack``; a file without
the latter states the stack depth as ``num_hidden_layers``. Attention is multi-head (vLLM and
transformers ignore any K/V head count) of ``head_dim`` (default 128).
"""

from __future__ import annotations

from kvplan.errors import SpecError
from kvplan.importers.parameters import Count, flag, linear, mlp, plain, shapes, size
from kvplan.importers.reading import Reading, whole
from kvplan.importers.registry import register
from kvplan.importers.rules import Rule, kv_heads_mha
from kvplan.model.limits import MAX_LAYERS

FAMILY = "hrm_text"

#: HrmTextConfig defaults (transformers configuration_hrm_text.py).
_DEFAULTS = {
    "vocab_size": 151808,
    "hidden_size": 1536,
    "intermediate_size": 4096,
    "num_hidden_layers": 16,
    "num_attention_heads": 12,
    "max_position_embeddings": 2048,
    "head_dim": 128,
    "H_cycles": 2,
    "L_cycles": 3,
    "tie_word_embeddings": False,
}


def _layers(r: Reading, n: int) -> None:
    runs = size(r, "H_cycles") * (size(r, "L_cycles") + 1)
    per_stack = r.config.get("num_layers_per_stack")
    if per_stack is None:
        total = whole(n * runs, "num_hidden_layers x H_cycles x (L_cycles + 1)")
        r.spec["num_hidden_layers"] = total
        r.notes.append(
            f"num_hidden_layers {total}: {n} a stack x {runs} runs (H_cycles x (L_cycles + 1)),"
            " one KV cache a run"
        )
        return
    per_stack = whole(per_stack, "num_layers_per_stack", maximum=MAX_LAYERS)
    if per_stack * runs != n:
        raise SpecError(
            "",
            [
                f"num_hidden_layers: {n} is not num_layers_per_stack {per_stack} x"
                f" H_cycles x (L_cycles + 1) = {per_stack * runs}"
            ],
        )
    r.notes.append(f"num_hidden_layers {n}: {per_stack} a stack x {runs} runs, one KV cache a run")


def _count(r: Reading) -> Count:
    """Two stacks of ``num_layers_per_stack`` layers, each a multi-head attention with q, k, v,
    o and a sigmoid output gate (a fifth heads x head_dim projection) and a gated MLP; the
    RMSNorms carry no weight. Embeddings, head, and the low stack's initial state (hidden)."""
    s = shapes(r)
    q = s.heads * s.head_dim
    bias = flag(r, "attention_bias")
    layer = linear(s.hidden, 4 * q, bias) + linear(q, s.hidden, bias)
    layer += mlp(s.hidden, size(r, "intermediate_size"), bias=flag(r, "mlp_bias"))
    runs = size(r, "H_cycles") * (size(r, "L_cycles") + 1)
    stacks = 2 * (s.layers // runs)
    return s.embeddings() + layer.times(stacks) + plain(s.hidden)


register(
    FAMILY,
    "hrm_text",
    Rule(kv_heads=kv_heads_mha, layers=_layers, defaults=_DEFAULTS, parameters=_count),
    ("full_attention",),
    "one MHA KV cache per layer run: num_layers_per_stack x H_cycles x (L_cycles + 1) layers"
    " (transformers HrmTextConfig, vLLM hrm_text.py)",
    architectures=("HrmTextForCausalLM",),
)
