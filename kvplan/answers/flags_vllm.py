"""vLLM's own settings in ``kvplan flags``: a site's calibration, ``--speculative-config`` and
the LoRA slots, checked against the engines asked for, and the flags they add to vLLM's line."""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence

from kvplan.arguments import as_instance, as_str
from kvplan.engines.vllm_calibration import Calibration
from kvplan.engines.vllm_lora import VllmLora
from kvplan.engines.vllm_speculative import Speculative, parse_speculative_config
from kvplan.engines.vllm_versions import DEFAULT_VERSION
from kvplan.errors import UnitError

__all__ = ["vllm_extra_flags", "vllm_settings"]


def vllm_settings(
    wanted: Sequence[str],
    gpu_name: str,
    tp: int,
    calibration: Calibration | None,
    speculative_config: str | None,
    lora: VllmLora | None,
) -> tuple[Calibration | None, Speculative | None, VllmLora | None]:
    """The settings checked: the speculative config and the LoRA slots ask for vLLM alone, a
    calibration for vLLM among the engines, on its own site (UnitError otherwise); a wrong
    type is an ArgumentTypeError naming the argument."""
    if speculative_config is not None:
        as_str(speculative_config, "speculative_config", "the JSON of --speculative-config")
    if lora is not None:
        as_instance(lora, VllmLora, "lora", "a VllmLora")
    if calibration is not None:
        as_instance(calibration, Calibration, "calibration", "a Calibration (kvplan calibrate)")
    for flag, value in (("--speculative-config", speculative_config), ("--enable-lora", lora)):
        if value is not None and tuple(wanted) != ("vllm",):
            raise UnitError(f"{flag}: vLLM's setting; it applies with --engine vllm")
    speculative = None
    if speculative_config is not None:
        speculative = parse_speculative_config(speculative_config)
    if calibration is not None:
        if "vllm" not in wanted:
            raise UnitError("--calibration: vLLM's budget terms; it applies with --engine vllm")
        calibration.check_site(gpu_name, DEFAULT_VERSION, tp)
    return calibration, speculative, lora


def vllm_extra_flags(speculative: Speculative | None, lora: VllmLora | None) -> list[str]:
    """vLLM's speculative decoding and LoRA flags, as given."""
    out = []
    if speculative is not None:
        doc: dict[str, object] = {"method": speculative.method}
        if speculative.num_speculative_tokens:
            doc["num_speculative_tokens"] = speculative.num_speculative_tokens
        if speculative.draft is not None:
            doc["model"] = speculative.draft.hf_id or speculative.draft.name
        out.append(f"--speculative-config={shlex.quote(json.dumps(doc))}")
    if lora is not None:
        out += ["--enable-lora", f"--max-loras={lora.max_loras}"]
        out.append(f"--max-lora-rank={lora.max_lora_rank}")
        if lora.target_modules:
            out.append("--lora-target-modules " + " ".join(lora.target_modules))
        if lora.fully_sharded:
            out.append("--fully-sharded-loras")
    return out
