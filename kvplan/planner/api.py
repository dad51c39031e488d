"""``plan``: the planner's one entry point, reading its arguments as the command line does."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from fractions import Fraction
from typing import TYPE_CHECKING, TypeGuard

from kvplan.arguments import (
    as_bytes,
    as_int,
    as_parallel,
    as_path,
    as_sequence,
    as_str,
    as_tokens,
)
from kvplan.catalog.lookup import as_spec
from kvplan.errors import UnitError
from kvplan.hardware.gpus import GPU
from kvplan.hardware.lookup import as_gpu
from kvplan.model.spec import ModelSpec
from kvplan.model.stages import as_tensor_parallel_size
from kvplan.planner.deployment import (
    DEFAULT_BLOCK_SIZE,
    DEFAULT_MAX_NUM_BATCHED_TOKENS,
    DEFAULT_UTILIZATION,
    Deployment,
    parse_utilization,
)
from kvplan.planner.mix import Lengths, length_mix, mix_lengths
from kvplan.planner.result import Plan
from kvplan.planner.search import DEFAULT_OBJECTIVE, DEFAULT_TOP, smallest_deployment
from kvplan.planner.solve import solve

if TYPE_CHECKING:
    from kvplan.hardware.systems import System
    from kvplan.planner.cluster import ClusterPlan


def plan(
    spec: ModelSpec | str,
    gpu: GPU | str,
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
) -> Plan:
    """Plan ``spec`` on ``gpu``.

    - ``max_model_len`` alone: the pool, and how many requests of that length fit at once.
    - ``concurrency`` alone: the longest context that many requests can each reach.
    - both, with neither parallel size given: the smallest deployment (tensor parallel within
      the model's head divisibility, then pipeline stages, then replicas) that holds them.
    - ``lengths``: concurrency for that mix of request lengths (prompt + output each), or
      ``mean_length`` (expected concurrency) and ``p99_length`` (worst case) in its place.
    - nothing asked: ``max_model_len`` is the model's ``max_position_embeddings``.

    ``spec`` and ``gpu`` may be names; token counts take ``32K``-style strings and sizes
    ``80GiB``-style strings, as the command line does. A float32 checkpoint is served in
    bfloat16 unless ``dtype`` says otherwise, as vLLM's and SGLang's ``--dtype auto`` do; the
    cache dtype follows the served dtype (``kvplan.model.dtypes``). Raises UnitError (or
    ModelNotFoundError / UnknownGPUError for names) for a bad argument.
    """
    spec = as_spec(spec)
    gpu = as_gpu(gpu)
    tp, pp = _parallel_sizes(spec, tensor_parallel_size, pipeline_parallel_size)
    length = _optional_tokens(max_model_len, "max_model_len")
    if concurrency is not None:
        concurrency = as_int(concurrency, "concurrency", minimum=1)
    block_size = as_int(block_size, "block_size", minimum=1, maximum=1 << 20)
    shared_prefix = as_tokens(shared_prefix_tokens, "shared_prefix_tokens")
    overhead = _optional_bytes(overhead_bytes, "overhead_bytes")
    kv_cache_memory = _optional_bytes(kv_cache_memory_bytes, "kv_cache_memory_bytes")
    mean = _optional_tokens(mean_length, "mean_length")
    p99 = _optional_tokens(p99_length, "p99_length")
    batched = as_tokens(max_num_batched_tokens, "max_num_batched_tokens", minimum=1)
    utilization = parse_utilization(gpu_memory_utilization)
    mix = mix_lengths(lengths, mean, p99)
    if length is None and concurrency is None and mix is None:
        length = spec.max_position_embeddings
    deployment = Deployment(
        spec,
        gpu,
        tp or 1,
        pp or 1,
        utilization,
        kv_cache_dtype,
        dtype,
        quantization,
        overhead,
        kv_cache_memory,
        block_size,
        batched,
    )
    if length is not None and concurrency is not None and tp is None and pp is None:
        found = smallest_deployment(deployment, length, concurrency, shared_prefix)
        if mix is None or not found.fits:
            return found
        return replace(found, length_mix=length_mix(found.stages, mix, shared_prefix, block_size))
    return solve(deployment, length, concurrency, shared_prefix, mix)


def _parallel_sizes(
    spec: ModelSpec, tensor_parallel_size: int | None, pipeline_parallel_size: int | None
) -> tuple[int | None, int | None]:
    """The parallel sizes as given (None: not given), checked against the model."""
    if tensor_parallel_size is not None:
        tensor_parallel_size = as_tensor_parallel_size(spec, tensor_parallel_size)
    if pipeline_parallel_size is not None:
        pipeline_parallel_size = as_parallel(pipeline_parallel_size, "pipeline_parallel_size")
        if pipeline_parallel_size > spec.num_hidden_layers:
            raise UnitError(
                f"pipeline_parallel_size {pipeline_parallel_size}: more stages than the"
                f" {spec.num_hidden_layers} layers of {spec.name}"
            )
    return tensor_parallel_size, pipeline_parallel_size


def _optional_tokens(value: int | str | None, name: str) -> int | None:
    """A token count of at least 1 (``32K``-style strings read), or None when not given."""
    return None if value is None else as_tokens(value, name, minimum=1)


def _optional_bytes(value: int | str | None, name: str) -> int | None:
    """A size in bytes (``80GiB``-style strings read), or None when not given."""
    return None if value is None else as_bytes(value, name)


def plan_cluster(
    spec: ModelSpec | str,
    gpu: GPU | str | Sequence[GPU | str] | None = None,
    *,
    max_model_len: int | str,
    concurrency: int,
    system: System | str | None = None,
    gpus_per_node: int | None = None,
    nodes: int | None = None,
    objective: str = DEFAULT_OBJECTIVE,
    top: int = DEFAULT_TOP,
    prices: Sequence[str] = (),
    prices_file: str | None = None,
    gpu_memory_utilization: float | str | Fraction = DEFAULT_UTILIZATION,
    kv_cache_dtype: str | None = None,
    dtype: str | None = None,
    quantization: str | None = None,
    overhead_bytes: int | str | None = None,
    block_size: int = DEFAULT_BLOCK_SIZE,
    shared_prefix_tokens: int | str = 0,
    max_num_batched_tokens: int | str = DEFAULT_MAX_NUM_BATCHED_TOKENS,
    disaggregate: int | str | None = None,
) -> ClusterPlan:
    """The best deployments of ``spec`` holding ``concurrency`` requests of ``max_model_len``
    tokens, in whole nodes of real systems (``kvplan.planner.cluster``), ranked by
    ``objective`` (gpus, nodes, cost, throughput), ``top`` of them, priced.

    ``gpu``: one GPU, several (``"h100,h200,mi300x"`` or a list: each on its catalog system),
    or None with ``system``. ``system`` names a catalog system (``hgx-h100``, ``gb200-nvl72``);
    ``gpus_per_node`` overrides its node size; ``nodes`` caps the nodes. ``prices``
    (``"h100=2.49"``) and ``prices_file`` replace the bundled list prices. ``disaggregate``:
    prompts of this many tokens; a prefill/decode disaggregated candidate is listed too.
    Raises UnitError,
    UnknownGPUError or UnknownSystemError for a bad argument.
    """
    from kvplan.hardware.costs import load_prices, parse_price_overrides
    from kvplan.planner.cluster import search_cluster

    spec = as_spec(spec)
    length = as_tokens(max_model_len, "max_model_len", minimum=1)
    n = as_int(concurrency, "concurrency", minimum=1)
    as_str(objective, "objective", "an objective: gpus, nodes, cost or throughput")
    top = as_int(top, "top", minimum=1, maximum=100)
    if nodes is not None:
        nodes = as_int(nodes, "nodes", minimum=1, maximum=1024)
    if gpus_per_node is not None:
        gpus_per_node = as_int(gpus_per_node, "gpus_per_node", minimum=1, maximum=1024)
    systems = _systems(gpu, system, gpus_per_node)
    prices_path = None if prices_file is None else as_path(prices_file, "prices_file")
    given = (
        *(load_prices(prices_path) if prices_path else ()),
        *parse_price_overrides(_price_texts(prices)),
    )
    deployment = Deployment(
        spec,
        systems[0].gpu,
        1,
        1,
        parse_utilization(gpu_memory_utilization),
        kv_cache_dtype,
        dtype,
        quantization,
        _optional_bytes(overhead_bytes, "overhead_bytes"),
        None,
        as_int(block_size, "block_size", minimum=1, maximum=1 << 20),
        as_tokens(max_num_batched_tokens, "max_num_batched_tokens", minimum=1),
    )
    return search_cluster(
        deployment,
        systems,
        length,
        n,
        objective=objective,
        top=top,
        prices=given,
        max_nodes=nodes,
        shared_prefix=as_tokens(shared_prefix_tokens, "shared_prefix_tokens"),
        disaggregate=None
        if disaggregate is None
        else as_tokens(disaggregate, "disaggregate", minimum=1),
    )


def _systems(
    gpu: GPU | str | Sequence[GPU | str] | None,
    system: System | str | None,
    gpus_per_node: int | None,
) -> list[System]:
    """The systems to search: the named one, else each GPU's catalog system (a PCIe-only
    node of 8 for a GPU without one), each with ``gpus_per_node`` when given."""
    from kvplan.hardware.systems import as_system, custom_system, system_for_gpu

    if system is not None:
        found = as_system(system)
        return [found if gpus_per_node is None else custom_system(found.gpu, gpus_per_node, found)]
    if gpu is None:
        raise UnitError("give a GPU (--gpu h100, or several: h100,h200) or a --system")
    names = gpu.split(",") if isinstance(gpu, str) else list(gpu) if _listed(gpu) else [gpu]
    if not names:
        raise UnitError("gpu: an empty list; give a GPU (h100) or several (h100,h200)")
    systems = []
    for name in names:
        device = as_gpu(name.strip() if isinstance(name, str) else name, "gpu")
        base = system_for_gpu(device)
        if gpus_per_node is not None or base is None:
            systems.append(custom_system(device, gpus_per_node or 8, base))
        else:
            systems.append(base)
    return systems


def _listed(gpu: object) -> TypeGuard[list[GPU | str] | tuple[GPU | str, ...]]:
    """A list or tuple of GPUs (not a str, a GPU or a mapping); each is checked as it is read."""
    return isinstance(gpu, list | tuple)


def _price_texts(prices: object) -> list[str]:
    """``prices`` as a list of ``GPU=DOLLARS`` strings (a str alone is refused: it would be
    read a character at a time)."""
    what = "a list of 'GPU=DOLLARS' strings"
    return [as_str(text, "prices", what) for text in as_sequence(prices, "prices", what)]
