"""``kvplan plan --engine llama.cpp``: every buffer per device, and the answers users ask.

``budget(spec, gpu, ask)`` lays one setting out (``llamacpp_layout``) and adds the compute
buffers (``llamacpp_compute``); ``plan(spec, gpu, ask)`` solves what ``ask`` leaves open:

- ``-ngl`` and ``-c`` given: whether it all fits;
- ``-c`` given, no ``-ngl``: the largest ``-ngl`` that fits at that context (0 .. n_layer + 1);
- ``-ngl`` given, no ``-c``: the longest context (a multiple of 256 cells, at most the model's
  ``max_position_embeddings``) that fits with those layers;
- neither: like llama.cpp's ``--fit``: every layer on the GPUs and the longest context that
  fits; when not even ``--fit-ctx`` (4,096) tokens fit, fewer layers at that context.

A device fits when its model, KV, output and compute buffers plus the headroom (llama.cpp's
``--fit-target`` margin, 1 GiB by default; ``--overhead`` replaces it) are within its memory
(on Apple silicon the GPU working set, or ``--wired-limit-mb``). The host is reported, not
limited. ``command`` is the llama-server line that realises the answer (``--fit off``: the
layers and context are kvplan's).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING

from kvplan.engines import llamacpp
from kvplan.engines.llamacpp_budget import Buffer, check_cache_types
from kvplan.engines.llamacpp_compute import MoE, gpu_compute_bytes, host_compute_bytes
from kvplan.engines.llamacpp_draft import DEFAULT_DRAFT_MAX, LlamaCppDraft
from kvplan.engines.llamacpp_layout import (
    SPLIT_MODES,
    Layout,
    device_names,
    host_buffer_name,
    layout,
)
from kvplan.errors import UnitError
from kvplan.files import is_file, path_exists
from kvplan.model.layers import MLALatent
from kvplan.units import GiB, MiB

if TYPE_CHECKING:
    from kvplan.engines.base import EngineResult
    from kvplan.hardware.gpus import GPU
    from kvplan.model.spec import ModelSpec

__all__ = [
    "FIT_CTX",
    "PLACEHOLDER_GGUF",
    "LlamaCppAsk",
    "LlamaCppPlan",
    "ModelSource",
    "budget",
    "model_source",
    "plan",
]

#: llama.cpp's ``--fit-ctx``: the shortest context ``--fit`` reduces to
FIT_CTX = 4096
#: llama.cpp's ``--fit-target``: memory ``--fit`` leaves free on each device
FIT_TARGET_BYTES = 1 * GiB
_PAD = 256
#: What ``-m`` is given when kvplan knows no GGUF file or Hub GGUF repo of the model
PLACEHOLDER_GGUF = "MODEL.gguf"
# A Hub repository of GGUF files, as its re-uploaders name them (bartowski/...-GGUF,
# unsloth/..._GGUF), with an optional :QUANT file choice (llama-server -hf REPO[:QUANT]).
_GGUF_REPO = re.compile(r"^(?P<repo>[\w.-]+/[\w.-]*[-_.]gguf)(?::(?P<quant>[\w.-]+))?$", re.I)


@dataclass(frozen=True, slots=True)
class ModelSource:
    """How llama-server is told to load a model: ``flag`` (``-m`` or ``-hf``) and ``value``;
    ``note`` says what to do when the line does not run as printed (a placeholder file) or
    what llama-server picks by itself ("" when neither)."""

    flag: str
    value: str
    note: str = ""

    @property
    def placeholder(self) -> bool:
        return self.flag == "-m" and self.value == PLACEHOLDER_GGUF

    @property
    def args(self) -> tuple[str, str]:
        """The two command-line words, the value quoted for a POSIX shell."""
        return self.flag, shlex.quote(self.value)


def model_source(model: str, spec: ModelSpec | None = None) -> ModelSource:
    """What llama-server's command line loads for ``model`` as the user typed it (``spec``:
    what it was read as, for the notes). The one place this is decided, for ``kvplan flags``
    and ``kvplan plan --engine llama.cpp``:

    - a ``.gguf`` path (or an Ollama blob, a file starting with ``GGUF``): ``-m PATH``, the
      first part of a split model (llama.cpp finds the others beside it);
    - a Hub GGUF repository, ``ORG/NAME-GGUF[:QUANT]``: ``-hf ORG/NAME-GGUF[:QUANT]``;
    - anything else (a Hub safetensors repo, a catalog name, a spec or config.json, an Ollama
      tag): ``-m MODEL.gguf``, a placeholder, with a note on where a GGUF file comes from.
      kvplan names no GGUF repository it was not given: it cannot know one exists.
    """
    from kvplan.catalog.names import is_ollama_tag, strip_hub_prefix
    from kvplan.importers.gguf import first_part, is_gguf

    text = model.strip()
    path = Path(text)
    if text.lower().endswith(".gguf") or (is_file(path) and is_gguf(path)):
        first = first_part(path)
        return ModelSource("-m", text if first == path else str(first))
    hub = _GGUF_REPO.match(strip_hub_prefix(text))
    if hub is not None and not path_exists(path):
        if hub["quant"]:
            return ModelSource("-hf", f"{hub['repo']}:{hub['quant']}")
        return ModelSource(
            "-hf",
            hub["repo"],
            f"-hf {hub['repo']} names no file: llama-server takes the repo's Q4_K_M (else its"
            " first file); add :QUANT to load the file these figures are for",
        )
    if is_ollama_tag(text) and not path_exists(path):
        note = (
            f"{PLACEHOLDER_GGUF}: llama-server reads a GGUF file, not an Ollama tag. Ollama keeps"
            f" {text}'s GGUF as a blob, blobs/sha256-<digest> in its models folder (OLLAMA_MODELS,"
            f" by default ~/.ollama/models); `ollama show --modelfile {text}` prints that path"
            " on its FROM line: pass it to -m"
        )
    elif spec is not None and spec.stored_weight_bytes is not None:
        note = f"{PLACEHOLDER_GGUF}: the .gguf file {spec.name} was read from"
    else:
        what = (spec.hf_id if spec is not None and spec.hf_id else None) or text
        note = (
            f"{PLACEHOLDER_GGUF}: llama-server reads a GGUF file; convert {what} with llama.cpp's"
            " convert_hf_to_gguf.py (llama-quantize for a smaller format) or download a GGUF"
            " of it, and pass that file to -m"
        )
    return ModelSource("-m", PLACEHOLDER_GGUF, note)


@dataclass(frozen=True, slots=True)
class LlamaCppAsk:
    """The llama-server settings of a plan; None for what kvplan solves."""

    model: str = "model.gguf"
    n_ctx: int | None = None
    n_gpu_layers: int | None = None
    num_gpus: int = 1
    tensor_split: tuple[Fraction, ...] | None = None
    split_mode: str = "layer"
    n_ubatch: int = 512
    n_batch: int = 2048
    flash_attn: str = "auto"
    type_k: str = "f16"
    type_v: str = "f16"
    n_seq_max: int = 1
    kv_unified: bool = False
    swa_full: bool = False  # llama-server's default at 0c1e570 (common.h; only the C API's is on)
    use_mmap: bool = True
    no_kv_offload: bool = False
    backend: str = "cuda"
    overhead_bytes: int | None = None
    wired_limit_bytes: int | None = None
    tensor_overrides: tuple[str, ...] = ()  # -ot PATTERN=DEVICE, as typed
    cpu_moe: bool = False
    n_cpu_moe: int = 0
    draft: LlamaCppDraft | None = None  # -md with its -ngld, -ctkd, -ctvd, --draft-max
    loras: tuple[str, ...] = ()  # --lora FILE.gguf, each an adapter on its weights' devices

    @property
    def fa(self) -> bool:
        """``-fa auto`` is on for CUDA and Metal (every model kvplan sizes has FA kernels
        there) and on for the CPU, as llama.cpp resolves it."""
        return self.flash_attn != "off"

    @property
    def split(self) -> tuple[Fraction, ...]:
        if self.backend == "cpu":
            return ()
        n = 1 if self.backend == "metal" else self.num_gpus
        return self.tensor_split or tuple(Fraction(1) for _ in range(n))


@dataclass(frozen=True, slots=True)
class LlamaCppPlan:
    """One setting laid out: every buffer per device, the answer and its command line."""

    model: str
    gpu: GPU
    ask: LlamaCppAsk
    n_ctx: int  # as llama.cpp prints it (padded)
    n_gpu_layers: int
    layout: Layout
    capacity_bytes: int  # per GPU
    headroom_bytes: int  # per GPU
    kv: EngineResult
    solved: str  # "fits", "n_gpu_layers", "n_ctx", "fit" or "n_seq_max"
    spec: ModelSpec | None = field(default=None, compare=False, repr=False)  # for the notes

    @property
    def n_layer(self) -> int:
        return len(self.layout.placement) - 1

    @property
    def fits(self) -> bool:
        return (
            all(
                g.total_bytes + self.headroom_bytes <= self.capacity_bytes for g in self.layout.gpus
            )
            and self.n_ctx > 0
        )

    @property
    def buffers(self) -> tuple[Buffer, ...]:
        return tuple(b for d in self.layout.devices for b in d.buffers)

    @property
    def source(self) -> ModelSource:
        """What the command line loads (``model_source`` of the model as typed)."""
        return model_source(self.ask.model, self.spec)

    @property
    def command(self) -> str:
        """The llama-server command line that realises this plan; ``source.note`` says what
        to put in place of a placeholder ``-m MODEL.gguf``."""
        a = self.ask
        parts = ["llama-server", *self.source.args, "-c", str(self.n_ctx)]
        parts += ["-ngl", str(self.n_gpu_layers), "-fa", "on" if a.fa else "off"]
        parts += ["-ub", str(a.n_ubatch), "-b", str(a.n_batch), "-np", str(a.n_seq_max)]
        if (a.type_k, a.type_v) != ("f16", "f16"):
            parts += ["-ctk", a.type_k, "-ctv", a.type_v]
        if len(a.split) > 1:
            parts += ["-sm", a.split_mode]
            parts += ["-ts", ",".join(_share(s) for s in a.split)]
        flags = {
            "--kv-unified": a.kv_unified,
            "--swa-full": a.swa_full,
            "--no-mmap": not a.use_mmap,
            "--no-kv-offload": a.no_kv_offload,
        }
        parts += [flag for flag, on in flags.items() if on]
        parts += ["--cpu-moe"] if a.cpu_moe else []
        parts += ["--n-cpu-moe", str(a.n_cpu_moe)] if a.n_cpu_moe else []
        for text in a.tensor_overrides:
            parts += ["-ot", shlex.quote(text)]
        parts += draft_args(a)
        for path in a.loras:
            parts += ["--lora", shlex.quote(path)]
        return " ".join([*parts, "--fit", "off"])


def _share(s: Fraction) -> str:
    return str(s.numerator) if s.denominator == 1 else str(float(s))


#: ``GGML_CUDA_MAX_DEVICES`` (ggml-cuda/common.cuh): the most GPUs llama.cpp splits over
MAX_DEVICES = 16


def _checked(spec: ModelSpec, ask: LlamaCppAsk) -> None:
    if ask.n_seq_max > LLAMA_MAX_SEQ:
        raise UnitError(
            f"-np {ask.n_seq_max}: llama.cpp serves at most {LLAMA_MAX_SEQ} sequences"
            " (LLAMA_MAX_SEQ)"
        )
    if ask.num_gpus > MAX_DEVICES:
        raise UnitError(f"{ask.num_gpus} GPUs: llama.cpp splits over at most {MAX_DEVICES}")
    if ask.split_mode not in SPLIT_MODES:
        raise UnitError(f"--split-mode {ask.split_mode!r}: allowed {', '.join(SPLIT_MODES)}")
    if ask.flash_attn not in ("on", "off", "auto"):
        raise UnitError(f"-fa {ask.flash_attn!r}: allowed on, off, auto")
    if ask.tensor_split is not None and len(ask.tensor_split) != ask.num_gpus:
        raise UnitError(
            f"--tensor-split: {len(ask.tensor_split)} shares for {ask.num_gpus} GPUs (-tp)"
        )
    if ask.backend == "metal" and ask.num_gpus > 1:
        raise UnitError("--device metal: one GPU (Apple silicon has one)")
    device_names(ask.backend, ask.num_gpus)
    mla = any(isinstance(layer, MLALatent) for layer in spec.layers)
    check_cache_types(ask.type_k, ask.type_v, flash_attn=ask.fa, mla=mla)
    if spec.vocab_size is None or spec.hidden_size is None:
        raise UnitError(f"{spec.name}: llama.cpp's buffers need vocab_size and hidden_size")


def _capacity(gpu: GPU, ask: LlamaCppAsk) -> int:
    if ask.backend == "metal" and ask.wired_limit_bytes is not None:
        return ask.wired_limit_bytes
    return gpu.memory_bytes if ask.backend != "cpu" else 0


def budget(spec: ModelSpec, gpu: GPU, ask: LlamaCppAsk, *, solved: str = "fits") -> LlamaCppPlan:
    """Every buffer of ``ask`` with its ``n_ctx`` and ``n_gpu_layers`` as given (None: the
    model's context, all layers)."""
    _checked(spec, ask)
    n_ctx = ask.n_ctx or spec.max_position_embeddings or FIT_CTX
    kv, placed = _context(spec, ask, n_ctx, ask.n_gpu_layers, _moved(spec, ask))
    if ask.backend == "cpu" and _gguf_path(ask) is not None:
        _exact_host_model(ask, placed)
    _add_compute(spec, ask, kv, placed)
    if ask.draft is not None:
        _add_draft(spec, ask, n_ctx, placed)
    for path in ask.loras:
        _add_lora(spec, ask, path, placed)
    headroom = ask.overhead_bytes if ask.overhead_bytes is not None else FIT_TARGET_BYTES
    printed_ctx = int(kv.engine_log.get("cells", 0) or kv.engine_log.get("swa_cells", 0))
    printed_ctx *= 1 if ask.kv_unified else int(kv.engine_log.get("streams", 1))
    ngl = _gpu_layers(spec, ask.n_gpu_layers, ask.backend)
    return LlamaCppPlan(
        spec.name, gpu, ask, printed_ctx or n_ctx, ngl, placed, _capacity(gpu, ask),
        headroom if ask.backend != "cpu" else 0, kv, solved, spec,
    )  # fmt: skip


def _gpu_layers(spec: ModelSpec, n_gpu_layers: int | None, backend: str) -> int:
    """The layers on the GPUs: as asked, at most every layer and the output one (None: all of
    them), none on the CPU backend."""
    n_layer = spec.num_hidden_layers
    ngl = n_layer + 1 if n_gpu_layers is None else min(n_gpu_layers, n_layer + 1)
    return 0 if backend == "cpu" else ngl


def _context(
    spec: ModelSpec,
    ask: LlamaCppAsk,
    n_ctx: int,
    n_gpu_layers: int | None,
    moved: list[dict[int | None, int]],
) -> tuple[EngineResult, Layout]:
    """One model's cache of ``n_ctx`` cells in ``ask``'s cache types and its layout with
    ``n_gpu_layers`` on the GPUs (None: all, the output layer too; none on the CPU backend)."""
    kv = llamacpp.kv_cache(
        spec,
        n_ctx=n_ctx,
        n_seq_max=ask.n_seq_max,
        n_ubatch=ask.n_ubatch,
        cache_type_k=ask.type_k,
        cache_type_v=ask.type_v,
        swa_full=ask.swa_full,
        flash_attn=ask.fa,
        kv_unified=ask.kv_unified,
    )
    placed = layout(
        spec,
        kv,
        backend=ask.backend,
        n_gpu_layers=_gpu_layers(spec, n_gpu_layers, ask.backend),
        split=ask.split,
        split_mode=ask.split_mode,
        no_kv_offload=ask.no_kv_offload,
        use_mmap=ask.use_mmap,
        n_seq_max=ask.n_seq_max,
        moved=moved,
    )
    return kv, placed


def _add_draft(spec: ModelSpec, ask: LlamaCppAsk, n_ctx: int, placed: Layout) -> None:
    """The draft model's buffers beside the target's on each device (kvplan.engines
    .llamacpp_draft): its own context with the target's -c, -np, -ub and flash attention, its
    -ctkd/-ctvd cache types, its -ngld layers on the GPUs."""
    draft = ask.draft
    assert draft is not None
    draft.check(spec)
    dspec = draft.spec
    own_ask = replace(ask, model=draft.model, type_k=draft.type_k, type_v=draft.type_v, draft=None)
    kv, own = _context(dspec, own_ask, n_ctx, draft.n_gpu_layers, [])
    _add_compute(dspec, own_ask, kv, own)
    for use, drafts in zip(placed.devices, own.devices, strict=True):
        use.draft_bytes += drafts.total_bytes
        use.buffers += [Buffer(b.device, f"draft {b.kind}", b.bytes) for b in drafts.buffers]


def _add_lora(spec: ModelSpec, ask: LlamaCppAsk, path: str, placed: Layout) -> None:
    """One ``--lora`` adapter's buffers, on the devices of the weights it adapts
    (kvplan.engines.llamacpp_lora)."""
    from kvplan.engines.llamacpp_lora import lora_bytes, read_lora

    tensors = read_lora(path, spec.num_hidden_layers)
    for device, num_bytes in lora_bytes(tensors, placed.placement, ask.backend).items():
        use = placed.host if device is None else placed.gpus[device]
        use.lora_bytes += num_bytes
        # a pair lives in its weight's buffer type: on the host the mapped file's when mapped
        host = host_buffer_name(ask.use_mmap)
        use.buffers.append(Buffer(host if device is None else use.name, "lora", num_bytes))


def draft_args(ask: LlamaCppAsk) -> list[str]:
    """llama-server's words for the draft model of ``ask`` (none without one)."""
    draft = ask.draft
    if draft is None:
        return []
    flag, value = model_source(draft.model, draft.spec).args
    words = ["-hfd" if flag == "-hf" else "-md", value]
    words += ["-ngld", str(_gpu_layers(draft.spec, draft.n_gpu_layers, ask.backend))]
    if (draft.type_k, draft.type_v) != ("f16", "f16"):
        words += ["-ctkd", draft.type_k, "-ctvd", draft.type_v]
    if draft.draft_max != DEFAULT_DRAFT_MAX:
        words += ["--draft-max", str(draft.draft_max)]
    return words


def _gguf_path(ask: LlamaCppAsk) -> str | None:
    """The model's ``.gguf`` file when it is one on disk (its tensor table is then exact)."""
    from pathlib import Path

    return ask.model if ask.model.lower().endswith(".gguf") and Path(ask.model).is_file() else None


def _exact_host_model(ask: LlamaCppAsk, placed: Layout) -> None:
    """A CPU-only plan of a ``.gguf`` file: the host's model buffers as llama.cpp allocates
    them (the mapped file span, ``CPU_REPACK``; ``llamacpp_budget.model_buffers``)."""
    from kvplan.engines.llamacpp_budget import model_buffers
    from kvplan.importers.gguf import import_gguf

    path = _gguf_path(ask)
    assert path is not None
    tensors = import_gguf(path).weights.tensors
    if any(t.part for t in tensors):
        return  # split files: the sum of the tensors, as for a GPU plan
    exact = model_buffers(tensors, use_mmap=ask.use_mmap)
    host = placed.host
    host.buffers = [*exact, *(b for b in host.buffers if b.kind != "model")]
    host.model_bytes = sum(b.bytes for b in exact)


def _moved(spec: ModelSpec, ask: LlamaCppAsk) -> list[dict[int | None, int]]:
    """Bytes per layer that ``-ot``, ``--cpu-moe`` and ``--n-cpu-moe`` move (exact from the
    tensor table when the model is a ``.gguf`` file)."""
    from kvplan.engines import llamacpp_offload as off
    from kvplan.engines.llamacpp_layout import layer_weights

    overrides = off.parse_overrides(ask.tensor_overrides)
    # past the model's layers every layer's experts are on the host already: no more patterns
    n_cpu_moe = min(ask.n_cpu_moe, spec.num_hidden_layers)
    overrides += off.moe_overrides(cpu_moe=ask.cpu_moe, n_cpu_moe=n_cpu_moe)
    if not overrides:
        return []
    tensors = off.layer_tensors(spec, layer_weights(spec).layers_bytes, _gguf_path(ask))
    names = device_names(ask.backend, len(ask.split)) if ask.split else ()
    return off.moved_bytes(tensors, overrides, names)


def _add_compute(spec: ModelSpec, ask: LlamaCppAsk, kv: EngineResult, placed: Layout) -> None:
    cells = int(kv.engine_log.get("cells", 0) or kv.engine_log.get("swa_cells", 0) or _PAD)
    t = min(ask.n_ubatch, ask.n_batch)
    output_device = placed.placement[-1]
    for use in placed.gpus:
        use.compute_bytes = gpu_compute_bytes(
            spec,
            cells=cells,
            n_ubatch=t,
            flash_attn=ask.fa,
            holds_output=output_device == use.index or output_device is None,
            holds_layers=use.num_layers > 0 or output_device is None,
        )
        use.buffers.append(Buffer(use.name, "compute", use.compute_bytes))
    host = placed.host
    if placed.gpus:
        host.compute_bytes = host_compute_bytes(spec, cells=cells, n_ubatch=t, flash_attn=ask.fa)
        name = f"{placed.gpus[0].name}_Host" if ask.backend == "cuda" else "CPU"
        host.buffers.append(Buffer(name, "compute", host.compute_bytes))
    else:
        from kvplan.engines.llamacpp_budget import compute_bytes_cpu

        # the padded context of every stream, and the routed experts a .gguf file declares
        streams = 1 if ask.kv_unified else int(kv.engine_log.get("streams", 1))
        host.compute_bytes = compute_bytes_cpu(
            spec,
            n_ctx=cells * streams,
            n_ubatch=t,
            n_seq_max=ask.n_seq_max,
            flash_attn=ask.fa,
            kv=kv,
            moe=_gguf_moe(ask),
        )
        host.buffers.append(Buffer("CPU", "compute", host.compute_bytes))


def _gguf_moe(ask: LlamaCppAsk) -> MoE | None:
    """The routed experts of the model's ``.gguf`` file (None for another model)."""
    from kvplan.engines.llamacpp_budget import moe_from_gguf
    from kvplan.importers.gguf_format import read_gguf_header

    path = _gguf_path(ask)
    if path is None:
        return None
    header = read_gguf_header(path)
    return moe_from_gguf(header.metadata, [t.name for t in header.tensors])


def plan(spec: ModelSpec, gpu: GPU, ask: LlamaCppAsk) -> LlamaCppPlan:
    """Solve what ``ask`` leaves open (see the module docstring)."""
    if ask.backend == "cpu":
        return budget(spec, gpu, replace(ask, n_gpu_layers=0))
    if ask.n_ctx is not None and ask.n_gpu_layers is not None:
        return budget(spec, gpu, ask)
    if ask.n_ctx is not None:
        return _most_layers(spec, gpu, ask, "n_gpu_layers")
    longest = _longest_context(spec, gpu, ask, "n_ctx")
    if ask.n_gpu_layers is not None or longest.fits:
        return longest if ask.n_gpu_layers is not None else replace(longest, solved="fit")
    return _most_layers(spec, gpu, replace(ask, n_ctx=FIT_CTX), "fit")


#: ``LLAMA_MAX_SEQ`` (src/llama-cparams.h): llama.cpp refuses a larger ``-np``.
LLAMA_MAX_SEQ = 256


def _largest(
    best: LlamaCppPlan, lo: int, hi: int, at: Callable[[int], LlamaCppPlan]
) -> LlamaCppPlan:
    """The plan ``at`` the largest value in ``lo..hi`` that fits, given ``best`` = ``at(lo)``,
    which fits, and memory that only grows with the value (bisection: log2 of the range)."""
    while lo < hi:
        mid = (lo + hi + 1) // 2
        trial = at(mid)
        if trial.fits:
            lo, best = mid, trial
        else:
            hi = mid - 1
    return best


def most_sequences(
    spec: ModelSpec, gpu: GPU, ask: LlamaCppAsk, context_tokens: int
) -> LlamaCppPlan | None:
    """The plan at the largest ``-np`` (at most ``LLAMA_MAX_SEQ``) whose sequences each get
    ``context_tokens`` (``-c`` = ``-np`` x it) with ``ask``'s ``-ngl``, every layer on the GPU
    when it gives none; None when not even one sequence fits so. Memory grows with ``-np``
    (cells, outputs, compute)."""
    ngl = spec.num_hidden_layers + 1 if ask.n_gpu_layers is None else ask.n_gpu_layers

    def at(n: int) -> LlamaCppPlan:
        asked = replace(ask, n_ctx=context_tokens * n, n_seq_max=n, n_gpu_layers=ngl)
        return budget(spec, gpu, asked, solved="n_seq_max")

    one = at(1)
    return _largest(one, 1, LLAMA_MAX_SEQ, at) if one.fits else None


def _most_layers(spec: ModelSpec, gpu: GPU, ask: LlamaCppAsk, solved: str) -> LlamaCppPlan:
    """The largest ``-ngl`` that fits (GPU memory grows with every layer offloaded)."""

    def at(ngl: int) -> LlamaCppPlan:
        return budget(spec, gpu, replace(ask, n_gpu_layers=ngl), solved=solved)

    none = at(0)
    return _largest(none, 0, spec.num_hidden_layers + 1, at) if none.fits else none


def _longest_context(spec: ModelSpec, gpu: GPU, ask: LlamaCppAsk, solved: str) -> LlamaCppPlan:
    """The longest context, in steps of 256 cells per sequence, that fits."""
    top = spec.max_position_embeddings or FIT_CTX
    if top // _PAD == 0:
        return budget(spec, gpu, replace(ask, n_ctx=top), solved=solved)
    per_seq = 1 if ask.kv_unified else ask.n_seq_max

    def at(steps: int) -> LlamaCppPlan:
        return budget(spec, gpu, replace(ask, n_ctx=steps * _PAD * per_seq), solved=solved)

    shortest = at(1)
    if not shortest.fits:
        return replace(shortest, n_ctx=0)
    return _largest(shortest, 1, top // _PAD, at)


def headroom_note(p: LlamaCppPlan) -> str:
    """How the headroom was chosen, for the table."""
    if p.ask.overhead_bytes is not None:
        return "--overhead"
    return f"llama.cpp --fit-target default ({FIT_TARGET_BYTES // MiB} MiB)"
