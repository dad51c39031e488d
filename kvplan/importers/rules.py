"""The shape of one model family's rule, and the rules most families share.

A ``Rule`` says how a ``config.json`` of one ``model_type`` maps onto a kvplan spec: how many
K/V heads the attention keeps, which kind each layer is, which keys are copied as they are,
the config class's defaults for keys a file may leave out, and the dtype when none is stated.
Family modules (``kvplan.importers.families``) build rules from these parts and register them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kvplan.errors import SpecError
from kvplan.importers.parameters import Counter, count_llama
from kvplan.importers.reading import Reading, as_list
from kvplan.units import abbreviate

#: Layer kinds a config's ``layer_types`` may name, and the spec kind each one becomes.
STATED_KINDS = {
    "full_attention": "full_attention",
    "attention": "full_attention",
    "sliding_attention": "sliding_attention",
    "chunked_attention": "chunked_attention",
    "linear_attention": "linear_attention",
    "mamba": "mamba",
}

#: What a rule built on ``layers_uniform`` produces: full attention, or sliding everywhere.
UNIFORM_KINDS = ("full_attention", "sliding_attention")

#: Mamba state sizes under the spec's names, copied as they are (Jamba, Granite 4 hybrids).
MAMBA_KEYS = (
    "mamba_d_state",
    "mamba_d_conv",
    "mamba_expand",
    "mamba_n_heads",
    "mamba_d_head",
    "mamba_n_groups",
)


def kv_heads_default(r: Reading) -> int | None:
    """``num_key_value_heads`` as stated (absent: every head keeps its own K and V)."""
    return r.get("num_key_value_heads")  # type: ignore[no-any-return]


def kv_heads_mha(r: Reading) -> int | None:
    """Classic multi-head attention: every head keeps its own K and V."""
    return None


def check_kinds(given: Sequence[object], allowed: Iterable[str]) -> None:
    """Raise SpecError naming the first entry of ``layer_types`` that is not one of
    ``allowed`` (a string: ``null``, a list or a mapping are no kind), and how many more."""
    names = tuple(allowed)
    # the index, not the entry, says whether one was found: an entry may itself be None
    bad = [i for i, k in enumerate(given) if not isinstance(k, str) or k not in names]
    if bad:
        more = f" (and {len(bad) - 1:,} more)" if len(bad) > 1 else ""
        raise SpecError(
            "",
            [
                f"layer_types.{bad[0]}: unknown kind {abbreviate(given[bad[0]])}{more};"
                f" allowed: {', '.join(names)}"
            ],
        )


def layers_explicit(r: Reading, n: int) -> bool:
    """Use ``layer_types`` when the file states it (transformers >= 4.53 writes it); True when
    it did. Raises SpecError for a list of the wrong length or an unknown kind."""
    given = r.config.get("layer_types")
    if given is None:
        return False
    if not as_list(given, "layer_types"):
        return False
    if len(given) != n:
        raise SpecError("", [f"layer_types: has {len(given):,} entries but {n} layers"])
    check_kinds(given, STATED_KINDS)
    kinds = [STATED_KINDS[k] for k in given]
    r.spec["layer_types"] = kinds
    if "sliding_attention" in kinds:
        r.spec["sliding_window"] = r.get("sliding_window")
    if "chunked_attention" in kinds:
        r.spec["attention_chunk_size"] = r.get("attention_chunk_size")
    return True


def layers_uniform(r: Reading, n: int) -> None:
    """Every layer alike: full attention, or sliding when the file states a window."""
    if layers_explicit(r, n):
        return
    window = r.config.get("sliding_window")
    if window is not None:
        r.spec["sliding_window"] = window
        r.notes.append(f"every layer slides: sliding_window {window}")


def pattern_every(
    r: Reading, n: int, is_attention: Callable[[int], bool], other: str, why: str
) -> None:
    """Per-layer kinds: full attention where ``is_attention(i)``, ``other`` elsewhere."""
    r.spec["layer_types"] = ["full_attention" if is_attention(i) else other for i in range(n)]
    r.notes.append(f"layer_types from {why}")


def mamba2_state(
    r: Reading, *, heads: int, head_dim: int, groups: int, state: int, conv: int
) -> None:
    """A Mamba2 state in the spec's keys, kept in the model dtype as vLLM keeps it unless
    ``--mamba-ssm-cache-dtype`` says otherwise (Mamba2, Falcon-H1, Zamba2)."""
    r.spec["mamba_n_heads"] = heads
    r.spec["mamba_d_head"] = head_dim
    r.spec["mamba_n_groups"] = groups
    r.spec["mamba_d_state"] = state
    r.spec["mamba_d_conv"] = conv
    r.spec["state_dtype"] = r.spec["torch_dtype"]


def _no_state(r: Reading) -> None:
    """Most families keep no recurrent state under names of their own."""


@dataclass(frozen=True, slots=True)
class Rule:
    """How one ``model_type`` maps onto a spec.

    - ``kv_heads``: the number of K/V heads (None: as many as attention heads), noting any
      derivation that is not a plain ``num_key_value_heads``.
    - ``layers``: sets ``layer_types``/``layer_types_pattern``/``sliding_window``... in the spec.
    - ``extra``: keys copied as they are (MLA ranks, Mamba and linear-attention state sizes).
    - ``defaults``: the config class's values for keys the file may leave out.
    - ``default_dtype``: the model dtype when the file states none (transformers: float32).
    - ``reads_head_dim``: False where ``head_dim`` means something else (MLA's latent).
    - ``state``: renames a family's own recurrent-state keys into the spec's, after ``extra``.
    - ``parameters``: the parameter count from the config's shapes (``importers.parameters``),
      used when a folder holds no weights; the default reads a Llama-shaped model.
    """

    kv_heads: Callable[[Reading], int | None] = kv_heads_default
    layers: Callable[[Reading, int], None] = layers_uniform
    extra: tuple[str, ...] = ()
    defaults: Mapping[str, Any] = field(default_factory=dict)
    default_dtype: str = "float32"
    reads_head_dim: bool = True
    state: Callable[[Reading], None] = _no_state
    parameters: Counter = count_llama
