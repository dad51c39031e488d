"""``kvplan plan``'s LoRA options, as vLLM and SGLang spell them: the adapter slots each
engine allocates on the GPU before it sizes the KV cache (kvplan.engines.vllm_lora,
kvplan.engines.sglang_lora). Light on purpose: typer only."""

from typing import Annotated

import typer

#: plan's LoRA parameters, in the order ``Question`` takes them
LORA_OPTIONS = (
    "enable_lora",
    "max_loras",
    "max_loras_per_batch",
    "max_lora_rank",
    "lora_target_modules",
    "fully_sharded_loras",
)

EnableLoraOpt = Annotated[
    bool | None,
    typer.Option(
        "--enable-lora",
        help="vLLM and SGLang: serve LoRA adapters; their slots come out of the KV budget.",
        show_default=False,
    ),
]
MaxLorasOpt = Annotated[
    int | None,
    typer.Option("--max-loras", min=1, help="vLLM: adapters in one batch (default 1).",
                 show_default=False),
]  # fmt: skip
MaxLorasPerBatchOpt = Annotated[
    int | None,
    typer.Option("--max-loras-per-batch", min=1, help="SGLang: adapter slots (default 8).",
                 show_default=False),
]  # fmt: skip
MaxLoraRankOpt = Annotated[
    int | None,
    typer.Option(
        "--max-lora-rank",
        min=1,
        help="vLLM (default 16; 1, 8, 16, 32, 64, 128, 256, 320, 512) and SGLang (required):"
        " the largest adapter rank.",
        show_default=False,
    ),
]
LoraTargetModulesOpt = Annotated[
    str | None,
    typer.Option(
        "--lora-target-modules",
        help="Comma-separated modules (q_proj, k_proj, v_proj, qkv_proj, o_proj, gate_proj,"
        " up_proj, gate_up_proj, down_proj; vLLM also embed_tokens, lm_head; SGLang also all)."
        " vLLM default: every module it supports; SGLang: required.",
        show_default=False,
    ),
]
FullyShardedLorasOpt = Annotated[
    bool | None,
    typer.Option(
        "--fully-sharded-loras",
        help="vLLM: shard both halves of each adapter across tensor parallel ranks.",
        show_default=False,
    ),
]
