"""The flags that make each engine hold a target: N requests of L tokens on a deployment.

Every engine gets a verdict from the same three figures, per GPU: the weights it places
there, the cache the target needs, and the engine's own overhead, against the memory the
engine lets itself use. Each engine is told in its own terms, from its own profile:

- vLLM: ``--kv-cache-memory`` = N x the blocks one request needs x the block bytes of a layer
  group (so hybrid models get vLLM's sliding reservation, not the ideal window), with
  ``--max-model-len L --max-num-seqs N``. Weights split over the TP ranks, plus its profiled
  activations and non-torch memory, within ``gpu_memory_utilization`` x the GPU (0.9: the
  rest is where vLLM captures its CUDA graphs).
- SGLang: ``--max-total-tokens`` = N x L, and the ``--mem-fraction-static`` (3 decimals,
  rounded up) that leaves room for the rank's weights and that pool. Fits only up to SGLang's
  own automatic fraction for that GPU and TP, whose remainder is what SGLang reserves for
  activations and CUDA graphs; a larger need is reported in words, never as a flag.
- llama.cpp: ``-c N x L -np N`` (one stream of L cells per sequence), the cache types, and the
  bytes the build allocates. llama.cpp does not shard tensors: its default
  ``--split-mode layer`` deals whole layers to the GPUs (layer ``il`` of ``n`` to GPU
  ``il x gpus // (n + 1)``, the output layer counted as layer ``n``), each layer's cache on its
  layer's GPU; the token embeddings stay in host memory. The fullest GPU decides, with its
  compute buffer and the ``--fit-target`` headroom: the verdict is ``kvplan plan --engine
  llama.cpp``'s for the same setting (``llamacpp_plan.budget``).
- TGI: ``--max-batch-total-tokens N x L --max-total-tokens L``; weights split over the shards,
  and the blocks its warm-up leaves room for (``TGI_WIGGLE_ROOM`` 0.9) must hold N requests.

The model and cache dtypes come from ``kvplan.model.dtypes.cache_dtypes``, the one rule every
command uses. An engine that cannot serve the deployment at all (attention heads that do not
split over the tensor-parallel size, a cache dtype it has no flag for, a model its profile
does not cover) gets a "does not fit" verdict with the reason. An engine that does not fit
gets no flags at all: what it would need is said in words.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from fractions import Fraction

from kvplan.answers.flags_target import EngineFlags, Target
from kvplan.answers.flags_vllm import vllm_extra_flags, vllm_settings
from kvplan.answers.question import OVERRIDE_FLAGS, engine_refuses_length, parse_hf_overrides
from kvplan.arguments import (
    as_fraction,
    as_int,
    as_parallel,
    as_sequence,
    as_str,
    as_tokens,
    check_strs,
)
from kvplan.catalog.lookup import as_spec
from kvplan.engines import llamacpp, sglang, tgi, vllm
from kvplan.engines.llamacpp_layout import layer_split
from kvplan.engines.vllm_calibration import Calibration
from kvplan.engines.vllm_lora import VllmLora
from kvplan.errors import KvplanError, UnitError
from kvplan.hardware.gpus import GPU
from kvplan.hardware.lookup import as_gpu
from kvplan.model.dtypes import PER_TOKEN_HEAD, CacheDTypes, cache_dtypes
from kvplan.model.spec import ModelSpec
from kvplan.model.weights import QUANTIZATIONS, Weights, model_weights, quantization_names
from kvplan.units import DType, GiB, cdiv, fraction_of, resolve_dtype

__all__ = ["ENGINES", "EngineFlags", "layer_split", "recommend"]

#: The engines ``recommend`` answers for, in the order it answers.
ENGINES = ("vllm", "sglang", "llama.cpp", "tgi")

# Each engine's --kv-cache-dtype value for a kvplan cache dtype that differs from the model
# dtype; a dtype missing here has no flag in that engine (vLLM config/cache.py CacheDType,
# SGLang server_args.py, TGI launcher; llama.cpp -ctk/-ctv take ggml types).
_VLLM_KV = {"fp8_e4m3": "fp8", "fp8_e5m2": "fp8_e5m2"}
_SGLANG_KV = {"fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2"}
_TGI_KV = {"fp8_e4m3": "fp8", "fp8_e5m2": "fp8_e5m2"}
_GGML_KV = llamacpp.GGML_NAMES  # kvplan dtype -> ggml cache type name
# llama.cpp has no 8-bit float or int8 cache: those requests get its 8-bit block type q8_0.
_GGML_8BIT = {"fp8_e4m3", "fp8_e5m2", "int8"}


#: Tokens per block of TGI's paged attention (the profile's default).
_TGI_BLOCK_SIZE = tgi.BLOCK_SIZES["paged"]


#: More concurrent requests than any engine schedules (vLLM's max_num_seqs, SGLang's
#: max_running_requests are far below): refused before any arithmetic grows with it.
MAX_CONCURRENCY = 1 << 24


_Answer = Callable[[Target], "EngineFlags"]


def recommend(
    spec: ModelSpec | str,
    gpu: GPU | str,
    *,
    max_model_len: int | str,
    concurrency: int,
    tensor_parallel_size: int = 1,
    kv_cache_dtype: str | None = None,
    quantization: str | None = None,
    gpu_memory_utilization: Fraction | float | str = Fraction(9, 10),
    engines: Sequence[str] | None = None,
    hf_overrides: str | None = None,
    model_as_typed: str | None = None,
    calibration: Calibration | None = None,
    speculative_config: str | None = None,
    lora: VllmLora | None = None,
) -> tuple[EngineFlags, ...]:
    """Per engine (all of ``ENGINES`` unless ``engines`` names some), the flags that hold
    ``concurrency`` requests of ``max_model_len`` tokens on ``tensor_parallel_size`` GPUs,
    and whether they fit.

    Raises UnitError for a target below one token, request or GPU, an unknown engine,
    quantization or cache dtype; SpecError when the spec has no parameter count (every
    verdict needs the weights). A deployment one engine cannot serve is that engine's
    "does not fit", not an error; so is a ``max_model_len`` past the model's trained length
    for vLLM and SGLang, which refuse it unless ``hf_overrides`` (vLLM's ``--hf-overrides``
    JSON, passed on as SGLang's ``--json-model-override-args``) extends it. ``calibration``
    (kvplan calibrate) sets vLLM's budget terms; it must be of this GPU, TP and vLLM's default
    line, and asks for vLLM among the engines (UnitError otherwise). ``speculative_config``
    (the JSON of vLLM's --speculative-config) and ``lora`` (``VllmLora``) are vLLM's: they ask
    for vLLM alone. A ``kv_cache_dtype`` of vLLM's per-token-head layouts is vLLM's flag; the
    other engines have none for it.
    """
    model = as_spec(spec)
    device = as_gpu(gpu)
    length = as_tokens(max_model_len, "max_model_len", minimum=1)
    n = as_int(concurrency, "concurrency", minimum=1, maximum=MAX_CONCURRENCY)
    tp = as_parallel(tensor_parallel_size, "tensor_parallel_size")
    util = as_fraction(gpu_memory_utilization, "gpu_memory_utilization")
    what = "a list of engine names"
    wanted = tuple(as_sequence(engines, "engines", what)) if engines is not None else ()
    for name in wanted:
        if as_str(name, "engines", what) not in ENGINES:
            raise UnitError(f"unknown engine {name!r}; allowed: {', '.join(ENGINES)}")
    wanted = wanted or ENGINES
    check_strs(
        optional=True,
        quantization=quantization,
        kv_cache_dtype=kv_cache_dtype,
        hf_overrides=hf_overrides,
        model_as_typed=model_as_typed,
    )
    quant = quantization.strip().lower() if quantization else None
    if quant is not None and quant not in QUANTIZATIONS:
        raise UnitError(f"unknown quantization {quantization!r}; allowed: {quantization_names()}")
    kv = (
        None
        if kv_cache_dtype is None or kv_cache_dtype.strip().lower() == "auto"
        else kv_cache_dtype
    )
    if kv is not None and kv not in PER_TOKEN_HEAD:
        resolve_dtype(kv)
    model_weights(model, quantization=quant)  # a spec without num_parameters fails here, once
    trained = parse_hf_overrides(hf_overrides) if hf_overrides else model.max_position_embeddings
    extended = (hf_overrides, trained, model_as_typed or "")
    own = vllm_settings(
        tuple(map(str, wanted)), device.name, tp, calibration, speculative_config, lora
    )
    target = Target(model, device, length, n, tp, kv, quant, util, *extended, *own)
    answer = {"vllm": _vllm, "sglang": _sglang, "llama.cpp": _llamacpp, "tgi": _tgi}
    return tuple(_guarded(name, answer[name], target) for name in ENGINES if name in wanted)


def _guarded(name: str, answer: _Answer, t: Target) -> EngineFlags:
    """``answer(t)``; a profile that does not cover the model is that engine's miss alone."""
    try:
        return answer(t)
    except KvplanError as e:
        return EngineFlags(name, (), 0, False, "", reason=f"not modelled: {e}", num_gpus=t.tp)


def _tp_problem(spec: ModelSpec, tp: int, engine: str) -> str:
    """Why ``engine`` cannot split ``spec`` over ``tp`` GPUs ("" when it can).

    vLLM and SGLang need ``num_attention_heads % tp == 0`` and KV heads that either split
    evenly or are replicated evenly (``QKVParallelLinear``: ``divide(kv, tp)`` or
    ``divide(tp, kv)``). TGI's modelling code divides both head counts by the shard count and
    replicates nothing (``flash_llama_modeling.py``). MLA keeps one latent: no KV-head rule.
    """
    if tp == 1:
        return ""
    heads, kv = spec.num_attention_heads, spec.kv_heads
    label = _LABELS[engine]
    if heads % tp:
        return (
            f"{heads} attention heads do not split over {tp} GPUs"
            f" ({label} needs num_attention_heads % tp == 0)"
        )
    if spec.kv_lora_rank is not None:
        return ""
    if engine == "tgi" and kv % tp:
        return (
            f"{kv} KV heads do not split over {tp} shards (TGI needs num_key_value_heads % tp == 0)"
        )
    if kv % tp and tp % kv:
        return (
            f"{kv} KV heads neither split over nor replicate evenly onto {tp} GPUs"
            f" ({label} needs kv_heads % tp == 0 or tp % kv_heads == 0)"
        )
    return ""


def _kv_flag(engine: str, table: dict[str, str], t: Target, cache: CacheDTypes) -> tuple[str, str]:
    """``(flag value, problem)``: the engine's --kv-cache-dtype for the cache ("" for auto)."""
    if t.kv in PER_TOKEN_HEAD:
        return t.kv, ""  # vLLM's own layout (cache_dtypes refuses it for the other engines)
    if t.kv is None or cache.k == cache.model:
        return "", ""
    value = table.get(cache.k.name)
    if value is None:
        allowed = ", ".join(["auto", *table.values()])
        return "", f"{engine} has no {cache.k.name} KV cache (--kv-cache-dtype takes {allowed})"
    return value, ""


_LABELS = {"vllm": "vLLM", "sglang": "SGLang", "tgi": "TGI"}


def _admit(
    engine: str, table: dict[str, str], t: Target
) -> tuple[CacheDTypes, str, EngineFlags | None]:
    """The engine's cache dtypes and --kv-cache-dtype value for the target, or its refusal
    (a cache dtype it has no flag for, or a TP its head split does not allow)."""
    cache = cache_dtypes(t.spec, engine, kv_cache_dtype=t.kv)
    kv_value, problem = _kv_flag(_LABELS[engine], table, t, cache)
    problem = (
        problem
        or _tp_problem(t.spec, t.tp, engine)
        or engine_refuses_length(engine, t.spec.name, t.length, t.trained)
    )
    return cache, kv_value, _refused(engine, t, cache, problem) if problem else None


def _refused(name: str, t: Target, cache: CacheDTypes, problem: str) -> EngineFlags:
    return EngineFlags(
        name,
        (),
        0,
        False,
        "",
        reason=problem,
        model_dtype=cache.model.name,
        kv_cache_dtype=cache.kv_dtype,
        dtype_reason=cache.reason,
        num_gpus=t.tp,
    )


def _verdict(
    engine: str,
    t: Target,
    cache: CacheDTypes,
    flags: tuple[str, ...],
    kv_cache_bytes: int,
    fits: bool,
    note: str,
    *,
    weights: int,
    required: int,
    budget: int,
    reason: str | None = None,
) -> EngineFlags:
    """An engine's answer: its flags only when it fits, and by default the reason it does
    not as what it needs against what it may use, per GPU."""
    if reason is None:
        reason = "" if fits else f"needs {_gib(required)} per GPU, {_gib(budget)} usable"
    return EngineFlags(
        engine,
        flags if fits else (),
        kv_cache_bytes,
        fits,
        note,
        reason=reason,
        model_dtype=cache.model.name,
        kv_cache_dtype=cache.kv_dtype,
        dtype_reason=cache.reason,
        weights_bytes=weights,
        required_bytes=required,
        budget_bytes=budget,
        num_gpus=t.tp,
    )


def _weights(t: Target, cache: CacheDTypes) -> Weights:
    return model_weights(t.spec, cache.model.name, t.quantization)


def _shared_flags(
    flags: list[str], t: Target, tp_flag: str, kv_value: str, quantization_flag: str
) -> str:
    """Append the flags every server engine takes in its own name (tensor parallelism, cache
    dtype, on-the-fly fp8 weights) to ``flags``; return the weights note."""
    if t.tp > 1:
        flags.append(f"{tp_flag}={t.tp}")
    if t.hf_overrides:
        engine = "sglang" if tp_flag == "--tp" else "vllm"
        flags.append(f"{OVERRIDE_FLAGS[engine]}={shlex.quote(t.hf_overrides)}")
    if kv_value:
        flags.append(f"--kv-cache-dtype={kv_value}")
    quant_flags, quant_note = _quantization_note(t, quantization_flag)
    flags += quant_flags
    return quant_note


def _quantization_note(t: Target, engine_flag: str | None) -> tuple[list[str], str]:
    """The engine's quantization flag (on-the-fly fp8 only) and a note for the others."""
    if t.quantization is None:
        return [], ""
    if engine_flag is None:
        return [], f"; weights sized as {t.quantization}: a GGUF of about that size"
    if t.quantization == "fp8":
        return [f"{engine_flag}=fp8"], ""
    return [], f"; weights sized as {t.quantization}: serve a checkpoint in that format"


def _gib(num_bytes: int) -> str:
    return f"{num_bytes / GiB:.2f} GiB"


def _sum(*parts: tuple[str, int]) -> str:
    """``weights 14.96 + pool 48.00 = 62.96 GiB``."""
    terms = " + ".join(f"{label} {num_bytes / GiB:.2f}" for label, num_bytes in parts)
    return f"{terms} = {_gib(sum(num_bytes for _, num_bytes in parts))}"


def _vllm(t: Target) -> EngineFlags:
    cache, kv_value, refused = _admit("vllm", _VLLM_KV, t)
    if refused is not None:
        return refused
    cfg = vllm.VllmConfig(
        max_model_len=t.length,
        gpu_memory_utilization=t.util,
        tensor_parallel_size=t.tp,
        kv_cache_dtype=t.kv if t.kv in PER_TOKEN_HEAD else cache.k.name,
        max_num_seqs=t.n,
        dtype=cache.model.name,
        quantization=t.quantization,
        calibration=t.calibration,
        speculative=t.speculative,
        lora=t.lora,
    )
    probe = vllm.profile(t.spec, t.gpu, cfg)
    block_bytes = probe.page_bytes * probe.group_size
    # one more block than N requests need: vLLM keeps block 0 as its null block
    need = (t.n * probe.blocks_per_request + 1) * block_bytes
    overhead = probe.stages[-1].overhead
    used = overhead.total_bytes + need
    budget = fraction_of(t.gpu.memory_bytes, t.util)
    fits = used <= budget
    flags = [f"--kv-cache-memory={need}", f"--max-model-len={t.length}", f"--max-num-seqs={t.n}"]
    flags += vllm_extra_flags(t.speculative, t.lora)
    quant_note = _shared_flags(flags, t, "--tensor-parallel-size", kv_value, "--quantization")
    figures = _sum(
        ("weights", overhead.weights_bytes),
        ("activations", overhead.activation_bytes),
        ("other", overhead.non_torch_bytes),
        ("CUDA graphs", overhead.cuda_graph_bytes),
        ("cache", need),
    )
    note = (
        f"{t.n:,} x {probe.blocks_per_request:,} blocks of {block_bytes:,} B; {figures}"
        f" of {_gib(budget)} ({float(t.util):g} x {_gib(t.gpu.memory_bytes)}){quant_note}"
    )
    return _verdict(
        "vllm",
        t,
        cache,
        tuple(flags),
        need,
        fits,
        note,
        weights=overhead.weights_bytes,
        required=used,
        budget=budget,
    )


def _thousandths(value: int) -> str:
    return f"{value // 1000}.{value % 1000:03d}"


def _sglang(t: Target) -> EngineFlags:
    cache, kv_value, refused = _admit("sglang", _SGLANG_KV, t)
    if refused is not None:
        return refused
    tokens = t.n * t.length
    cell = sglang.cell_size_bytes(t.spec, tp=t.tp, kv_cache_dtype=cache.k.name)
    pool = tokens * cell
    weights = cdiv(_weights(t, cache).total_bytes, t.tp)
    required = weights + pool
    total = t.gpu.memory_bytes
    # rest = free_after - free_before x (1 - f) = f x total - weights (nothing used before
    # load): the smallest f, in thousandths, whose rest holds the pool
    fraction = cdiv(required * 1000, total)
    # SGLang's own default keeps (1 - f) x total for activations and CUDA graphs: a fraction
    # above it starves them, and one of 1 or more is not a fraction at all
    ceiling = Fraction(repr(sglang.mem_fraction_static_auto(total, tp=t.tp)))
    fits = Fraction(fraction, 1000) <= ceiling
    budget = fraction_of(total, ceiling)
    flags = [f"--max-total-tokens={tokens}", f"--mem-fraction-static={_thousandths(fraction)}"]
    quant_note = _shared_flags(flags, t, "--tp", kv_value, "--quantization")
    note = (
        f"{tokens:,} tokens x {cell:,} B; {_sum(('weights', weights), ('pool', pool))}"
        f" of {_gib(total)}; SGLang's own default {float(ceiling):.3f}{quant_note}"
    )
    reason = (
        ""
        if fits
        else f"needs a --mem-fraction-static of {_thousandths(fraction)}, above the"
        f" {float(ceiling):.3f} that leaves SGLang its reserve for activations and CUDA graphs"
    )
    return _verdict(
        "sglang",
        t,
        cache,
        tuple(flags),
        pool,
        fits,
        note,
        weights=weights,
        required=required,
        budget=budget,
        reason=reason,
    )


def _llamacpp_cache(t: Target, model: DType) -> tuple[CacheDTypes, str]:
    """The cache llama.cpp is told to keep, and a problem ("" when it has that type)."""
    if t.kv is None:
        f16 = resolve_dtype("float16")
        return CacheDTypes(
            model, f16, f16, "llama.cpp caches in f16 unless -ctk/-ctv say otherwise"
        ), ""
    asked = resolve_dtype(t.kv)
    if asked.name in _GGML_8BIT:
        q8 = resolve_dtype("q8_0")
        reason = f"q8_0 for {t.kv}: llama.cpp has no 8-bit float or int8 cache type"
        return CacheDTypes(model, q8, q8, reason), ""
    if asked.name not in _GGML_KV:
        allowed = ", ".join(_GGML_KV.values())
        return CacheDTypes(model, asked, asked, f"cache dtype {asked.name} as given"), (
            f"llama.cpp has no {asked.name} cache (-ctk/-ctv take {allowed})"
        )
    return CacheDTypes(model, asked, asked, f"cache {_GGML_KV[asked.name]} as given"), ""


def _llamacpp(t: Target) -> EngineFlags:
    """llama.cpp's verdict is ``kvplan plan --engine llama.cpp``'s for the same setting
    (``llamacpp_plan.budget``: every layer on the GPUs, compute and output buffers, the
    ``--fit-target`` headroom), so flags and plan give one answer."""
    from kvplan.engines.llamacpp_plan import LlamaCppAsk, budget

    model = cache_dtypes(t.spec, "llama.cpp").model
    cache, problem = _llamacpp_cache(t, model)
    problem = problem or _llamacpp_limits(t)
    if problem:
        return _refused("llama.cpp", t, cache, problem)
    cache_type = _GGML_KV[cache.k.name]
    ask = LlamaCppAsk(
        model=t.model_as_typed or t.spec.resolved_from or t.spec.name,
        n_ctx=t.n * t.length,
        n_seq_max=t.n,
        n_gpu_layers=t.spec.num_hidden_layers + 1,
        num_gpus=t.tp,
        type_k=cache_type,
        type_v=cache_type,
    )
    try:
        plan = budget(t.spec, t.gpu, ask)
    except UnitError as e:  # a setting llama.cpp itself refuses (-np past 256, 17 GPUs)
        return _refused("llama.cpp", t, cache, str(e))
    index, fullest = max(enumerate(plan.layout.gpus), key=lambda g: g[1].total_bytes)
    required = fullest.total_bytes + plan.headroom_bytes
    fits = plan.fits
    _, quant_note = _quantization_note(t, None)
    where = f"GPU {index + 1} of {t.tp} holds {fullest.num_layers} layers; " if t.tp > 1 else ""
    parts = [("weights", fullest.model_bytes), ("cache", fullest.kv_bytes)]
    parts += [
        (label, num_bytes)
        for label, num_bytes in (
            ("compute", fullest.compute_bytes),
            ("output", fullest.output_bytes),
            ("headroom", plan.headroom_bytes),
        )
        if num_bytes
    ]
    figures = _sum(*parts)
    note = f"{where}{figures} of {_gib(plan.capacity_bytes)}{quant_note}"
    if fits and plan.source.note:
        note += f"; {plan.source.note}"
    return EngineFlags(
        "llama.cpp",
        _llamacpp_flags(t, cache_type) if fits else (),
        plan.kv.kv_cache_bytes,
        fits,
        note,
        reason="" if fits else f"needs {_gib(required)} on one GPU of {_gib(plan.capacity_bytes)}",
        model_dtype=model.name,
        kv_cache_dtype=cache.kv_dtype,
        dtype_reason=cache.reason,
        weights_bytes=fullest.model_bytes,
        required_bytes=required,
        budget_bytes=plan.capacity_bytes,
        num_gpus=t.tp,
    )


def _llamacpp_limits(t: Target) -> str:
    """Why llama.cpp cannot take ``-c N x L`` at all ("" when it can); ``-np`` past
    ``LLAMA_MAX_SEQ`` and too many GPUs are ``llamacpp_plan.budget``'s to refuse."""
    if t.n * t.length >= 2**32:
        return f"-c {t.n * t.length}: beyond llama.cpp's 32-bit n_ctx"
    return ""


def _llamacpp_flags(t: Target, cache_type: str) -> tuple[str, ...]:
    from kvplan.engines.llamacpp_plan import model_source

    flags = [f"-c {t.n * t.length}", f"-np {t.n}", f"-ctk {cache_type}", f"-ctv {cache_type}"]
    if cache_type not in ("f16", "bf16", "f32"):
        flags.append("-fa on")  # a quantized V cache needs flash attention
    flags.append("-ngl 999")  # every layer on the GPUs, as the verdict counts them
    if t.tp > 1:
        flags.append("-sm layer")
    # What -m (or -hf) loads, decided as kvplan plan --engine llama.cpp decides it; last, so
    # the flags before it keep their places. A placeholder's note is in the verdict's note.
    typed = t.model_as_typed or t.spec.resolved_from or t.spec.name
    flags.append(" ".join(model_source(typed, t.spec).args))
    return tuple(flags)


def _tgi(t: Target) -> EngineFlags:
    cache, kv_value, refused = _admit("tgi", _TGI_KV, t)
    if refused is not None:
        return refused
    weights = cdiv(_weights(t, cache).total_bytes, t.tp)
    total = t.gpu.memory_bytes
    result = tgi.kv_cache(
        t.spec,
        t.gpu,
        free_bytes_after_warmup=max(0, total - weights),
        kv_cache_dtype=cache.k.name,
        tp=t.tp,
    )
    block = int(result.engine_log["total_cache_size"])
    num_blocks = result.num_blocks or 0
    need_blocks = t.n * cdiv(t.length, _TGI_BLOCK_SIZE)
    fits = num_blocks >= need_blocks
    required = weights + need_blocks * block
    # TGI 3.x: free - (1 - fraction x wiggle) x total, with --cuda-memory-fraction 1
    budget = fraction_of(total, tgi.WIGGLE_ROOM)
    flags = [
        f"--max-batch-total-tokens={t.n * t.length}",
        f"--max-total-tokens={t.length}",
        f"--max-concurrent-requests={t.n}",
    ]
    quant_note = _shared_flags(flags, t, "--num-shard", kv_value, "--quantize")
    note = (
        f"{need_blocks:,} blocks of {block:,} B needed, {num_blocks:,} fit beside"
        f" {_gib(weights)} of weights in 0.9 x {_gib(total)}; warm-up not counted{quant_note}"
    )
    return _verdict(
        "tgi",
        t,
        cache,
        tuple(flags),
        result.kv_cache_bytes,
        fits,
        note,
        weights=weights,
        required=required,
        budget=budget,
    )
