"""vLLM's release lines as kvplan models them, and the line for what a user types.

A line is a range of releases that size the KV cache by the same rules; ``resolve_version``
maps ``0.19.1``, ``v0.32.0`` or ``0.25.0`` to one and says so when it stands in for a release no
line covers. The rules themselves are in kvplan/engines/vllm.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import pairwise

from kvplan.errors import UnknownEngineError

__all__ = [
    "CUDA_GRAPH_BUDGET",
    "DEFAULT_VERSION",
    "FLOAT32_SSM_STATE",
    "GDN_CHECKPOINT_LINES",
    "HOLDS_NULL_BLOCK",
    "KERNEL_BLOCK_TOKENS",
    "ONE_LOG_LINE",
    "RULES",
    "SAMPLER_WARMUP_LINES",
    "SLIDING_KERNEL_BLOCK",
    "TOKENS_FROM_CONCURRENCY",
    "V1_ONLY_SPECULATIVE",
    "V2_RUNNER",
    "V2_RUNNER_HYBRIDS",
    "VERSIONS",
    "VersionChoice",
    "resolve_version",
]

#: A line is named after the newest release it covers. ``0.8``: the first V1 releases
#: (v0.8-v0.9.0): one KV cache group, sliding and chunked layers kept as full attention,
#: ``GPU KV cache size = num_blocks x block_size`` and concurrency ``tokens / max_model_len``.
#: ``0.19``: the hybrid manager (v0.9.1-v0.19.x). ``0.24`` to ``0.32``: the same layout with
#: the rule changes in ``RULES``, each read from that release's source and dated to the first
#: release that has it; 0.27.1 and 0.32.0 are also measured against the
#: real engine (its CPU build; tests/data/vllm_oracle_<version>.json). Their memory budget
#: also subtracts the CUDA-graph estimate (kvplan.engines.vllm_cudagraph), a fit to public
#: logs: give ``--kv-cache-memory`` for exact figures. ``0.33`` (v0.33.x) is read from its
#: source only: no CPU build of it exists to run. The default is the newest line run against
#: the real engine, 0.32.
VERSIONS = ("0.8", "0.19", "0.20", "0.24", "0.25", "0.27", "0.28", "0.29", "0.32", "0.33")
DEFAULT_VERSION = "0.32"

#: Each rule change after v0.19: the first release that has it, the file of vLLM's source it
#: was read from, and what changed. The line tuples below follow from these releases.
RULES = (
    (
        "0.20.0",
        "vllm/v1/core/kv_cache_utils.py",
        "the printed KV cache size is int(max concurrency x max_model_len) tokens, not"
        " num_blocks // groups x block_size",
    ),
    (
        "0.20.0",
        "vllm/model_executor/models/config.py",
        "Nemotron-H keeps its SSM state in float32 when --mamba-ssm-cache-dtype is auto and"
        " the config names none (float16 before)",
    ),
    (
        "0.21.0",
        "vllm/v1/worker/gpu_worker.py, vllm/envs.py",
        "the memory budget subtracts the profiled CUDA-graph estimate"
        " (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS on by default; opt-in from v0.17)",
    ),
    (
        "0.25.0",
        "vllm/model_executor/layers/attention/attention.py",
        "sliding-window layers take the attention backend's smallest kernel block (16 tokens"
        " for FlashAttention and the CPU backend), scaled up to the other layers' page when"
        " there are any: a model whose layers all slide keeps 16-token blocks",
    ),
    (
        "0.26.0",
        "vllm/config/model.py",
        "generating hybrids (Mamba, gated delta net) take prefix caching by default",
    ),
    (
        "0.26.0",
        "vllm/config/vllm.py, vllm/v1/kv_cache_interface.py",
        "sliding and chunked layers reserve max_num_batched_tokens x the batches in flight"
        " (2 with async scheduling, the GPU default) beyond the window",
    ),
    (
        "0.28.0",
        "vllm/model_executor/models/config.py",
        "prefix caching puts recurrent state in the align mode (2 blocks a request) for"
        " every model; before, models with Mamba prefix caching took the all mode",
    ),
    (
        "0.28.0",
        "vllm/v1/core/kv_cache_utils.py",
        "the KV cache size and the maximum concurrency are printed on one line",
    ),
    (
        "0.29.0",
        "vllm/v1/core/kv_cache_utils.py",
        "one block (the block pool's null block) is held back before deciding whether a"
        " request fits and when estimating the longest that does",
    ),
    (
        "0.29.0",
        "vllm/v1/kv_cache_interface.py",
        "Mamba2 layers in the align mode hold one more block, a prefill checkpoint",
    ),
    (
        "0.30.0",
        "vllm/model_executor/layers/attention/attention.py",
        "sliding-window layers take --block-size again when the backend runs it",
    ),
    (
        "0.33.0",
        "vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py, vllm/platforms/interface.py",
        "Qwen's gated-delta-net hybrids in the align mode, on FlashInfer's GDN prefill (Hopper;"
        " Blackwell with 128-wide keys), raise attention blocks in steps of 64 tokens and hold"
        " a prefill checkpoint block a request",
    ),
    (
        "0.33.0",
        "vllm/v1/worker/gpu/model_runner.py",
        "the V2 model runner's profile runs the sampler a second time with every sampling"
        " parameter on, its logits in float32",
    ),
)

#: lines whose budget subtracts the CUDA-graph estimate (from v0.21.0; v0.20.x, its own line,
#: only printed it)
CUDA_GRAPH_BUDGET = ("0.24", "0.25", "0.27", "0.28", "0.29", "0.32", "0.33")
#: lines that run attention-only models on the V2 model runner by default (from v0.26.0:
#: "Using V2 Model Runner" in its logs; ``VllmConfig.use_v2_model_runner``), and the lines
#: that run every model on it unless a feature it lacks is asked for (v0.32 source)
V2_RUNNER = ("0.27", "0.28", "0.29", "0.32", "0.33")
V2_RUNNER_HYBRIDS = ("0.32", "0.33")
#: speculative methods the V2 runner does not take (``_get_v2_model_runner_unsupported_features``)
V1_ONLY_SPECULATIVE = ("suffix", "medusa", "mlp_speculator")
#: lines whose printed KV cache size is int(concurrency x max_model_len) (from v0.20.0)
TOKENS_FROM_CONCURRENCY = ("0.20", "0.24", "0.25", "0.27", "0.28", "0.29", "0.32", "0.33")
#: lines that print the size and the concurrency on one line (from v0.28.0)
ONE_LOG_LINE = ("0.28", "0.29", "0.32", "0.33")
#: lines whose fit check holds the null block back (from v0.29.0)
HOLDS_NULL_BLOCK = ("0.29", "0.32", "0.33")
#: lines whose sliding-window layers take the backend's smallest kernel block, 16 tokens,
#: whatever --block-size says, when no other layer's page scales them up (v0.25.0-v0.29.x)
SLIDING_KERNEL_BLOCK = ("0.25", "0.27", "0.28", "0.29")
#: the attention backend's smallest kernel block, in tokens, that those lines keep
KERNEL_BLOCK_TOKENS = 16

#: lines whose Qwen gated-delta-net layers take FlashInfer's 64-token prefill checkpoints in
#: the align mode (v0.33.0): attention blocks in steps of 64 tokens, a checkpoint block more
GDN_CHECKPOINT_LINES = ("0.33",)
#: lines whose V2 model runner profiles a second sampler pass in float32 (v0.33.0)
SAMPLER_WARMUP_LINES = ("0.33",)

#: vLLM's four-part hotfix releases, each in the line of its first three parts
_HOTFIXES = ("0.9.0.1", "0.10.1.1")

#: The releases each modelled line covers, oldest first: (line, first, last) as (major, minor,
#: patch). v0.9.1 brought the hybrid KV cache manager.
_LINES = (
    ("0.8", (0, 8, 0), (0, 9, 0)),
    ("0.19", (0, 9, 1), (0, 19, 1 << 30)),
    ("0.20", (0, 20, 0), (0, 20, 1 << 30)),
    ("0.24", (0, 21, 0), (0, 24, 1 << 30)),
    ("0.25", (0, 25, 0), (0, 25, 1 << 30)),
    ("0.27", (0, 26, 0), (0, 27, 1 << 30)),
    ("0.28", (0, 28, 0), (0, 28, 1 << 30)),
    ("0.29", (0, 29, 0), (0, 29, 1 << 30)),
    ("0.32", (0, 30, 0), (0, 32, 1 << 30)),
    ("0.33", (0, 33, 0), (0, 33, 1 << 30)),
)


@dataclass(frozen=True, slots=True)
class VersionChoice:
    """The modelled line used for the version a user asked for, and a note when they differ
    (an older or newer release than any line covers)."""

    asked: str
    line: str
    note: str


def resolve_version(version: str | None) -> VersionChoice:
    """The modelled line for what a user types: ``0.19.1``, ``v0.19``, ``0.32.0``, or None for the
    newest. A release outside every line picks the nearest line and says so; text that is not
    a version raises UnknownEngineError."""
    if version is None:
        return VersionChoice(DEFAULT_VERSION, DEFAULT_VERSION, "")
    text = version.strip().lower().removeprefix("v")
    # a build's local tag (0.32.0+cpu, +gcac8a75a7.d20260828) and a re-packaging
    # (0.12.0.post2) size nothing
    text = re.sub(r"(\+[a-z0-9.]+|\.post\d+)$", "", text)
    # a release candidate, alpha, beta or development build (0.28.1rc1.dev50) is read with
    # the line of the release it leads to, and the answer says so
    pre = re.fullmatch(r"(\d+\.\d+(?:\.\d+)?)((?:rc|a|b)\d+)?(\.dev\d+)?", text)
    prerelease = pre is not None and (pre.group(2) or pre.group(3)) is not None
    if pre is not None:
        text = pre.group(1)
    parts = text.split(".")
    if ".".join(parts) in _HOTFIXES:
        parts = parts[:3]
    if not 2 <= len(parts) <= 3 or not all(p.isdigit() and len(p) <= 6 for p in parts):
        raise UnknownEngineError(
            f"vLLM version {version[:40]!r}: write it as vLLM prints it, e.g. 0.19.1 or v0.32.0;"
            f" modelled lines: {', '.join(VERSIONS)}"
        )
    release = (int(parts[0]), int(parts[1]), int(parts[2]) if len(parts) == 3 else 0)
    for line, first, last in _LINES:
        if first <= release <= last:
            note = (
                f"vLLM {version.strip()[:40]} is a pre-release of {text}; using the {line} rules"
                f" (v{_span(line)}), the line of that release"
                if prerelease
                else ""
            )
            return VersionChoice(version, line, note)
    line, where = _nearest_line(release)
    return VersionChoice(
        version,
        line,
        f"vLLM {text} is {where} the modelled release lines; using the {line} rules"
        f" (v{_span(line)}), the nearest",
    )


def _nearest_line(release: tuple[int, int, int]) -> tuple[str, str]:
    """The line nearest to a release no line covers, and how it relates to the lines."""
    if release < _LINES[0][1]:
        return _LINES[0][0], "older than all"
    if release > _LINES[-1][2]:
        return _LINES[-1][0], "newer than all"
    # between two lines: the nearer by minor release (a tie goes to the older, whose rules
    # were read in full)
    for (older, _, older_last), (newer, newer_first, _) in pairwise(_LINES):
        if older_last < release < newer_first:
            before = release[1] - older_last[1]
            after = newer_first[1] - release[1]
            return (older if before <= after else newer), "between"
    return _LINES[-1][0], "newer than all"  # pragma: no cover - the ranges leave no other gap


def _span(line: str) -> str:
    for name, first, last in _LINES:
        if name == line:
            end = f"{last[0]}.{last[1]}.x" if last[2] >= 1 << 30 else ".".join(map(str, last))
            return f"{first[0]}.{first[1]}.{first[2]}-{end}"
    return line  # pragma: no cover - every line is in _LINES


#: model types whose SSM state a line keeps in float32 when --mamba-ssm-cache-dtype is auto
#: (vllm/model_executor/models/config.py, from v0.20.0: NemotronH takes the config's
#: mamba_ssm_cache_dtype, else float32; float16 before, the same size as bfloat16);
#: measured on 0.32: Nemotron-H 8B's state page needs 1,152-token attention blocks
FLOAT32_SSM_STATE = dict.fromkeys(VERSIONS[2:], ("nemotron_h",))
