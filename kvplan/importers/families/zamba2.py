"""Zamba2 (Zyphra): Mamba2 layers, some of them "hybrid" layers that first apply a shared
attention block.

The attention weights are shared between hybrid layers, but vLLM 0.32 (zamba2.py) gives every
hybrid layer a KV cache of its own, so each is ``attention_mamba``: an attention cache and a
Mamba2 state. vLLM builds that attention with ``num_attention_heads`` K/V heads (it never reads
``num_key_value_heads``) of ``attention_head_dim``, which Zamba2Config sets to ``2 x
hidden_size / num_attention_heads`` (the shared block reads the hidden state concatenated with
the embeddings). The Mamba2 state: ``n_mamba_heads`` heads of ``mamba_expand x hidden_size /
n_mamba_heads``, ``mamba_ngroups`` groups, in the model dtype.
"""

from __future__ import annotations

from kvplan.errors import SpecError
from kvplan.importers.parameters import Count, size
from kvplan.importers.reading import Reading, as_list
from kvplan.importers.registry import register
from kvplan.importers.rules import Rule, kv_heads_mha, mamba2_state

FAMILY = "zamba2"

#: Zamba2Config defaults (transformers configuration_zamba2.py).
_DEFAULTS = {
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
    "hidden_size": 2560,
    "num_hidden_layers": 54,
    "num_attention_heads": 32,
    "mamba_d_state": 64,
    "mamba_d_conv": 4,
    "mamba_expand": 2,
    "mamba_ngroups": 1,
    "n_mamba_heads": 8,
    "tie_word_embeddings": True,
}

#: Zamba2Config's layers_block_type when the file states none (54 layers).
_PATTERN = (
    ["mamba"]
    + (["mamba"] * 5 + ["hybrid"]) * 7
    + ["mamba"] * 4
    + ["hybrid"]
    + ["mamba"] * 3
    + ["hybrid"]
    + ["mamba"] * 2
)

_KINDS = {"hybrid": "attention_mamba", "mamba": "mamba", "linear_attention": "mamba"}


def _layers(r: Reading, n: int) -> None:
    given = r.config.get("layers_block_type")
    if given is None:
        if n != len(_PATTERN):
            raise SpecError("", [f"layers_block_type: required for {n} layers"])
        given = _PATTERN
        r.notes.append("layers_block_type: the Zamba2Config default")
    blocks = as_list(given, "layers_block_type")
    if len(blocks) != n or any(b not in _KINDS for b in blocks):
        raise SpecError(
            "", [f"layers_block_type: needs one of {', '.join(_KINDS)} per layer ({n})"]
        )
    r.spec["layer_types"] = [_KINDS[b] for b in blocks]
    hidden, heads = size(r, "hidden_size"), size(r, "num_attention_heads")
    r.spec["head_dim"] = 2 * hidden // heads
    r.notes.append(
        f"head_dim {2 * hidden // heads}: 2 x hidden_size / num_attention_heads (Zamba2Config);"
        " K/V heads = num_attention_heads (vLLM zamba2.py)"
    )
    if r.config.get("use_long_context"):
        r.spec["max_position_embeddings"] = 16384
        r.notes.append("max_position_embeddings 16384: use_long_context (Zamba2Config)")


def _state(r: Reading) -> None:
    inner = size(r, "mamba_expand") * size(r, "hidden_size")
    heads = size(r, "n_mamba_heads")
    if inner % heads:
        raise SpecError(
            "", [f"n_mamba_heads: {heads} does not divide mamba_expand x hidden_size {inner}"]
        )
    groups, state, conv = (size(r, k) for k in ("mamba_ngroups", "mamba_d_state", "mamba_d_conv"))
    mamba2_state(r, heads=heads, head_dim=inner // heads, groups=groups, state=state, conv=conv)


def _not_counted(r: Reading) -> Count:
    """The shared attention blocks and their adapters are not counted here."""
    raise SpecError("", ["num_parameters: zamba2 is not counted from the config's shapes"])


register(
    FAMILY,
    "zamba2",
    Rule(
        kv_heads=kv_heads_mha,
        layers=_layers,
        state=_state,
        defaults=_DEFAULTS,
        reads_head_dim=False,
        parameters=_not_counted,
    ),
    ("mamba", "attention_mamba"),
    "layers_block_type: hybrid -> shared attention (own KV cache each, MHA, head_dim 2 x hidden"
    " / heads) + Mamba2, else Mamba2 (transformers Zamba2Config, vLLM zamba2.py)",
    architectures=("Zamba2ForCausalLM",),
)
