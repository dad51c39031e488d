"""End-to-end error of kvplan's vLLM profile on the shared reference logs, with leave-one-out.

Run: ``python bench/vllm_reference_errors.py PATH/TO/engine_logs.yaml``.

For every vLLM v0.19 case (``vllm-llmd-*``) it predicts the KV pool and the printed maximum
concurrency from the model, the GPU and the flags alone, and compares them with the log. The
activation model has two per-element constants (12 B per sampled logit, 2 projections of the MLP
width per batched token); the leave-one-out column refits both by least squares on the other
cases' logged activation and predicts the held-out case with them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

import kvplan
from kvplan.engines import vllm
from kvplan.hardware.lookup import find_gpu
from kvplan.units import GiB, resolve_dtype

MODELS = {
    "meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b",
    "Qwen/Qwen3-8B": "qwen3-8b",
    "codellama/CodeLlama-7b-hf": "codellama-7b",
    "deepseek-ai/DeepSeek-V2-Lite-Chat": "deepseek-v2-lite",
    "google/gemma-2-9b-it": "gemma-2-9b",
    "google/gemma-3-12b-it": "gemma-3-12b",
    "mistralai/Mixtral-8x7B-Instruct-v0.1": "mixtral-8x7b",
    "microsoft/phi-4": "phi-4",
}


def _features(spec: kvplan.ModelSpec, cfg: vllm.VllmConfig) -> tuple[float, float]:
    dtype = resolve_dtype(
        cfg.dtype or ("bfloat16" if spec.torch_dtype == "float32" else spec.torch_dtype)
    )
    mlp = cfg.max_num_batched_tokens * (spec.intermediate_size or 0) * dtype.block_bytes
    logits = cfg.max_num_seqs * (spec.vocab_size or 0)
    return mlp / GiB, logits / GiB


def main(path: str) -> int:
    cases = []
    for case in yaml.safe_load(Path(path).read_text()):
        if not case["id"].startswith("vllm-llmd-"):
            continue
        s, o = case["settings"], case["observed"]
        spec = kvplan.load_model(MODELS[case["model"]])
        kv = None if s["kv_cache_dtype"] in (None, "auto") else s["kv_cache_dtype"]
        dtype = None if s["dtype"] in (None, "auto", "bfloat16") else s["dtype"]
        cfg = vllm.config(
            s["max_model_len"],
            gpu_memory_utilization=str(s["gpu_memory_utilization"]),
            tensor_parallel_size=s["tensor_parallel_size"],
            pipeline_parallel_size=s["pipeline_parallel_size"],
            kv_cache_dtype=kv,
            dtype=dtype,
            quantization=s["quantization"],
            max_num_batched_tokens=s["max_num_batched_tokens"],
            max_num_seqs=s["max_num_seqs"],
            block_size=s["block_size"],
        )
        cases.append((case["id"], spec, cfg, o))
    print(f"{'case':58s} {'pool err':>9s} {'conc err':>9s} {'LOO pool':>9s} {'LOO conc':>9s}")
    sums = [0.0, 0.0, 0.0, 0.0]
    h100 = find_gpu("h100")
    for i, (cid, spec, cfg, o) in enumerate(cases):
        r = vllm.profile(spec, h100, cfg)
        pool_err = r.available_bytes / GiB / o["available_kv_cache_gib"] - 1
        conc_err = float(r.max_concurrency) / o["max_concurrency"] - 1
        # leave-one-out: fit activation = a * mlp + b * logits on the other cases
        rows = [
            (_features(s2, c2), o2["peak_activation_gib"])
            for j, (_, s2, c2, o2) in enumerate(cases)
            if j != i
        ]
        sxx = sum(m * m for (m, _), _ in rows)
        sxy = sum(m * g for (m, g), _ in rows)
        syy = sum(g * g for (_, g), _ in rows)
        sxz = sum(m * z for (m, _), z in rows)
        syz = sum(g * z for (_, g), z in rows)
        det = sxx * syy - sxy * sxy
        a, b = (sxz * syy - syz * sxy) / det, (syz * sxx - sxz * sxy) / det
        mlp, logits = _features(spec, cfg)
        last = r.stages[-1]
        modelled_act = last.overhead.activation_bytes / GiB
        loo_act = a * mlp + b * logits
        loo_pool = r.available_bytes / GiB + modelled_act - loo_act
        loo_pool_err = loo_pool / o["available_kv_cache_gib"] - 1
        loo_conc_err = (1 + conc_err) * (loo_pool / (r.available_bytes / GiB)) - 1
        errs = (pool_err, conc_err, loo_pool_err, loo_conc_err)
        sums = [acc + abs(e) for acc, e in zip(sums, errs, strict=True)]
        print(f"{cid:58s} " + " ".join(f"{100 * e:+8.2f}%" for e in errs))
    n = len(cases)
    print(f"{'mean absolute error':58s} " + " ".join(f"{100 * v / n:8.2f}%" for v in sums))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
