"""What one ``kvplan flags`` question holds (``Target``) and what each engine answers
(``EngineFlags``), shared by the engines' rules in kvplan.answers.flags."""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvplan.engines.vllm_calibration import Calibration
    from kvplan.engines.vllm_lora import VllmLora
    from kvplan.engines.vllm_speculative import Speculative
    from kvplan.hardware.gpus import GPU
    from kvplan.model.spec import ModelSpec

__all__ = ["EngineFlags", "Target"]


@dataclass(frozen=True, slots=True)
class EngineFlags:
    """One engine's command-line flags for the target, and what they make it allocate.

    Bytes are per GPU (the fullest GPU for llama.cpp): ``weights_bytes`` placed there,
    ``required_bytes`` = weights + cache + the engine's modelled overhead, ``budget_bytes``
    the memory the engine lets itself use there. ``reason`` says why it does not fit ("" when
    it fits); ``flags`` is empty unless the engine fits, so no value it would refuse is shown.
    """

    engine: str
    flags: tuple[str, ...]
    kv_cache_bytes: int
    fits: bool
    note: str
    reason: str = ""
    model_dtype: str = ""
    kv_cache_dtype: str = ""
    dtype_reason: str = ""
    weights_bytes: int = 0
    required_bytes: int = 0
    budget_bytes: int = 0
    num_gpus: int = 1


@dataclass(frozen=True, slots=True)
class Target:
    """The target: the model, the GPU, ``n`` requests of ``length`` tokens on ``tp`` GPUs, and
    the settings asked for."""

    spec: ModelSpec
    gpu: GPU
    length: int
    n: int
    tp: int
    kv: str | None
    quantization: str | None
    util: Fraction
    hf_overrides: str | None = None  # as given; its trained length is ``trained``
    trained: int | None = None
    model_as_typed: str = ""  # the model as the user typed it (a .gguf path, a Hub repo)
    calibration: Calibration | None = None  # vLLM's budget terms fitted on this site
    speculative: Speculative | None = None  # vLLM's --speculative-config
    lora: VllmLora | None = None  # vLLM's --enable-lora slots
