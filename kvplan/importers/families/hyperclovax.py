"""NAVER HyperCLOVA X SEED (``hyperclovax``): Llama-shaped GQA with muP multipliers and norms
after attention and after the MLP (``use_post_norm``, default true).

HyperCLOVAXConfig (configuration_hyperclovax.py) fills ``head_dim`` with ``hidden_size /
num_attention_heads`` and ``num_key_value_heads`` with the head count when absent; vLLM's
hyperclovax.py reads both as stated. The multipliers scale activations, not the cache.
The SEED vision v2 checkpoints (``hyperclovax_vision_v2``) nest that text model in
``text_config``; vLLM's hyperclovax_vision_v2.py builds it with the text model's own class.
"""

from __future__ import annotations

from kvplan.importers.parameters import Count, decoder, flag, mlp, norm, shapes, size
from kvplan.importers.reading import Reading
from kvplan.importers.registry import register, register_wrapper
from kvplan.importers.rules import UNIFORM_KINDS, Rule

FAMILY = "hyperclovax"

# HyperCLOVAXConfig defaults for the keys that size the cache or the weights.
_DEFAULTS = {
    "vocab_size": 32000,
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "max_position_embeddings": 2048,
    "tie_word_embeddings": False,
}


def _count_hyperclovax(r: Reading) -> Count:
    """modeling_hyperclovax.py: Llama's layer (``attention_bias``, ``mlp_bias``) plus two
    RMSNorms after attention and MLP when ``use_post_norm``."""
    s = shapes(r)
    bias = flag(r, "attention_bias")
    inter = size(r, "intermediate_size")
    layer = s.attention(bias, bias) + mlp(s.hidden, inter, bias=flag(r, "mlp_bias"))
    num_norms = 4 if flag(r, "use_post_norm", default=True) else 2
    layer += norm(s.hidden).times(num_norms)
    return decoder(s, layer.times(s.layers))


register(
    FAMILY,
    "hyperclovax",
    Rule(defaults=_DEFAULTS, parameters=_count_hyperclovax),
    UNIFORM_KINDS,
    "read as llama (HyperCLOVAXConfig: head_dim hidden_size / heads, K/V heads = heads when"
    " absent; vLLM hyperclovax.py)",
    architectures=("HyperCLOVAXForCausalLM",),
)
register_wrapper(
    FAMILY,
    "hyperclovax_vision_v2",
    "hyperclovax",
    "HyperCLOVA X SEED vision v2 (vLLM: HCXVisionV2ForCausalLM): the text model in"
    " text_config (HyperCLOVAXVisionV2Config: hyperclovax when it names none); the vision"
    " tower is not counted",
    architectures=("HCXVisionV2ForCausalLM",),
)
