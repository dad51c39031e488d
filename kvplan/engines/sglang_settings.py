"""The settings of ``kvplan.engines.sglang.kv_cache`` beyond the pool itself: the memory share
(``--mem-fraction-static`` or SGLang's automatic one, by release line), speculative decoding
(``kvplan.engines.sglang_spec``) and LoRA slots (``kvplan.engines.sglang_lora``), checked once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kvplan.arguments import (
    as_flag,
    as_instance,
    as_int,
    as_parallel,
    as_real,
    as_sequence,
    as_str,
    check_flags,
    check_ints,
    check_strs,
)
from kvplan.engines.sglang_lora import lora_bytes
from kvplan.engines.sglang_memory import mem_fraction_static_auto, vlm_mem_fraction
from kvplan.engines.sglang_spec import Speculative, speculative
from kvplan.engines.sglang_versions import SglangVersion, resolve_sglang_version
from kvplan.errors import UnitError
from kvplan.hardware.gpus import GPU
from kvplan.model.limits import MAX_DIM
from kvplan.model.spec import ModelSpec
from kvplan.model.stages import as_tensor_parallel_size

__all__ = ["Extras", "attention_tp_size", "check_sizes", "extras", "pool_fraction"]


@dataclass(frozen=True, slots=True)
class Extras:
    """The release line, the speculative setting (None: off) and the LoRA slots' bytes."""

    version: SglangVersion
    speculative: Speculative | None
    lora_bytes: int


def extras(
    spec: ModelSpec,
    tp: int,
    *,
    version: str | None,
    speculative_algorithm: str | None,
    speculative_num_steps: int | None,
    speculative_eagle_topk: int | None,
    speculative_num_draft_tokens: int | None,
    speculative_draft_model: ModelSpec | None,
    enable_lora: bool,
    max_loras_per_batch: int,
    max_lora_rank: int | None,
    lora_target_modules: Sequence[str] | None,
) -> Extras:
    """Checks and resolves the version, speculative and LoRA settings of one ``kv_cache``."""
    check_strs(optional=True, version=version, speculative_algorithm=speculative_algorithm)
    check_ints(minimum=1, optional=True, max_lora_rank=max_lora_rank)
    as_int(max_loras_per_batch, "max_loras_per_batch", minimum=1)
    if speculative_draft_model is not None:
        as_instance(speculative_draft_model, ModelSpec, "speculative_draft_model", "a ModelSpec")
    if lora_target_modules is not None:
        for module in as_sequence(lora_target_modules, "lora_target_modules", "a list of str"):
            as_str(module, "lora_target_modules", "a list of str")
    choice = resolve_sglang_version(version)
    draft = speculative(
        spec,
        speculative_algorithm,
        num_steps=speculative_num_steps,
        eagle_topk=speculative_eagle_topk,
        num_draft_tokens=speculative_num_draft_tokens,
        draft=speculative_draft_model,
    )
    if draft is not None and choice.line != "0.5.9":
        raise UnitError(
            f"speculative_algorithm with SGLang {choice.line}: the draft pool is modelled for"
            " the 0.5.9 line (v0.5.3-v0.5.9) only"
        )
    if not as_flag(enable_lora, "enable_lora"):
        if max_lora_rank is not None or lora_target_modules is not None:
            raise UnitError("max_lora_rank and lora_target_modules need enable_lora=True")
        return Extras(choice, draft, 0)
    if max_lora_rank is None or lora_target_modules is None:
        raise UnitError(
            "enable_lora: give max_lora_rank and lora_target_modules (SGLang infers them from"
            " the adapters, which kvplan does not read)"
        )
    slots = lora_bytes(
        spec,
        max_loras_per_batch=max_loras_per_batch,
        max_lora_rank=max_lora_rank,
        target_modules=lora_target_modules,
        tp=tp,
    )
    return Extras(choice, draft, slots)


def pool_fraction(
    spec: ModelSpec,
    gpu: GPU,
    given: float | None,
    *,
    tp: int,
    pp: int,
    dp: int,
    enable_dp_attention: bool,
    chunked_prefill_size: int | None,
    cuda_graph_max_bs: int | None,
    extra: Extras,
) -> float:
    """``--mem-fraction-static`` as given, else SGLang's automatic share for the release line,
    lowered for a multimodal model as ``adjust_mem_fraction_for_vlm`` does (a given share is
    kept)."""
    if given is not None:
        return as_real(given, "mem_fraction_static", low=0, high=1)
    auto = mem_fraction_static_auto(
        gpu.memory_bytes,
        tp=tp,
        pp=pp,
        chunked_prefill_size=chunked_prefill_size,
        cuda_graph_max_bs=cuda_graph_max_bs,
        dp=dp,
        enable_dp_attention=enable_dp_attention,
        speculative_algorithm=None if extra.speculative is None else extra.speculative.algorithm,
        version=extra.version.line,
    )
    return vlm_mem_fraction(auto, spec.multimodal)


def check_sizes(
    *,
    max_total_tokens: int | None,
    weights_bytes: int | None,
    used_before_load_bytes: int,
    index_head_dim: int | None,
    chunked_prefill_size: int | None,
    cuda_graph_max_bs: int | None,
    swa_full_tokens_ratio: float = 0.8,
    enable_dp_attention: bool = False,
) -> None:
    """The sizes of ``kv_cache``: whole numbers; a chunk of 0 or -1 turns chunking off; the
    sliding share a real in [0, 1]; the DP-attention switch a flag."""
    check_flags(enable_dp_attention=enable_dp_attention)
    as_real(swa_full_tokens_ratio, "swa_full_tokens_ratio", low=0, high=1)
    check_ints(optional=True, weights_bytes=weights_bytes, cuda_graph_max_bs=cuda_graph_max_bs)
    as_int(used_before_load_bytes, "used_before_load_bytes")
    check_ints(minimum=1, optional=True, max_total_tokens=max_total_tokens)
    if index_head_dim is not None:
        as_int(index_head_dim, "index_head_dim", minimum=1, maximum=MAX_DIM)
    if chunked_prefill_size is not None:
        as_int(chunked_prefill_size, "chunked_prefill_size", minimum=-1)


def attention_tp_size(
    spec: ModelSpec, tp: int, pp: int, dp: int, page_size: int, enable_dp_attention: bool
) -> int:
    """The TP size attention runs at (``tp / dp`` with DP attention), the sizes checked."""
    check_ints(minimum=1, tp=tp, pp=pp, dp=dp, page_size=page_size)
    as_tensor_parallel_size(spec, max(1, tp // dp) if enable_dp_attention else tp)
    if as_parallel(pp, "pp") > spec.num_hidden_layers:
        raise UnitError(f"pp {pp}: more stages than the {spec.num_hidden_layers} layers")
    as_parallel(dp, "dp")
    return max(1, tp // dp) if enable_dp_attention else tp
