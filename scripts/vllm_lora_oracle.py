"""Record the LoRA slots vLLM's CPU build allocates: every ``lora_a_stacked`` and
``lora_b_stacked`` tensor of the wrapped model, in bytes, for a few dense models.

Run it in the virtual environment that has vLLM's CPU build (see scripts/vllm_oracle.py):

    python scripts/vllm_lora_oracle.py --out tests/data/vllm_lora_0.32.0.json

Each case starts ``vllm.LLM`` on a shrunk config (scripts/vllm_oracle.py's ``shrunk_config``,
dummy weights, the real hidden size) with ``enable_lora`` and the case's settings, in a child
process, and sums the stacks' bytes (each tensor once). The config used is kept in the
record, so a test rebuilds the same model.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from vllm_oracle import FIXTURES, shrunk_config

#: name, fixture, max_loras, max_lora_rank, lora_target_modules (None: vLLM's default)
CASES: list[dict[str, object]] = [
    {
        "name": "lora-llama-3.1-8b",
        "fixture": "llama-3.1-8b",
        "max_loras": 3,
        "max_lora_rank": 16,
        "target_modules": None,
    },
    {
        "name": "lora-qwen2.5-7b-attention",
        "fixture": "qwen2.5-7b",
        "max_loras": 2,
        "max_lora_rank": 8,
        "target_modules": ["qkv_proj", "o_proj"],
    },
    {
        "name": "lora-qwen2.5-7b",
        "fixture": "qwen2.5-7b",
        "max_loras": 4,
        "max_lora_rank": 32,
        "target_modules": None,
    },
    {
        "name": "lora-qwen3-8b-mlp",
        "fixture": "qwen3-8b",
        "max_loras": 1,
        "max_lora_rank": 64,
        "target_modules": ["gate_up_proj", "down_proj"],
    },
]


def run_case(case: dict[str, object]) -> dict[str, object]:
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    import torch
    import vllm
    from vllm import LLM

    config = shrunk_config(str(case["fixture"]))
    # the real width: some vLLM classes (Qwen2) take the head size from hidden_size, not
    # from the head_dim the shrunk config states
    original = json.loads((FIXTURES / str(case["fixture"]) / "config.json").read_text())
    config["hidden_size"] = original["hidden_size"]
    folder = Path(tempfile.mkdtemp(prefix="kvplan-lora-"))
    (folder / "config.json").write_text(json.dumps(config))
    llm = LLM(
        model=str(folder),
        load_format="dummy",
        skip_tokenizer_init=True,
        enforce_eager=True,
        kv_cache_memory_bytes=1 << 28,
        max_model_len=1024,
        max_num_seqs=8,
        max_num_batched_tokens=1024,
        enable_lora=True,
        max_loras=int(case["max_loras"]),  # type: ignore[call-overload]
        max_lora_rank=int(case["max_lora_rank"]),  # type: ignore[call-overload]
        lora_target_modules=case["target_modules"],
    )
    worker = llm.llm_engine.engine_core.engine_core.model_executor.driver_worker.worker
    model = worker.model_runner.get_model()
    seen: set[int] = set()
    modules: dict[str, int] = {}
    for name, module in model.named_modules():
        for attr in ("lora_a_stacked", "lora_b_stacked"):
            value = getattr(module, attr, None)
            for tensor in value if isinstance(value, (tuple, list)) else (value,):
                if isinstance(tensor, torch.Tensor) and tensor.data_ptr() not in seen:
                    seen.add(tensor.data_ptr())
                    key = name.split(".")[-1]
                    modules[key] = modules.get(key, 0) + tensor.numel() * tensor.element_size()
    return {
        **case,
        "vllm_version": vllm.__version__,
        "config": config,
        "lora_bytes": sum(modules.values()),
        "bytes_by_module": modules,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--case")
    args = parser.parse_args()
    if args.case:
        case = next(c for c in CASES if c["name"] == args.case)
        print("RECORD " + json.dumps(run_case(case)))
        return 0
    records = []
    for case in CASES:
        done = subprocess.run(
            [sys.executable, __file__, "--out", args.out, "--case", str(case["name"])],
            capture_output=True,
            text=True,
            timeout=900,
        )
        line = [x for x in done.stdout.splitlines() if x.startswith("RECORD ")]
        records.append(json.loads(line[-1][7:]) if line else {**case, "error": done.stderr[-800:]})
    Path(args.out).write_text(json.dumps(records, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
