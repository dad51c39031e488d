"""A budget's trace: a deployment replayed on a request trace (``kvplan simulate``), for its
``min_trace_hit_rate`` and ``max_trace_load_ms`` assertions.

A deployment's ``trace`` block names the trace (a file inside the budget's folder, as its spec
files are), its format and the tiers below the GPU; the replay takes the deployment's GPU,
``gpu_memory_utilization``, ``kv_cache_dtype`` and ``engine_version``. The hit rate is
asserted in tokens, exactly: the tokens found on the GPU or in a tier must reach
``ceil(rate x input tokens)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr

from kvplan.errors import SpecError
from kvplan.gate.fields import ByteSize

if TYPE_CHECKING:
    from kvplan.hardware.gpus import GPU


class TraceSettings(BaseModel):
    """The trace a deployment is replayed on, and the tiers below its GPU (sizes per GPU)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: Annotated[StrictStr, Field(min_length=1, max_length=4096)] = Field(
        description="The trace, a file inside this budget's folder."
    )
    format: Literal["auto", "mooncake", "token-ids", "prefix-groups"] = Field(
        "auto", description="The trace's format (auto: from its first line)."
    )
    host_tier: ByteSize | None = Field(None, description="Host memory tier (256GiB).")
    disk_tier: ByteSize | None = Field(None, description="Local disk tier (2TiB).")
    remote_tier: ByteSize | None = Field(None, description="Remote pool tier (10TiB).")


@dataclass(frozen=True, slots=True)
class TraceFacts:
    """What the replay gives: input tokens, those found on the GPU or in a tier, the most
    one request spent loading (ms)."""

    input_tokens: int
    reused_tokens: int
    max_load_ms: int

    def required_tokens(self, rate: float) -> int:
        """The tokens a hit rate of ``rate`` asks for: ceil(rate x input), exactly."""
        share = Fraction(str(rate))
        return -(-share.numerator * self.input_tokens // share.denominator)


def trace_facts(
    deployment: str,
    trace: TraceSettings | None,
    model: tuple[str, Path],
    device: GPU,
    asked: tuple[str, tuple[Fraction, str | None, str | None, int]],
) -> TraceFacts:
    """Replay the deployment named ``deployment`` (its model name and the budget's folder,
    its GPU, its engine with its utilization, KV cache dtype, version and TP size) on its
    ``trace``, a file
    inside the folder. Raises SpecError for a missing trace block, UnitError for a path
    outside the folder."""
    from kvplan.answers.simulate import TierSize, replay_trace
    from kvplan.gate.paths import budget_model, inside

    if trace is None:
        raise SpecError(deployment, ["expect: a trace assertion needs a trace block"])
    name, base = model
    what = "a budget names traces inside its own folder; copy the trace beside the budget"
    path = inside(deployment, "trace.path", trace.path, base, what)
    tiers = [
        TierSize(tier, size)
        for tier in ("host", "disk", "remote")
        if (size := getattr(trace, f"{tier}_tier")) is not None
    ]
    engine, (utilization, kv_cache_dtype, version, tp) = asked
    replay = replay_trace(
        budget_model(deployment, name, base),
        device,
        path,
        gpu_memory_utilization=utilization,
        kv_cache_dtype=kv_cache_dtype,
        version=version,
        tiers=tiers,
        trace_format=trace.format,
        engine=engine,
        tensor_parallel_size=tp,
    )
    r = replay.result
    return TraceFacts(r.input_tokens, r.reused_tokens, r.max_load_ms)
