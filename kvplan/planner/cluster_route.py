"""When a plan question is a cluster question, and the answer either way.

``kvplan plan`` and the library ask the same rule (``is_cluster_question``): a question goes to
the node-aware search (``plan_cluster``, whole nodes of a catalog system, ranked and priced)

- when any cluster keyword is given (``system``, ``gpus_per_node``, ``nodes``, ``objective``,
  ``top``, ``prices``, ``prices_file``, ``disaggregate``), whatever else is asked;
- when several GPUs are named (``"h100,h200"`` or a list), to compare them;
- when the question is the fewest GPUs (a ``max_model_len`` and a ``concurrency``, kvplan's own
  planner, no parallel size, no memory given: neither a pool, a length mix nor a GPU whose
  memory was replaced) on a GPU that a catalog system is built of.

Every other question is one deployment (``plan``). llama.cpp plans one machine, never a
cluster. ``plan_deployment`` answers with whichever the rule picks, as the command line does.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvplan.arguments import as_sequence, as_str, check_types
from kvplan.errors import UnitError
from kvplan.hardware.gpus import GPU
from kvplan.planner.deployment import (
    DEFAULT_BLOCK_SIZE,
    DEFAULT_MAX_NUM_BATCHED_TOKENS,
    DEFAULT_UTILIZATION,
)

if TYPE_CHECKING:
    from kvplan.model.spec import ModelSpec
    from kvplan.planner.cluster import ClusterPlan
    from kvplan.planner.mix import Lengths
    from kvplan.planner.result import Plan

#: The engine whose fewest-GPU question the cluster search answers (``kvplan plan -e``).
IDEAL_ENGINE = "ideal"
#: Engines that plan one machine only: a cluster keyword does not route them.
SINGLE_MACHINE_ENGINES = ("llama.cpp",)

GpuArg = GPU | str | Sequence[GPU | str] | None


def is_cluster_question(
    gpu: GpuArg,
    *,
    max_model_len: int | str | None = None,
    concurrency: int | None = None,
    tensor_parallel_size: int | None = None,
    pipeline_parallel_size: int | None = None,
    kv_cache_memory_bytes: int | str | None = None,
    lengths: object = None,
    mean_length: int | str | None = None,
    p99_length: int | str | None = None,
    gpu_memory_bytes: int | str | None = None,
    engine: str = IDEAL_ENGINE,
    system: str | None = None,
    gpus_per_node: int | None = None,
    nodes: int | None = None,
    objective: str | None = None,
    top: int | None = None,
    prices: Sequence[str] = (),
    prices_file: str | None = None,
    disaggregate: int | str | None = None,
) -> bool:
    """True when ``plan_cluster`` answers the question (the rule of the module docstring).

    The keywords are ``plan``'s and ``plan_cluster``'s, None (or empty) where not given;
    ``lengths`` is anything given for a length mix (a list, or a file's path); a mix given
    as ``mean_length``/``p99_length`` counts the same (the search in nodes holds every
    request at ``max_model_len``, so a question about a mix stays with ``plan``);
    ``gpu_memory_bytes`` the device's memory when given apart from ``gpu`` (the command
    line's ``--gpu-memory``). Never raises for a GPU name it does not know: that is the
    planner's error to give; an argument of the wrong type raises ArgumentTypeError (a
    TypeError). Values are the planner's to check."""
    check_types((GPU, str, list, tuple), "a GPU, a GPU's name, a list of them, or None", gpu=gpu)
    check_types(
        (int, str),
        "an integer or a string",
        max_model_len=max_model_len,
        kv_cache_memory_bytes=kv_cache_memory_bytes,
        mean_length=mean_length,
        p99_length=p99_length,
        gpu_memory_bytes=gpu_memory_bytes,
        disaggregate=disaggregate,
    )
    check_types(
        (int,),
        "an integer or None",
        concurrency=concurrency,
        tensor_parallel_size=tensor_parallel_size,
        pipeline_parallel_size=pipeline_parallel_size,
        gpus_per_node=gpus_per_node,
        nodes=nodes,
        top=top,
    )
    from kvplan.hardware.systems import System

    check_types((str, System), "a System, a system's name or None", system=system)
    check_types((str,), "a str or None", objective=objective)
    check_types((str, Path), "a path or None", prices_file=prices_file)
    as_str(engine, "engine")
    as_sequence(prices, "prices", "a list of 'GPU=DOLLARS' strings")
    if engine in SINGLE_MACHINE_ENGINES:
        return False
    given = (system, gpus_per_node, nodes, objective, top, prices_file, disaggregate)
    if any(v is not None for v in given) or prices:
        return True
    if _several(gpu):
        return True
    fewest_gpus = (
        engine == IDEAL_ENGINE
        and max_model_len is not None
        and concurrency is not None
        and tensor_parallel_size is None
        and pipeline_parallel_size is None
        and kv_cache_memory_bytes is None
        and lengths is None
        and mean_length is None
        and p99_length is None
        and gpu_memory_bytes is None
    )
    return fewest_gpus and _catalog_system_gpu(gpu)


def _several(gpu: GpuArg) -> bool:
    if isinstance(gpu, str):
        return "," in gpu
    return gpu is not None and not isinstance(gpu, GPU)


def _catalog_system_gpu(gpu: GpuArg) -> bool:
    """A catalog GPU, its memory as catalogued, that a catalog system is built of."""
    from kvplan.hardware.gpus import UnknownGPUError
    from kvplan.hardware.lookup import find_gpu
    from kvplan.hardware.systems import system_for_gpu

    if gpu is None or not isinstance(gpu, GPU | str):
        return False
    try:
        device = find_gpu(gpu if isinstance(gpu, str) else gpu.name)
    except UnknownGPUError:
        return False
    if isinstance(gpu, GPU) and gpu != device:
        return False  # memory replaced (custom_gpu): a question about that device
    return system_for_gpu(device) is not None


def plan_deployment(
    spec: ModelSpec | str,
    gpu: GpuArg,
    *,
    tensor_parallel_size: int | None = None,
    pipeline_parallel_size: int | None = None,
    max_model_len: int | str | None = None,
    concurrency: int | None = None,
    gpu_memory_utilization: float | str | Fraction = DEFAULT_UTILIZATION,
    kv_cache_dtype: str | None = None,
    dtype: str | None = None,
    quantization: str | None = None,
    overhead_bytes: int | str | None = None,
    kv_cache_memory_bytes: int | str | None = None,
    block_size: int = DEFAULT_BLOCK_SIZE,
    shared_prefix_tokens: int | str = 0,
    lengths: Lengths | None = None,
    mean_length: int | str | None = None,
    p99_length: int | str | None = None,
    max_num_batched_tokens: int | str = DEFAULT_MAX_NUM_BATCHED_TOKENS,
    system: str | None = None,
    gpus_per_node: int | None = None,
    nodes: int | None = None,
    objective: str | None = None,
    top: int | None = None,
    prices: Sequence[str] = (),
    prices_file: str | None = None,
    disaggregate: int | str | None = None,
) -> Plan | ClusterPlan:
    """The answer ``kvplan plan`` gives: ``plan_cluster``'s ranked deployments when
    ``is_cluster_question``, else ``plan``'s one deployment. A cluster question takes the
    settings both share; its parallel sizes, pool and length mix are not used (as on the
    command line). Raises UnitError when a cluster question lacks ``max_model_len`` or
    ``concurrency``, and what ``plan`` / ``plan_cluster`` raise."""
    from kvplan.planner.api import plan, plan_cluster
    from kvplan.planner.search import DEFAULT_OBJECTIVE, DEFAULT_TOP

    asked: dict[str, Any] = {
        "max_model_len": max_model_len,
        "concurrency": concurrency,
        "tensor_parallel_size": tensor_parallel_size,
        "pipeline_parallel_size": pipeline_parallel_size,
        "kv_cache_memory_bytes": kv_cache_memory_bytes,
    }
    keywords: dict[str, Any] = {
        "system": system,
        "gpus_per_node": gpus_per_node,
        "nodes": nodes,
        "objective": objective,
        "top": top,
        "prices": prices,
        "prices_file": prices_file,
        "disaggregate": disaggregate,
    }
    shared: dict[str, Any] = {
        "gpu_memory_utilization": gpu_memory_utilization,
        "kv_cache_dtype": kv_cache_dtype,
        "dtype": dtype,
        "quantization": quantization,
        "overhead_bytes": overhead_bytes,
        "block_size": block_size,
        "shared_prefix_tokens": shared_prefix_tokens,
        "max_num_batched_tokens": max_num_batched_tokens,
    }
    mix: dict[str, Any] = {
        "lengths": lengths,
        "mean_length": mean_length,
        "p99_length": p99_length,
    }
    if not is_cluster_question(gpu, **asked, **mix, **keywords):
        if not isinstance(gpu, GPU | str):
            raise UnitError("gpu: give one GPU (a name or a GPU) for one deployment")
        return plan(spec, gpu, **asked, **mix, **shared)
    if max_model_len is None or concurrency is None:
        raise UnitError(
            "a deployment in nodes (system, gpus_per_node, nodes, objective, top, prices,"
            " prices_file, disaggregate, several GPUs) needs both max_model_len and concurrency"
        )
    keywords["objective"] = objective or DEFAULT_OBJECTIVE
    keywords["top"] = top or DEFAULT_TOP
    return plan_cluster(
        spec, gpu, max_model_len=max_model_len, concurrency=concurrency, **keywords, **shared
    )
