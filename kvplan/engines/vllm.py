"""vLLM's V1 engine: how it budgets memory, pages its KV cache, and what it prints.

Rules read for vLLM v0.10 to v0.19 (vllm/v1/core/kv_cache_utils.py,
vllm/v1/kv_cache_interface.py, vllm/v1/worker/gpu_worker.py, vllm/config/cache.py):

- Budget per GPU: ``requested = total x gpu_memory_utilization``; ``available = requested -
  weights - peak activation - non-torch memory``. Up to v0.20 CUDA graphs are captured after
  the KV cache is sized, out of the ``1 - utilization`` headroom; from v0.21.0 their profiled
  estimate is subtracted too (kvplan.engines.vllm_cudagraph, 0 with ``enforce_eager``).
  ``--kv-cache-memory`` replaces ``available``.
- Pages: each attention layer stores ``block_size`` tokens per page:
  ``block_size x kv_heads_per_rank x head_size x 2 (K, V) x dtype bytes``; an MLA layer stores
  one latent: ``block_size x (kv_lora_rank + qk_rope_head_dim) x dtype bytes``.
- Groups: layers with the same cache spec form a type; hybrid models cut each type into groups
  of ``group_size`` layers (the smallest type's count, or the largest's when it is under 1.5x the
  smallest), padding the last group. ``num_blocks = available // page // group_size``, the
  minimum over pipeline stages.
- Printed: ``GPU KV cache size: {num_blocks // num_groups x block_size:,} tokens`` and
  ``Maximum concurrency for {max_model_len:,} tokens per request: {x:.2f}x`` with
  ``x = num_blocks / sum over groups of blocks one request needs``: a full group
  ``cdiv(max_model_len, block_size)``; a sliding group
  ``cdiv(min(window - 1 + max_num_batched_tokens, max_model_len), block_size) + 1``; a chunked
  group ``cdiv(min(chunk + max_num_batched_tokens, max_model_len), block_size)``.

Worked example (Llama 3.1 8B, H100, the logged available 58.11 GiB): a page is 16 x 8 x 128
x 2 x 2 B = 65,536 B; 32 layers in one group; 29,751 blocks x 16 = 476,016 tokens; a request of
8,192 tokens needs 512 blocks, so 29,751 / 512 = 58.11x.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from fractions import Fraction

from kvplan.arguments import as_fraction, as_instance, as_parallel
from kvplan.catalog.lookup import as_spec
from kvplan.engines.base import EngineResult
from kvplan.engines.vllm_config import VllmConfig as VllmConfig
from kvplan.engines.vllm_config import with_batch_defaults
from kvplan.engines.vllm_flags import Settings, resolve
from kvplan.engines.vllm_layout import (  # re-exported: callers read them from here
    FP8_DS_MLA_TOKEN_BYTES as FP8_DS_MLA_TOKEN_BYTES,
)
from kvplan.engines.vllm_layout import PER_TOKEN_HEAD as PER_TOKEN_HEAD
from kvplan.engines.vllm_layout import PageSpec as PageSpec
from kvplan.engines.vllm_layout import align_to_state_pages, part_owners, unify_page_sizes
from kvplan.engines.vllm_layout import kv_cache_groups as kv_cache_groups
from kvplan.engines.vllm_layout import page_spec as page_spec
from kvplan.engines.vllm_layout import page_specs as page_specs
from kvplan.engines.vllm_lora import lora_parts
from kvplan.engines.vllm_multimodal import EncoderProfile, encoder_profile, text_weights_spec
from kvplan.engines.vllm_overhead import Overhead as Overhead
from kvplan.engines.vllm_overhead import calibrated
from kvplan.engines.vllm_overhead import estimate_overhead as estimate_overhead
from kvplan.engines.vllm_speculative import (
    check_line,
    draft_layers,
    draft_weight_bytes,
    retained_tokens,
    with_default_tokens,
    with_speculative_tail,
)
from kvplan.engines.vllm_versions import (  # the release lines, re-exported for callers
    DEFAULT_VERSION as DEFAULT_VERSION,
)
from kvplan.engines.vllm_versions import (
    FLOAT32_SSM_STATE,
    HOLDS_NULL_BLOCK,
    KERNEL_BLOCK_TOKENS,
    ONE_LOG_LINE,
    SLIDING_KERNEL_BLOCK,
    TOKENS_FROM_CONCURRENCY,
)
from kvplan.engines.vllm_versions import VERSIONS as VERSIONS
from kvplan.engines.vllm_versions import VersionChoice as VersionChoice
from kvplan.engines.vllm_versions import resolve_version as resolve_version
from kvplan.errors import UnitError, UnknownEngineError
from kvplan.hardware.gpus import GPU
from kvplan.hardware.lookup import as_gpu
from kvplan.model.dtypes import cache_dtypes, served_dtype
from kvplan.model.layers import AttentionAndState, LayerCache, RecurrentState
from kvplan.model.spec import ModelSpec
from kvplan.model.stages import Stage, as_tensor_parallel_size, walk_stages
from kvplan.model.weights import Weights, pipeline_partition, weights_for_pool
from kvplan.units import FLOAT_DTYPES, GiB, cdiv, fraction_of, resolve_dtype


@dataclass(frozen=True, slots=True)
class StageResult:
    index: int
    first_layer: int
    last_layer: int
    overhead: Overhead
    available_bytes: int
    num_blocks: int


@dataclass(frozen=True, slots=True)
class VllmResult:
    """The modelled start-up of vLLM for one deployment: per stage, and what it prints."""

    config: VllmConfig
    stages: tuple[StageResult, ...]
    page_bytes: int
    num_groups: int
    group_size: int
    block_size: int
    num_gpu_blocks: int
    gpu_kv_cache_tokens: int
    blocks_per_request: int
    max_concurrency: Fraction
    padding_layers: int
    groups: tuple[tuple[PageSpec, int], ...]
    settings: Settings | None = None
    encoder: EncoderProfile | None = None  # a multimodal model's (kvplan.engines.vllm_multimodal)

    @property
    def available_bytes(self) -> int:
        """What the first worker prints as ``Available KV cache memory``."""
        return self.stages[0].available_bytes

    @property
    def max_requests(self) -> int:
        """Requests of ``max_model_len`` the pool holds at once, as vLLM's fit check counts."""
        return self.fit_blocks // self.blocks_per_request

    @property
    def fit_blocks(self) -> int:
        """Blocks vLLM counts when deciding whether a request fits: all of them, or from 0.32
        all but the null block. A pool of exactly one request's blocks is refused there."""
        held_back = 1 if self.config.version in HOLDS_NULL_BLOCK else 0
        return max(0, self.num_gpu_blocks - held_back)

    def log_lines(self) -> tuple[str, ...]:
        size = f"GPU KV cache size: {self.gpu_kv_cache_tokens:,} tokens"
        concurrency = (
            f"Maximum concurrency for {self.config.max_model_len:,} tokens per request:"
            f" {float(self.max_concurrency):.2f}x"
        )
        available = f"Available KV cache memory: {self.available_bytes / GiB:.2f} GiB"
        encoder = self.encoder.log_line() if self.encoder is not None else None
        if self.config.version not in ONE_LOG_LINE:
            return (available, size, concurrency)
        lines = [encoder] if encoder else []  # printed by the profile, before the pool
        lines.append(available)  # from 0.28: the pool and the concurrency on one line
        override = self.config.num_gpu_blocks_override
        if override is not None:
            computed = min(s.num_blocks for s in self.stages)
            lines.append(
                f"Overriding num_gpu_blocks={computed} with num_gpu_blocks_override={override}"
            )
        return (*lines, f"{size}, {concurrency}")

    def to_engine_result(self) -> EngineResult:
        log: dict[str, int | float | str] = {
            "num_gpu_blocks": self.num_gpu_blocks,
            "gpu_kv_cache_tokens": self.gpu_kv_cache_tokens,
            "max_concurrency": round(float(self.max_concurrency), 2),
            "available_kv_cache_gib": round(self.available_bytes / GiB, 2),
        }
        if self.encoder is not None and self.encoder.modality is not None:
            log["encoder_cache_budget_tokens"] = self.encoder.budget_tokens
            log["encoder_cache_bytes"] = self.encoder.cache_bytes  # held while it profiles
        if self.fit_blocks < self.blocks_per_request:
            # vLLM refuses to start and prints the longest max_model_len that would fit
            log["estimated_max_model_len"] = estimated_max_model_len(self)
        return EngineResult(
            engine="vllm",
            engine_version=self.config.version,
            kv_cache_bytes=self.num_gpu_blocks * self.page_bytes * self.group_size,
            num_blocks=self.num_gpu_blocks,
            block_size=self.block_size,
            kv_cache_tokens=self.gpu_kv_cache_tokens,
            engine_log=log,
            log_lines=self.log_lines(),
        )


def _served_dtype(spec: ModelSpec, cfg: VllmConfig) -> str:
    """The dtype vLLM runs the model in (``kvplan.model.dtypes``: ``--dtype``, else ``auto``)."""
    return served_dtype(spec, "vllm", dtype=cfg.dtype)[0].name


def profile(spec: ModelSpec | str, gpu: GPU | str, cfg: VllmConfig) -> VllmResult:
    """vLLM's start-up for ``spec`` on ``gpu``: budget, blocks, and its printed figures.
    ``spec`` and ``gpu`` may be names; a wrong type raises ArgumentTypeError (a TypeError)."""
    spec, gpu = as_spec(spec), as_gpu(gpu)
    as_instance(cfg, VllmConfig, "cfg", "a VllmConfig (from vllm_config)")
    if cfg.version not in VERSIONS:
        raise UnknownEngineError(
            f"vLLM {cfg.version} is not modelled; modelled: {', '.join(VERSIONS)}"
            " (resolve_version maps a release such as 0.19.1 to its line)"
        )
    cfg = with_batch_defaults(cfg, None if gpu.name == _GIVEN else gpu)
    tp, pp = cfg.tensor_parallel_size, cfg.pipeline_parallel_size
    if cfg.calibration is not None:
        cfg.calibration.check_site(gpu.name, cfg.version, tp, pp)
    as_tensor_parallel_size(spec, tp)
    if as_parallel(pp, "pipeline_parallel_size") > spec.num_hidden_layers:
        raise UnitError(
            f"pipeline_parallel_size {pp}: more stages than {spec.num_hidden_layers} layers"
        )
    served = _served_dtype(spec, cfg)
    layer_specs, groups, group_size, padding = layout(spec, cfg, gpu)
    page = groups[0][0].page_bytes
    pool_given = cfg.kv_cache_memory_bytes is not None
    encoder = encoder_profile(spec, cfg, served)
    loaded = text_weights_spec(spec, encoder)  # without a skipped tower's weights
    weights = weights_for_pool(loaded, served, cfg.quantization, pool_given=pool_given)
    held = encoder.cache_bytes if encoder is not None else 0  # embeddings during the profile
    usable = fraction_of(gpu.memory_bytes, cfg.gpu_memory_utilization)
    counts = pipeline_partition(spec.num_hidden_layers, pp)
    stages = []
    for stage in walk_stages(spec, counts, weights, tp):
        drafter = _draft_weight_bytes(spec, cfg, weights, served) if stage.is_last else 0
        overhead = _stage_overhead(spec, cfg, gpu, stage, (drafter, held))
        available = cfg.kv_cache_memory_bytes
        if available is None:
            available = max(0, usable - overhead.total_bytes)
        first, last = stage.first_layer, stage.last_layer
        owners = part_owners(cache_layers(spec, cfg))
        # a drafter's layers (after the target's) run on the last stage
        span = (first, owners[-1] if stage.is_last else last)
        stage_group_size = _stage_group_size(layer_specs, owners, groups, group_size, span)
        stages.append(
            StageResult(
                stage.index, first, last, overhead, available, available // page // stage_group_size
            )
        )
    num_blocks = min(s.num_blocks for s in stages)
    if cfg.num_gpu_blocks_override is not None:
        num_blocks = cfg.num_gpu_blocks_override  # every worker's pool, whatever was profiled
    result = _result(cfg, tuple(stages), groups, group_size, padding, num_blocks)
    return replace(result, settings=settings(spec, cfg, gpu), encoder=encoder)


def _stage_overhead(
    spec: ModelSpec, cfg: VllmConfig, gpu: GPU, stage: Stage, extra: tuple[int, int]
) -> Overhead:
    """One stage's modelled profile, with ``extra`` = (the drafter's weights, an encoder's
    embeddings held through the profiling run) added to its weights and activation."""
    overhead = estimate_overhead(
        spec,
        cfg,
        samples=stage.is_last,
        weights_bytes=stage.weights_bytes,
        gpu_name=gpu.name,
        num_layers=stage.num_layers,
        pcie_only=_pcie_only(gpu),
    )
    if cfg.calibration is not None:
        overhead = calibrated(overhead, cfg.calibration)
    drafter, held = extra
    return replace(
        overhead,
        weights_bytes=overhead.weights_bytes + drafter + _lora_bytes(spec, cfg, stage),
        activation_bytes=overhead.activation_bytes + held,
    )


def _lora_bytes(spec: ModelSpec, cfg: VllmConfig, stage: Stage) -> int:
    """The LoRA stacks on one GPU of ``stage`` (kvplan.engines.vllm_lora): its layers', the
    embeddings' on the first stage, the head's on the last."""
    if cfg.lora is None:
        return 0
    layer, embed, head = lora_parts(spec, cfg.lora, cfg.tensor_parallel_size)
    first = embed if stage.index == 0 else 0
    return layer * stage.num_layers + first + (head if stage.is_last else 0)


def _ssm_cache_dtype(spec: ModelSpec, cfg: VllmConfig) -> str | None:
    """``--mamba-ssm-cache-dtype``: as given; auto keeps the state in the model dtype, except
    for the model types a version keeps in float32."""
    if cfg.mamba_ssm_cache_dtype not in (None, "auto"):
        name = resolve_dtype(cfg.mamba_ssm_cache_dtype).name
        if name not in FLOAT_DTYPES:
            raise UnitError(
                f"--mamba-ssm-cache-dtype {cfg.mamba_ssm_cache_dtype!r}: vLLM takes auto,"
                f" {', '.join(FLOAT_DTYPES)}"
            )
        return name
    if spec.model_type in FLOAT32_SSM_STATE.get(cfg.version, ()):
        return "float32"
    if spec.conv_dtype is not None:
        # a state kept apart from its conv tail (Kimi delta attention: mamba_utils.py
        # kda_state_dtype keeps it in float32 under auto, the tail in the model dtype)
        return spec.state_dtype
    return None


def layout(
    spec: ModelSpec, cfg: VllmConfig, gpu: GPU | None = None
) -> tuple[list[PageSpec | None], list[tuple[PageSpec, int]], int, int]:
    """vLLM's cache layout of ``spec``: each cache layer's page spec (None: no cache; a layer
    with attention and state gives two, ``part_owners``), the groups, the layers per group,
    and the padding layers. Needs no budget (nor a GPU: unset batch defaults are a large
    GPU's, ``with_batch_defaults``); ``gpu`` picks the kernels that size blocks (v0.33's
    gated-delta-net checkpoints, ``vllm_flags.gdn_checkpoints``)."""
    cfg = with_batch_defaults(cfg, None)
    served = _served_dtype(spec, cfg)
    model_dtype = resolve_dtype(served)
    cache_format = cfg.kv_cache_dtype or model_dtype.name
    state_dtype = resolve_dtype(_ssm_cache_dtype(spec, cfg) or model_dtype.name)
    tp = cfg.tensor_parallel_size
    flags = settings(spec, cfg, gpu)
    layer_specs = align_to_state_pages(
        [
            part
            for layer in cache_layers(spec, cfg)
            for part in page_specs(
                layer, tp, cache_format, cfg.block_size, state_dtype, model_dtype
            )
        ],
        flags.chunk_tokens or flags.checkpoint_tokens,
    )
    if cfg.version == "0.8":
        # no hybrid manager yet: every attention layer keeps every token (one group)
        if any(s is not None and s.kind == "mamba" for s in layer_specs):
            raise UnitError("vLLM 0.8 (V1) does not serve models with recurrent state")
        layer_specs = [
            None if s is None else replace(s, kind="mla" if s.kind == "mla" else "full", window=0)
            for s in layer_specs
        ]
    cached = [s for s in layer_specs if s is not None]
    if cfg.version in SLIDING_KERNEL_BLOCK and cached and all(s.kind == "sliding" for s in cached):
        # v0.25-v0.29: a model whose every layer slides keeps the attention backend's smallest
        # kernel block, whatever --block-size says (Mistral 7B v0.1 at 128 ran on 16 in 0.27.1)
        layer_specs = [
            None if s is None else replace(s, block_size=KERNEL_BLOCK_TOKENS) for s in layer_specs
        ]
    mamba2 = spec.mamba_n_heads is not None
    all_mode = flags.mamba_cache_mode == "all"
    drafts, retained = _speculative_blocks(spec, cfg)
    layer_specs = [
        None
        if s is None
        else replace(
            s, state_blocks=flags.state_blocks(mamba2), per_block=all_mode, spec_blocks=drafts
        )
        if s.kind == "mamba"
        else replace(s, in_flight=flags.in_flight_tokens, retained=retained)
        if s.kind in ("sliding", "chunked")
        else s
        for s in layer_specs
    ]
    layer_specs = unify_page_sizes(layer_specs)
    cached = [s for s in layer_specs if s is not None]
    groups, group_size, padding = kv_cache_groups(cached)
    if not groups:
        raise UnitError(f"{spec.name} keeps no KV cache: nothing for vLLM to page")
    return layer_specs, groups, group_size, padding


def cache_layers(spec: ModelSpec, cfg: VllmConfig) -> tuple[LayerCache, ...]:
    """The layers vLLM gives a cache spec, in the order it registers them: the target's,
    their conv tails k positions longer with a drafter, then the drafter's
    (kvplan.engines.vllm_speculative)."""
    if cfg.speculative is None:
        return spec.layers
    speculative = with_default_tokens(cfg.speculative, spec)
    k = speculative.num_speculative_tokens
    target = tuple(with_speculative_tail(layer, spec, k) for layer in spec.layers)
    return target + draft_layers(speculative, spec)


def _draft_weight_bytes(spec: ModelSpec, cfg: VllmConfig, weights: Weights, served: str) -> int:
    """The drafter's weights on one GPU (kvplan.engines.vllm_speculative): MTP modules sized
    from the target's layers, a separate drafter from its own spec, split by TP."""
    if cfg.speculative is None:
        return 0
    speculative = with_default_tokens(cfg.speculative, spec)
    tp = cfg.tensor_parallel_size
    if speculative.draft is not None:
        pool_given = cfg.kv_cache_memory_bytes is not None
        own = weights_for_pool(speculative.draft, served, None, pool_given=pool_given)
        return cdiv(own.total_bytes, tp)
    dtype_bytes = resolve_dtype(served).block_bytes
    return cdiv(draft_weight_bytes(speculative, spec, weights.layers_bytes, dtype_bytes), tp)


def _pcie_only(gpu: GPU) -> bool:
    """Whether the catalog's system for ``gpu`` joins its GPUs over PCIe alone."""
    from kvplan.hardware.systems import system_for_gpu

    system = system_for_gpu(gpu)
    return system is not None and system.pcie_only


def _speculative_blocks(spec: ModelSpec, cfg: VllmConfig) -> tuple[int, int]:
    """The state blocks a request holds for its draft tokens, and the tokens sliding layers
    keep below their window, with ``cfg``'s drafter (0 and 0 without)."""
    if cfg.speculative is None:
        return 0, 0
    check_line(cfg.version, cfg.pipeline_parallel_size)
    speculative = with_default_tokens(cfg.speculative, spec)
    return speculative.num_speculative_tokens, retained_tokens(speculative, spec, cfg.version)


def settings(spec: ModelSpec, cfg: VllmConfig, gpu: GPU | None = None) -> Settings:
    """What vLLM's own flags resolve to for ``spec`` on ``gpu`` (kvplan.engines.vllm_flags)."""
    # Falcon-H1 and Zamba2 layers run a Mamba2 mixer beside attention: vLLM's is_hybrid
    recurrent = any(isinstance(layer, RecurrentState | AttentionAndState) for layer in spec.layers)
    name = None if gpu is None else gpu.name
    return resolve(spec, with_batch_defaults(cfg, None), recurrent=recurrent, gpu_name=name)


def _stage_group_size(
    layer_specs: Sequence[PageSpec | None],
    owners: Sequence[int],
    groups: Sequence[tuple[PageSpec, int]],
    group_size: int,
    stage: tuple[int, int],
) -> int:
    """Layers per group on the stage holding layers ``first..last``: vLLM projects the global
    groups onto each worker. A type's layers are dealt round-robin into its groups
    (``layers[i::num_groups]``), so each stage keeps a share of every group. ``owners``:
    the decoder layer of each cache layer; ``stage``: its first and last decoder layer."""
    first, last = stage
    if first == 0 and last == owners[-1]:
        return group_size
    largest = 0
    for spec in dict.fromkeys(g for g, _ in groups):
        members = [i for i, s in enumerate(layer_specs) if s == spec]
        num_groups = sum(1 for g, _ in groups if g == spec)
        for j in range(num_groups):
            on_stage = sum(1 for i in members[j::num_groups] if first <= owners[i] <= last)
            largest = max(largest, on_stage)
    return max(1, largest)


#: The device of ``from_available``: none known, so the batch defaults of a large GPU apply.
_GIVEN = "given"


def from_available(spec: ModelSpec, available_bytes: int, cfg: VllmConfig) -> VllmResult:
    """vLLM's blocks and printed figures given the KV memory it reported as available."""
    device = GPU(_GIVEN, "a GPU", "unknown", 0, 0, 0, None, "given")
    return profile(spec, device, replace(cfg, kv_cache_memory_bytes=available_bytes))


def _result(
    cfg: VllmConfig,
    stages: tuple[StageResult, ...],
    groups: Sequence[tuple[PageSpec, int]],
    group_size: int,
    padding: int,
    num_blocks: int,
) -> VllmResult:
    per_request = sum(spec.blocks_per_request(cfg) for spec, _ in groups)
    block_size = min(spec.block_size for spec, _ in groups)
    if cfg.version == "0.8":
        tokens = num_blocks * block_size
        concurrency = Fraction(tokens, cfg.max_model_len)
    else:
        concurrency = Fraction(num_blocks, per_request)
        if cfg.version in TOKENS_FROM_CONCURRENCY:
            tokens = num_blocks * cfg.max_model_len // per_request  # int(concurrency x length)
        else:
            tokens = num_blocks // len(groups) * block_size
    return VllmResult(
        config=cfg,
        stages=stages,
        page_bytes=groups[0][0].page_bytes,
        num_groups=len(groups),
        group_size=group_size,
        num_gpu_blocks=num_blocks,
        block_size=block_size,
        gpu_kv_cache_tokens=tokens,
        blocks_per_request=per_request,
        max_concurrency=concurrency,
        padding_layers=padding,
        groups=tuple(groups),
    )


def config(
    max_model_len: int,
    *,
    gpu_memory_utilization: float | str | Fraction = Fraction(9, 10),
    **kwargs: object,
) -> VllmConfig:
    """A ``VllmConfig`` from vLLM's own flag names (``tensor_parallel_size``, ``block_size``...)."""
    return VllmConfig(
        max_model_len=max_model_len,
        gpu_memory_utilization=as_fraction(gpu_memory_utilization, "gpu_memory_utilization"),
        **kwargs,  # type: ignore[arg-type]
    )


def estimated_max_model_len(result: VllmResult, concurrency: int = 1) -> int:
    """The longest ``max_model_len`` that ``concurrency`` requests can each reach, by binary
    search as vLLM estimates it when one request of the configured length does not fit:
    ``concurrency x blocks one request needs <= num_gpu_blocks``."""
    cfg = result.config
    lo, hi = 0, cfg.max_model_len
    while lo < hi:
        mid = (lo + hi + 1) // 2
        probe = replace(cfg, max_model_len=mid)
        blocks = sum(page.blocks_per_request(probe) for page, _ in result.groups)
        if concurrency * blocks <= result.fit_blocks:
            lo = mid
        else:
            hi = mid - 1
    return lo


def v0_num_gpu_blocks(
    spec: ModelSpec,
    kv_cache_bytes: int,
    *,
    block_size: int = 16,
    tensor_parallel_size: int = 1,
    kv_cache_dtype: str | None = None,
) -> int:
    """The legacy V0 engine's ``# GPU blocks`` (vLLM up to about v0.6, vllm/worker/worker.py).

    V0 sizes ``kv_cache_size = total x gpu_memory_utilization - peak memory`` from a profile run
    of ``max_num_batched_tokens`` tokens (equal to max_model_len without chunked prefill, so the
    pool shrinks as max_model_len grows), and one block spans every layer:
    ``num_gpu_blocks = kv_cache_size // (block_size x per-token bytes of all layers)``.
    Llama 3.1 8B: 16 x 131,072 B = 2 MiB a block; 3.81 GiB -> 1,952 blocks.
    """
    dtype = cache_dtypes(spec, "vllm", kv_cache_dtype=kv_cache_dtype).k
    per_block = 0
    for layer in spec.layers:
        for page in page_specs(layer, tensor_parallel_size, dtype.name, block_size, dtype):
            per_block += page.page_bytes if page is not None else 0
    if per_block == 0:
        raise UnitError(f"{spec.name} keeps no KV cache: nothing for vLLM to page")
    return kv_cache_bytes // per_block
