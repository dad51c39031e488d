"""Record the LoRA buffers the real llama.cpp allocates for small adapters, as an oracle for
kvplan.engines.llamacpp_lora.

Each case writes the tiny llama GGUF of scripts/llamacpp_oracle.py and a LoRA adapter GGUF for
it (``general.type`` adapter, ``adapter.type`` lora; for each adapted weight ``NAME`` the pair
``NAME.lora_a`` of ggml shape (in, rank) and ``NAME.lora_b`` of (rank, out); for the token
embeddings the halves are flipped, as llm_build_inp_embd reads them), loads both on the CPU
through llama-cpp-python's low-level API in a child process and keeps the
``CPU LoRA buffer size = X MiB`` line llama.cpp prints. The recording, with the llama.cpp
commit and each adapter's tensor table, is written to tests/data/llamacpp_lora_<commit>.json.

Usage (in an environment with ``llama-cpp-python`` and ``gguf``):

    python scripts/llamacpp_lora_oracle.py --out tests/data/llamacpp_lora_0c1e570.json
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

sys.path.insert(0, str(Path(__file__).parent))
from llamacpp_oracle import EMBD, FF, HEAD_DIM, HEADS, KV_HEADS, VOCAB, _case, _commit, write_gguf

#: the weights a case adapts and their ggml (in, out) shapes in the tiny llama model
SHAPES = {
    "attn_q": (EMBD, HEADS * HEAD_DIM),
    "attn_k": (EMBD, KV_HEADS * HEAD_DIM),
    "attn_v": (EMBD, KV_HEADS * HEAD_DIM),
    "attn_output": (HEADS * HEAD_DIM, EMBD),
    "ffn_gate": (EMBD, FF),
    "ffn_up": (EMBD, FF),
    "ffn_down": (FF, EMBD),
}
CASES: list[dict[str, Any]] = [
    {"name": "lora-attn-r64-f32", "rank": 64, "type": "F32",
     "modules": ["attn_q", "attn_v"], "layers": [0, 1, 2, 3]},
    {"name": "lora-all-r128-f16", "rank": 128, "type": "F16",
     "modules": list(SHAPES), "layers": [0, 1, 2, 3]},
    {"name": "lora-mlp-r96-f32-two-layers", "rank": 96, "type": "F32",
     "modules": ["ffn_gate", "ffn_up", "ffn_down"], "layers": [1, 3]},
    {"name": "lora-embd-out-r32-f32", "rank": 32, "type": "F32",
     "modules": ["attn_output"], "layers": [0], "embd": True, "output": True},
]  # fmt: skip


def adapter_tensors(case: dict[str, Any]) -> list[tuple[str, tuple[int, ...]]]:
    """(name, ggml shape) of each adapter tensor."""
    r = case["rank"]
    out: list[tuple[str, tuple[int, ...]]] = []
    for layer in case["layers"]:
        for module in case["modules"]:
            n_in, n_out = SHAPES[module]
            base = f"blk.{layer}.{module}.weight"
            out += [(f"{base}.lora_a", (n_in, r)), (f"{base}.lora_b", (r, n_out))]
    if case.get("embd"):
        out += [("token_embd.weight.lora_a", (r, VOCAB)), ("token_embd.weight.lora_b", (r, EMBD))]
    if case.get("output"):
        out += [("output.weight.lora_a", (EMBD, r)), ("output.weight.lora_b", (r, VOCAB))]
    return out


def write_adapter(case: dict[str, Any], path: Path) -> None:
    import gguf
    import numpy as np

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_string("general.type", "adapter")
    writer.add_string("adapter.type", "lora")
    writer.add_float32("adapter.lora.alpha", float(case["rank"]))
    dtype = np.float16 if case["type"] == "F16" else np.float32
    for name, shape in adapter_tensors(case):
        writer.add_tensor(name, np.zeros(tuple(reversed(shape)), dtype=dtype))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _child(model_path: str, adapter_path: str) -> None:
    import ctypes

    import llama_cpp

    @llama_cpp.llama_log_callback  # type: ignore[misc]
    def _log(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
        sys.stderr.write(text.decode("utf-8", "replace"))

    llama_cpp.llama_log_set(_log, ctypes.c_void_p(0))
    llama_cpp.llama_backend_init()
    model = llama_cpp.llama_model_load_from_file(
        model_path.encode(), llama_cpp.llama_model_default_params()
    )
    adapter = llama_cpp.llama_adapter_lora_init(model, adapter_path.encode())
    sys.stderr.write("ORACLE: adapter " + ("loaded" if adapter else "refused") + "\n")


_LORA = re.compile(r"(\S+) LoRA buffer size =\s+([\d.]+) MiB")


def run_case(case: dict[str, Any], workdir: Path) -> dict[str, Any]:
    model = workdir / "llama.gguf"
    if not model.exists():
        write_gguf(_case("llama-f16", "llama"), model)
    adapter = workdir / f"{case['name']}.gguf"
    write_adapter(case, adapter)
    child = subprocess.run(
        [sys.executable, __file__, "--child", str(model), str(adapter)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    log = child.stdout + child.stderr
    return {
        **case,
        "tensors": [{"name": n, "shape": list(s)} for n, s in adapter_tensors(case)],
        "buffers": [{"device": m[1], "mib": m[2]} for m in _LORA.finditer(log)],
        "loaded": "ORACLE: adapter loaded" in log,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="results JSON file (default: print)")
    parser.add_argument("--commit", default="0c1e570", help="llama.cpp commit of the build")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(*args.child)
        return
    with tempfile.TemporaryDirectory() as tmp:
        cases = [run_case(case, Path(tmp)) for case in CASES]
    doc = {
        "about": "LoRA buffers the real llama.cpp allocates for adapters of the tiny llama model of"
        " scripts/llamacpp_oracle.py (llama-f16), on the CPU, recorded by"
        " scripts/llamacpp_lora_oracle.py: each adapter's tensors and the 'CPU LoRA buffer size'"
        " line it printed (MiB, 2 decimals).",
        "llama_cpp_commit": args.commit,
        "llama_cpp_python": _commit()[1],
        "system_info": _commit()[0].strip(),
        "cases": cases,
    }
    text = json.dumps(doc, indent=1) + "\n"
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
