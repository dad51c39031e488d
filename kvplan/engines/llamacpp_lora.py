"""llama-server's LoRA adapters (``--lora FILE.gguf``): each adapter's tensors on the device of
the weight they adapt.

Read in llama.cpp 0c1e570 (src/llama-adapter.cpp, ``llama_adapter_lora_init_impl``): an adapter
file is a GGUF of ``general.type`` ``adapter`` and ``adapter.type`` ``lora`` holding, for each
adapted weight ``NAME``, the pair ``NAME.lora_a`` and ``NAME.lora_b``. Each pair is allocated in
the buffer type of ``NAME`` in the loaded model (a CPU repacking type falls back to the plain
CPU one), one buffer a buffer type, each tensor padded to the buffer's alignment (128 B on
CUDA, ``TENSOR_ALIGNMENT`` 32 B elsewhere) and, on CUDA, a quantized tensor's rows padded to
``MATRIX_ROW_PADDING`` (512 values); llama.cpp prints ``CUDA0 LoRA buffer size = X MiB``. The
token embeddings stay in host memory, so their pair does too. Only the adapter's header is read.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from kvplan.errors import SpecError
from kvplan.importers.gguf_format import GGML_TYPES, GGUFTensor, read_gguf_header

__all__ = ["LoraTensor", "lora_bytes", "read_lora"]

#: a tensor's row is padded to this many values on CUDA when it is quantized
MATRIX_ROW_PADDING = 512
_BLOCKS = {name: (values, size) for name, values, size in GGML_TYPES.values()}
_LAYER = re.compile(r"blk\.(\d{1,6})\.")


@dataclass(frozen=True, slots=True)
class LoraTensor:
    """One adapter tensor: the weight it adapts, that weight's layer (None: the token
    embeddings; -1: the output layer), its ggml type, shape and bytes in the file."""

    base: str
    layer: int | None
    ggml_type: str
    shape: tuple[int, ...]
    num_bytes: int


def _layer(base: str, path: str, n_layer: int) -> int | None:
    if base == "token_embd.weight":
        return None
    if base == "output.weight":
        return -1
    found = _LAYER.match(base)
    if found is None or int(found[1]) >= n_layer:
        raise SpecError(
            path,
            [
                f"tensor {base[:60]}.lora_a: adapts no weight of a {n_layer}-layer model"
                " (blk.N.* with N below the layers, token_embd.weight or output.weight)"
            ],
        )
    return int(found[1])


def read_lora(path: str, n_layer: int) -> tuple[LoraTensor, ...]:
    """The adapter tensors of the LoRA GGUF ``path`` for a model of ``n_layer`` layers.
    Raises SpecError naming the file for one that is not a LoRA adapter, a pair missing a
    half, or a tensor that adapts no weight of the model."""
    header = read_gguf_header(path)
    kinds = (header.metadata.get("general.type"), header.metadata.get("adapter.type"))
    if kinds != ("adapter", "lora"):
        raise SpecError(
            path, ["not a LoRA adapter: general.type must be 'adapter' and adapter.type 'lora'"]
        )
    halves: dict[str, list[GGUFTensor]] = {}
    for tensor in header.tensors:
        base, dot, half = tensor.name.rpartition(".")
        if not dot or half not in ("lora_a", "lora_b"):
            raise SpecError(
                path, [f"tensor {tensor.name[:60]}: an adapter holds .lora_a and .lora_b"]
            )
        halves.setdefault(base, []).append(tensor)
    out = []
    for base, pair in halves.items():
        if len(pair) != 2:
            raise SpecError(path, [f"tensor {base[:60]}: its LoRA pair is missing one half"])
        layer = _layer(base, path, n_layer)
        out += [LoraTensor(base, layer, t.ggml_type, t.shape, t.num_bytes) for t in pair]
    return tuple(out)


def _pad(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def alloc_bytes(tensor: LoraTensor, backend: str) -> int:
    """The bytes ``tensor`` takes in a buffer of ``backend`` (``cuda``, ``metal``, ``cpu``)."""
    size = tensor.num_bytes
    if backend == "cuda":
        values, block = _BLOCKS.get(tensor.ggml_type.upper(), (1, 0))
        row = tensor.shape[0] if tensor.shape else 0
        if values > 1 and row % MATRIX_ROW_PADDING:
            size += (MATRIX_ROW_PADDING - row % MATRIX_ROW_PADDING) // values * block
        return _pad(size, 128)
    return _pad(size, 32)


def lora_bytes(
    tensors: Sequence[LoraTensor], device_of: Sequence[int | None], backend: str
) -> dict[int | None, int]:
    """Bytes per device (GPU index, None: the host) of ``tensors``, each on the device of the
    layer it adapts (``device_of[layer]``; the output layer last), the token embeddings' on the
    host."""
    out: dict[int | None, int] = {}
    for tensor in tensors:
        device = None if tensor.layer is None else device_of[tensor.layer]
        out[device] = out.get(device, 0) + alloc_bytes(
            tensor, backend if device is not None else "cpu"
        )
    return out
