"""The LoRA settings of a question, as each engine's profile takes them: vLLM's
``VllmLora`` (kvplan.engines.vllm_lora) and SGLang's ``kv_cache`` keywords
(kvplan.engines.sglang_lora). A LoRA setting without ``--enable-lora`` is refused by name, as
neither engine allocates a slot then."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kvplan.errors import UnitError

if TYPE_CHECKING:
    from kvplan.answers.question import Question
    from kvplan.engines.vllm_lora import VllmLora

__all__ = ["sglang_lora", "vllm_lora"]


def _lora_modules(q: Question) -> tuple[str, ...] | None:
    """``--lora-target-modules``: the comma-separated names, or None."""
    if q.lora_target_modules is None:
        return None
    return tuple(name.strip() for name in q.lora_target_modules.split(",") if name.strip())


def _lora_given(q: Question, engine_only: tuple[str, ...]) -> bool:
    """Whether LoRA is on; a LoRA setting without ``--enable-lora`` is refused by name."""
    if q.enable_lora:
        return True
    names = ("max_lora_rank", "lora_target_modules", *engine_only)
    given = [name for name in names if getattr(q, name) is not None]
    if given:
        flag = "--" + given[0].replace("_", "-")
        raise UnitError(f"{flag}: needs --enable-lora (without it no adapter slot is allocated)")
    return False


def vllm_lora(q: Question) -> VllmLora | None:
    """vLLM's LoRA settings (kvplan.engines.vllm_lora), None when LoRA is off."""
    if not _lora_given(q, ("max_loras", "fully_sharded_loras")):
        return None
    from kvplan.engines.vllm_lora import VllmLora

    return VllmLora(
        max_loras=q.max_loras or 1,
        max_lora_rank=16 if q.max_lora_rank is None else q.max_lora_rank,
        target_modules=_lora_modules(q),
        fully_sharded=bool(q.fully_sharded_loras),
    )


def sglang_lora(q: Question) -> dict[str, Any]:
    """SGLang's LoRA keywords of ``sglang.kv_cache`` (kvplan.engines.sglang_lora)."""
    if not _lora_given(q, ("max_loras_per_batch",)):
        return {}
    return {
        "enable_lora": True,
        "max_loras_per_batch": q.max_loras_per_batch or 8,
        "max_lora_rank": q.max_lora_rank,
        "lora_target_modules": _lora_modules(q),
    }
