"""Tensors moved off their layer's device: llama.cpp's ``--cpu-moe``, ``--n-cpu-moe N`` and
``-ot/--override-tensor PATTERN=DEVICE``.

Read in llama.cpp at commit 0c1e570 (``common/arg.cpp``, ``common/common.h``,
``src/llama-model-loader.cpp``):

- ``-ot PATTERN=DEVICE[,PATTERN=DEVICE...]``: every weight whose name the regular expression
  ``PATTERN`` matches anywhere (``std::regex_search``) is placed on ``DEVICE`` (a buffer type
  name: ``CPU``, ``CUDA0``, ``MTL0``...) instead of its layer's device; the first matching
  override wins. Tensors overridden to ``CPU`` may still be repacked (``CPU_REPACK``) like the
  host's own layers.
- ``--cpu-moe``: the override ``\\.ffn_(up|down|gate|gate_up)_(ch|)exps=CPU`` (every routed
  expert tensor, ``LLM_FFN_EXPS_REGEX``); ``--n-cpu-moe N``: one override per layer ``i < N``,
  ``blk\\.i\\.ffn_(up|down|gate|gate_up)_(ch|)exps=CPU``. kvplan applies ``-ot`` first, then
  these (llama.cpp keeps the order typed; with every override to ``CPU`` the order does not
  change the bytes).

The bytes moved come from the GGUF tensor table when the model is a ``.gguf`` file (exact).
Otherwise each layer is two tensors: the routed experts (``ffn_gate_exps``, ``ffn_up_exps``,
``ffn_down_exps``, a third each) and the rest; the experts' bytes are the layer's bytes times
the share of the expert parameters a token does not use (``num_parameters -
num_active_parameters``) in the decoder layers' parameters. That share omits the ``k`` active
experts of ``E``: 6.25% of the expert bytes for 8 of 128 (Qwen3-30B-A3B), so without a file the
moved bytes are a lower bound.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from kvplan.errors import UnitError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from kvplan.model.spec import ModelSpec

__all__ = [
    "EXPS_PATTERN",
    "Override",
    "layer_tensors",
    "moe_overrides",
    "moved_bytes",
    "parse_overrides",
]

#: llama.cpp's ``LLM_FFN_EXPS_REGEX`` (common/common.h): the routed expert tensors
EXPS_PATTERN = r"\.ffn_(up|down|gate|gate_up)_(ch|)exps"
_LAYER = re.compile(r"blk\.(\d+)\.")


@dataclass(frozen=True, slots=True)
class Override:
    """``PATTERN=DEVICE``: tensors whose name matches go to ``device``."""

    pattern: str
    device: str

    @property
    def flag(self) -> str:
        return f"{self.pattern}={self.device}"


def parse_overrides(texts: Sequence[str]) -> tuple[Override, ...]:
    """``-ot`` values (each ``PATTERN=DEVICE``, several joined by commas) as overrides."""
    out = []
    for text in texts:
        for item in text.split(","):
            pattern, sep, device = item.strip().rpartition("=")
            if not sep or not pattern or not device:
                raise UnitError(f"-ot {item!r}: PATTERN=DEVICE (exps=CPU)")
            try:
                re.compile(pattern)
            except re.error as e:
                raise UnitError(f"-ot {item!r}: not a regular expression ({e})") from None
            out.append(Override(pattern, device))
    return tuple(out)


def moe_overrides(*, cpu_moe: bool, n_cpu_moe: int) -> tuple[Override, ...]:
    """The overrides ``--cpu-moe`` and ``--n-cpu-moe N`` add, as llama.cpp writes them."""
    if n_cpu_moe < 0:
        raise UnitError(f"--n-cpu-moe {n_cpu_moe}: at least 0")
    out = [Override(EXPS_PATTERN, "CPU")] if cpu_moe else []
    out += [Override(rf"blk\.{i}{EXPS_PATTERN}", "CPU") for i in range(n_cpu_moe)]
    return tuple(out)


@lru_cache(maxsize=4)
def _gguf_layer_tensors(path: str, n_layer: int) -> tuple[tuple[tuple[str, int], ...], ...]:
    from kvplan.importers.gguf import import_gguf

    layers: list[list[tuple[str, int]]] = [[] for _ in range(n_layer)]
    for t in import_gguf(path).weights.tensors:
        m = _LAYER.match(t.name)
        if m is not None and int(m[1]) < n_layer:
            layers[int(m[1])].append((t.name, t.num_bytes))
    return tuple(tuple(layer) for layer in layers)


def layer_tensors(
    spec: ModelSpec, layers_bytes: Sequence[int], gguf_path: str | None
) -> tuple[tuple[tuple[str, int], ...], ...]:
    """``(name, bytes)`` of each repeating layer's tensors (module docstring)."""
    n = spec.num_hidden_layers
    if gguf_path is not None:
        return _gguf_layer_tensors(gguf_path, n)
    total, active = spec.num_parameters, spec.num_active_parameters
    embed = (spec.vocab_size or 0) * (spec.hidden_size or 0)
    layer_params = (total or 0) - embed * (1 if spec.tie_word_embeddings else 2)
    inactive = (total - active) if total and active and active < total else 0
    out = []
    for i, num_bytes in enumerate(layers_bytes):
        experts = num_bytes * inactive // layer_params if layer_params > 0 else 0
        third = experts // 3
        names = ("ffn_gate_exps", "ffn_up_exps", "ffn_down_exps")
        parts = [third, third, experts - 2 * third]
        layer = [(f"blk.{i}.{name}.weight", b) for name, b in zip(names, parts, strict=True)]
        out.append((*layer, (f"blk.{i}.other", num_bytes - experts)))
    return tuple(out)


def moved_bytes(
    tensors: Sequence[Sequence[tuple[str, int]]],
    overrides: Sequence[Override],
    gpu_names: Sequence[str],
) -> list[dict[int | None, int]]:
    """Per layer, the bytes each override sends to a device (an index into ``gpu_names``;
    None: the host)."""
    allowed = {"CPU": None, **{name: i for i, name in enumerate(gpu_names)}}
    for o in overrides:
        if o.device not in allowed:
            raise UnitError(f"-ot {o.flag}: device {o.device!r}; allowed {', '.join(allowed)}")
    compiled = [(re.compile(o.pattern), allowed[o.device]) for o in overrides]
    out: list[dict[int | None, int]] = []
    for layer in tensors:
        moved: dict[int | None, int] = {}
        for name, num_bytes in layer:
            for rx, device in compiled:
                if rx.search(name):
                    moved[device] = moved.get(device, 0) + num_bytes
                    break
        out.append(moved)
    return out
