"""StepFun's Step models: Step 1 (``step1``), Step 3's text model (``step3_text``) and Step 3.5
(``step3p5``).

vLLM's step3_text.py builds every layer's attention with ``num_kv_heads=1`` whatever the
config says, of ``head_dim`` (Step3TextConfig default 256), the queries going through a
``share_q_dim`` low-rank projection that caches nothing. Step3TextConfig lives in vLLM
(transformers_utils/configs/step3_vl.py); its context key is ``max_seq_len`` (default 65536).

Step 1 (vLLM step1.py, ALiBi) caches ``num_attention_groups`` K/V heads of hidden_size / heads.
Step 3.5 (vLLM step3p5.py) caches ``num_attention_groups`` K/V heads per layer, except on the
layers of ``attention_other_setting``'s ``attention_type``, which take that setting's groups and
head_dim; its ``layer_types`` also lists the MTP layers, which the config class cuts off.
Worked example (Step 3.5 with layer_types F S S S, window 512, 8 groups of 128 everywhere): a
token adds 4 x 2 x 8 x 128 x 2 = 16,384 B while the context is below the window.
"""

from __future__ import annotations

from kvplan.errors import SpecError
from kvplan.importers.parameters import Count
from kvplan.importers.reading import Reading, as_list, mapping, whole
from kvplan.importers.registry import register
from kvplan.importers.rules import UNIFORM_KINDS, Rule, check_kinds
from kvplan.model.limits import MAX_DIM

FAMILY = "step"

# Step3TextConfig defaults (vLLM) for the keys that size the cache.
_STEP3_TEXT = {
    "hidden_size": 7168,
    "num_attention_heads": 64,
    "num_hidden_layers": 61,
    "head_dim": 256,
    "max_seq_len": 65536,
    "vocab_size": 128815,
    "intermediate_size": 18432,
}


def _one_kv_head(r: Reading) -> int:
    return 1


def _uncounted(r: Reading) -> Count:
    """Step 3's weights (shared-q projection, MoE layers listed by ``moe_layers_enum``) are not
    counted from the config: a folder with its safetensors gives the count."""
    raise SpecError("", ["num_parameters: step3_text is not counted from the config's shapes"])


register(
    FAMILY,
    "step3_text",
    Rule(kv_heads=_one_kv_head, defaults=_STEP3_TEXT, parameters=_uncounted),
    UNIFORM_KINDS,
    "Step 3 text: one K/V head of head_dim (default 256) per layer, as vLLM step3_text.py"
    " builds it; Step3TextConfig defaults",
    architectures=("Step3TextForCausalLM",),
)


# --- Step 1 -------------------------------------------------------------------------------------

# StepConfig (the Step1Config of the released remote code) defaults; it sets no
# tie_word_embeddings, so transformers' True applies.
_STEP1 = {
    "hidden_size": 5120,
    "intermediate_size": 13312,
    "num_attention_heads": 40,
    "num_attention_groups": 8,
    "num_hidden_layers": 48,
    "max_seq_len": 4096,
    "vocab_size": 65536,
    "tie_word_embeddings": True,
}


def _attention_groups(r: Reading) -> int | None:
    """``num_attention_groups`` K/V heads (the config class always sets it: default 8)."""
    return r.get("num_attention_groups")  # type: ignore[no-any-return]


register(
    FAMILY,
    "step1",
    Rule(kv_heads=_attention_groups, defaults=_STEP1, reads_head_dim=False),
    UNIFORM_KINDS,
    "Step 1 (ALiBi): num_attention_groups K/V heads (StepConfig default 8) of hidden_size /"
    " heads, a stated head_dim unread; max_seq_len (default 4096) (vLLM step1.py)",
    architectures=("Step1ForCausalLM",),
)


# --- Step 3.5 -----------------------------------------------------------------------------------

# Step3p5Config defaults (vLLM transformers_utils/configs/step3p5.py) for the keys that size
# the cache are StepConfig's, without its tie_word_embeddings; it has no
# max_position_embeddings default, so max_seq_len gives the length.
_STEP3P5 = {key: value for key, value in _STEP1.items() if key != "tie_word_embeddings"}


def _step3p5_kinds(r: Reading, n: int) -> list[str]:
    """``layer_types`` cut to the decoder layers (the config class drops the MTP layers'
    entries), else vLLM's default: even layers slide. Sliding only with a ``sliding_window``."""
    given = r.config.get("layer_types")
    if given is None:
        kinds = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n)]
    else:
        kinds = list(as_list(given, "layer_types")[:n])
        if len(kinds) != n:
            raise SpecError("", [f"layer_types: has {len(kinds)} entries but {n} layers"])
        check_kinds(kinds, _STEP3P5_KINDS)
    if r.config.get("sliding_window") is None:
        return ["full_attention"] * n
    return kinds


_STEP3P5_KINDS = ("full_attention", "sliding_attention")


def _step3p5_layers(r: Reading, n: int) -> None:
    """Per-layer kinds, and per-layer K/V heads and head_dim where ``attention_other_setting``
    gives the layers of its ``attention_type`` their own (vLLM step3p5.py)."""
    kinds = _step3p5_kinds(r, n)
    r.spec["layer_types"] = kinds
    if "sliding_attention" in kinds:
        r.spec["sliding_window"] = r.config["sliding_window"]
    other = mapping(r.config.get("attention_other_setting"), "attention_other_setting")
    if not other or r.config.get("layer_types") is None:
        return
    missing = [k for k in _OTHER_KEYS if other.get(k) is None]
    if missing:
        raise SpecError("", [f"attention_other_setting: {', '.join(missing)} required (vLLM)"])
    heads, head_dim = r.spec["num_key_value_heads"], r.spec.get("head_dim")
    if head_dim is None:
        hidden = whole(r.spec.get("hidden_size"), "hidden_size", maximum=MAX_DIM)
        head_dim = hidden // whole(r.spec["num_attention_heads"], "num_attention_heads")
    chosen = [k == other["attention_type"] for k in kinds]
    per_heads = [other["num_attention_groups"] if c else heads for c in chosen]
    per_dims = [other["head_dim"] if c else head_dim for c in chosen]
    if any(chosen):
        r.spec["num_key_value_heads_per_layer"] = per_heads
        r.spec["head_dim_per_layer"] = per_dims
        r.notes.append(
            f"{other['attention_type']} layers: {other['num_attention_groups']} K/V heads of"
            f" {other['head_dim']} (attention_other_setting)"
        )


_OTHER_KEYS = ("attention_type", "num_attention_heads", "num_attention_groups", "head_dim")


def _uncounted_step3p5(r: Reading) -> Count:
    """Step 3.5's MoE layers (``moe_layers_enum``), shared experts and head-wise gates are not
    counted from the config: a folder with its safetensors gives the count."""
    raise SpecError("", ["num_parameters: step3p5 is not counted from the config's shapes"])


register(
    FAMILY,
    "step3p5",
    Rule(
        kv_heads=_attention_groups,
        layers=_step3p5_layers,
        defaults=_STEP3P5,
        parameters=_uncounted_step3p5,
    ),
    UNIFORM_KINDS,
    "Step 3.5: num_attention_groups K/V heads; layer_types cut to the decoder layers (absent:"
    " even layers slide), sliding only with a sliding_window; attention_other_setting's K/V"
    " heads and head_dim for its attention_type (vLLM step3p5.py); Step3p5Config defaults",
    architectures=("Step3p5ForCausalLM",),
)
