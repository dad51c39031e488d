"""Llama-Nemotron NAS models (``nemotron-nas``, DeciLMForCausalLM): Llama layers whose
attention and MLP a neural architecture search resized or removed, one block config a layer.

vLLM 0.32 (nemotron_nas.py) reads ``block_configs[i]``: an attention with ``no_op`` keeps no
cache (and has no input norm); otherwise it has ``num_attention_heads / n_heads_in_group`` K/V
heads of ``head_dim`` (absent: hidden_size / num_attention_heads, as LlamaAttention). An MLP
is ``no_op`` or gated of ``ffn_mult`` (width ``2 x ffn_mult x hidden_size / 3`` rounded up to
a multiple of 256) or of a stated ``intermediate_size``. vLLM builds nothing for
``replace_with_linear``, so such blocks are refused, never guessed. The config class is the
checkpoint's own (configuration_decilm.py, remote code).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvplan.errors import SpecError
from kvplan.importers.parameters import Count, decoder, linear, mlp, norm, shapes
from kvplan.importers.reading import Reading, as_list, mapping, whole
from kvplan.importers.registry import register
from kvplan.importers.rules import Rule, kv_heads_mha
from kvplan.model.limits import MAX_DIM

FAMILY = "nemotron_nas"


def _blocks(r: Reading, n: int) -> list[tuple[Mapping[str, Any], Mapping[str, Any]]]:
    """Each layer's (attention, ffn) block config; SpecError when absent or malformed."""
    given = r.config.get("block_configs")
    if given is None:
        raise SpecError("", ["block_configs: required for nemotron-nas (one per layer)"])
    blocks = as_list(given, "block_configs")
    if len(blocks) != n:
        raise SpecError("", [f"block_configs: has {len(blocks):,} entries but {n} layers"])
    out = []
    for i, block in enumerate(blocks):
        block = mapping(block, f"block_configs.{i}")
        attention = mapping(block.get("attention"), f"block_configs.{i}.attention")
        ffn = mapping(block.get("ffn"), f"block_configs.{i}.ffn")
        for part, config in (("attention", attention), ("ffn", ffn)):
            if config.get("replace_with_linear") and not config.get("no_op"):
                raise SpecError(
                    "",
                    [f"block_configs.{i}.{part}.replace_with_linear: vLLM 0.32 does not build it"],
                )
        out.append((attention, ffn))
    return out


def _kv_heads(r: Reading, attention: Mapping[str, Any], i: int) -> int | None:
    """K/V heads of one layer; None for a no-op attention."""
    if attention.get("no_op"):
        return None
    heads = r.spec["num_attention_heads"]
    group = whole(attention.get("n_heads_in_group"), f"block_configs.{i}.n_heads_in_group")
    if heads % group:
        raise SpecError(
            "", [f"block_configs.{i}.n_heads_in_group: {group} does not divide {heads} heads"]
        )
    return int(heads // group)


def _layers(r: Reading, n: int) -> None:
    kv = [_kv_heads(r, attention, i) for i, (attention, _) in enumerate(_blocks(r, n))]
    attended = [k for k in kv if k is not None]
    if not attended:
        raise SpecError("", ["block_configs: every attention is no_op"])
    r.spec["layer_types"] = ["no_cache" if k is None else "full_attention" for k in kv]
    # a no_cache layer reads no K/V heads; its entry repeats the fewest any layer keeps
    r.spec["num_key_value_heads_per_layer"] = [min(attended) if k is None else k for k in kv]
    r.notes.append(
        f"block_configs: {len(attended)} attention layers (K/V heads = heads / n_heads_in_group),"
        f" {n - len(attended)} no_op"
    )


def _ffn_width(r: Reading, ffn: Mapping[str, Any], hidden: int, i: int) -> int:
    """The gated MLP's width: from ``ffn_mult`` as vLLM's ``_ffn_mult_to_intermediate_size``
    (``int(2 x mult x hidden / 3)`` rounded up to 256), else the stated width."""
    mult = ffn.get("ffn_mult")
    if mult is None:
        return whole(ffn.get("intermediate_size"), f"block_configs.{i}.ffn.intermediate_size")
    if isinstance(mult, bool) or not isinstance(mult, int | float) or not 0 < mult < MAX_DIM:
        raise SpecError("", [f"block_configs.{i}.ffn.ffn_mult: must be a positive number"])
    width = int(2 * mult * hidden / 3)
    return -(-width // 256) * 256


def _count(r: Reading) -> Count:
    """Per layer: the attention (q, k, v, o of its K/V heads, no biases) and its input
    RMSNorm unless no_op; the gated MLP and its RMSNorm unless no_op. Embeddings, head and
    the final norm."""
    s = shapes(r)
    layers = Count()
    for i, (attention, ffn) in enumerate(_blocks(r, s.layers)):
        kv = _kv_heads(r, attention, i)
        if kv is not None:
            q, k = s.heads * s.head_dim, kv * s.head_dim
            layers += linear(s.hidden, q + 2 * k) + linear(q, s.hidden) + norm(s.hidden)
        if not ffn.get("no_op"):
            layers += mlp(s.hidden, _ffn_width(r, ffn, s.hidden, i)) + norm(s.hidden)
    return decoder(s, layers)


register(
    FAMILY,
    "nemotron-nas",
    Rule(kv_heads=kv_heads_mha, layers=_layers, parameters=_count),
    ("full_attention", "no_cache"),
    "block_configs: K/V heads = heads / n_heads_in_group per layer, no_op attention keeps no"
    " cache; ffn_mult widths (vLLM nemotron_nas.py; the checkpoint's configuration_decilm.py)",
    architectures=("DeciLMForCausalLM",),
)
