"""vLLM's own flags that change its KV cache, per release line: which line has each flag, its
default there, and the settings they resolve to.

Read from vLLM v0.32's source:

- ``--enable-prefix-caching`` (vllm/config/cache.py: on by default; vllm/engine/arg_utils.py
  keeps it on for every generating model, hybrids included). With recurrent state (Mamba,
  gated delta net) it switches the state to the *align* mode (MambaModelConfig in
  vllm/model_executor/models/config.py): a request then holds ``2`` state blocks
  (vllm/v1/kv_cache_interface.py, ``MambaSpec.max_memory_usage_bytes``), plus one prefill
  checkpoint block for Mamba2 layers (vllm/model_executor/layers/mamba/mamba_mixer2.py), in
  place of one.
- ``--mamba-cache-mode`` (``none`` or ``align``): 0.32 sets it from prefix caching whatever is
  given (``none`` becomes ``align`` with prefix caching; ``align`` becomes ``none`` without).
- ``--async-scheduling`` (vllm/config/vllm.py: on by default on GPUs). Sliding-window and
  chunked layers reserve for the tokens in flight: ``max_num_batched_tokens x`` the concurrent
  batches, which are ``2`` with async scheduling on one stage, ``pp + 1`` with it on ``pp``
  stages (the V2 model runner), else ``pp``.
- ``--num-gpu-blocks-override`` (vllm/v1/core/kv_cache_utils.py, ``get_kv_cache_configs``):
  the pool is that many blocks on every worker, whatever memory was profiled; vLLM logs
  ``Overriding num_gpu_blocks=N with num_gpu_blocks_override=M`` and plans against it.

When each rule arrived (read from each release's source; kvplan/engines/vllm_versions.py
``RULES``): hybrids take prefix caching by default from v0.26.0 (vllm/config/model.py; off
before); sliding and chunked layers reserve for the batches in flight from v0.26.0; before
v0.28.0 prefix caching put the models that have Mamba prefix caching (``ALL_MODE_MODELS``) in
the *all* mode and the others in the align mode; the Mamba2 prefill checkpoint block
arrived in v0.29.0. The 0.19 to 0.25 lines take ``--enable-prefix-caching`` and
``--num-gpu-blocks-override`` (prefix caching on a model with recurrent state is refused
there); ``--async-scheduling`` is modelled from the 0.27 line and ``--mamba-cache-mode`` from
the 0.28 line. The 0.8 line takes ``--num-gpu-blocks-override`` and ``--enable-prefix-caching``
(no recurrent state).

The *all* mode (v0.26.0-v0.27.x, read from 0.27.1): a request holds a state block per
``block_size`` tokens of ``max_model_len``, ``cdiv(max_model_len, block_size)`` per state group
(vllm/v1/kv_cache_interface.py, ``MambaSpec.max_memory_usage_bytes``), where ``block_size`` is
the attention block raised to hold a state page in whole Mamba chunks
(vllm/platforms/interface.py, ``_align_hybrid_block_size``): ``unit x cdiv(state page,
unit x attention token bytes)`` with ``unit = lcm(chunk, --block-size)`` and ``chunk`` the
config's ``chunk_size`` or ``mamba_chunk_size``, 2,048 when it names none
(vllm/config/model.py, ``get_mamba_chunk_size``). A model without attention keeps
``--block-size``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvplan.engines.vllm_cudagraph import BLACKWELL_DATACENTER
from kvplan.engines.vllm_versions import GDN_CHECKPOINT_LINES, VERSIONS
from kvplan.errors import UnitError

if TYPE_CHECKING:
    from kvplan.engines.vllm_config import VllmConfig
    from kvplan.model.spec import ModelSpec

#: the lines that model each flag
FLAG_LINES = {
    "--enable-prefix-caching": VERSIONS,
    "--async-scheduling": ("0.27", "0.28", "0.29", "0.32", "0.33"),
    "--mamba-cache-mode": ("0.28", "0.29", "0.32"),
    "--num-gpu-blocks-override": VERSIONS,
}
MAMBA_CACHE_MODES = ("none", "align")
#: lines whose prefix caching puts recurrent state in the align mode (read in v0.24.0, v0.25.0
#: and v0.27.1 on; before v0.28 only for models outside ALL_MODE_MODELS). The 0.20 and older
#: lines are not read
ALIGN_MODE_LINES = ("0.24", "0.25", "0.27", "0.28", "0.29", "0.32", "0.33")
#: lines where prefix caching is on by default for hybrids too (v0.26.0)
HYBRID_PREFIX_BY_DEFAULT = ("0.27", "0.28", "0.29", "0.32", "0.33")
#: lines whose prefix caching puts the models that implement Mamba prefix caching in the all
#: mode (vllm/model_executor/models/config.py, MambaModelConfig, the same in v0.24.0, v0.25.0
#: and v0.27.1), and those models' types (the SupportsMambaPrefixCaching classes of
#: vllm/model_executor/models, the same seven in each)
ALL_MODE_LINES = ("0.24", "0.25", "0.27")
ALL_MODE_MODELS = (
    "falcon_h1",
    "granitemoehybrid",
    "jamba",
    "mamba",
    "mamba2",
    "nemotron_h",
    "zamba2",
)
#: the Mamba chunk of each all-mode model type, from its config's ``chunk_size`` or
#: ``mamba_chunk_size`` (Nemotron-H 8B, 56B and Nemotron 3 Nano: 128; Falcon-H1 7B: 128;
#: Granite 4.0-H Small: 256; Zamba2's config default: 256; Mamba2's: 256); Jamba and Mamba
#: configs name none, so vLLM takes ``DEFAULT_MAMBA_CHUNK``
MAMBA_CHUNK_TOKENS = {
    "falcon_h1": 128,
    "granitemoehybrid": 256,
    "mamba2": 256,
    "nemotron_h": 128,
    "zamba2": 256,
}
DEFAULT_MAMBA_CHUNK = 2048
#: lines whose Mamba2 layers hold a prefill checkpoint block in the align mode (v0.29.0)
CHECKPOINT_BLOCK_LINES = ("0.29", "0.32", "0.33")
#: lines where async scheduling is on unless turned off (vLLM on a GPU), and where it matters
ASYNC_BY_DEFAULT = ("0.27", "0.28", "0.29", "0.32", "0.33")
#: lines whose sliding and chunked layers reserve for the batches in flight (v0.26.0)
IN_FLIGHT_LINES = ("0.27", "0.28", "0.29", "0.32", "0.33")


#: model types whose linear attention is vLLM's QwenGatedDeltaNetAttention (v0.33:
#: vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py)
QWEN_GDN_MODEL_TYPES = ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text")
#: GPUs on which vLLM 0.33 runs gated-delta-net prefill with FlashInfer's kernel
#: (``_resolve_gdn_prefill_backend``): every Hopper; Blackwell (SM 10.x and 12.x) when the
#: keys are 128 wide and CUDA is 13 or later, as in the default wheel
HOPPER_GPUS = ("h100-sxm", "h100-pcie", "h100-nvl", "h200", "h200-nvl", "h20", "h800", "gh200")
BLACKWELL_GPUS = (*BLACKWELL_DATACENTER, "rtx-5080", "rtx-5090", "rtx-pro-6000")
#: the prefill checkpoint grid of FlashInfer's GDN kernel, in tokens
GDN_CHECKPOINT_TOKENS = 64


def gdn_checkpoints(spec: ModelSpec, cfg: VllmConfig, gpu_name: str | None) -> bool:
    """Whether ``spec``'s gated delta net takes FlashInfer's prefill checkpoints on
    ``gpu_name`` (None: no GPU known, so not) on ``cfg``'s line."""
    if cfg.version not in GDN_CHECKPOINT_LINES or spec.model_type not in QWEN_GDN_MODEL_TYPES:
        return False
    if gpu_name in HOPPER_GPUS:
        return True
    return gpu_name in BLACKWELL_GPUS and spec.linear_key_head_dim == 128


@dataclass(frozen=True, slots=True)
class Settings:
    """What the flags resolve to for one model on one line.

    ``mamba_cache_mode``: None for a model without recurrent state, else ``none``, ``align``
    or ``all``. ``state_blocks``: blocks a request holds per recurrent-state group (the all
    mode's depend on the request's length: ``PageSpec.per_block``). ``in_flight_tokens``: the
    tokens sliding and chunked layers reserve beyond their window. ``checkpoint_block``: Mamba2
    layers in the align mode hold a prefill checkpoint block too; so do Qwen's gated delta nets
    on FlashInfer from v0.33 (``checkpoint_tokens``: their attention blocks grow in steps of
    that many tokens, 0 otherwise).
    """

    enable_prefix_caching: bool
    async_scheduling: bool
    mamba_cache_mode: str | None
    in_flight_tokens: int
    checkpoint_block: bool = True
    chunk_tokens: int = 0
    checkpoint_tokens: int = 0

    def state_blocks(self, mamba2: bool) -> int:
        if self.mamba_cache_mode != "align":
            return 1  # none; all: one per block, counted by PageSpec.per_block
        checkpoint = mamba2 or self.checkpoint_tokens > 0
        return 3 if checkpoint and self.checkpoint_block else 2


def check_flags(cfg: VllmConfig) -> None:
    """Refuse, in one line naming the line, a flag the chosen line does not model."""
    given = {
        "--enable-prefix-caching": cfg.enable_prefix_caching,
        "--async-scheduling": cfg.async_scheduling,
        "--mamba-cache-mode": cfg.mamba_cache_mode,
        "--num-gpu-blocks-override": cfg.num_gpu_blocks_override,
    }
    for flag, value in given.items():
        if value is not None and cfg.version not in FLAG_LINES[flag]:
            lines = ", ".join(FLAG_LINES[flag])
            raise UnitError(
                f"{flag}: not modelled for vLLM's {cfg.version} release line"
                f" (modelled for: {lines})"
            )
    if cfg.mamba_cache_mode is not None and cfg.mamba_cache_mode not in MAMBA_CACHE_MODES:
        raise UnitError(
            f"--mamba-cache-mode {cfg.mamba_cache_mode!r}: vLLM takes"
            f" {', '.join(MAMBA_CACHE_MODES)}"
        )
    if cfg.num_gpu_blocks_override is not None and cfg.num_gpu_blocks_override < 1:
        raise UnitError(
            f"--num-gpu-blocks-override {cfg.num_gpu_blocks_override}: must be at least 1"
        )


def resolve(
    spec: ModelSpec, cfg: VllmConfig, *, recurrent: bool, gpu_name: str | None = None
) -> Settings:
    """The settings ``cfg`` resolves to for ``spec`` (``recurrent``: it keeps a state) on
    ``gpu_name`` (the catalog GPU; None when no GPU is known)."""
    check_flags(cfg)
    prefix = cfg.enable_prefix_caching
    if prefix is None:
        prefix = not recurrent or cfg.version in HYBRID_PREFIX_BY_DEFAULT
    if recurrent and prefix and cfg.version not in ALIGN_MODE_LINES:
        raise UnitError(
            f"--enable-prefix-caching on {spec.name} (recurrent state): its align mode is"
            f" modelled from vLLM 0.32 back to the 0.24 line, not for the {cfg.version} line"
        )
    all_mode = cfg.version in ALL_MODE_LINES and spec.model_type in ALL_MODE_MODELS
    mode = None
    chunk = 0
    if recurrent:
        mode = "align" if prefix and cfg.version in ALIGN_MODE_LINES else "none"
        if mode == "align" and all_mode:
            mode = "all"
            chunk = MAMBA_CHUNK_TOKENS.get(spec.model_type or "", DEFAULT_MAMBA_CHUNK)
    if cfg.async_scheduling is not None:
        async_on = cfg.async_scheduling
    else:
        async_on = cfg.version in ASYNC_BY_DEFAULT
    pp = cfg.pipeline_parallel_size
    batches = 1
    if cfg.version in IN_FLIGHT_LINES:
        batches = (2 if pp == 1 else pp + 1) if async_on else pp
    checkpoint = cfg.version in CHECKPOINT_BLOCK_LINES
    in_flight = cfg.batched_tokens * batches
    grid = GDN_CHECKPOINT_TOKENS if mode == "align" and gdn_checkpoints(spec, cfg, gpu_name) else 0
    return Settings(prefix, async_on, mode, in_flight, checkpoint, chunk, grid)
