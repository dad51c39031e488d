"""Exact parameter counts from a checkpoint's safetensors headers (or its index).

A safetensors file starts with an 8-byte little-endian header length and a JSON header naming
each tensor's dtype and shape; only that header is read, never the tensors. The header is
third-party input: a length past 100 MiB, a dtype that is not a safetensors name, a shape that
is not a short list of sizes, or a total past ``MAX_PARAMETERS`` is a SpecError naming the file.

A local folder and the Hub share one path: each file's header dict is checked by
``check_header`` and the headers are counted by ``weights_from_headers``; only where the header
bytes come from differs (``read_safetensors_header`` here, range requests in ``hub``).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvplan.errors import SpecError
from kvplan.files import is_file, read_bytes, read_head
from kvplan.importers.reading import Config, mapping, read_json, whole
from kvplan.model.limits import MAX_PARAMETERS
from kvplan.units import abbreviate

INDEX_NAME = "model.safetensors.index.json"

# Storage beside quantized weights: scales, zero points, group indices; not parameters.
_OVERHEAD = (
    "_scales", "_scale", "_scale_2", "weight_scale_inv", ".scales", ".qzeros", ".g_idx",
    "_zero_point",
)  # fmt: skip
# The routed experts' tensors: ``mlp.experts.7.gate_proj.weight`` (DeepSeek, Qwen, Mixtral's
# ``block_sparse_moe.experts.``), ``mlp.experts.gate_up_proj_blocks`` (gpt-oss, one tensor for
# all experts); a shared expert (``shared_experts.``, ``shared_expert.``) is not among them.
_ROUTED_EXPERTS = ".experts."
#: The longest header read: the safetensors library's own limit (100,000,000 B) rounded up.
HEADER_LIMIT_BYTES = 100 * 2**20
#: Bits of one element of each safetensors dtype (the format's own list, as of 0.7).
DTYPE_BITS: dict[str, int] = {
    "BOOL": 8, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "F4": 4,
    "F6_E2M3": 6, "F6_E3M2": 6, "I16": 16, "U16": 16, "F16": 16, "BF16": 16, "I32": 32,
    "U32": 32, "F32": 32, "C64": 64, "F64": 64, "I64": 64, "U64": 64,
}  # fmt: skip
#: Dimensions of one tensor, and the largest dimension: far beyond any checkpoint.
_MAX_RANK = 16
_MAX_DIM = 2**48
_MAX_OFFSET = 2**62


@dataclass(frozen=True, slots=True)
class WeightCount:
    """Parameters of a checkpoint, read from safetensors headers or the index."""

    num_parameters: int
    num_quantized_parameters: int
    weight_dtype: str | None
    dtypes: dict[str, int]
    how: str
    #: Parameters of the tensors named as routed experts (0: none named so).
    num_expert_parameters: int = 0


def read_safetensors_header(path: Path) -> dict[str, Any]:
    """The JSON header of a .safetensors file: the 8-byte little-endian length, then JSON.

    Reads the header only, never the tensors. Raises SpecError naming the file when it is not
    a regular file, not safetensors, or a tensor's dtype or shape is malformed.
    """
    head = read_head(path, 8)
    if len(head) < 8:
        raise SpecError(str(path), ["not a safetensors file: shorter than 8 bytes"])
    (length,) = struct.unpack("<Q", head)
    if length > HEADER_LIMIT_BYTES:
        raise SpecError(str(path), [f"not a safetensors file: header of {length:,} B"])
    raw = read_bytes(path, offset=8, num_bytes=length)
    header = parse_header(raw) if len(raw) == length else None
    return check_header(header, str(path))


def parse_header(raw: bytes) -> Any:
    """The JSON of a header's bytes, strictly UTF-8 (the format's encoding: ``json.loads``
    alone would also read UTF-16 and UTF-32); None when they are not."""
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):  # JSONDecodeError is a ValueError
        return None


def check_header(header: Any, where: str) -> dict[str, Any]:
    """``header`` when it is a safetensors header (tensor name -> {dtype, shape,
    data_offsets}); SpecError naming ``where`` (a file, or a file on the Hub) when it is not an
    object, an entry's dtype or shape is malformed, or the tensors' byte ranges are not what
    the format requires: each as long as its dtype and shape, one after another from 0. (The
    data itself is never read, so a file holding only its header still counts.)"""
    if not isinstance(header, dict):
        raise SpecError(where, ["not a safetensors file: the header is not a JSON object"])
    try:
        spans = sorted(
            (_span(name, info), name) for name, info in header.items() if name != "__metadata__"
        )
        end = 0
        for (begin, stop), name in spans:
            if begin != end:
                shown = name if len(name) <= 80 else name[:77] + "..."
                raise SpecError("", [f"{shown}: data_offsets start at {begin:,}, not {end:,}"])
            end = stop
    except SpecError as e:
        raise SpecError(where, [f"not a safetensors file: {e.problems[0]}"]) from None
    return header


def _span(name: str, info: Any) -> tuple[int, int]:
    """A tensor's ``data_offsets`` [begin, end], checked against its dtype and shape."""
    dtype, numel = _tensor(name, info)
    shown = name if len(name) <= 80 else name[:77] + "..."
    offsets = info.get("data_offsets")
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(type(o) is int and 0 <= o <= _MAX_OFFSET for o in offsets)
        or offsets[0] > offsets[1]
    ):
        raise SpecError("", [f"{shown}: data_offsets must be [begin, end], 0 <= begin <= end"])
    bits = numel * DTYPE_BITS[dtype]
    if bits % 8 or offsets[1] - offsets[0] != bits // 8:
        raise SpecError(
            "",
            [
                f"{shown}: data_offsets span {offsets[1] - offsets[0]:,} B; {numel:,} x {dtype}"
                f" is {bits / 8:,g} B"
            ],
        )
    return offsets[0], offsets[1]


def _tensor(name: str, info: Any) -> tuple[str, int]:
    """A header entry's dtype and element count; SpecError naming the tensor when malformed."""
    shown = name if len(name) <= 80 else name[:77] + "..."
    if not isinstance(info, Mapping):
        raise SpecError("", [f"{shown}: must be an object with dtype and shape"])
    dtype, shape = info.get("dtype"), info.get("shape")
    if not isinstance(dtype, str) or dtype not in DTYPE_BITS:
        raise SpecError(
            "",
            [
                f"{shown}: dtype {abbreviate(dtype)} is not a safetensors dtype; one of"
                f" {', '.join(DTYPE_BITS)}"
            ],
        )
    if not isinstance(shape, list) or len(shape) > _MAX_RANK:
        raise SpecError("", [f"{shown}: shape must be a list of at most {_MAX_RANK} sizes"])
    numel = 1
    for dim in shape:
        if isinstance(dim, bool) or not isinstance(dim, int) or not 0 <= dim <= _MAX_DIM:
            raise SpecError("", [f"{shown}: shape {abbreviate(dim)} is not a size"])
        numel *= dim
    return dtype, numel


def count_parameters(
    headers: Mapping[str, Mapping[str, Any]], quant: Config, how: str = "safetensors headers"
) -> WeightCount:
    """Parameters per format from safetensors headers (name -> {dtype, shape}).

    Scales, zero points and group indices are storage, not parameters. MXFP4 ``*_blocks``
    hold two 4-bit values a byte; GPTQ/AWQ ``qweight`` packs 32 / bits values an int32.
    Tensors under ``.experts.`` are counted apart as the routed experts. Raises SpecError for
    a malformed entry or ``quantization_config``.
    """
    quant = mapping(quant, "quantization_config")
    method = str(quant.get("quant_method", "")).lower()
    bits = quant.get("bits", 4)
    bits = 4 if bits is None else whole(bits, "quantization_config.bits", maximum=32)
    dtypes: dict[str, int] = {}
    quantized = experts = 0
    for name, info in headers.items():
        if name == "__metadata__" or name.endswith(_OVERHEAD):
            continue
        dtype, numel = _tensor(name, info)
        if name.endswith("_blocks") and dtype == "U8":
            numel, dtype = numel * 2, "MXFP4"
            quantized += numel
        elif name.endswith(".qweight") and dtype == "I32":
            numel, dtype = numel * 32 // bits, f"INT{bits}"
            quantized += numel
        elif dtype == "U8" and _packs_fp4(name, info, headers):
            numel, dtype = numel * 2, "NVFP4"
            quantized += numel
        elif dtype.startswith("F8_"):
            quantized += numel
        dtypes[dtype] = dtypes.get(dtype, 0) + numel
        if _ROUTED_EXPERTS in name:
            experts += numel
    total = sum(dtypes.values())
    if total > MAX_PARAMETERS:
        raise SpecError("", [f"safetensors headers: {total:,} parameters, over {MAX_PARAMETERS:,}"])
    return WeightCount(
        num_parameters=total,
        num_quantized_parameters=quantized,
        weight_dtype=(_weight_dtype(method, bits) or _by_tensors(dtypes)) if quantized else None,
        dtypes=dict(sorted(dtypes.items())),
        how=how,
        num_expert_parameters=experts,
    )


def _packs_fp4(name: str, info: Mapping[str, Any], headers: Mapping[str, Any]) -> bool:
    """Whether a U8 tensor holds NVFP4 weights, two 4-bit values a byte, as NVIDIA ModelOpt
    (``X.weight``) and compressed-tensors (``X.weight_packed``) store them: by its companion
    ``X.weight_scale``, one FP8 E4M3 scale per 16 values, so its last dimension is an eighth
    of the packed tensor's (the quantization_config's spelling varies; the tensors do not)."""
    if not name.endswith((".weight", ".weight_packed")):
        return False
    scale = headers.get(name.removesuffix("_packed") + "_scale")
    if not isinstance(scale, Mapping) or scale.get("dtype") != "F8_E4M3":
        return False
    shape, scale_shape = info.get("shape"), scale.get("shape")
    return (
        isinstance(shape, list)
        and isinstance(scale_shape, list)
        and len(shape) == len(scale_shape) >= 2
        and shape[:-1] == scale_shape[:-1]
        and isinstance(scale_shape[-1], int)
        and scale_shape[-1] * 8 == shape[-1]
    )


def _by_tensors(dtypes: Mapping[str, int]) -> str | None:
    """The weight format the quantized tensors themselves show, when the method does not."""
    if "NVFP4" in dtypes:
        return "nvfp4"
    return "fp8_e4m3" if "F8_E4M3" in dtypes else None


def _weight_dtype(method: str, bits: int) -> str | None:
    if method in ("gptq", "awq"):
        return "int4" if bits == 4 else "int8" if bits == 8 else None
    return {"fp8": "fp8_e4m3", "mxfp4": "mxfp4", "nvfp4": "nvfp4"}.get(method)


def weights_from_headers(
    headers: Mapping[str, Any], config: Config, where: str = ""
) -> WeightCount:
    """The checkpoint's parameters from the header of each of its files (file name -> header
    dict), wherever the headers were read; ``where`` ends the description (`` on the Hub``).

    Raises SpecError naming the file of a malformed header, or for a malformed
    ``quantization_config``.
    """
    quant = mapping(config.get("quantization_config"), "quantization_config")
    merged: dict[str, Any] = {}
    for name, header in headers.items():
        merged.update(check_header(header, name))
    return count_parameters(merged, quant, f"safetensors headers of {len(headers)} file(s){where}")


def weights_in_folder(folder: Path, config: Config, torch_dtype: str) -> WeightCount | None:
    """The checkpoint's parameters, from shard headers, else from the index's total_size when
    the checkpoint is unquantized (one dtype); None when the folder has neither."""
    shards = sorted(folder.glob("*.safetensors"))
    if shards:
        return weights_from_headers(
            {str(shard): read_safetensors_header(shard) for shard in shards}, config
        )
    index = folder / INDEX_NAME
    if not is_file(index):
        return None
    quant = mapping(config.get("quantization_config"), "quantization_config")
    data = read_json(index)
    try:
        metadata = mapping(data.get("metadata"), "metadata")
        total = metadata.get("total_size")
        if total is not None:
            whole(total, "metadata.total_size", maximum=MAX_PARAMETERS * 8)
    except SpecError as e:
        raise SpecError(str(index), e.problems) from None
    width = {"float32": 4, "float16": 2, "bfloat16": 2}.get(torch_dtype)
    if not isinstance(total, int) or quant or width is None or total % width:
        return None
    return WeightCount(
        total // width,
        0,
        None,
        {torch_dtype: total // width},
        f"{INDEX_NAME} total_size {total:,} B / {width} B",
    )
