#!/usr/bin/env bash
# The GPU check of the torch probe: a fixed set of probes on CUDA, one JSON report.
#   bash scripts/gpu_probe_check.sh [REPORT.json]
# Needs an NVIDIA GPU, and kvplan with its probe extra installed (pip install '.[probe]').
# Each probe builds a real transformers model with a bundled spec's KV geometry, fills its
# cache, and records the measured cache bytes, the CUDA allocator's deltas (allocated,
# reserved, decode peak) and, with --paged, a vLLM-shaped pool's allocation against its plan.
set -euo pipefail
report="${1:-gpu_probe_report.json}"
if ! python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "no CUDA device visible to torch" >&2
  exit 3
fi
probes=(
  "llama-3.1-8b --context 8K --batch 4 --decode-steps 16 --paged --blocks 2048"
  "qwen3-8b --context 32K --batch 1 --decode-steps 8"
  "mistral-7b-v0.1 --context 8K --batch 2 --decode-steps 8"
  "gemma-3-12b --context 16K --batch 2 --decode-steps 8 --paged --blocks 1024"
  "gpt-oss-20b --context 16K --batch 2 --decode-steps 8"
  "deepseek-v2-lite --context 8K --batch 2 --decode-steps 8 --kv-dtype bfloat16"
  "llama-3.2-1b --context 128K --batch 1 --decode-steps 4 --kv-dtype float16"
)
python - "$report" "${probes[@]}" <<'PY'
import json, shlex, subprocess, sys, time
report, probes = sys.argv[1], sys.argv[2:]
results = []
for probe in probes:
    args = ["kvplan", "probe", *shlex.split(probe), "--device", "cuda", "--format", "json"]
    start = time.time()
    done = subprocess.run(args, capture_output=True, text=True)
    entry = {"command": " ".join(args), "exit_code": done.returncode,
             "seconds": round(time.time() - start, 1)}
    try:
        entry["result"] = json.loads(done.stdout)
    except json.JSONDecodeError:
        entry["stderr"] = done.stderr[-2000:]
    results.append(entry)
    print(f"{entry['exit_code']} {probe}", file=sys.stderr)
import torch
doc = {"schema_version": 1, "device": torch.cuda.get_device_name(0),
       "torch": torch.__version__, "probes": results}
with open(report, "w", encoding="utf-8") as f:
    json.dump(doc, f, indent=2)
print(f"wrote {report}", file=sys.stderr)
PY
