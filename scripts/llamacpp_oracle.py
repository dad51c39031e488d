"""Record what the real llama.cpp allocates for small GGUF files, as an oracle for kvplan.

Each case writes a tiny GGUF file with the ``gguf`` writer (metadata, a minimal SentencePiece
vocabulary and real tensor data with tiny dimensions), loads it on the CPU through
llama-cpp-python's low-level API in a child process (one per case) and keeps the lines
llama.cpp prints about its buffers: model buffers per buffer type (CPU, CPU_Mapped,
CPU_REPACK), the KV buffer and its size lines, the output buffer, the compute buffer and the
padded ``n_ctx``. The compute buffer's exact size in bytes is read as well (``compute_bytes``):
an eval callback sees the first node of a one-token decode, whose ``buffer`` is the compute
buffer, and ``ggml_backend_buffer_get_size`` gives its size (the decode does not grow it). The
recording is written to ``tests/data/llamacpp_oracle_<commit>.json`` with the llama.cpp
commit, the llama-cpp-python version and each case's settings. The cases: llama, qwen2, qwen3,
gemma2/3 with sliding windows, deepseek2 MLA (dense, and with V2's or V3's routed experts) and
a grid of qwen3moe ones (experts, experts used, expert width, n_embd, -ub, flash attention).

Usage (in an environment with ``llama-cpp-python`` and ``gguf`` installed):

    python scripts/llamacpp_oracle.py                # every case, write the recording
    python scripts/llamacpp_oracle.py --quick        # a few cases, print the recording only
    python scripts/llamacpp_oracle.py --quick --out F  # a few cases, written to F (CI)

``write_gguf(case, path)`` is imported by the tests to rebuild each case's file (only the
header matters to kvplan; the tensor values are random).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

#: tiny geometry shared by the cases (all multiples of 32 so every weight type applies)
EMBD = 64
HEADS = 4
KV_HEADS = 2
HEAD_DIM = 32
FF = 128
LAYERS = 4
EXPERTS = 8  # qwen3moe: routed experts, 2 used per token, each FF_EXP wide
EXPERTS_USED = 2
FF_EXP = 64
VOCAB = 320  # 3 specials + 256 bytes + 61 words; a multiple of 8 (repack needs ne[1] % 8)
CTX_TRAIN = 4096
#: deepseek2's MLA: (kv_lora_rank, qk_nope, qk_rope, v_head_dim)
MLA = (64, 32, 32, 32)
#: the attention geometry a case may set: (key, default)
_GEOMETRY = (("heads", HEADS), ("kv_heads", KV_HEADS), ("head_dim", HEAD_DIM))


def _case(name: str, arch: str, **settings: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "arch": arch,
        "weights": "F16",
        "n_ctx": 1024,
        "n_batch": 512,
        "n_ubatch": 512,
        "n_seq_max": 1,
        "kv_unified": False,
        "swa_full": False,
        "flash_attn": True,
        "type_k": "f16",
        "type_v": "f16",
        "use_mmap": True,
        "layers": LAYERS,
    }
    base.update(settings)
    base["name"] = name
    return base


CASES: list[dict[str, Any]] = [
    _case("llama-f16", "llama"),
    _case("llama-f16-nofa", "llama", flash_attn=False),
    _case("llama-q8_0", "llama", weights="Q8_0"),
    _case("llama-q4_0", "llama", weights="Q4_0"),
    _case("llama-q4_0-nommap", "llama", weights="Q4_0", use_mmap=False),
    _case("llama-f16-nommap", "llama", use_mmap=False),
    _case("llama-ctx1000", "llama", n_ctx=1000),
    _case("llama-ctx3000-ub256", "llama", n_ctx=3000, n_ubatch=256, n_batch=1024),
    _case("llama-ub128", "llama", n_ubatch=128, n_batch=128),
    _case("llama-np4", "llama", n_seq_max=4),
    _case("llama-np4-unified", "llama", n_seq_max=4, kv_unified=True),
    _case("llama-np3-ctx1000", "llama", n_seq_max=3, n_ctx=1000),
    _case("llama-q8kv", "llama", type_k="q8_0", type_v="q8_0"),
    _case("llama-q4k-f16v-nofa", "llama", type_k="q4_0", flash_attn=False),
    _case("llama-q8v-nofa", "llama", type_v="q8_0", flash_attn=False),
    _case("llama-8layers", "llama", layers=8),
    _case("qwen3-f16", "qwen3"),
    _case("qwen3-q4_0-np2", "qwen3", weights="Q4_0", n_seq_max=2),
    _case("gemma2-swa", "gemma2"),
    _case("gemma2-swa-full", "gemma2", swa_full=True),
    _case("gemma3-swa", "gemma3", layers=6, n_ctx=2048),
    _case("gemma3-swa-full", "gemma3", layers=6, n_ctx=2048, swa_full=True),
    _case("gemma3-swa-np2", "gemma3", layers=6, n_ctx=2048, n_seq_max=2),
    _case("gemma3-swa-nofa", "gemma3", layers=6, n_ctx=2048, flash_attn=False),
    _case("deepseek2-mla", "deepseek2"),
    _case("deepseek2-mla-nofa", "deepseek2", flash_attn=False),
    _case("deepseek2-mla-ctx2048", "deepseek2", n_ctx=2048),
    _case("qwen3moe-f16", "qwen3moe"),
    _case("qwen3moe-q4_0-ub256", "qwen3moe", weights="Q4_0", n_ubatch=256, n_batch=256),
    _case("qwen3moe-f16-nofa-ctx2048", "qwen3moe", flash_attn=False, n_ctx=2048),
    _case("qwen3moe-ffexp128-used4", "qwen3moe", ff_exp=128, experts_used=4),
    _case("qwen3moe-ffexp32-used2-ub128", "qwen3moe", ff_exp=32, n_ubatch=128, n_batch=128),
]

#: the qwen3moe grid: (experts, used, expert width, n_embd, -ub, flash attention)
MOE_GRID = [
    (4, 1, 64, 64, 512, True),
    (4, 4, 64, 64, 512, True),
    (8, 1, 64, 64, 512, True),
    (8, 4, 64, 64, 512, True),
    (8, 8, 64, 64, 512, True),
    (16, 2, 64, 64, 512, True),
    (16, 4, 32, 64, 512, True),
    (8, 2, 32, 64, 512, True),
    (8, 2, 128, 64, 512, True),
    (8, 2, 256, 64, 512, True),
    (8, 2, 64, 128, 512, True),
    (8, 2, 64, 256, 512, True),
    (8, 2, 128, 128, 256, True),
    (8, 2, 64, 64, 128, True),
    (8, 4, 128, 64, 128, True),
    (8, 2, 256, 256, 256, True),
    (16, 8, 32, 128, 512, True),
    (8, 2, 64, 64, 512, False),
    (8, 4, 128, 64, 512, False),
    (16, 2, 64, 128, 256, False),
    (8, 2, 256, 64, 128, False),
    (4, 2, 32, 256, 512, False),
]
CASES += [
    _case(
        f"qwen3moe-e{e}-u{u}-f{f}-d{d}-ub{ub}" + ("" if fa else "-nofa"),
        "qwen3moe",
        experts=e,
        experts_used=u,
        ff_exp=f,
        embd=d,
        n_ubatch=ub,
        n_batch=ub,
        flash_attn=fa,
    )
    for e, u, f, d, ub, fa in MOE_GRID
]
#: deepseek2 with routed experts: V3's router (sigmoid, selection bias, groups, normalised
#: and scaled weights) and V2's (softmax, scaled or not), one leading dense layer
_V3 = {"shared": 1, "lead": 1, "gating": 2, "probs_b": True, "norm": True, "scale": 2.5}
_V2 = {"lead": 1, "gating": 1, "probs_b": False, "norm": False, "groups": None}
DEEPSEEK_MOE = [
    ("v3", {**_V3, "experts": 8, "used": 2, "ff_exp": 64, "groups": [4, 2]}, {}),
    (
        "v3-nofa",
        {**_V3, "experts": 8, "used": 2, "ff_exp": 64, "groups": [4, 2]},
        {"flash_attn": False},
    ),
    (
        "v3-e16-u4-g8-ub128",
        {**_V3, "experts": 16, "used": 4, "ff_exp": 128, "groups": [8, 4]},
        {"n_ubatch": 128, "n_batch": 128},
    ),
    ("v2lite", {**_V2, "experts": 8, "used": 4, "ff_exp": 32, "shared": 2, "scale": 1.0}, {}),
    (
        "v2-scale16-ub256",
        {**_V2, "experts": 8, "used": 2, "ff_exp": 64, "shared": 2, "scale": 16.0},
        {"n_ubatch": 256, "n_batch": 256},
    ),
]
CASES += [
    _case("qwen2-f16", "qwen2", embd=128),
    _case("qwen2-f16-nofa-ub256", "qwen2", embd=128, flash_attn=False, n_ubatch=256, n_batch=256),
]
CASES += [_case(f"deepseek2-moe-{n}", "deepseek2", moe=m, **kw) for n, m, kw in DEEPSEEK_MOE]

#: cache types beyond f16 (llama.cpp casts an f32 cache to f16 for flash attention), other
#: attention geometries, and MLA with other dims and cache types
_MLA_WIDE = {"heads": 8, "mla": [128, 64, 32, 64]}
CASES += [
    _case("llama-f32kv", "llama", type_k="f32", type_v="f32"),
    _case("llama-f32kv-nofa", "llama", type_k="f32", type_v="f32", flash_attn=False),
    _case("llama-f32k-f16v", "llama", type_k="f32"),
    _case("llama-f16k-f32v-nofa", "llama", type_v="f32", flash_attn=False),
    _case("llama-q4_0kv", "llama", type_k="q4_0", type_v="q4_0"),
    _case("llama-q4_1kv", "llama", type_k="q4_1", type_v="q4_1"),
    _case("llama-q5_0kv", "llama", type_k="q5_0", type_v="q5_0"),
    _case("llama-q5_1kv", "llama", type_k="q5_1", type_v="q5_1"),
    _case("llama-q8k-f16v", "llama", type_k="q8_0"),
    _case("llama-f16k-q4v", "llama", type_v="q4_0"),
    _case("llama-q8k-q4v-np2", "llama", type_k="q8_0", type_v="q4_0", n_seq_max=2),
    _case("llama-q8k-nofa", "llama", type_k="q8_0", flash_attn=False),
    _case("llama-h8-kv4-d64", "llama", embd=256, heads=8, kv_heads=4, head_dim=64),
    _case(
        "llama-h8-kv4-d64-q8kv",
        "llama",
        embd=256,
        heads=8,
        kv_heads=4,
        head_dim=64,
        type_k="q8_0",
        type_v="q8_0",
    ),
    _case(
        "llama-h8-kv1-d128-nofa",
        "llama",
        embd=256,
        heads=8,
        kv_heads=1,
        head_dim=128,
        flash_attn=False,
    ),
    _case(
        "llama-h16-kv8-d32-q4k-nofa-ub256",
        "llama",
        embd=128,
        heads=16,
        kv_heads=8,
        type_k="q4_0",
        flash_attn=False,
        n_ubatch=256,
        n_batch=256,
    ),
    _case("qwen3-q8kv", "qwen3", type_k="q8_0", type_v="q8_0"),
    _case("qwen3-f32kv-np2", "qwen3", type_k="f32", type_v="f32", n_seq_max=2),
    _case("gemma3-swa-q8kv", "gemma3", layers=6, n_ctx=2048, type_k="q8_0", type_v="q8_0"),
    _case("gemma3-swa-f32kv", "gemma3", layers=6, n_ctx=2048, type_k="f32", type_v="f32"),
    _case("qwen3moe-q4kv", "qwen3moe", type_k="q4_0", type_v="q4_0"),
    _case("deepseek2-mla-q8_0", "deepseek2", type_k="q8_0", type_v="q8_0"),
    _case("deepseek2-mla-q8_0-nofa", "deepseek2", type_k="q8_0", type_v="q8_0", flash_attn=False),
    _case("deepseek2-mla-q8k-f16v", "deepseek2", type_k="q8_0"),
    _case(
        "deepseek2-mla-576-q8_0",
        "deepseek2",
        embd=256,
        heads=8,
        mla=[96, 32, 32, 32],
        type_k="q8_0",
        type_v="q8_0",
    ),
    _case("llama-d128-q4k", "llama", embd=256, heads=4, kv_heads=2, head_dim=128, type_k="q4_0"),
    _case("llama-d128-q8v", "llama", embd=256, heads=4, kv_heads=2, head_dim=128, type_v="q8_0"),
    _case(
        "llama-d192-q8kv",
        "llama",
        embd=384,
        heads=4,
        kv_heads=2,
        head_dim=192,
        type_k="q8_0",
        type_v="q8_0",
    ),
    _case(
        "llama-d64-q8kv-np2-ub256",
        "llama",
        embd=256,
        heads=4,
        kv_heads=4,
        head_dim=64,
        type_k="q8_0",
        type_v="q8_0",
        n_seq_max=2,
        n_ubatch=256,
        n_batch=256,
    ),
    _case(
        "llama-d64-q4k-nofa",
        "llama",
        embd=256,
        heads=8,
        kv_heads=2,
        head_dim=64,
        type_k="q4_0",
        flash_attn=False,
    ),
    _case(
        "qwen3-d64-q8kv",
        "qwen3",
        embd=256,
        heads=8,
        kv_heads=2,
        head_dim=64,
        type_k="q8_0",
        type_v="q8_0",
    ),
    _case(
        "gemma3-d64-q8kv",
        "gemma3",
        layers=6,
        n_ctx=2048,
        embd=256,
        heads=4,
        kv_heads=2,
        head_dim=64,
        type_k="q8_0",
        type_v="q8_0",
    ),
    _case(
        "gemma3-d64-q4k-nofa",
        "gemma3",
        layers=6,
        n_ctx=2048,
        embd=256,
        heads=4,
        kv_heads=2,
        head_dim=64,
        type_k="q4_0",
        flash_attn=False,
    ),
    _case(
        "gemma2-d128-q8kv",
        "gemma2",
        embd=256,
        heads=4,
        kv_heads=2,
        head_dim=128,
        type_k="q8_0",
        type_v="q8_0",
    ),
    _case(
        "qwen3moe-d64-q8kv",
        "qwen3moe",
        embd=256,
        heads=4,
        kv_heads=2,
        head_dim=64,
        type_k="q8_0",
        type_v="q8_0",
    ),
    _case(
        "llama-d64-f32kv-np2",
        "llama",
        embd=256,
        heads=4,
        kv_heads=2,
        head_dim=64,
        type_k="f32",
        type_v="f32",
        n_seq_max=2,
    ),
    _case("deepseek2-mla-f32-np2", "deepseek2", type_k="f32", type_v="f32", n_seq_max=2),
    _case("deepseek2-mla-wide-f32", "deepseek2", embd=256, type_k="f32", type_v="f32", **_MLA_WIDE),
    _case("deepseek2-mla-q4_0", "deepseek2", type_k="q4_0", type_v="q4_0"),
    _case("deepseek2-mla-f32", "deepseek2", type_k="f32", type_v="f32"),
    _case("deepseek2-mla-f32-nofa", "deepseek2", type_k="f32", type_v="f32", flash_attn=False),
    _case("deepseek2-mla-wide", "deepseek2", embd=256, **_MLA_WIDE),
    _case("deepseek2-mla-wide-nofa", "deepseek2", embd=256, flash_attn=False, **_MLA_WIDE),
    _case(
        "deepseek2-mla-wide-np2-ub256",
        "deepseek2",
        embd=256,
        n_seq_max=2,
        n_ubatch=256,
        n_batch=256,
        **_MLA_WIDE,
    ),
    _case(
        "deepseek2-mla-wide-q8_0", "deepseek2", embd=256, type_k="q8_0", type_v="q8_0", **_MLA_WIDE
    ),
    _case("deepseek2-mla-ctx3000-nofa", "deepseek2", n_ctx=3000, flash_attn=False),
    _case("deepseek2-qlora", "deepseek2", q_lora=96),
    _case("deepseek2-qlora-nofa", "deepseek2", q_lora=96, flash_attn=False),
    _case(
        "deepseek2-qlora-wide-q8_0",
        "deepseek2",
        embd=256,
        q_lora=192,
        type_k="q8_0",
        type_v="q8_0",
        **_MLA_WIDE,
    ),
    _case(
        "deepseek2-qlora-wide-np2-nofa",
        "deepseek2",
        embd=256,
        q_lora=64,
        n_seq_max=2,
        flash_attn=False,
        **_MLA_WIDE,
    ),
    _case("deepseek2-moe-v3-qlora", "deepseek2", q_lora=128, moe=DEEPSEEK_MOE[0][1]),
]

QUICK = (
    "llama-q4_0",
    "gemma3-swa",
    "deepseek2-mla",
    "llama-q8v-nofa",
    "qwen3moe-ffexp128-used4",
    "gemma2-d128-q8kv",
    "deepseek2-mla-f32",
)


# --- writing the GGUF files --------------------------------------------------------------


def _tensors(case: dict[str, Any]) -> list[tuple[str, tuple[int, ...]]]:
    """(name, ggml shape: ne[0] first) of every tensor llama.cpp loads for ``case``'s arch."""
    arch, layers = case["arch"], case["layers"]
    ff_exp = case.get("ff_exp", FF_EXP)
    experts = case.get("experts", EXPERTS)
    embd = case.get("embd", EMBD)
    heads, kv_heads, head_dim = (case.get(k, d) for k, d in _GEOMETRY)
    lora, nope, rope, v_mla = case.get("mla", MLA)
    out: list[tuple[str, tuple[int, ...]]] = [("token_embd.weight", (embd, VOCAB))]
    out.append(("output_norm.weight", (embd,)))
    if arch in ("llama", "qwen2", "qwen3", "qwen3moe", "deepseek2"):
        out.append(("output.weight", (embd, VOCAB)))
    for i in range(layers):
        b = f"blk.{i}."
        out.append((b + "attn_norm.weight", (embd,)))
        if arch == "deepseek2":
            out += [
                *_mla_query(b, embd, heads * (nope + rope), case.get("q_lora", 0)),
                (b + "attn_kv_a_mqa.weight", (embd, lora + rope)),
                (b + "attn_kv_a_norm.weight", (lora,)),
                (b + "attn_k_b.weight", (nope, lora, heads)),
                (b + "attn_v_b.weight", (lora, v_mla, heads)),
                (b + "attn_output.weight", (heads * v_mla, embd)),
            ]
        else:
            out += [
                (b + "attn_q.weight", (embd, heads * head_dim)),
                (b + "attn_k.weight", (embd, kv_heads * head_dim)),
                (b + "attn_v.weight", (embd, kv_heads * head_dim)),
                (b + "attn_output.weight", (heads * head_dim, embd)),
            ]
        if arch == "qwen2":
            out += [
                (b + "attn_q.bias", (heads * head_dim,)),
                (b + "attn_k.bias", (kv_heads * head_dim,)),
                (b + "attn_v.bias", (kv_heads * head_dim,)),
            ]
        if arch in ("qwen3", "qwen3moe", "gemma3"):
            out += [
                (b + "attn_q_norm.weight", (head_dim,)),
                (b + "attn_k_norm.weight", (head_dim,)),
            ]
        if arch in ("gemma2", "gemma3"):
            out.append((b + "post_attention_norm.weight", (embd,)))
            out.append((b + "post_ffw_norm.weight", (embd,)))
        if arch == "qwen3moe":
            out += [
                (b + "ffn_norm.weight", (embd,)),
                (b + "ffn_gate_inp.weight", (embd, experts)),
                (b + "ffn_gate_exps.weight", (embd, ff_exp, experts)),
                (b + "ffn_up_exps.weight", (embd, ff_exp, experts)),
                (b + "ffn_down_exps.weight", (ff_exp, embd, experts)),
            ]
            continue
        if arch == "deepseek2" and "moe" in case and i >= case["moe"]["lead"]:
            out += _deepseek_moe(b, embd, case["moe"])
            continue
        out += [
            (b + "ffn_norm.weight", (embd,)),
            (b + "ffn_gate.weight", (embd, FF)),
            (b + "ffn_up.weight", (embd, FF)),
            (b + "ffn_down.weight", (FF, embd)),
        ]
    return out


def _mla_query(b: str, embd: int, width: int, q_lora: int) -> list[tuple[str, tuple[int, ...]]]:
    """deepseek2's query: one projection (V2-Lite), or through a normed rank (V2, V3)."""
    if not q_lora:
        return [(b + "attn_q.weight", (embd, width))]
    return [
        (b + "attn_q_a.weight", (embd, q_lora)),
        (b + "attn_q_a_norm.weight", (q_lora,)),
        (b + "attn_q_b.weight", (q_lora, width)),
    ]


def _deepseek_moe(b: str, embd: int, moe: dict[str, Any]) -> list[tuple[str, tuple[int, ...]]]:
    """A deepseek2 MoE layer's feed-forward: router, routed and shared experts."""
    n, width, shared = moe["experts"], moe["ff_exp"], moe["shared"] * moe["ff_exp"]
    out = [(b + "ffn_norm.weight", (embd,)), (b + "ffn_gate_inp.weight", (embd, n))]
    if moe["probs_b"]:
        out.append((b + "exp_probs_b.bias", (n,)))
    out += [
        (b + "ffn_gate_exps.weight", (embd, width, n)),
        (b + "ffn_up_exps.weight", (embd, width, n)),
        (b + "ffn_down_exps.weight", (width, embd, n)),
        (b + "ffn_gate_shexp.weight", (embd, shared)),
        (b + "ffn_up_shexp.weight", (embd, shared)),
        (b + "ffn_down_shexp.weight", (shared, embd)),
    ]
    return out


def _deepseek_moe_metadata(writer: Any, a: str, moe: dict[str, Any]) -> None:
    writer.add_uint32(f"{a}.leading_dense_block_count", moe["lead"])
    writer.add_uint32(f"{a}.expert_feed_forward_length", moe["ff_exp"])
    writer.add_uint32(f"{a}.expert_shared_count", moe["shared"])
    writer.add_uint32(f"{a}.expert_count", moe["experts"])
    writer.add_uint32(f"{a}.expert_used_count", moe["used"])
    writer.add_float32(f"{a}.expert_weights_scale", moe["scale"])
    writer.add_bool(f"{a}.expert_weights_norm", moe["norm"])
    writer.add_uint32(f"{a}.expert_gating_func", moe["gating"])  # 1 softmax, 2 sigmoid
    if moe["groups"]:
        writer.add_uint32(f"{a}.expert_group_count", moe["groups"][0])
        writer.add_uint32(f"{a}.expert_group_used_count", moe["groups"][1])


def _metadata(writer: Any, arch: str, layers: int, case: dict[str, Any]) -> None:
    a = arch
    writer.add_uint32(f"{a}.context_length", CTX_TRAIN)
    writer.add_uint32(f"{a}.embedding_length", case.get("embd", EMBD))
    writer.add_uint32(f"{a}.block_count", layers)
    writer.add_uint32(f"{a}.feed_forward_length", FF)
    heads, kv_heads, head_dim = (case.get(k, d) for k, d in _GEOMETRY)
    lora, nope, rope, v_mla = case.get("mla", MLA)
    writer.add_uint32(f"{a}.attention.head_count", heads)
    writer.add_float32(f"{a}.attention.layer_norm_rms_epsilon", 1e-6)
    writer.add_float32(f"{a}.rope.freq_base", 10000.0)
    if arch == "deepseek2":
        writer.add_uint32(f"{a}.attention.head_count_kv", 1)
        writer.add_uint32(f"{a}.attention.kv_lora_rank", lora)
        writer.add_uint32(f"{a}.attention.key_length", lora + rope)
        writer.add_uint32(f"{a}.attention.value_length", lora)
        writer.add_uint32(f"{a}.attention.key_length_mla", nope + rope)
        writer.add_uint32(f"{a}.attention.value_length_mla", v_mla)
        writer.add_uint32(f"{a}.attention.q_lora_rank", case.get("q_lora", 0))
        writer.add_uint32(f"{a}.rope.dimension_count", rope)
        if "moe" in case:
            _deepseek_moe_metadata(writer, a, case["moe"])
            return
        writer.add_uint32(f"{a}.leading_dense_block_count", layers)
        writer.add_uint32(f"{a}.expert_feed_forward_length", FF)
        writer.add_uint32(f"{a}.expert_shared_count", 1)
        writer.add_uint32(f"{a}.expert_count", 0)
        writer.add_uint32(f"{a}.expert_used_count", 0)
        return
    writer.add_uint32(f"{a}.attention.head_count_kv", kv_heads)
    writer.add_uint32(f"{a}.attention.key_length", head_dim)
    writer.add_uint32(f"{a}.attention.value_length", head_dim)
    if arch == "qwen3moe":
        writer.add_uint32(f"{a}.expert_count", case.get("experts", EXPERTS))
        writer.add_uint32(f"{a}.expert_used_count", case.get("experts_used", EXPERTS_USED))
        writer.add_uint32(f"{a}.expert_feed_forward_length", case.get("ff_exp", FF_EXP))
    if arch in ("gemma2", "gemma3"):
        writer.add_uint32(f"{a}.attention.sliding_window", 128)
    if arch == "gemma2":
        writer.add_float32(f"{a}.attn_logit_softcapping", 50.0)
        writer.add_float32(f"{a}.final_logit_softcapping", 30.0)


def _vocab(writer: Any) -> None:
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
    tokens += [f"\u2581w{i}" for i in range(VOCAB - len(tokens))]
    types = [2, 3, 3] + [6] * 256 + [1] * (VOCAB - 259)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores([0.0] * 259 + [-float(i) for i in range(VOCAB - 259)])
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)


def write_gguf(case: dict[str, Any], path: Path) -> None:
    """Write ``case``'s GGUF file at ``path`` (weights in ``case["weights"]``, norms f32)."""
    import gguf
    import numpy as np

    rng = np.random.default_rng(0)
    wtype = gguf.GGMLQuantizationType[case["weights"]]
    writer = gguf.GGUFWriter(str(path), case["arch"])
    _metadata(writer, case["arch"], case["layers"], case)
    _vocab(writer)
    for name, shape in _tensors(case):
        data = (rng.standard_normal(tuple(reversed(shape))) * 0.02).astype(np.float32)
        if len(shape) == 1:
            writer.add_tensor(name, data)
        elif wtype == gguf.GGMLQuantizationType.F16 or shape[0] % 32:
            writer.add_tensor(name, data.astype(np.float16))
        else:
            writer.add_tensor(name, gguf.quants.quantize(data, wtype), raw_dtype=wtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


# --- running llama.cpp -------------------------------------------------------------------

_CACHE_TYPES = {"f32": 0, "f16": 1, "q4_0": 2, "q4_1": 3, "q5_0": 6, "q5_1": 7, "q8_0": 8}


def _child(case: dict[str, Any], path: str) -> None:
    """Load ``path`` with ``case``'s settings; llama.cpp's log goes to stderr."""
    import ctypes

    import llama_cpp

    @llama_cpp.llama_log_callback  # type: ignore[misc]
    def _log(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
        sys.stderr.write(text.decode("utf-8", "replace"))

    llama_cpp.llama_log_set(_log, ctypes.c_void_p(0))
    llama_cpp.llama_backend_init()
    mparams = llama_cpp.llama_model_default_params()
    if hasattr(llama_cpp, "LLAMA_LOAD_MODE_MMAP") or "load_mode" in dict(
        mparams._fields_  # type: ignore[attr-defined]
    ):
        # this build's llama_model_params has load_mode (1 = mmap, 0 = read into a buffer)
        # in place of use_mmap; setting a missing ctypes field would be silently ignored
        mparams.load_mode = 1 if case["use_mmap"] else 0
    else:
        mparams.use_mmap = case["use_mmap"]
    model = llama_cpp.llama_model_load_from_file(path.encode(), mparams)
    if not model:
        sys.stderr.write("ORACLE: model load failed\n")
        sys.exit(3)
    cparams = llama_cpp.llama_context_default_params()
    for key in ("n_ctx", "n_batch", "n_ubatch", "n_seq_max", "kv_unified", "swa_full"):
        setattr(cparams, key, case[key])
    cparams.n_threads = cparams.n_threads_batch = 1
    cparams.flash_attn_type = 1 if case["flash_attn"] else 0
    cparams.type_k = _CACHE_TYPES[case["type_k"]]
    cparams.type_v = _CACHE_TYPES[case["type_v"]]
    seen: list[int] = []

    @llama_cpp.ggml_backend_sched_eval_callback  # type: ignore[misc]
    def _node(tensor: int, ask: bool, user_data: ctypes.c_void_p) -> bool:
        # ggml_tensor.buffer (the second field, at byte 8): the compute buffer of a node
        if ask and not seen:
            seen.append(ctypes.c_void_p.from_address(tensor + 8).value or 0)
        return False

    cparams.cb_eval = _node
    ctx = llama_cpp.llama_init_from_model(model, cparams)
    if not ctx:
        sys.stderr.write("ORACLE: context refused\n")
        sys.exit(4)
    _print_compute_bytes(ctx, seen)
    llama_cpp.llama_free(ctx)
    llama_cpp.llama_model_free(model)


def _print_compute_bytes(ctx: Any, seen: list[int]) -> None:
    """Decode one token and print the exact size of the compute buffer its first node lives
    in (``ggml_backend_buffer_get_size``): the one-token graph fits the reserved buffer, which
    is therefore not reallocated."""
    import ctypes

    import llama_cpp

    batch = llama_cpp.llama_batch_init(1, 0, 1)
    batch.n_tokens = 1
    batch.token[0], batch.pos[0], batch.n_seq_id[0], batch.logits[0] = 3, 0, 1, 1
    batch.seq_id[0][0] = 0
    if llama_cpp.llama_decode(ctx, batch) != 0 or not seen:
        return
    lib = ctypes.CDLL(str(Path(llama_cpp.__file__).parent / "lib" / "libggml-base.so"))
    lib.ggml_backend_buffer_get_size.restype = ctypes.c_size_t
    lib.ggml_backend_buffer_get_size.argtypes = [ctypes.c_void_p]
    lib.ggml_backend_buffer_name.restype = ctypes.c_char_p
    lib.ggml_backend_buffer_name.argtypes = [ctypes.c_void_p]
    name = lib.ggml_backend_buffer_name(seen[0]).decode()
    size = lib.ggml_backend_buffer_get_size(seen[0])
    sys.stderr.write(f"ORACLE: {name} compute buffer bytes = {size}\n")
    llama_cpp.llama_batch_free(batch)


_MODEL = re.compile(r"load_tensors:\s+(\S+) model buffer size =\s+([\d.]+) MiB")
_KV = re.compile(r"llama_kv_cache:\s+(\S+) KV buffer size =\s+([\d.]+) MiB")
_OUT = re.compile(r"llama_context:\s+(\S+)\s+output buffer size =\s+([\d.]+) MiB")
# printed by ``sched_reserve`` (older builds: ``llama_context``); again with 4 decimals when
# the context is freed (``~llama_context: CPU compute buffer size is 2.1387 MiB``)
_COMPUTE = re.compile(r"\w+:\s+(\S+) compute buffer size =\s+([\d.]+) MiB")
_COMPUTE_FREED = re.compile(r"~llama_context:\s+(\S+) compute buffer size is\s+([\d.]+) MiB")
_COMPUTE_BYTES = re.compile(r"ORACLE: (\S+) compute buffer bytes = (\d+)")
_CTX = re.compile(r"llama_context: n_ctx\s+= (\d+)")
_SIZE = re.compile(r"llama_kv_cache: size = .*")


def parse_log(text: str) -> dict[str, Any]:
    """The buffers and figures one llama.cpp run printed (MiB as printed, 2 decimals)."""
    buffers: list[dict[str, Any]] = []
    for kind, pattern in (("model", _MODEL), ("kv", _KV), ("output", _OUT), ("compute", _COMPUTE)):
        for match in pattern.finditer(text):
            buffers.append({"device": match[1], "kind": kind, "mib": match[2]})
    ctx = _CTX.search(text)
    return {
        "buffers": buffers,
        "compute_freed_mib": {m[1]: m[2] for m in _COMPUTE_FREED.finditer(text)},
        "compute_bytes": {m[1]: int(m[2]) for m in _COMPUTE_BYTES.finditer(text)},
        "n_ctx": int(ctx[1]) if ctx else None,
        "kv_size_lines": [m[0].split(": ", 1)[1] for m in _SIZE.finditer(text)],
        "refused": "ORACLE: context refused" in text,
    }


def run_case(case: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """Write the case's file, load it in a child process and parse what it printed."""
    path = workdir / f"{case['name']}.gguf"
    write_gguf(case, path)
    proc = subprocess.run(
        [sys.executable, __file__, "--child", json.dumps(case), str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    result = parse_log(proc.stderr)
    if proc.returncode < 0:
        # llama.cpp aborted on this host (a GGML_ASSERT): the case did not run here, which
        # says nothing of kvplan; the recording keeps the assertion, and the tests skip it
        asserts = [line for line in proc.stderr.splitlines() if "GGML_ASSERT" in line]
        reason = asserts[-1].rsplit(": ", 1)[-1] if asserts else "no assertion printed"
        result["crashed"] = f"signal {-proc.returncode}: {reason}"[:300]
        return {"case": case, "result": result}
    if proc.returncode not in (0, 4) or (proc.returncode == 0 and not result["buffers"]):
        raise RuntimeError(f"{case['name']}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
    errors = [line for line in proc.stderr.splitlines() if "quantized V cache" in line]
    result["error_lines"] = errors
    return {"case": case, "result": result}


def _commit() -> str:
    import llama_cpp

    info = llama_cpp.llama_print_system_info().decode()
    return info, llama_cpp.__version__


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", nargs=2, metavar=("CASE", "PATH"))
    parser.add_argument("--quick", action="store_true", help="a few cases, print only")
    parser.add_argument("--out", type=Path, default=None, help="the recording's path")
    parser.add_argument("--commit", default="0c1e570", help="llama.cpp commit of the build")
    parser.add_argument("--only", nargs="+", default=None, help="run these cases only")
    args = parser.parse_args()
    if args.child:
        _child(json.loads(args.child[0]), args.child[1])
        return
    names = QUICK if args.quick else args.only
    cases = [c for c in CASES if names is None or c["name"] in names]
    system_info, version = _commit()
    with tempfile.TemporaryDirectory() as tmp:
        records = [run_case(case, Path(tmp)) for case in cases]
    recording = {
        "llama_cpp_commit": args.commit,
        "llama_cpp_python": version,
        "system_info": system_info.strip(),
        "backend": "CPU",
        "cases": records,
    }
    text = json.dumps(recording, indent=1) + "\n"
    if (args.quick or args.only) and args.out is None:
        print(text)
        return
    root = Path(__file__).resolve().parent.parent
    out = args.out or root / "tests" / "data" / f"llamacpp_oracle_{args.commit}.json"
    out.write_text(text)
    print(f"wrote {out}: {len(records)} cases")


if __name__ == "__main__":
    main()
