"""The GGUF container: its header (metadata keys and the tensor table) read and validated.

A GGUF file is ``GGUF``, a version, the tensor and key counts, the key/value metadata, one
entry per tensor (name, shape, ggml type, offset), padding to ``general.alignment`` (32 B by
default), then the tensor data. Only the header is read, through a memory map, so the data
pages of a 20 GiB file are never touched and the answer takes milliseconds. The header is
third-party input: every count, length and offset is checked against the file's size and a
limit before anything is read or allocated, and any refusal is one SpecError naming the file.

llama.cpp's own ``gguf`` package holds the same tables (``GGML_QUANT_SIZES``,
``GGUFValueType``); its ``GGUFReader`` is not used here because it bounds no count from the
file and builds a numpy view per array element (a 150k-token vocabulary takes seconds).
``tests/test_gguf.py`` checks the tables below against that package.
"""

from __future__ import annotations

import mmap
import os
import stat
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvplan.errors import SpecError

#: ggml tensor types: id -> (name, values per block, bytes per block), from ggml/include/ggml.h
#: and ggml/src/ggml-common.h (K-quants use 256-value super-blocks, QK_K). Worked example:
#: Q4_K = 2 + 2 (fp16 scale and min) + 12 (6-bit sub-block scales) + 128 (4-bit values) = 144 B
#: per 256 values, so a 4096 x 4096 Q4_K matrix is 65,536 blocks x 144 B = 9,437,184 B.
GGML_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("F32", 1, 4),
    1: ("F16", 1, 2),
    2: ("Q4_0", 32, 18),
    3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24),
    8: ("Q8_0", 32, 34),
    9: ("Q8_1", 32, 40),
    10: ("Q2_K", 256, 84),
    11: ("Q3_K", 256, 110),
    12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176),
    14: ("Q6_K", 256, 210),
    15: ("Q8_K", 256, 292),
    16: ("IQ2_XXS", 256, 66),
    17: ("IQ2_XS", 256, 74),
    18: ("IQ3_XXS", 256, 98),
    19: ("IQ1_S", 256, 50),
    20: ("IQ4_NL", 32, 18),
    21: ("IQ3_S", 256, 110),
    22: ("IQ2_S", 256, 82),
    23: ("IQ4_XS", 256, 136),
    24: ("I8", 1, 1),
    25: ("I16", 1, 2),
    26: ("I32", 1, 4),
    27: ("I64", 1, 8),
    28: ("F64", 1, 8),
    29: ("IQ1_M", 256, 56),
    30: ("BF16", 1, 2),
    34: ("TQ1_0", 256, 54),
    35: ("TQ2_0", 256, 66),
    39: ("MXFP4", 32, 17),
    40: ("NVFP4", 64, 36),
    41: ("Q1_0", 128, 18),
}

#: ``general.file_type`` (llama_ftype in llama.h): what llama-quantize was asked for.
FILE_TYPES: dict[int, str] = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
    11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S",
    17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS",
    23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S",
    29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0", 37: "TQ2_0",
    38: "MXFP4_MOE", 39: "NVFP4", 40: "Q1_0",
}  # fmt: skip

# Metadata value types (gguf.h): id -> struct format of one scalar; 8 string, 9 array.
_SCALARS: dict[int, str] = {
    0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d",
}  # fmt: skip
_STRING, _ARRAY = 8, 9

#: Limits far past any real file (DeepSeek V3: about 1,100 tensors and 50 keys; Gemma 3:
#: 262,144 tokens; the longest chat templates are tens of KiB), low enough that no header can
#: make kvplan loop for minutes or allocate gigabytes.
MAX_TENSORS = 2**20
MAX_KEYS = 2**16
MAX_ARRAY_ITEMS = 2**24
#: A string array (the vocabulary) is walked item by item: at most 2**21, 8 x Gemma 3's.
MAX_STRING_ITEMS = 2**21
MAX_STRING_BYTES = 2**26
MAX_HEADER_BYTES = 2**30
#: Numeric arrays up to this length are kept (per-layer values); longer ones (token scores)
#: keep only their length.
KEPT_ARRAY_ITEMS = 2**16
_MAX_DIMS = 4  # GGML_MAX_DIMS
_MAX_NAME_BYTES = 256  # llama.cpp allows 63 (GGML_MAX_NAME - 1)
_MAX_ELEMENTS = 2**60


@dataclass(frozen=True, slots=True)
class GGUFArray:
    """A metadata array whose items are not kept: strings (the vocabulary) or a long list."""

    item_type: str
    count: int


@dataclass(frozen=True, slots=True)
class GGUFTensor:
    """One entry of a tensor table: its ggml type, shape (ggml order: ``ne[0]`` first, the
    row length), and exact bytes in the file. ``part`` is the split file holding it (0-based)."""

    name: str
    ggml_type: str
    shape: tuple[int, ...]
    num_elements: int
    num_bytes: int
    part: int = 0


@dataclass(frozen=True, slots=True)
class GGUFHeader:
    """What a GGUF file's header says: its metadata, tensor table and where the data starts."""

    path: str
    version: int
    metadata: dict[str, Any]
    tensors: tuple[GGUFTensor, ...]
    data_offset: int
    file_bytes: int


def tensor_bytes(ggml_type: int, shape: tuple[int, ...]) -> int:
    """Bytes of a tensor of this ggml type and shape: whole blocks along each row (``ne[0]``
    must be a multiple of the block), times the rows. Raises ValueError when it is not."""
    _, block_values, block_bytes = GGML_TYPES[ggml_type]
    row = shape[0] if shape else 1
    if row % block_values:
        raise ValueError(f"row of {row:,} values is not a whole number of {block_values}-blocks")
    rows = 1
    for n in shape[1:]:
        rows *= n
    return row // block_values * block_bytes * rows


def read_gguf_header(path: str | Path, part: int = 0) -> GGUFHeader:
    """The header of the GGUF file ``path`` (``part``: its index among split files).

    Reads the metadata and the tensor table only, through a memory map. Raises SpecError
    naming the file when it is not a regular file, not GGUF, truncated or malformed.
    """
    shown = str(path)
    fd = _open_regular(path)
    try:
        size = os.fstat(fd).st_size
        if size < 24:
            raise SpecError(shown, [f"not a GGUF file: {size} B, shorter than a GGUF header"])
        with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as view:
            return _Parser(view, shown, size, part).header()
    except OSError as e:
        raise SpecError(shown, [f"cannot read: {e.strerror or e}"]) from None
    finally:
        os.close(fd)


def _open_regular(path: str | Path) -> int:
    shown = str(path)
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError) as e:
        detail = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise SpecError(shown, [f"cannot read: {detail}"]) from None
    if not stat.S_ISREG(mode):
        what = "is a folder" if stat.S_ISDIR(mode) else "not a regular file (a FIFO, a device...)"
        raise SpecError(shown, [f"cannot read: {what}; give a .gguf file"])
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise SpecError(shown, [f"cannot read: {e.strerror or e}"]) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # replaced between stat and open
        os.close(fd)
        raise SpecError(shown, ["cannot read: not a regular file; give a .gguf file"])
    return fd


class _Parser:
    """A cursor over the memory-mapped header; every read is checked against the file end."""

    def __init__(self, view: mmap.mmap, shown: str, size: int, part: int) -> None:
        self.view, self.shown, self.size, self.part = view, shown, size, part
        self.pos = 0
        self.order = "<"

    def fail(self, problem: str) -> SpecError:
        return SpecError(self.shown, [problem])

    def take(self, num_bytes: int, what: str) -> int:
        """Advance past ``num_bytes``; returns where they start."""
        start = self.pos
        if num_bytes > self.size - start:
            raise self.fail(
                f"truncated GGUF header: {what} at byte {start:,} runs past the end of the"
                f" file ({self.size:,} B)"
            )
        if start + num_bytes > MAX_HEADER_BYTES:
            raise self.fail(f"GGUF header larger than {MAX_HEADER_BYTES // 2**20:,} MiB")
        self.pos = start + num_bytes
        return start

    def scalar(self, fmt: str, what: str) -> Any:
        width = struct.calcsize(fmt)
        return struct.unpack_from(self.order + fmt, self.view, self.take(width, what))[0]

    def count(self, what: str, limit: int, min_item_bytes: int) -> int:
        n: int = self.scalar("Q", what)
        if n > limit or n * min_item_bytes > self.size - self.pos:
            reason = (
                f"more than the {limit:,} kvplan reads"
                if n > limit
                else f"more than the {self.size - self.pos:,} B left in the file can hold"
            )
            raise self.fail(f"GGUF header: {what} {n:,} is {reason}")
        return n

    def string(self, what: str) -> str:
        n = self.count(f"length of {what}", MAX_STRING_BYTES, 1)
        start = self.take(n, what)
        try:
            return self.view[start : start + n].decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"GGUF header: {what} is not UTF-8") from None

    def skip_strings(self, n: int, key: str) -> None:
        """Past ``n`` strings of array ``key``, in one tight loop (2**21 take a second)."""
        length_at = struct.Struct(self.order + "Q").unpack_from
        view, pos, end = self.view, self.pos, min(self.size, MAX_HEADER_BYTES)
        for _ in range(n):
            if pos + 8 > end:
                break
            pos += 8 + length_at(view, pos)[0]
            if pos > end:
                break
        else:
            self.pos = pos
            return
        if pos + 8 <= self.size:  # inside the file, past the most kvplan reads of a header
            raise self.fail(f"GGUF header larger than {MAX_HEADER_BYTES // 2**20:,} MiB")
        raise self.fail(
            f"truncated GGUF header: an item of {key!r} runs past the end of the file"
            f" ({self.size:,} B)"
        )

    def header(self) -> GGUFHeader:
        if self.view[:4] != b"GGUF":
            raise self.fail(
                f"not a GGUF file: it starts with {bytes(self.view[:4])!r}, not b'GGUF'"
            )
        self.pos = 4
        raw = self.view[4:8]
        if raw[:2] == b"\0\0":  # a big-endian file: its version reads as a multiple of 2**16
            self.order = ">"
        version = self.scalar("I", "version")
        if version not in (2, 3):
            raise self.fail(f"GGUF version {version} is not supported (kvplan reads 2 and 3)")
        n_tensors = self.count("tensor count", MAX_TENSORS, 8 + 4 + 8 + 4 + 8)
        n_keys = self.count("key count", MAX_KEYS, 8 + 4)
        metadata: dict[str, Any] = {}
        for _ in range(n_keys):
            key = self.string("a key name")
            if key in metadata:
                raise self.fail(f"GGUF header: key {key!r} appears twice")
            metadata[key] = self.value(self.scalar("I", f"type of {key!r}"), key, depth=0)
        tensors = tuple(self.tensor() for _ in range(n_tensors))
        names = {t.name for t, _ in tensors}
        if len(names) != len(tensors):
            raise self.fail("GGUF header: a tensor name appears twice")
        alignment = metadata.get("general.alignment", 32)
        if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
            raise self.fail(f"general.alignment: must be a power of two, got {alignment!r}")
        data_offset = -(-self.pos // alignment) * alignment
        self.check_data(tensors, data_offset, alignment)
        return GGUFHeader(
            self.shown, version, metadata, tuple(t for t, _ in tensors), data_offset, self.size
        )

    def value(self, kind: int, key: str, depth: int) -> Any:
        if kind in _SCALARS:
            return self.scalar(_SCALARS[kind], f"value of {key!r}")
        if kind == _STRING:
            return self.string(f"value of {key!r}")
        if kind != _ARRAY:
            raise self.fail(f"GGUF header: key {key!r} has unknown value type {kind}")
        if depth > 0:
            raise self.fail(f"GGUF header: key {key!r} nests arrays, which GGUF readers refuse")
        item = self.scalar("I", f"item type of {key!r}")
        width = struct.calcsize(_SCALARS[item]) if item in _SCALARS else 8
        limit = MAX_STRING_ITEMS if item == _STRING else MAX_ARRAY_ITEMS
        n = self.count(f"length of array {key!r}", limit, width)
        if item == _STRING:
            self.skip_strings(n, key)
            return GGUFArray("string", n)
        if item not in _SCALARS:
            raise self.fail(f"GGUF header: array {key!r} has unsupported item type {item}")
        start = self.take(n * width, f"array {key!r}")
        if n > KEPT_ARRAY_ITEMS:
            return GGUFArray(_SCALARS[item], n)
        return struct.unpack_from(f"{self.order}{n}{_SCALARS[item]}", self.view, start)

    def tensor(self) -> tuple[GGUFTensor, int]:
        name = self.string("a tensor name")
        if len(name.encode()) > _MAX_NAME_BYTES:
            raise self.fail(f"tensor name {name[:40]!r}...: longer than {_MAX_NAME_BYTES} B")
        n_dims = self.scalar("I", f"dimensions of {name}")
        if not 1 <= n_dims <= _MAX_DIMS:
            raise self.fail(f"tensor {name}: {n_dims} dimensions; GGUF allows 1 to {_MAX_DIMS}")
        start = self.take(8 * n_dims, f"shape of {name}")
        shape = struct.unpack_from(f"{self.order}{n_dims}Q", self.view, start)
        kind = self.scalar("I", f"type of {name}")
        offset = self.scalar("Q", f"offset of {name}")
        if kind not in GGML_TYPES:
            raise self.fail(
                f"tensor {name}: ggml type {kind} is not one kvplan knows"
                f" ({', '.join(t[0] for t in GGML_TYPES.values())}); a newer quantization?"
            )
        elements = 1
        for n in shape:
            elements *= n
        if elements > _MAX_ELEMENTS:
            raise self.fail(f"tensor {name}: shape {list(shape)} is absurdly large")
        try:
            num_bytes = tensor_bytes(kind, shape)
        except ValueError as e:
            raise self.fail(f"tensor {name} ({GGML_TYPES[kind][0]}): {e}") from None
        ggml = GGML_TYPES[kind][0]
        return GGUFTensor(name, ggml, shape, elements, num_bytes, self.part), offset

    def check_data(
        self, tensors: tuple[tuple[GGUFTensor, int], ...], data_offset: int, alignment: int
    ) -> None:
        """Each tensor's data must start aligned and end inside the file: a download cut
        short is named here, not when an engine loads it."""
        for t, offset in tensors:
            if offset % alignment:
                raise self.fail(f"tensor {t.name}: offset {offset:,} is not {alignment}-aligned")
            end = data_offset + offset + t.num_bytes
            if end > self.size:
                raise self.fail(
                    f"truncated: tensor {t.name} ends at byte {end:,} but the file has"
                    f" {self.size:,} B (an incomplete download?)"
                )
