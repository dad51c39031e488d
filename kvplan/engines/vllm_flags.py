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
the *all* mode, a state block per ``block_size`` tokens, which kvplan does not model (refused,
with the way out), and the others in the align mode; the Mamba2 prefill checkpoint block
arrived in v0.29.0. The 0.19 to 0.25 lines take ``--enable-prefix-caching`` and
``--num-gpu-blocks-override`` (prefix caching on a model with recurrent state is refused
there); ``--async-scheduling`` is modelled from the 0.27 line and ``--mamba-cache-mode`` from
the 0.28 line. The 0.8 line takes ``--num-gpu-blocks-override`` and ``--enable-prefix-caching``
(no recurrent state).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvplan.engines.vllm_versions import VERSIONS
from kvplan.errors import UnitError

if TYPE_CHECKING:
    from kvplan.engines.vllm import VllmConfig
    from kvplan.spec import ModelSpec

#: the lines that model each flag
FLAG_LINES = {
    "--enable-prefix-caching": VERSIONS,
    "--async-scheduling": ("0.27", "0.28", "0.29", "0.32"),
    "--mamba-cache-mode": ("0.28", "0.29", "0.32"),
    "--num-gpu-blocks-override": VERSIONS,
}
MAMBA_CACHE_MODES = ("none", "align")
#: lines whose prefix caching puts recurrent state in the align mode (v0.26.0 on; on the 0.27
#: line only for models outside ALL_MODE_MODELS)
ALIGN_MODE_LINES = ("0.27", "0.28", "0.29", "0.32")
#: lines where prefix caching is on by default for hybrids too (v0.26.0)
HYBRID_PREFIX_BY_DEFAULT = ("0.27", "0.28", "0.29", "0.32")
#: lines whose prefix caching puts the models that implement Mamba prefix caching in the all
#: mode (v0.26.0-v0.27.x; vllm/model_executor/models/config.py, MambaModelConfig), and those
#: models' types (the SupportsMambaPrefixCaching classes of vllm/model_executor/models)
ALL_MODE_LINES = ("0.27",)
ALL_MODE_MODELS = (
    "falcon_h1",
    "granitemoehybrid",
    "jamba",
    "mamba",
    "mamba2",
    "nemotron_h",
    "zamba2",
)
#: lines whose Mamba2 layers hold a prefill checkpoint block in the align mode (v0.29.0)
CHECKPOINT_BLOCK_LINES = ("0.29", "0.32")
#: lines where async scheduling is on unless turned off (vLLM on a GPU), and where it matters
ASYNC_BY_DEFAULT = ("0.27", "0.28", "0.29", "0.32")
#: lines whose sliding and chunked layers reserve for the batches in flight (v0.26.0)
IN_FLIGHT_LINES = ("0.27", "0.28", "0.29", "0.32")


@dataclass(frozen=True, slots=True)
class Settings:
    """What the flags resolve to for one model on one line.

    ``mamba_cache_mode``: None for a model without recurrent state. ``state_blocks``: blocks a
    request holds per recurrent-state group. ``in_flight_tokens``: the tokens sliding and
    chunked layers reserve beyond their window. ``checkpoint_block``: Mamba2 layers in the
    align mode hold a prefill checkpoint block too.
    """

    enable_prefix_caching: bool
    async_scheduling: bool
    mamba_cache_mode: str | None
    in_flight_tokens: int
    checkpoint_block: bool = True

    def state_blocks(self, mamba2: bool) -> int:
        if self.mamba_cache_mode != "align":
            return 1
        return 3 if mamba2 and self.checkpoint_block else 2


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


def resolve(spec: ModelSpec, cfg: VllmConfig, *, recurrent: bool) -> Settings:
    """The settings ``cfg`` resolves to for ``spec`` (``recurrent``: it keeps a state)."""
    check_flags(cfg)
    prefix = cfg.enable_prefix_caching
    if prefix is None:
        prefix = not recurrent or cfg.version in HYBRID_PREFIX_BY_DEFAULT
    if recurrent and prefix and cfg.version not in ALIGN_MODE_LINES:
        raise UnitError(
            f"--enable-prefix-caching on {spec.name} (recurrent state): its align mode is"
            f" modelled from vLLM 0.32 back to 0.26, not for the {cfg.version} line"
        )
    all_mode = cfg.version in ALL_MODE_LINES and spec.model_type in ALL_MODE_MODELS
    if recurrent and prefix and all_mode:
        given = "--enable-prefix-caching" if cfg.enable_prefix_caching else "prefix caching"
        raise UnitError(
            f"{given} on {spec.name}: vLLM {cfg.version} keeps its state in the all mode"
            " (a block per block_size tokens), not modelled; pass"
            " --no-enable-prefix-caching, or use the 0.28 line"
        )
    mode = None
    if recurrent:
        mode = "align" if prefix and cfg.version in ALIGN_MODE_LINES else "none"
    if cfg.async_scheduling is not None:
        async_on = cfg.async_scheduling
    else:
        async_on = cfg.version in ASYNC_BY_DEFAULT
    pp = cfg.pipeline_parallel_size
    batches = 1
    if cfg.version in IN_FLIGHT_LINES:
        batches = (2 if pp == 1 else pp + 1) if async_on else pp
    checkpoint = cfg.version in CHECKPOINT_BLOCK_LINES
    return Settings(prefix, async_on, mode, cfg.max_num_batched_tokens * batches, checkpoint)


def refuse_other_engine(engine: str, flags: Mapping[str, object]) -> None:
    """Refuse vLLM's cache flags (those set in ``flags``) with another engine, in one line
    naming the first flag."""
    given = [name for name, value in flags.items() if value is not None]
    if engine != "vllm" and given:
        flag = "--" + given[0].replace("_", "-")
        raise UnitError(f"{flag}: a vLLM flag; it applies with --engine vllm only")
