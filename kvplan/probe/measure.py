"""The torch probe: build a real transformers model with a spec's KV geometry and measure the
cache it allocates.

The model keeps every dimension the cache depends on (layers and their kinds, KV heads, head
dims, windows, MLA dims, state dims) and shrinks everything else (hidden and MLP widths where
the cache does not depend on them, vocabulary, experts), randomly initialised from the config:
no weights, nothing downloaded. A prefill of ``context_tokens`` tokens for ``batch_size``
sequences and ``decode_steps`` decode steps fill its cache, whose tensors are then measured:
their logical bytes (elements x element size, what the transformers profile estimates) and
the bytes of their storages, de-duplicated (what is held: a sliding layer's slice can keep its
whole prefill storage alive). On CUDA the allocator's view is measured too. The builders, one
per family, are in ``kvplan.probe.families``.

What transformers holds that the engines do not (measured with transformers 5.24 on the CPU,
its torch paths; the estimate compared with is kvplan's transformers profile):

- A Mamba1, Mamba2, short-convolution or gated-delta-net layer keeps the whole conv kernel
  (``conv_kernel`` columns, LFM2's ``conv_L_cache``), in the model dtype; vLLM and llama.cpp
  keep ``kernel - 1``. The transformers profile counts it; kvplan's ideal cache does not.
- The SSM state of Mamba1 and Mamba2 layers (Mamba, Falcon Mamba, Mamba2, Falcon-H1, Zamba2,
  Nemotron-H, Granite 4, Jamba) and the gated delta net's recurrent state (Qwen3-Next,
  Qwen3.5, OLMo Hybrid) come back from the torch scans in float32 whatever the model dtype
  (vLLM keeps the model dtype unless told); the profile sizes them so.
- Falcon-H1 and Zamba2's hybrid layers hold K and V and a Mamba2 state in one cache layer;
  both are measured, and counted under ``full_attention`` and ``recurrent_state``.
- Gemma 3n and Gemma 4's shared layers (the last ``num_kv_shared_layers``) hold nothing: a
  ``DummyLayer``, no full-length copy of the K and V they read.
- DeepSeek-V3.2 and GLM-5 (DSA) keep the sparse-attention indexer's key beside the MLA latent
  as ``[batch, tokens, index_head_dim]`` in the model dtype (``DynamicIndexedLayer``); vLLM
  keeps it in fp8 with a scale per 128 values. DeepSeek-V3.2, bfloat16, 17 tokens: 61 x 17 x
  128 x 2 B = 265,472 B beside the latent.

torch and transformers are imported inside the functions only: ``import kvplan`` never loads
them, and without them ``kvplan probe`` says how to install them and exits 3.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

from kvplan.arguments import as_int, as_optional_str, as_str, as_tokens
from kvplan.catalog.lookup import as_spec
from kvplan.errors import KvplanError, ProbeUnavailableError
from kvplan.model.layers import (
    AttentionAndState,
    ChunkedLocalAttention,
    MLALatent,
    RecurrentState,
    SlidingWindowAttention,
)
from kvplan.model.spec import ModelSpec
from kvplan.probe import families as probe_families
from kvplan.probe.families import TINY_VOCAB
from kvplan.probe.families import family_of as family_of  # re-exported for the CLI

INSTALL_HINT = (
    "kvplan probe needs PyTorch and transformers, which kvplan does not install by default:"
    " pip install 'kvplan[probe]'"
)


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """What the probe measured, next to what kvplan estimates."""

    model: str
    family: str
    device: str
    dtype: str
    context_tokens: int
    batch_size: int
    decode_steps: int
    tensor_bytes: int
    storage_bytes: int
    by_kind: dict[str, int]
    transformers_estimate_bytes: int
    estimate_by_kind: dict[str, int]
    ideal_bytes: int
    num_tensors: int
    allocator: dict[str, int] = field(default_factory=dict)
    paged: dict[str, int] = field(default_factory=dict)

    @property
    def difference_bytes(self) -> int:
        return self.tensor_bytes - self.transformers_estimate_bytes


def require_torch() -> tuple[Any, Any]:
    """torch and transformers, or ProbeUnavailableError with the install hint."""
    try:
        import torch
        import transformers
    except ImportError:
        raise ProbeUnavailableError(INSTALL_HINT) from None
    return torch, transformers


def build_config(spec: ModelSpec, dtype: str, max_tokens: int) -> Any:
    """A transformers config with ``spec``'s cache geometry and tiny everything else."""
    _, transformers = require_torch()
    return probe_families.build_config(spec, transformers, dtype, max_tokens)


def _cache_tensors(cache: Any) -> list[tuple[int, str, Any]]:
    """``(layer index, part, tensor)`` for every tensor a transformers cache holds."""
    import torch

    found: list[tuple[int, str, Any]] = []
    layers = getattr(cache, "layers", None)
    if layers is not None:
        for i, layer in enumerate(layers):
            for part in ("keys", "values", "indexer_keys", "conv_states", "recurrent_states"):
                held = getattr(layer, part, None)
                # recurrent layers keep their states in dicts keyed by state index
                values = held.values() if isinstance(held, dict) else [held]
                found.extend((i, part, t) for t in values if isinstance(t, torch.Tensor))
        return found
    for part in ("key_cache", "value_cache", "conv_states", "ssm_states"):
        for i, tensor in enumerate(getattr(cache, part, None) or []):
            if isinstance(tensor, torch.Tensor):
                found.append((i, part, tensor))
    return found


def run_probe(
    spec: ModelSpec | str,
    *,
    context_tokens: int | str,
    batch_size: int = 1,
    decode_steps: int = 0,
    device: str = "cpu",
    dtype: str | None = None,
    paged_blocks: int | None = None,
    seed: int = 0,
) -> ProbeResult:
    """Build, fill and measure (see the module docstring).

    Raises ProbeUnavailableError without torch and transformers or without the CUDA device
    asked for, KvplanError for a model the probe cannot build or a block-format dtype,
    UnitError for a count below its minimum, ArgumentTypeError (a TypeError) for an argument of
    the wrong type. The arguments are checked before torch is imported.
    """
    from kvplan.units import resolve_dtype

    model = as_spec(spec)
    context_tokens = as_tokens(context_tokens, "context_tokens", minimum=1)
    batch_size = as_int(batch_size, "batch_size", minimum=1)
    decode_steps = as_int(decode_steps, "decode_steps")
    seed = as_int(seed, "seed")
    if paged_blocks is not None:
        paged_blocks = as_int(paged_blocks, "paged_blocks")
    as_str(device, "device", "a torch device name such as cuda")
    as_optional_str(dtype, "dtype")
    torch, transformers = require_torch()
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ProbeUnavailableError("--device cuda: no CUDA device is available to torch")
    name = resolve_dtype(dtype or model.torch_dtype).name
    if name not in ("float32", "float16", "bfloat16"):
        raise KvplanError(
            f"--kv-dtype {name}: transformers caches in the model dtype; use"
            " float32, float16 or bfloat16"
        )
    torch_dtype = getattr(torch, name)
    with warnings.catch_warnings():
        # transformers warns about slow fallback kernels and renamed arguments; the probe
        # measures allocation, not speed, and works across versions on purpose
        warnings.simplefilter("ignore")
        transformers.logging.set_verbosity_error()
        return _measure(
            model,
            torch,
            transformers,
            name,
            torch_dtype,
            context_tokens,
            batch_size,
            decode_steps,
            device,
            paged_blocks,
            seed,
        )


def _measure(
    spec: ModelSpec,
    torch: Any,
    transformers: Any,
    name: str,
    torch_dtype: Any,
    context_tokens: int,
    batch_size: int,
    decode_steps: int,
    device: str,
    paged_blocks: int | None,
    seed: int,
) -> ProbeResult:
    from kvplan.model.estimator import estimate

    total = context_tokens + decode_steps
    config = build_config(spec, name, total)
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch_dtype)
    model.eval().to(device)
    shape = (batch_size, context_tokens, decode_steps)
    cache, allocator = _fill_cache(torch, model, shape, device)
    tensors = _cache_tensors(cache)
    logical, storage_bytes, by_kind = _tensor_bytes(spec, tensors)
    estimated, estimate_by_kind = _profile(spec, total, batch_size, name)
    paged = _paged_pool(spec, paged_blocks, name, device) if paged_blocks else {}
    return ProbeResult(
        model=spec.name,
        family=family_of(spec),
        device=device,
        dtype=name,
        context_tokens=context_tokens,
        batch_size=batch_size,
        decode_steps=decode_steps,
        tensor_bytes=logical,
        storage_bytes=storage_bytes,
        by_kind=by_kind,
        transformers_estimate_bytes=estimated,
        estimate_by_kind=estimate_by_kind,
        ideal_bytes=estimate(spec, total, batch_size=batch_size, kv_dtype=name).kv_cache_bytes,
        num_tensors=len(tensors),
        allocator=allocator,
        paged=paged,
    )


def _fill_cache(
    torch: Any, model: Any, shape: tuple[int, int, int], device: str
) -> tuple[Any, dict[str, int]]:
    """Prefill ``batch x context`` random tokens, then ``decode_steps`` one-token steps; the
    filled cache and, on CUDA, the allocator's deltas over the whole run and the decode."""
    batch_size, context_tokens, decode_steps = shape
    cuda = device.startswith("cuda")
    allocator: dict[str, int] = {}
    if cuda:
        torch.cuda.synchronize()
        before, reserved = torch.cuda.memory_allocated(), torch.cuda.memory_reserved()
    ids = torch.randint(0, TINY_VOCAB, (batch_size, context_tokens), device=device)
    with torch.no_grad():
        out = model(input_ids=ids, use_cache=True)
        cache = out.past_key_values
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            peak_base = torch.cuda.memory_allocated()
        for _ in range(decode_steps):
            step = torch.randint(0, TINY_VOCAB, (batch_size, 1), device=device)
            out = model(input_ids=step, past_key_values=cache, use_cache=True)
            cache = out.past_key_values
        del out
    if cuda:
        torch.cuda.synchronize()
        allocator = {
            "memory_allocated_delta": torch.cuda.memory_allocated() - before,
            "memory_reserved_delta": torch.cuda.memory_reserved() - reserved,
            "decode_peak_delta": torch.cuda.max_memory_allocated() - peak_base,
        }
    return cache, allocator


def _tensor_bytes(
    spec: ModelSpec, tensors: list[tuple[int, str, Any]]
) -> tuple[int, int, dict[str, int]]:
    """The logical bytes of the cache tensors (elements x element size), the bytes of their
    storages counted once each, and the logical bytes per layer kind."""
    by_kind: dict[str, int] = {}
    storages: dict[int, int] = {}
    logical = 0
    for index, part, tensor in tensors:
        kind = _kind(spec, index, part)
        size = tensor.numel() * tensor.element_size()
        logical += size
        by_kind[kind] = by_kind.get(kind, 0) + size
        storage = tensor.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
    return logical, sum(storages.values()), by_kind


def _profile(
    spec: ModelSpec, total_tokens: int, batch_size: int, dtype: str
) -> tuple[int, dict[str, int]]:
    """The transformers profile's bytes for the same cache, in all and per cache kind."""
    from kvplan.engines import transformers as hf_profile

    profile = hf_profile.kv_cache(
        spec, context_tokens=total_tokens, batch_size=batch_size, dtype=dtype
    )
    by_kind = {
        key.removesuffix("_bytes"): int(value)
        for key, value in profile.engine_log.items()
        if key.endswith("_bytes") and key not in ("k_bytes", "v_bytes", "state_bytes")
    }
    return profile.kv_cache_bytes, by_kind


def _kind(spec: ModelSpec, index: int, part: str) -> str:
    """The layer kind a cached tensor counts under, as the transformers profile names it."""
    layer = spec.layers[index] if index < len(spec.layers) else None
    match layer:
        case MLALatent():
            return "mla_latent"
        case SlidingWindowAttention():
            return "sliding_attention"
        case ChunkedLocalAttention():
            return "chunked_attention"
        case RecurrentState():
            return "recurrent_state"
        case AttentionAndState() if part not in ("keys", "values"):
            return "recurrent_state"
        case _:
            return "full_attention"


def _paged_pool(spec: ModelSpec, num_blocks: int, dtype: str, device: str) -> dict[str, int]:
    """Allocate vLLM's KV cache tensors for ``num_blocks`` blocks and compare with the plan.

    vLLM allocates one raw byte tensor per ``KVCacheTensor`` (``page x num_blocks`` bytes) and
    views each layer's blocks in it: one per layer for a uniform model, ``group_size`` shared
    tensors for a hybrid. The planned bytes are the profile's; on CUDA the allocator's delta
    shows what the caching allocator adds (block rounding).
    """
    import torch

    from kvplan.engines import vllm

    _, groups, tensors_needed, _ = vllm.layout(spec, vllm.config(16, kv_cache_dtype=dtype))
    page = groups[0][0].page_bytes
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
    pool = [
        torch.empty((page * num_blocks,), dtype=torch.int8, device=device)
        for _ in range(tensors_needed)
    ]
    result = {
        "num_blocks": num_blocks,
        "page_bytes": page,
        "num_tensors": tensors_needed,
        "planned_bytes": num_blocks * page * tensors_needed,
        "tensor_bytes": sum(t.numel() for t in pool),
    }
    if cuda:
        torch.cuda.synchronize()
        result["memory_allocated_delta"] = torch.cuda.memory_allocated() - before
    del pool
    return result
