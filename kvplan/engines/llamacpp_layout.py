"""Where llama.cpp puts each layer, and what every device holds for one setting.

Read in llama.cpp at commit 0c1e570 (``src/llama-model.cpp``, ``load_tensors``;
``src/llama-kv-cache.cpp``; ``src/llama-context.cpp``):

- **layers**: ``-ngl N`` offloads the *last* ``N`` repeating layers: layer ``il`` runs on a
  GPU when ``il >= n_layer - N``. The output layer (head and final norm) counts as layer
  ``n_layer``: it is offloaded only when ``N > n_layer`` (``-ngl 33`` for a 32-layer model).
  The token embedding always stays on the host (it is read by ``get_rows``). A head tied to
  the embedding is loaded a second time, on the output layer's device, when that is a GPU.
- **split** (``--split-mode layer``, the default): offloaded layer ``il`` goes to the first
  device ``d`` whose cumulative share ``(ts[0] + ... + ts[d]) / sum(ts)`` is greater than
  ``(il - i_gpu_start) / act_gpu_layers`` (``std::upper_bound``); without ``--tensor-split``
  the shares are the devices' free memory, equal for GPUs of one kind. ``--split-mode row``
  keeps every offloaded layer on the main GPU but splits its weight matrices by rows across
  the devices in the same shares; ``none`` uses the main GPU only.
- **KV**: each layer's K and V live on that layer's device (``--no-kv-offload``: all on the
  host), so a device's KV buffer is the cells of each cache part times the row bytes of the
  layers it holds.
- **output**: the logits, ``n_vocab x n_seq_max x 4`` bytes, in the host buffer of the first
  GPU (``CUDA_Host``), or ``CPU`` without one.

The compute buffers are estimates (``llamacpp_compute``); the model, KV and output buffers
are exact given the file's tensor bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING

from kvplan.engines import llamacpp
from kvplan.engines.llamacpp_budget import Buffer, output_bytes
from kvplan.errors import UnitError
from kvplan.model.layers import (
    ChunkedLocalAttention,
    FullAttention,
    MLALatent,
    RecurrentState,
    SlidingWindowAttention,
)

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from kvplan.engines.base import EngineResult
    from kvplan.model.spec import ModelSpec

__all__ = [
    "BACKENDS",
    "SPLIT_MODES",
    "DeviceUse",
    "LayerWeights",
    "Layout",
    "device_names",
    "host_buffer_name",
    "layer_devices",
    "layer_kv_bytes",
    "layer_weights",
    "layout",
]

#: ``--device``: the backend whose rules apply
BACKENDS = ("cpu", "cuda", "metal")
#: ``--split-mode``
SPLIT_MODES = ("layer", "row", "none")


@dataclass(frozen=True, slots=True)
class LayerWeights:
    """Weight bytes as llama.cpp places them: the token embedding (host), each repeating
    layer, and the output layer (head, or the tied embedding's copy, plus final norm)."""

    embedding_bytes: int
    layers_bytes: tuple[int, ...]
    output_bytes: int
    tied: bool
    exact: bool  # True: from a GGUF tensor table; False: estimated from the parameter count


def layer_weights(spec: ModelSpec) -> LayerWeights:
    """The spec's weights per layer: exact from a GGUF file, else ``model_weights`` spread
    evenly over the layers (the remainder on the last ones)."""
    stored = spec.stored_weight_bytes
    tied = bool(spec.tie_word_embeddings)
    if stored is not None:
        return LayerWeights(
            stored.embedding_bytes, tuple(stored.layers_bytes), stored.output_bytes, tied, True
        )
    from kvplan.model.weights import model_weights

    w = model_weights(spec)
    n = spec.num_hidden_layers
    base, extra = divmod(w.layers_bytes, n)
    layers = tuple(base + (1 if i >= n - extra else 0) for i in range(n))
    return LayerWeights(w.embedding_bytes, layers, w.lm_head_bytes, tied, False)


def device_names(backend: str, num_gpus: int) -> tuple[str, ...]:
    """Devices as llama.cpp names them: ``CUDA0``, ``CUDA1``...; ``MTL0`` on Metal."""
    match backend:
        case "cuda":
            return tuple(f"CUDA{i}" for i in range(num_gpus))
        case "metal":
            return ("MTL0",)
        case "cpu":
            return ()
    raise UnitError(f"--device {backend!r}: allowed {', '.join(BACKENDS)}")


def _cumulative(split: Sequence[Fraction]) -> list[Fraction]:
    total = sum(split, Fraction(0))
    if total <= 0 or any(s < 0 for s in split):
        raise UnitError("--tensor-split: the shares must be >= 0 with a positive sum")
    out, running = [], Fraction(0)
    for share in split:
        running += share
        out.append(running / total)
    return out


def layer_devices(
    n_layer: int, n_gpu_layers: int, split: Sequence[Fraction], split_mode: str = "layer"
) -> list[int | None]:
    """The device index of layers ``0 .. n_layer`` (the last is the output layer); None: host.

    llama.cpp's rule (module docstring): 32 layers, ``-ngl 33``, ``-ts 1,1``: layers 0-15 on
    device 0 (``i/33 < 1/2``), 16-31 and the output layer on device 1.
    """
    if not split:
        return [None] * (n_layer + 1)
    ngl = max(0, n_gpu_layers)
    i_gpu_start = max(n_layer - ngl, 0)
    act = min(ngl, n_layer + 1)
    shares = _cumulative(split)
    out: list[int | None] = []
    for il in range(n_layer + 1):
        if il < i_gpu_start or il - i_gpu_start >= act:
            out.append(None)
        elif split_mode != "layer":
            out.append(0)
        else:
            at = Fraction(il - i_gpu_start, act)
            out.append(next((d for d, s in enumerate(shares) if s > at), len(shares) - 1))
    return out


def layer_kv_bytes(spec: ModelSpec, kv: EngineResult) -> list[int]:
    """KV bytes of each layer for a ``llamacpp.kv_cache`` result: its part's cells times
    streams times the layer's row bytes (the parts' totals are these sums)."""
    log = kv.engine_log
    streams = int(log.get("streams", 1))
    type_k, type_v = str(log["type_k"]), str(log["type_v"])
    main = int(log.get("cells", 0)) * streams
    swa = int(log.get("swa_cells", 0)) * streams
    rec = int(log.get("recurrent_cells", 0))
    out = []
    for layer in spec.layers:
        match layer:
            case SlidingWindowAttention() | ChunkedLocalAttention() if swa:
                k, v = layer.num_kv_heads * layer.head_dim, layer.num_kv_heads * layer.v_head_dim
                row = llamacpp.ggml_row_bytes(type_k, k) + llamacpp.ggml_row_bytes(type_v, v)
                out.append(swa * row)
            case FullAttention():
                k, v = layer.num_kv_heads * layer.head_dim, layer.num_kv_heads * layer.v_head_dim
                row = llamacpp.ggml_row_bytes(type_k, k) + llamacpp.ggml_row_bytes(type_v, v)
                out.append(main * row)
            case MLALatent():
                k, v = llamacpp.mla_row_values(layer, spec, build=None, fork="llama.cpp")
                row = llamacpp.ggml_row_bytes(type_k, k) + llamacpp.ggml_row_bytes(type_v, v)
                out.append(main * row)
            case RecurrentState():
                out.append(rec * 4 * (layer.conv_values + layer.ssm_values))
            case _:
                out.append(0)
    return out


@dataclass(slots=True)
class DeviceUse:
    """What one device (or the host, ``index`` None) holds, in exact bytes by kind."""

    name: str
    index: int | None
    model_bytes: int = 0
    kv_bytes: int = 0
    output_bytes: int = 0
    compute_bytes: int = 0
    num_layers: int = 0
    buffers: list[Buffer] = field(default_factory=list)
    draft_bytes: int = 0  # a draft model's weights, cache and compute buffers (-md)
    lora_bytes: int = 0  # LoRA adapters' tensors (--lora)

    @property
    def total_bytes(self) -> int:
        return (
            self.model_bytes
            + self.kv_bytes
            + self.output_bytes
            + self.compute_bytes
            + self.draft_bytes
            + self.lora_bytes
        )


@dataclass(frozen=True, slots=True)
class Layout:
    """The devices (GPUs first, the host last) and the layer placement of one setting."""

    devices: tuple[DeviceUse, ...]
    placement: tuple[int | None, ...]  # layers 0 .. n_layer (the output layer last)

    @property
    def host(self) -> DeviceUse:
        return self.devices[-1]

    @property
    def gpus(self) -> tuple[DeviceUse, ...]:
        return self.devices[:-1]


def host_buffer_name(use_mmap: bool) -> str:
    """The host buffer type model weights take: the mapped file's, or plain CPU memory."""
    return "CPU_Mapped" if use_mmap else "CPU"


def layout(
    spec: ModelSpec,
    kv: EngineResult,
    *,
    backend: str,
    n_gpu_layers: int,
    split: Sequence[Fraction],
    split_mode: str = "layer",
    no_kv_offload: bool = False,
    use_mmap: bool = True,
    n_seq_max: int = 1,
    moved: Sequence[Mapping[int | None, int]] = (),
) -> Layout:
    """Model, KV and output bytes per device for ``kv`` (compute is added by the caller).

    ``moved``: per repeating layer, the bytes ``-ot``/``--cpu-moe`` send to a GPU index or
    (None) the host instead of the layer's device (``llamacpp_offload.moved_bytes``)."""
    names = device_names(backend, len(split))
    gpus = [DeviceUse(n, i) for i, n in enumerate(names)]
    host = DeviceUse("CPU", None)
    weights = layer_weights(spec)
    n_layer = spec.num_hidden_layers
    placement = layer_devices(n_layer, n_gpu_layers, split if gpus else (), split_mode)
    shares = [Fraction(s) for s in split]
    host_model = weights.embedding_bytes
    per_layer = [*weights.layers_bytes, weights.output_bytes]
    if placement[n_layer] is not None and weights.tied:
        per_layer[n_layer] += weights.embedding_bytes  # the tied head's copy on the GPU
    for il, (device, num_bytes) in enumerate(zip(placement, per_layer, strict=True)):
        left, to_host = _move(moved[il] if il < len(moved) else {}, device, gpus)
        num_bytes, host_model = num_bytes - left, host_model + to_host
        if device is None:
            host_model += num_bytes
            host.num_layers += 1 if il < n_layer else 0
            continue
        if split_mode == "row" and len(gpus) > 1:
            _split_rows(gpus, shares, num_bytes)
        else:
            gpus[device].model_bytes += num_bytes
        gpus[device].num_layers += 1 if il < n_layer else 0
    for device, kv_bytes in zip(placement, layer_kv_bytes(spec, kv), strict=False):
        target = host if device is None or no_kv_offload else gpus[device]
        target.kv_bytes += kv_bytes
    host.output_bytes = output_bytes(spec.vocab_size or 1, n_seq_max)
    host.model_bytes = host_model
    # Metal maps the file's pages into its own buffer (``MTL0_Mapped``) instead of copying
    model_name = "{}_Mapped" if backend == "metal" and use_mmap else "{}"
    for use in gpus:
        use.buffers += [
            Buffer(model_name.format(use.name), "model", use.model_bytes),
            Buffer(use.name, "kv", use.kv_bytes),
        ]
    host_kind = host_buffer_name(use_mmap)
    host.buffers += [Buffer(host_kind, "model", host.model_bytes)]
    if host.kv_bytes:
        host.buffers.append(Buffer("CPU", "kv", host.kv_bytes))
    out_name = f"{names[0]}_Host" if backend == "cuda" and names else "CPU"
    host.buffers.append(Buffer(out_name, "output", host.output_bytes))
    return Layout((*gpus, host), tuple(placement))


def _move(
    moves: Mapping[int | None, int], device: int | None, gpus: list[DeviceUse]
) -> tuple[int, int]:
    """Bytes of one layer that leave its ``device`` (GPUs' shares added to them), and how
    many of them go to the host."""
    left = to_host = 0
    for dest, part in moves.items():
        if dest == device:
            continue
        left += part
        if dest is None:
            to_host += part
        else:
            gpus[dest].model_bytes += part
    return left, to_host


def _split_rows(gpus: list[DeviceUse], shares: list[Fraction], num_bytes: int) -> None:
    """``--split-mode row``: a layer's bytes spread over the GPUs by their shares (whole
    bytes; the remainder on the main GPU)."""
    total = sum(shares, Fraction(0))
    given = 0
    for use, share in list(zip(gpus, shares, strict=True))[1:]:
        part = int(num_bytes * share / total)
        use.model_bytes += part
        given += part
    gpus[0].model_bytes += num_bytes - given


def layer_split(num_layers: int, num_gpus: int) -> tuple[tuple[int, ...], int]:
    """llama.cpp's ``--split-mode layer`` on equal GPUs: layers per GPU, and the output's GPU.

    ``llama_model::load_tensors`` puts layer ``il`` on the first GPU whose cumulative share
    of free memory exceeds ``il / (n_layer + 1)`` (the output layer is ``il = n_layer``), that
    is GPU ``il x gpus // (n_layer + 1)`` when the GPUs are alike. Llama 3.1 70B (80 layers)
    on 4 GPUs: 21, 20, 20 and 19 layers, the output on the last.
    """
    counts = [0] * num_gpus
    for il in range(num_layers):
        counts[il * num_gpus // (num_layers + 1)] += 1
    return tuple(counts), num_layers * num_gpus // (num_layers + 1)
