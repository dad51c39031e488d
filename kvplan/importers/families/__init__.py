"""One module per model family, each registering its ``model_type`` rules with
``kvplan.importers.registry`` when imported. ``kvplan.importers`` imports this package once,
which loads them all; add a new family's module to the list below."""

from kvplan.importers.families import (
    dbrx,
    deepseek,
    falcon,
    gemma,
    glm,
    gpt2,
    gpt_oss,
    granite,
    jamba,
    llama,
    llama4,
    minimax,
    nemotron_h,
    phi,
    qwen,
)

__all__ = [
    "dbrx",
    "deepseek",
    "falcon",
    "gemma",
    "glm",
    "gpt2",
    "gpt_oss",
    "granite",
    "jamba",
    "llama",
    "llama4",
    "minimax",
    "nemotron_h",
    "phi",
    "qwen",
]
