"""Which model a serving log ran, when it prints no name kvplan can read.

A llama.cpp log prints the model's shapes (``print_info: n_layer = 32``, ``n_ctx_train``,
``n_head_kv``, ``n_embd_head_k``, ``n_vocab``...) and the cache it allocated (``KV self size =
512.00 MiB`` for ``n_ctx = 4096`` tokens), and often the model file it was started with
(``-m ./models/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf``). ``identify_model`` keeps the catalog
specs whose shapes and cache size agree with every printed figure, narrowed by the names the
model's file and folders give (read by ``kvplan.catalog.names``): exactly one left is the model,
with a
provenance line saying how it was found; none or several is a SpecError naming them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kvplan.catalog.lookup import list_models, load_model
from kvplan.errors import KvplanError, SpecError
from kvplan.model.spec import ModelSpec

# print_info (llm_load_print_meta in older builds) key -> the spec field it prints.
_SHAPE_FIELDS = {
    "n_layer": "num_hidden_layers",
    "n_ctx_train": "max_position_embeddings",
    "n_head": "num_attention_heads",
    "n_head_kv": "num_key_value_heads",
    "n_embd": "hidden_size",
    "n_embd_head_k": "head_dim",
    "n_vocab": "vocab_size",
}
_GGUF_KV_TYPES = {"f16": "float16", "bf16": "bfloat16", "f32": "float32"}


@dataclass(frozen=True, slots=True)
class PrintedShapes:
    """What a log prints about its model: shape figures, and the cache it allocated."""

    figures: dict[str, int]
    kv_mib: str | None  # "512.00", as printed
    n_ctx: int | None
    k_type: str | None
    v_type: str | None

    def describe(self) -> str:
        parts = [f"{k} {v}" for k, v in self.figures.items()]
        if self.kv_mib is not None and self.n_ctx is not None:
            parts.append(f"KV {self.kv_mib} MiB at {self.n_ctx} tokens")
        return ", ".join(parts)


def printed_shapes(text: str) -> PrintedShapes:
    """The shape figures and cache size a llama.cpp log prints (absent ones left out)."""
    figures: dict[str, int] = {}
    for key in _SHAPE_FIELDS:
        m = re.search(rf"\b{key}\s*=\s*(\d+)\b", text) or re.search(rf"\b{key} \((\d+)\)", text)
        if m is not None and key not in figures:
            figures[key] = int(m.group(1))
    kv = re.search(r"KV self size\s*=\s*([\d.]+) MiB", text)
    n_ctx = re.search(r"(?:kv_size|n_ctx)\s*=\s*(\d+)", text)
    types = re.search(r"K \((\w+)\)[^V\n]*V \((\w+)\)", text) or re.search(
        r"type_k = '(\w+)', type_v = '(\w+)'", text
    )
    c_kv = re.search(r"c\^KV \((\w+)\)", text)
    k_type = types.group(1) if types else (c_kv.group(1) if c_kv else None)
    v_type = types.group(2) if types else k_type
    return PrintedShapes(
        figures,
        kv.group(1) if kv else None,
        int(n_ctx.group(1)) if n_ctx else None,
        k_type,
        v_type,
    )


def model_file_names(text: str) -> list[str]:
    """Names the model's file and folders give, innermost first: ``-m .../unsloth/DeepSeek-R1-
    GGUF/DeepSeek-R1-UD-Q2_K_XL-00001-of-00005.gguf`` gives the file's stem (without its shard
    number), then each folder's name."""
    m = re.search(r"(?:^|\s)(?:-m|--model)\s+(\S+)", text, re.MULTILINE)
    if m is None:
        return []
    parts = [p for p in m.group(1).strip("*'\"").replace("\\", "/").split("/") if p]
    names: list[str] = []
    for part in reversed(parts[-3:]):
        stem = re.sub(r"(?i)(-\d{5}-of-\d{5})?\.gguf$", "", part)
        if stem and stem not in (".", ".."):
            names.append(stem)
    return names


def _matches(spec: ModelSpec, shapes: PrintedShapes) -> bool:
    for key, value in shapes.figures.items():
        field = _SHAPE_FIELDS[key]
        mine = getattr(spec, field)
        if field == "num_key_value_heads" and mine is None:
            mine = spec.num_attention_heads
        if field == "head_dim" and mine is None and spec.hidden_size:
            mine = spec.hidden_size // spec.num_attention_heads
        if mine is not None and mine != value:
            return False
    if shapes.kv_mib is None or shapes.n_ctx is None or shapes.k_type is None:
        return True
    return _kv_mib(spec, shapes) == shapes.kv_mib


def _kv_mib(spec: ModelSpec, shapes: PrintedShapes) -> str | None:
    """The cache of ``n_ctx`` tokens in the printed types, in MiB as llama.cpp prints it."""
    from kvplan.model.estimator import estimate

    k = _GGUF_KV_TYPES.get(shapes.k_type or "", shapes.k_type)
    v = _GGUF_KV_TYPES.get(shapes.v_type or "", shapes.v_type)
    try:
        est = estimate(spec, shapes.n_ctx or 0, k_dtype=k, v_dtype=v)
    except KvplanError:
        return None
    return f"{est.kv_cache_bytes / 2**20:.2f}"


def _named(names: list[str]) -> list[ModelSpec]:
    found: list[ModelSpec] = []
    for name in names:
        try:
            found.append(load_model(name, paths=False))  # names a log prints, never paths
        except (KvplanError, OSError):  # a refused quant tag, a folder name of no model
            continue
    return found


def identify_model(text: str, path: str) -> ModelSpec:
    """The catalog model a name-less log ran, from its printed shapes and its model file's
    name; raises SpecError listing the candidates when the log does not settle on one."""
    shapes = printed_shapes(text)
    if not shapes.figures and shapes.kv_mib is None:
        raise SpecError(
            path,
            ["the log names no model; pass --model NAME (a catalog name, an HF id or a spec file)"],
        )
    fitting = [s for s in list_models() if _matches(s, shapes)]
    named = {s.name for s in _named(model_file_names(text))}
    chosen = [s for s in fitting if s.name in named] or fitting
    how = "the printed shapes" + (
        " and the model file's name" if len(chosen) < len(fitting) else ""
    )
    if len(chosen) == 1:
        line = f"model identified from {how} ({shapes.describe()}): {chosen[0].name}"
        return chosen[0].with_provenance(line)
    listed = ", ".join(s.name for s in chosen[:8]) if chosen else "no catalog model"
    raise SpecError(
        path,
        [
            f"the log names no model; its shapes ({shapes.describe()}) fit {listed}:"
            " pass --model NAME"
        ],
    )
