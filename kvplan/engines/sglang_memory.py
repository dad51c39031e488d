"""SGLang's automatic ``--mem-fraction-static``: the reserve heuristic of
``_handle_gpu_memory_settings`` in ``python/sglang/srt/server_args.py`` (late 2025; releases of
mid-2025 and earlier used other defaults: ``version`` picks the line, see
``kvplan.engines.sglang_versions``). The pool that fraction sizes is ``kvplan.engines.sglang``'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from kvplan.engines.sglang_versions import resolve_sglang_version
from kvplan.units import GiB, MiB


def _default_prefill_and_graph_bs(gpu_mem_mib: Fraction, tp: int) -> tuple[int, int]:
    """``chunked_prefill_size`` and ``cuda_graph_max_bs`` defaults by GPU memory (CUDA)."""
    small_tp = tp < 4
    if gpu_mem_mib < 20 * 1024:  # T4, 4080
        return 2048, 8
    if gpu_mem_mib < 35 * 1024:  # A10, 4090, 5090
        return 2048, 24 if small_tp else 80
    if gpu_mem_mib < 60 * 1024:  # A100 40GB, L40
        return 4096, 32 if small_tp else 160
    if gpu_mem_mib < 160 * 1024:  # H100, A100 80GB, H20, H200
        return 8192, 256 if small_tp else 512
    return 16384, 512  # B200, MI300


def mem_fraction_static_auto(
    gpu_memory_bytes: int,
    *,
    tp: int = 1,
    pp: int = 1,
    chunked_prefill_size: int | None = None,
    cuda_graph_max_bs: int | None = None,
    max_prefill_tokens: int = 16384,
    dp: int = 1,
    enable_dp_attention: bool = False,
    speculative_algorithm: str | None = None,
    version: str | None = None,
) -> float:
    """SGLang's automatic ``mem_fraction_static``: ``round((gpu - reserved) / gpu, 3)``, MiB.

    ``reserved`` (MiB) = 512 + 1.5 x max(chunked_prefill_size, 2048) (``max_prefill_tokens``
    when chunking is off, ``<= 0``) + 2 x cuda_graph_max_bs + tp x pp / 8 x 1024; with DP
    attention + 3 x cuda_graph_max_bs x dp, and + 1.5 x cuda_graph_max_bs x dp more when
    cuda_graph_max_bs > 300; at least 10 GiB on GPUs over 60 GiB; + 2 GiB for EAGLE-style
    drafts, + 6 GiB for STANDALONE, nothing for NGRAM. Unset sizes take the defaults of the
    GPU's memory tier. SGLang reads the total from ``nvidia-smi`` (MiB), a little above what
    torch reports; pass that figure for an exact match.

    H100 (81,090 MiB), TP 1: 512 + 12,288 + 512 + 128 = 13,440 -> 0.834.
    B200 (182,642 MiB), TP 8, DP 8 attention: 512 + 24,576 + 1,024 + 1,024 + 12,288 + 6,144
    = 45,568 -> 0.751. Multimodal models then take ``vlm_mem_fraction``. ``version`` (an
    SGLang release, None for this line) picks an older line's rule: ``_fraction_0_4``,
    ``_fraction_0_5_2``.
    """
    gpu_mem = Fraction(gpu_memory_bytes, MiB)
    line = resolve_sglang_version(version).line
    if line in ("0.4.6", "0.4.7"):
        return float(_fraction_0_4(gpu_mem, tp * pp, speculative_algorithm, line == "0.4.7"))
    if line == "0.5.2":
        return _fraction_0_5_2(gpu_mem, tp * pp, speculative_algorithm, enable_dp_attention)
    default_chunk, default_bs = _default_prefill_and_graph_bs(gpu_mem, tp)
    chunk = default_chunk if chunked_prefill_size is None else chunked_prefill_size
    graph_bs = default_bs if cuda_graph_max_bs is None else cuda_graph_max_bs

    reserved = Fraction(512)
    prefill = chunk if chunk > 0 else max_prefill_tokens
    reserved += Fraction(3, 2) * max(prefill, 2048)
    reserved += 2 * graph_bs
    reserved += Fraction(tp * pp * 1024, 8)
    if enable_dp_attention:
        reserved += 3 * graph_bs * dp
        if graph_bs > 300:
            reserved += Fraction(3, 2) * graph_bs * dp
    if gpu_mem > 60 * 1024:
        reserved = max(reserved, Fraction(10 * 1024))
    if speculative_algorithm is not None:
        if speculative_algorithm.upper() == "STANDALONE":
            reserved += 6 * 1024
        elif speculative_algorithm.upper() != "NGRAM":
            reserved += 2 * 1024
    return float(round((gpu_mem - reserved) / gpu_mem, 3))


def vlm_mem_fraction(fraction: float, block: Mapping[str, Any] | None) -> float:
    """The automatic ``fraction`` as SGLang lowers it for a multimodal model (``block``, the
    spec's ``multimodal``; None: a text model, unchanged): ``adjust_mem_fraction_for_vlm`` in
    python/sglang/srt/server_args.py scales it by ``0.95 x`` a factor of the vision tower's
    size against a ViT-L/14 (24 layers of 1,024): ``1 - 0.1 x (layers x hidden^2 / (24 x
    1,024^2) - 1)``, kept within 0.8 and 1.05, reading ``vision_config``'s num_hidden_layers
    (24 when the config has none, as Qwen-VL's ``depth``) and hidden_size (1,024), in floats.
    Gemma 3's SigLIP (27 layers of 1,152): ratio 1.423828125, factor 0.9576171875."""
    if block is None:
        return fraction
    layers: int = block.get("vision_num_hidden_layers", 24)
    hidden: int = block.get("vision_hidden_size", 1024)
    ratio = (layers * hidden**2) / (24 * 1024**2)
    factor = max(0.8, min(1.05, 1.0 - 0.1 * (ratio - 1.0)))
    return fraction * (0.95 * factor)


def _fraction_0_4(
    gpu_mem_mib: Fraction, parallel: int, speculative: str | None, v0_4_7: bool
) -> Fraction:
    """v0.4.6's fraction (v0.4.7's with ``v0_4_7``): a table by ``tp x pp`` up to 81,920 MiB,
    0.88 above, then raised over 96 GiB. H100 (81,090 MiB), TP 8: 0.81. H200 (143,771 MiB),
    TP 1: min(0.88 + 49,152 x 0.12 / 143,771, 125,339 / 143,771) = min(0.92102...,
    0.87179...) = 0.87179... v0.4.7 takes 0.79 over 180,000 MiB and keeps 20 GiB, not 18,
    with a speculative algorithm."""
    fraction = Fraction(88, 100)
    if gpu_mem_mib <= 81920:
        for least, table in ((16, 79), (8, 81), (4, 85), (2, 87)):
            if parallel >= least:
                fraction = Fraction(table, 100)
                break
    if v0_4_7 and gpu_mem_mib > 180_000:
        return Fraction(79, 100)
    if gpu_mem_mib > 96 * 1024:
        kept = 20 * 1024 if v0_4_7 and speculative is not None else 18 * 1024
        raised = fraction + 48 * 1024 * (1 - fraction) / gpu_mem_mib
        fraction = min(raised, (gpu_mem_mib - kept) / gpu_mem_mib)
    return fraction


def _fraction_0_5_2(
    gpu_mem_mib: Fraction, parallel: int, speculative: str | None, dp_attention: bool
) -> float:
    """v0.4.8-v0.5.2's fraction: ``round((gpu - reserved) / gpu, 3)``, ``reserved`` (MiB) by
    memory tier. H100 (81,090 MiB), TP 1: (9.5 + 0.5) x 1,024 = 10,240 -> 70,850 / 81,090
    = 0.874; TP 8: 13.5 x 1,024 = 13,824 -> 0.830."""
    if gpu_mem_mib < 35 * 1024:
        reserved = (Fraction(28, 10) + Fraction(parallel, 10)) * 1024
    elif gpu_mem_mib < 90 * 1024:
        reserved = (Fraction(95, 10) + Fraction(parallel, 2)) * 1024
    elif gpu_mem_mib < 160 * 1024:
        reserved = (12 + Fraction(parallel, 2)) * 1024
    else:
        reserved = Fraction(32 * GiB, MiB)
    if speculative is not None:
        reserved += (6 if speculative.upper() == "STANDALONE" else 2) * 1024
    reserved += 4 * 1024 * dp_attention
    return float(round((gpu_mem_mib - reserved) / gpu_mem_mib, 3))
