"""vLLM serving a multimodal model: the encoder's weights and the embeddings its memory profile
holds, which come out of the KV pool.

Read from vLLM v0.32's source:

- ``--limit-mm-per-prompt`` (vllm/config/multimodal.py, ``MultiModalConfig.limit_per_prompt``):
  JSON, a count per modality (``{"image": 2, "video": 0}``), 999 for a modality it does not
  name (``get_limit_per_prompt``). ``--language-model-only`` makes every limit 0.
- A modality of limit 0 is not taken; when every modality a tower serves is 0, vLLM builds
  that tower without weights (``_mark_tower_model`` in
  vllm/model_executor/models/interfaces.py: Qwen-VL's one vision tower serves image and
  video), and with every limit 0 the model runs text-only: nothing is profiled
  (vllm/config/model.py).
- The encoder budget (vllm/v1/core/encoder_cache_manager.py ``compute_mm_encoder_budget``;
  vllm/multimodal/encoder_budget.py ``MultiModalBudget``): each taken modality's most tokens
  an item puts into the language model (``get_mm_max_tokens_per_item``, for requests of
  ``max_model_len``); the budget is ``max(max_num_batched_tokens, the largest of them)``
  (both the compute budget and the cache size start at ``max_num_batched_tokens``,
  vllm/config/scheduler.py).
- The profile (vllm/v1/worker/gpu_model_runner.py ``profile_run``): the modality of the most
  tokens an item, ``max(1, min(budget // tokens, max_num_seqs x per-prompt items))`` items of
  it, where a prompt holds ``max(1, min(limit, max_model_len // tokens))``; their embeddings
  (``tokens x hidden_size`` in the model dtype each) stay in the encoder cache while the
  language model's dummy batch runs, so they add to the peak that sizes the KV pool
  (Qwen3-VL's embeddings carry its deepstack features too: ``out_hidden_size x 4`` values).

Worked example, Qwen2.5-VL 3B on an H100 at ``--max-model-len 32768`` (8,192 batched tokens):
an image is 16,384 tokens, a video 2 frame groups of 16,384 = 32,768; the budget is
max(8,192, 32,768) = 32,768 tokens, one video of them, 32,768 x 2,048 x 2 B = 134,217,728 B
(128 MiB) held. With ``'{"video": 0}'``: one image, 16,384 x 2,048 x 2 B = 64 MiB.

Not modelled: the encoder's own activations while it runs (freed before the language model's
dummy batch), ``--mm-processor-kwargs`` sizes, and per-modality options beyond ``count``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvplan.errors import UnitError
from kvplan.model.multimodal import MODALITIES, max_tokens_per_item
from kvplan.units import resolve_dtype

if TYPE_CHECKING:
    from kvplan.engines.vllm_config import VllmConfig
    from kvplan.model.multimodal import Multimodal
    from kvplan.model.spec import ModelSpec

#: vLLM's limit for a modality ``--limit-mm-per-prompt`` does not name
DEFAULT_LIMIT = 999
#: the release lines whose encoder budget and tower skipping are modelled
MULTIMODAL_LINES = ("0.32", "0.33")
#: the largest count taken for one modality (far above any prompt)
MAX_LIMIT = 1 << 20


@dataclass(frozen=True, slots=True)
class EncoderProfile:
    """What vLLM's memory profile does with a multimodal model's encoder.

    ``limits``: items a prompt may hold, per modality; ``tower_loaded``: the encoder's
    weights are on the GPU (``encoder_weight_parameters`` of them); ``modality``: the one
    profiled, None when none is (text-only); ``tokens_per_item`` and ``num_items`` of it;
    ``budget_tokens``: the encoder cache budget; ``cache_bytes``: the embeddings held.
    """

    limits: tuple[tuple[str, int], ...]
    tower_loaded: bool
    encoder_parameters: int
    modality: str | None = None
    tokens_per_item: int = 0
    num_items: int = 0
    budget_tokens: int = 0
    cache_bytes: int = 0

    def log_line(self) -> str | None:
        """vLLM's own line for the profile (gpu_model_runner.py), None when none is run."""
        if self.modality is None:
            return None
        return (
            f"Encoder cache will be initialized with a budget of {self.budget_tokens} tokens,"
            f" and profiled with {self.num_items} {self.modality} items of the maximum"
            " feature size."
        )


def parse_limits(text: str) -> dict[str, int]:
    """``--limit-mm-per-prompt`` as vLLM takes it: a JSON object of counts, or of objects
    with a ``count`` (``{"video": {"count": 1}}``). Raises UnitError naming the flag."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        value = None
    if not isinstance(value, dict):
        raise UnitError(
            f"--limit-mm-per-prompt: a JSON object of counts per modality"
            f' ({", ".join(MODALITIES)}), such as \'{{"image": 2, "video": 0}}\''
        )
    limits: dict[str, int] = {}
    for modality, given in value.items():
        count = given.get("count") if isinstance(given, dict) else given
        if isinstance(given, dict) and set(given) - {"count"}:
            raise UnitError(
                f"--limit-mm-per-prompt: {modality}: only a count is modelled, not"
                f" {', '.join(sorted(set(given) - {'count'}))}"
            )
        if modality not in MODALITIES:
            raise UnitError(
                f"--limit-mm-per-prompt: {modality!r} is not a modality; allowed:"
                f" {', '.join(MODALITIES)}"
            )
        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= MAX_LIMIT:
            raise UnitError(
                f"--limit-mm-per-prompt: {modality}: a whole number of items from 0 to {MAX_LIMIT}"
            )
        limits[modality] = count
    return limits


def encoder_profile(spec: ModelSpec, cfg: VllmConfig, served_dtype: str) -> EncoderProfile | None:
    """The encoder's share of vLLM's start-up for ``spec`` (see the module docstring); None
    for a text-only model, whose flags vLLM ignores. Raises UnitError for a modality the
    model does not take, a line that does not model it, or pipeline stages with a profile."""
    block = spec.multimodal
    given = parse_limits(cfg.limit_mm_per_prompt) if cfg.limit_mm_per_prompt else {}
    if block is None:
        return None
    if cfg.version not in MULTIMODAL_LINES:
        if given or cfg.language_model_only:
            raise UnitError(
                "--limit-mm-per-prompt, --language-model-only: not modelled for vLLM's"
                f" {cfg.version} release line (modelled for: {', '.join(MULTIMODAL_LINES)})"
            )
        return None
    taken: list[str] = list(block["modalities"])
    unknown = sorted(set(given) - set(taken))
    if unknown:
        raise UnitError(
            f"--limit-mm-per-prompt: {', '.join(unknown)}: {spec.name} takes"
            f" {', '.join(taken)} (its multimodal.modalities)"
        )
    limits = {m: 0 if cfg.language_model_only else given.get(m, DEFAULT_LIMIT) for m in taken}
    held = tuple(limits.items())
    if not any(limits.values()):  # text-only: the tower is built without weights
        return EncoderProfile(held, False, block["encoder_parameters"])
    tokens = {
        m: n
        for m, n in max_tokens_per_item(block, cfg.max_model_len).items()
        if limits.get(m, 0) > 0
    }
    missing = [m for m in taken if limits[m] > 0 and m not in tokens]
    if missing:
        raise UnitError(
            f"{spec.name}: multimodal.{missing[0]}_tokens is not in the spec; give it, or"
            f" --limit-mm-per-prompt '{{\"{missing[0]}\": 0}}'"
        )
    return _profile(spec, block, cfg, served_dtype, held, tokens)


def _profile(
    spec: ModelSpec,
    block: Multimodal,
    cfg: VllmConfig,
    served_dtype: str,
    limits: tuple[tuple[str, int], ...],
    tokens: dict[str, int],
) -> EncoderProfile:
    if cfg.pipeline_parallel_size > 1:
        raise UnitError(
            f"{spec.name} on -pp {cfg.pipeline_parallel_size}: vLLM's multimodal profile is"
            " modelled on one pipeline stage; add --language-model-only to plan the text"
            " model alone"
        )
    modality = max(tokens, key=lambda m: tokens[m])  # the first of the most, as vLLM's max
    per_item = tokens[modality]
    budget = max(cfg.batched_tokens, per_item)
    per_prompt = max(1, min(dict(limits)[modality], cfg.max_model_len // per_item))
    items = max(1, min(budget // per_item, cfg.num_seqs * per_prompt))
    width = block.get("embedding_width", spec.hidden_size or 0)
    cache = items * per_item * width * resolve_dtype(served_dtype).block_bytes
    encoder = block["encoder_parameters"]
    return EncoderProfile(limits, True, encoder, modality, per_item, items, budget, cache)


def text_weights_spec(spec: ModelSpec, profile: EncoderProfile | None) -> ModelSpec:
    """``spec`` as vLLM loads it: without the encoder's parameters when the tower is skipped."""
    if profile is None or profile.tower_loaded or spec.num_parameters is None:
        return spec
    update: dict[str, int] = {"num_parameters": spec.num_parameters - profile.encoder_parameters}
    if spec.num_active_parameters is not None:
        update["num_active_parameters"] = spec.num_active_parameters - profile.encoder_parameters
    return spec.model_copy(update=update)
