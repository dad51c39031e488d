"""A GGUF file (llama.cpp, Ollama, LM Studio) -> a validated kvplan spec and its exact weights.

Only the header is read (``gguf_format``): the metadata gives the cache geometry
(``gguf_archs`` maps each architecture as llama.cpp reads it) and the tensor table gives the
weights to the byte, per tensor, per layer, and for the token embedding and the output head
apart, since llama.cpp keeps the embedding on the host and offloads the head with the layers.

A model split by ``llama-gguf-split`` (``name-00001-of-00003.gguf``...) is read from all its
parts: the first holds the metadata, every part a share of the tensor table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvplan.errors import SpecError
from kvplan.files import is_file, read_head
from kvplan.importers.config import Imported
from kvplan.importers.gguf_archs import map_architecture
from kvplan.importers.gguf_format import (
    FILE_TYPES,
    GGUFArray,
    GGUFHeader,
    GGUFTensor,
    read_gguf_header,
)
from kvplan.model.limits import MAX_DIM, MAX_PARAMETERS
from kvplan.model.spec import parse_spec

GGUF_SUFFIX = ".gguf"
_SPLIT = re.compile(r"^(?P<stem>.+)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")
_LAYER = re.compile(r"^blk\.(\d{1,6})\.")
#: Split files llama-gguf-split writes at most (5 digits).
_MAX_PARTS = 99_999
#: The longest name taken from ``general.name``; a longer one is cut.
_NAME_CHARS = 96


@dataclass(frozen=True, slots=True)
class GGUFWeights:
    """Weight bytes exactly as the tensor table states them.

    ``layer_bytes[i]``: the tensors named ``blk.i.*``; ``token_embd_bytes``: ``token_embd.weight``
    (kept on the host by llama.cpp); ``output_bytes``: ``output.weight``, 0 when the head is tied
    to the embedding; ``other_bytes``: the rest (final norm, RoPE factors...). ``bytes_by_type``:
    ggml type -> bytes, largest first.
    """

    num_parameters: int
    token_embd_bytes: int
    output_bytes: int
    layer_bytes: tuple[int, ...]
    other_bytes: int
    bytes_by_type: tuple[tuple[str, int], ...]
    tensors: tuple[GGUFTensor, ...]
    files: tuple[str, ...]

    @property
    def total_bytes(self) -> int:
        """Every tensor's bytes: what the file's data section holds, padding excluded."""
        return self.token_embd_bytes + self.output_bytes + sum(self.layer_bytes) + self.other_bytes


@dataclass(frozen=True, slots=True)
class GGUFImported(Imported):
    """An imported GGUF file: the spec as from a config.json, plus its exact weights."""

    weights: GGUFWeights


def is_gguf(path: str | Path) -> bool:
    """True for a path ending in ``.gguf`` (the file need not exist: reading it says why), or
    a regular file starting with ``GGUF`` (Ollama's blobs are named ``sha256-<hex>``). Never
    raises."""
    if str(path).lower().endswith(GGUF_SUFFIX):
        return True
    try:
        return read_head(path, 4) == b"GGUF"
    except (SpecError, OSError, ValueError):
        return False


def import_gguf(path: str | Path, name: str | None = None) -> GGUFImported:
    """Read a GGUF file's header (every part of a split model) into a validated spec.

    Never reads tensor data. Raises SpecError naming the file for anything that is not a
    readable GGUF file, an unmapped architecture or an invalid value.
    """
    path = Path(path)
    headers = _read_parts(path)
    first = headers[0]
    shown = first.path
    metadata = first.metadata
    arch = metadata.get("general.architecture")
    if not isinstance(arch, str):
        raise SpecError(shown, ["general.architecture: required, a string"])
    weights = _weights(headers, metadata.get(f"{arch}.block_count"))
    try:
        data, notes = map_architecture(arch, metadata)
        _sizes(data, arch, metadata, weights)
    except SpecError as e:
        raise SpecError(shown, e.problems) from None
    notes.insert(0, "torch_dtype float16: llama.cpp's default cache type (-ctk/-ctv f16)")
    notes.append(_weights_note(weights, metadata))
    stated = _display_name(metadata.get("general.name"))
    if name is None and stated is not None:
        notes.insert(0, f"name {stated}: general.name")
    label = name or stated or _stem(Path(shown)).lower()
    origin = Path(shown).name if len(headers) == 1 else f"{Path(shown).name} (+{len(headers) - 1})"
    ordered: dict[str, Any] = {"name": label}
    ordered["source"] = f"{origin}; {'; '.join(notes)}"
    ordered.update(data)
    spec = parse_spec(ordered, shown)
    return GGUFImported(spec, ordered, tuple(notes), shown, weights)


# --- split files ----------------------------------------------------------------------------


def _read_parts(path: Path) -> list[GGUFHeader]:
    """The headers of ``path`` and, for a split model, of every part, first part first."""
    match = _SPLIT.match(path.name)
    if match is None:
        header = read_gguf_header(path)
        count = header.metadata.get("split.count")
        if isinstance(count, int) and count > 1:
            raise SpecError(
                str(path),
                [
                    f"split.count {count}: one part of a split model, but not named"
                    " NAME-00001-of-0000N.gguf, so its other parts cannot be found"
                ],
            )
        return [header]
    count = int(match["count"])
    if not 1 <= int(match["no"]) <= count <= _MAX_PARTS:
        raise SpecError(str(path), [f"split file name: part {match['no']} of {match['count']}?"])
    names = [
        path.with_name(f"{match['stem']}-{i:05d}-of-{count:05d}.gguf") for i in range(1, count + 1)
    ]
    missing = [p.name for p in names if not is_file(p)]
    if missing:
        raise SpecError(str(path), [f"split model: part {missing[0]} is missing beside it"])
    headers = [read_gguf_header(p, part=i) for i, p in enumerate(names)]
    stated = headers[0].metadata.get("split.count")
    if stated is not None and stated != count:
        raise SpecError(headers[0].path, [f"split.count {stated}, but the name says {count}"])
    total = headers[0].metadata.get("split.tensors.count")
    found = sum(len(h.tensors) for h in headers)
    if total is not None and total != found:
        raise SpecError(
            headers[0].path, [f"split.tensors.count {total:,}, but the parts hold {found:,}"]
        )
    return headers


def _display_name(value: Any) -> str | None:
    """``general.name`` as a short name in the catalog's style, safe to print: lower case,
    letters, digits and ``.`` ``+`` ``_`` kept, every other run (spaces, slashes, control and
    markup characters) one dash, at most ``_NAME_CHARS`` characters ("Meta Llama 3.1 8B
    Instruct" -> ``meta-llama-3.1-8b-instruct``). None when nothing printable is left."""
    if not isinstance(value, str):
        return None
    words = (w for w in re.split(r"[^\w.+]+", value.lower()[: 4 * _NAME_CHARS]) if w)
    shown = "-".join(words)[:_NAME_CHARS].strip("-._+")
    return shown or None


def first_part(path: str | Path) -> Path:
    """The first file of a split model (``name-00002-of-00003.gguf`` ->
    ``name-00001-of-00003.gguf``, beside it), which llama.cpp loads the others from; any
    other path as it is."""
    path = Path(path)
    match = _SPLIT.match(path.name)
    if match is None:
        return path
    return path.with_name(f"{match['stem']}-00001-of-{match['count']}.gguf")


def _stem(path: Path) -> str:
    match = _SPLIT.match(path.name)
    return (
        match["stem"] if match else path.name[: -len(GGUF_SUFFIX)] if is_gguf(path) else path.stem
    )


# --- weights --------------------------------------------------------------------------------


def _weights(headers: list[GGUFHeader], block_count: Any) -> GGUFWeights:
    tensors = tuple(t for h in headers for t in h.tensors)
    names = {t.name for t in tensors}
    if len(names) != len(tensors):
        raise SpecError(headers[0].path, ["split model: a tensor appears in two parts"])
    n = block_count if isinstance(block_count, int) and 0 < block_count <= 10_000 else 0
    layers = [0] * n
    embd = output = other = 0
    by_type: dict[str, int] = {}
    for t in tensors:
        by_type[t.ggml_type] = by_type.get(t.ggml_type, 0) + t.num_bytes
        layer = _LAYER.match(t.name)
        if layer is not None and int(layer[1]) < n:
            layers[int(layer[1])] += t.num_bytes
        elif t.name == "token_embd.weight":
            embd += t.num_bytes
        elif t.name == "output.weight":
            output += t.num_bytes
        else:
            other += t.num_bytes
    return GGUFWeights(
        num_parameters=sum(t.num_elements for t in tensors),
        token_embd_bytes=embd,
        output_bytes=output,
        layer_bytes=tuple(layers),
        other_bytes=other,
        bytes_by_type=tuple(sorted(by_type.items(), key=lambda kv: (-kv[1], kv[0]))),
        tensors=tensors,
        files=tuple(h.path for h in headers),
    )


def _sizes(data: dict[str, Any], arch: str, metadata: dict[str, Any], w: GGUFWeights) -> None:
    """Vocabulary, tied head and parameter count, which size the weights, not the cache."""
    vocab = metadata.get(f"{arch}.vocab_size")
    tokens = metadata.get("tokenizer.ggml.tokens")
    embd = next((t for t in w.tensors if t.name == "token_embd.weight"), None)
    if not isinstance(vocab, int) or isinstance(vocab, bool):
        if isinstance(tokens, GGUFArray):
            vocab = tokens.count
        elif embd is not None and len(embd.shape) == 2:
            vocab = embd.shape[1]
        else:
            vocab = None
    if vocab and vocab <= MAX_DIM:
        data["vocab_size"] = vocab
    data["torch_dtype"] = "float16"
    data["tie_word_embeddings"] = w.output_bytes == 0
    if not 0 < w.num_parameters <= MAX_PARAMETERS:
        raise SpecError("", [f"tensor table: {w.num_parameters:,} parameters"])
    data["num_parameters"] = w.num_parameters
    ftype = metadata.get("general.file_type")
    label = FILE_TYPES.get(ftype) if isinstance(ftype, int) else None
    data["stored_weight_bytes"] = {
        "embedding_bytes": w.token_embd_bytes,
        "layers_bytes": list(w.layer_bytes),
        # The head (0 when tied) with the final norm and the tensors outside the layers.
        "output_bytes": w.output_bytes + w.other_bytes,
        "format": label or "GGUF",
    }


def _weights_note(w: GGUFWeights, metadata: dict[str, Any]) -> str:
    ftype = metadata.get("general.file_type")
    label = FILE_TYPES.get(ftype, f"file type {ftype}") if isinstance(ftype, int) else None
    types = ", ".join(f"{k} {v:,} B" for k, v in w.bytes_by_type)
    head = f"{label}: " if label else ""
    return f"{head}weights {w.total_bytes:,} B exact from the tensor table ({types})"
