"""``kvplan probe``: build a real transformers model and measure its cache."""

from typing import Annotated

import typer

from kvplan.cli.common import auto_none, check_failed_unless, command, emit, guard, option
from kvplan.cli.options import FormatOpt, MaxModelLenOpt, ModelArg, OutputFormat
from kvplan.progress import progress

BatchOpt = Annotated[
    int,
    typer.Option(
        "--batch",
        "-n",
        min=1,
        help="Sequences (-n, as plan's --concurrency). No longer -b: that is llama.cpp's"
        " logical batch in tokens in every command.",
    ),
]
DecodeStepsOpt = Annotated[
    int, typer.Option("--decode-steps", min=0, help="Decode steps after the prefill.")
]
DeviceOpt = Annotated[str, typer.Option("--device", help="cpu or cuda (cuda:N).")]
# the model's dtype and its cache's, one choice in transformers: not --kv-cache-dtype
KvDtypeOpt = Annotated[
    str, typer.Option("--kv-dtype", help="Model and cache dtype: auto, float32, bfloat16...")
]
ToleranceOpt = Annotated[
    str,
    typer.Option(
        "--tolerance",
        help="Allowed difference from the transformers estimate: bytes (4KiB) or percent (1%).",
    ),
]
PagedOpt = Annotated[
    bool, typer.Option("--paged", help="Also allocate a vLLM-shaped paged pool and compare.")
]
BlocksOpt = Annotated[int, typer.Option("--blocks", min=1, help="Blocks of the --paged pool.")]


@command("probe")
def probe(
    model: ModelArg,
    context: MaxModelLenOpt = "512",
    batch: BatchOpt = 1,
    decode_steps: DecodeStepsOpt = 0,
    device: DeviceOpt = "cpu",
    kv_dtype: KvDtypeOpt = "auto",
    tolerance: ToleranceOpt = "0",
    paged: PagedOpt = False,
    blocks: BlocksOpt = 64,
    output: FormatOpt = OutputFormat.table,
) -> None:
    """Build a real transformers model with the spec's KV geometry and measure its cache.

    -c is the prefill tokens of each sequence. Needs the probe extra (pip install
    'kvplan[probe]'); exits 3 without it, 1 when the measured cache differs from kvplan's
    transformers estimate by more than --tolerance.
    """
    from kvplan.catalog.lookup import load_model
    from kvplan.probe.measure import family_of, run_probe
    from kvplan.probe.tolerance import parse_tolerance
    from kvplan.units import parse_tokens
    from kvplan.views import probe as views

    def run() -> None:
        spec = load_model(model)
        tokens = option("--context", parse_tokens, context)
        family_of(spec)  # an unsupported model is a usage error, before torch is needed
        allowed = parse_tolerance(tolerance, "--tolerance")
        with progress(f"probing {spec.name} on {device} with transformers"):
            result = run_probe(
                spec,
                context_tokens=tokens,
                batch_size=batch,
                decode_steps=decode_steps,
                device=device,
                dtype=auto_none(kv_dtype),
                paged_blocks=blocks if paged else None,
            )
        estimate_bytes = result.transformers_estimate_bytes
        allowed_bytes = allowed.allowed_bytes(estimate_bytes)
        within = allowed.holds(result.difference_bytes, estimate_bytes)
        emit(
            output,
            lambda: views.probe_to_dict(result, within, allowed_bytes),
            lambda: views.probe_view(result, within, allowed_bytes),
        )
        check_failed_unless(within)

    guard(run)
