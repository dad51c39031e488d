"""Pipeline stages: which layers each stage holds, and its weights on one rank.

Every walk over pipeline stages (the planner and the vLLM, SGLang and TensorRT-LLM profiles)
goes through ``walk_stages``. The split itself is the caller's: each engine splits layers by its
own rule, so the layer counts come in (``kvplan.model.weights.pipeline_partition`` for vLLM's rule,
``kvplan.engines.trtllm.pp_layer_counts`` for TensorRT-LLM's).

Worked example (Llama 3.1 8B, 32 layers, PP 3 as vLLM splits them): 32 = 3 x 10 + 2, and the
two extra layers go one each to the stages before the last, from the second-to-last backwards:
(11, 11, 10). Stage 0 holds layers 0-10 and the embeddings, stage 1 layers 11-21, stage 2
layers 22-31 and the output head.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from kvplan.arguments import as_parallel
from kvplan.errors import UnitError
from kvplan.model.layers import LayerCache
from kvplan.model.spec import ModelSpec
from kvplan.model.weights import Weights, stage_weight_bytes


@dataclass(frozen=True, slots=True)
class Stage:
    """One pipeline stage: its layers, in order and grouped, and its weights on one rank.

    ``first_layer`` and ``last_layer`` are inclusive indices into ``spec.layers``;
    ``layer_groups`` are the stage's identical layers with their counts, in order of first
    appearance. ``weights_bytes`` is the stage's weights on one tensor-parallel rank, 0 when
    the walk was given no weights.
    """

    index: int
    first_layer: int
    last_layer: int
    layer_groups: tuple[tuple[LayerCache, int], ...]
    is_first: bool
    is_last: bool
    weights_bytes: int
    spec: ModelSpec = field(repr=False, compare=False)

    @property
    def num_layers(self) -> int:
        return self.last_layer - self.first_layer + 1

    @property
    def layers(self) -> tuple[LayerCache, ...]:
        """The stage's layers in order (sliced on demand: planning sweeps need only groups)."""
        return self.spec.layers[self.first_layer : self.last_layer + 1]


def walk_stages(
    spec: ModelSpec,
    layer_counts: Sequence[int],
    weights: Weights | None = None,
    tp: int = 1,
) -> tuple[Stage, ...]:
    """The stages of ``spec`` split into ``layer_counts`` layers each, first to last.

    With ``weights``, each stage carries its weight bytes on one of ``tp`` ranks
    (``kvplan.model.weights.stage_weight_bytes``: layers pro rata, the embeddings on the first
    stage,
    the output head on the last). Raises UnitError when the counts do not add up to the
    model's layers or one is below 1.
    """
    num_layers = spec.num_hidden_layers  # = len(spec.layers) (the spec checks it); a plain field
    if sum(layer_counts) != num_layers or min(layer_counts, default=0) < 1:
        raise UnitError(
            f"stages of {tuple(layer_counts)} layers do not split the {num_layers} layers"
            f" of {spec.name}"
        )
    # one stage: the spec's own groups; several: each stage's layers counted
    all_layers = spec.layers if len(layer_counts) > 1 else ()
    stages = []
    first = 0
    for index, count in enumerate(layer_counts):
        last = first + count - 1
        is_first, is_last = index == 0, index == len(layer_counts) - 1
        stages.append(
            Stage(
                index=index,
                first_layer=first,
                last_layer=last,
                layer_groups=_grouped(all_layers[first : last + 1])
                if all_layers
                else spec.layer_groups,
                is_first=is_first,
                is_last=is_last,
                weights_bytes=0
                if weights is None
                else stage_weight_bytes(weights, num_layers, count, is_first, is_last, tp),
                spec=spec,
            )
        )
        first = last + 1
    return tuple(stages)


def _grouped(layers: Sequence[LayerCache]) -> tuple[tuple[LayerCache, int], ...]:
    """Identical layers with their counts, in order of first appearance (as ``layer_groups``)."""
    counts: dict[LayerCache, int] = {}
    for layer in layers:
        counts[layer] = counts.get(layer, 0) + 1
    return tuple(counts.items())


def tensor_parallel_valid(spec: ModelSpec, tp: int) -> bool:
    """Whether the engines can shard ``spec`` over ``tp`` GPUs: query heads divide evenly, KV
    heads divide evenly or are replicated (TP a multiple of them); MLA keeps one latent per
    rank, so only the query heads count (vLLM ``verify_with_parallel_config``)."""
    if spec.num_attention_heads % tp:
        return False
    kv = spec.kv_heads
    return spec.kv_lora_rank is not None or kv % tp == 0 or tp % kv == 0


def as_tensor_parallel_size(spec: ModelSpec, value: object) -> int:
    """``value`` if it is a tensor-parallel size ``spec`` shards over, else UnitError naming
    the valid sizes."""
    tp = as_parallel(value, "tensor_parallel_size")
    if not tensor_parallel_valid(spec, tp):
        heads = spec.num_attention_heads
        valid = ", ".join(str(t) for t in range(1, heads + 1) if tensor_parallel_valid(spec, t))
        raise UnitError(
            f"tensor_parallel_size {tp}: {spec.name} has {heads} attention heads and"
            f" {spec.kv_heads} KV heads, which do not shard over {tp} GPUs; valid sizes: {valid}"
        )
    return tp
