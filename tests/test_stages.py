"""The pipeline-stage walk: layers and weights per stage, hand-worked, and its users."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from kvplan import find_gpu, load_model
from kvplan.engines import sglang, trtllm, vllm
from kvplan.errors import UnitError
from kvplan.model.stages import Stage, walk_stages
from kvplan.model.weights import model_weights, pipeline_partition
from kvplan.planner import plan
from kvplan.planner import pool as planner_pool

LLAMA = load_model("llama-3.1-8b")  # 32 layers, 8,030,261,248 parameters, untied head
H100 = find_gpu("h100-sxm")  # 85,029,027,840 B as CUDA reports it

# Llama 3.1 8B in bf16: embeddings and head 128,256 x 4,096 x 2 B each; the layers take the rest,
# (8,030,261,248 - 2 x 525,336,576) x 2 = 13,959,176,192 B, 436,224,256 B a layer (/ 32).
EMBED = 128_256 * 4_096 * 2  # 1,050,673,152 B
LAYER = 13_959_176_192 // 32  # 436,224,256 B

# vLLM's rule, 32 layers on 3 stages: 32 = 3 x 10 + 2; the 2 extra layers go to the
# second-to-last stage, then the one before it: (11, 11, 10).
LLAMA_PP3 = (11, 11, 10)
LLAMA_PP3_RANGES = [(0, 0, 10), (1, 11, 21), (2, 22, 31)]
LLAMA_PP3_WEIGHTS = [
    11 * LAYER + EMBED,  # 4,798,466,816 + 1,050,673,152 = 5,849,139,968
    11 * LAYER,  # 4,798,466,816
    10 * LAYER + EMBED,  # 4,362,242,560 + 1,050,673,152 = 5,412,915,712
]


def ranges(stages: Sequence[Any]) -> list[tuple[int, int, int]]:
    return [(s.index, s.first_layer, s.last_layer) for s in stages]


def test_llama_32_layers_over_pp3_as_vllm_partitions_them() -> None:
    assert pipeline_partition(32, 3) == LLAMA_PP3
    stages = walk_stages(LLAMA, LLAMA_PP3, model_weights(LLAMA))
    assert ranges(stages) == LLAMA_PP3_RANGES
    assert [s.num_layers for s in stages] == [11, 11, 10]
    assert [s.is_first for s in stages] == [True, False, False]
    assert [s.is_last for s in stages] == [False, False, True]
    assert [len(s.layers) for s in stages] == [11, 11, 10]
    assert [s.layer_groups[0][1] for s in stages] == [11, 11, 10]  # one kind of layer
    assert [s.weights_bytes for s in stages] == LLAMA_PP3_WEIGHTS
    # the stages hold every weight exactly once: 8,030,261,248 x 2 B
    assert sum(s.weights_bytes for s in stages) == 16_060_522_496


def test_weights_per_rank_split_over_tp_rounding_up() -> None:
    stages = walk_stages(LLAMA, LLAMA_PP3, model_weights(LLAMA), tp=2)
    # every stage's bytes are even: halves, 2,924,569,984 / 2,399,233,408 / 2,706,457,856
    assert [s.weights_bytes for s in stages] == [w // 2 for w in LLAMA_PP3_WEIGHTS]
    assert [s.weights_bytes for s in stages] == [2_924_569_984, 2_399_233_408, 2_706_457_856]
    odd = walk_stages(LLAMA, LLAMA_PP3, model_weights(LLAMA), tp=3)
    # 5,849,139,968 / 3 = 1,949,713,322.67 -> 1,949,713,323 B on each rank
    assert odd[0].weights_bytes == 1_949_713_323


def test_tied_embeddings_the_last_stage_keeps_its_own_copy() -> None:
    qwen = load_model("qwen3-0.6b")  # 28 layers, 596,049,920 parameters, tied
    embed = 151_936 * 1_024 * 2  # 311,164,928 B
    layers = (596_049_920 - 151_936 * 1_024) * 2  # 880,934,912 B
    one = walk_stages(qwen, (28,), model_weights(qwen))
    assert one[0].weights_bytes == layers + embed  # 1,192,099,840: the table once
    two = walk_stages(qwen, (14, 14), model_weights(qwen))
    # each stage: half the layers (440,467,456) and one copy of the table: 751,632,384
    assert [s.weights_bytes for s in two] == [layers // 2 + embed] * 2 == [751_632_384] * 2


def test_hybrid_layers_grouped_per_stage() -> None:
    gemma = load_model("gemma-3-12b")  # 48 layers: 5 sliding then 1 full, repeated
    stages = walk_stages(gemma, (16, 16, 16))
    # full layers at 5, 11, 17, ...: stage 0 (0-15) has 5 and 11; stage 1 (16-31) 17, 23, 29;
    # stage 2 (32-47) 35, 41, 47
    kinds = [{layer.kind: n for layer, n in s.layer_groups} for s in stages]
    assert kinds == [
        {"sliding_attention": 14, "full_attention": 2},
        {"sliding_attention": 13, "full_attention": 3},
        {"sliding_attention": 13, "full_attention": 3},
    ]
    # in order of first appearance: stage 0 starts sliding
    assert stages[0].layer_groups[0][0].kind == "sliding_attention"
    assert all(s.weights_bytes == 0 for s in stages)  # no weights given


def test_one_stage_is_the_whole_model() -> None:
    (stage,) = walk_stages(LLAMA, (32,))
    assert (stage.index, stage.first_layer, stage.last_layer) == (0, 0, 31)
    assert stage.is_first
    assert stage.is_last
    assert stage.layers == LLAMA.layers
    assert stage.layer_groups == LLAMA.layer_groups


def test_stage_is_frozen() -> None:
    (stage,) = walk_stages(LLAMA, (32,))
    assert isinstance(stage, Stage)
    with pytest.raises(AttributeError):
        stage.index = 1  # type: ignore[misc]


@pytest.mark.parametrize(
    "counts",
    [(16, 15), (16, 17), (32, 0), (33, -1)],
    ids=["31 of 32 layers", "33 of 32 layers", "an empty stage", "a negative stage"],
)
def test_counts_must_split_the_layers(counts: tuple[int, ...]) -> None:
    with pytest.raises(UnitError, match="do not split the 32 layers"):
        walk_stages(LLAMA, counts)


class Spy:
    """Records each walk an engine asks for, and answers with the real one."""

    def __init__(self) -> None:
        self.counts: list[tuple[int, ...]] = []

    def __call__(self, spec: Any, counts: Sequence[int], *args: Any) -> tuple[Stage, ...]:
        self.counts.append(tuple(counts))
        return walk_stages(spec, counts, *args)


def test_planner_stages_come_from_the_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    spy = Spy()
    monkeypatch.setattr(planner_pool, "walk_stages", spy)
    found = plan(LLAMA, H100, pipeline_parallel_size=3, max_model_len=8192)
    assert spy.counts == [LLAMA_PP3]
    assert ranges(found.stages) == LLAMA_PP3_RANGES
    assert [s.weights_bytes for s in found.stages] == LLAMA_PP3_WEIGHTS


def test_vllm_stages_come_from_the_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    spy = Spy()
    monkeypatch.setattr(vllm, "walk_stages", spy)
    cfg = vllm.VllmConfig(max_model_len=8192, pipeline_parallel_size=3)
    result = vllm.profile(LLAMA, H100, cfg)
    assert spy.counts == [LLAMA_PP3]
    assert ranges(result.stages) == LLAMA_PP3_RANGES
    # vLLM's weights add the rotary cache to the walk's bytes: 131,072 x 128 values x 2 B
    rotary = 131_072 * 128 * 2
    assert [s.overhead.weights_bytes - rotary for s in result.stages] == LLAMA_PP3_WEIGHTS


def test_sglang_stages_come_from_the_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    spy = Spy()
    monkeypatch.setattr(sglang, "walk_stages", spy)
    result = sglang.kv_cache(LLAMA, H100, pp=3, mem_fraction_static=0.9)
    assert spy.counts == [LLAMA_PP3]
    # the first stage is reported: rest = (total - its weights) - total x 0.1
    # = 85,029,027,840 - 5,849,139,968 - 8,502,902,784 = 70,676,985,088 B
    assert result.engine_log["rest_bytes"] == 70_676_985_088


def test_trtllm_stages_come_from_the_walk_with_its_own_split(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spy = Spy()
    monkeypatch.setattr(trtllm, "walk_stages", spy)
    result = trtllm.kv_cache(LLAMA, H100, pp=5)
    # Mapping.pp_layers: 32 = 5 x 6 + 2, the extra layers to the first ranks: (7, 7, 6, 6, 6);
    # vLLM's rule would give (6, 6, 7, 7, 6)
    assert spy.counts == [(7, 7, 6, 6, 6)]
    assert pipeline_partition(32, 5) == (6, 6, 7, 7, 6)
    # the first rank is reported: peak = its weights, 7 x 436,224,256 + 1,050,673,152
    # = 4,104,242,944 B; available = floor((85,029,027,840 - 4,104,242,944) x 0.9)
    # = floor(72,832,306,406.4)
    assert result.engine_log["available_kv_mem_bytes"] == 72_832_306_406
