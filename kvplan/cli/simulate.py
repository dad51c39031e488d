"""``kvplan simulate``: a request trace replayed through an engine's prefix cache."""

from typing import Annotated

import typer

from kvplan.cli.common import command, emit, guard, option
from kvplan.cli.options import (
    EngineVersionOpt,
    FormatOpt,
    GpuMemoryUtilizationOpt,
    GpuOpt,
    KvCacheDtypeOpt,
    OutputFormat,
)

TraceArg = Annotated[
    str,
    typer.Argument(
        help="A Mooncake request trace (JSONL: timestamp, input_length, output_length,"
        " hash_ids of 512-token blocks).",
        show_default=False,
    ),
]
SimulateModelOpt = Annotated[
    str, typer.Option("--model", "-m", help="The model served.", show_default=False)
]


@command("simulate")
def simulate(
    trace: TraceArg,
    model: SimulateModelOpt,
    gpu: GpuOpt,
    gpu_memory_utilization: GpuMemoryUtilizationOpt = "0.9",
    kv_cache_dtype: KvCacheDtypeOpt = "auto",
    engine_version: EngineVersionOpt = None,
    output: FormatOpt = OutputFormat.table,
) -> None:
    """Replay a request trace through vLLM's prefix cache on one GPU's pool: the tokens found
    cached, those prefilled, the FLOPs saved, the blocks evicted.

    The pool is the one vLLM gives the model on the GPU (kvplan plan --engine vllm); requests
    are admitted first come first served when their blocks fit, hit the longest run of their
    first blocks still cached, and evict the least recently freed blocks.
    """
    from kvplan.answers.simulate import replay_trace
    from kvplan.catalog.lookup import load_model
    from kvplan.cli.common import dtype_option
    from kvplan.hardware.lookup import find_gpu
    from kvplan.planner import parse_utilization
    from kvplan.views import simulate as views

    def run() -> None:
        utilization = option("--gpu-memory-utilization", parse_utilization, gpu_memory_utilization)
        kv = dtype_option("--kv-cache-dtype", kv_cache_dtype)
        replay = replay_trace(
            load_model(model),
            find_gpu(gpu),
            trace,
            gpu_memory_utilization=utilization,
            kv_cache_dtype=kv,
            version=engine_version,
        )
        doc = views.replay_to_dict(replay, trace)
        emit(output, lambda: doc, lambda: views.replay_view(doc))

    guard(run)
