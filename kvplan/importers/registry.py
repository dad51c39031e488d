"""The one registry of import rules: ``model_type`` -> ``Rule``, and the ``Architecture`` that
``kvplan architectures`` lists for it.

Family modules (``kvplan.importers.families.<family>``) call ``register`` at import time; the
package ``kvplan.importers`` imports every family once, so the registry itself imports none
and there is no cycle: families -> registry -> rules -> reading.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvplan.importers.parameters import VisionCounter
from kvplan.importers.rules import Rule

#: The layer kinds an architecture may list (``mla_latent`` is full attention through MLA's
#: compressed latent; ``no_cache`` is a layer without attention or state, e.g. an MLP layer).
LAYER_KINDS = (
    "full_attention",
    "sliding_attention",
    "chunked_attention",
    "mla_latent",
    "mamba",
    "linear_attention",
    "short_conv",
    "attention_mamba",
    "attention_conv",
    "compressed_attention",
    "sparse_attention",
    "indexed_attention",
    "no_cache",
)


@dataclass(frozen=True, slots=True)
class Architecture:
    """One importable ``model_type``: its rules module (``family``), the layer kinds its rule
    can produce, a one-line note on the quirks the rule handles, the model classes
    (``architectures`` in config.json, as vLLM's registry names them) that it reads, and the
    engines checked to serve it: ``vllm`` when vLLM 0.32's registry lists one of those
    classes (or only 0.33's, which the note then names), ``vllm-transformers`` when vLLM
    serves it through its Transformers backend."""

    model_type: str
    family: str
    layer_kinds: tuple[str, ...]
    notes: str
    architectures: tuple[str, ...] = ()
    engines: tuple[str, ...] = ()


_RULES: dict[str, Rule] = {}
_WRAPPED: dict[str, str] = {}  # wrapper model_type -> the model_type of its text model
_ARCHITECTURES: dict[str, Architecture] = {}
_VISION: dict[str, VisionCounter] = {}  # wrapper model_type -> its vision tower's count
_CLASS_RULES: dict[tuple[str, str], Rule] = {}  # (model_type, class) -> the class's own rule


#: The engine names an ``Architecture`` may list.
ENGINES = ("vllm", "vllm-transformers")


def _engines(architectures: tuple[str, ...], engines: tuple[str, ...] | None) -> tuple[str, ...]:
    """The stated engines, else vLLM when vLLM's registry names the model classes."""
    if engines is not None:
        return tuple(engines)
    return ("vllm",) if architectures else ()


def _add(architecture: Architecture) -> None:
    name = architecture.model_type
    if not set(architecture.engines) <= set(ENGINES):
        raise ValueError(f"model_type {name!r}: engines {architecture.engines} not in {ENGINES}")
    if name in _ARCHITECTURES:
        raise ValueError(f"model_type {name!r}: registered twice")
    unknown = sorted(set(architecture.layer_kinds) - set(LAYER_KINDS))
    if unknown or not architecture.layer_kinds:
        raise ValueError(f"model_type {name!r}: layer kinds {unknown} not in {LAYER_KINDS}")
    if not architecture.notes or "\n" in architecture.notes:
        raise ValueError(f"model_type {name!r}: notes must be one line")
    _ARCHITECTURES[name] = architecture


def register(
    family: str,
    model_type: str,
    rule: Rule,
    layer_kinds: tuple[str, ...],
    notes: str,
    architectures: tuple[str, ...] = (),
    engines: tuple[str, ...] | None = None,
) -> None:
    """Map ``model_type`` by ``rule``; ``architectures`` are the model classes that config.json
    names for it (``LlamaForCausalLM``), ``engines`` those that serve it (default: ``vllm``
    when ``architectures`` are given). Raises ValueError when the type is already registered,
    a layer kind or engine is unknown or the notes are not one line (a family module's
    mistake)."""
    classes = tuple(architectures)
    kinds = tuple(layer_kinds)
    _add(Architecture(model_type, family, kinds, notes, classes, _engines(classes, engines)))
    _RULES[model_type] = rule


def register_wrapper(
    family: str,
    model_type: str,
    inner: str,
    notes: str,
    vision: VisionCounter | None = None,
    architectures: tuple[str, ...] = (),
    engines: tuple[str, ...] | None = None,
) -> None:
    """``model_type`` wraps a text model in a nested config (``text_config``...); the nested
    ``model_type``, or ``inner`` when the nested config has none, decides the rule. ``inner``
    must be registered first. ``vision`` counts the parameters of its vision tower."""
    layer_kinds = _ARCHITECTURES[inner].layer_kinds
    classes = tuple(architectures)
    _add(Architecture(model_type, family, layer_kinds, notes, classes, _engines(classes, engines)))
    _WRAPPED[model_type] = inner
    if vision is not None:
        _VISION[model_type] = vision


def register_class_rule(
    model_type: str, class_name: str, rule: Rule, layer_kinds: tuple[str, ...], notes: str
) -> None:
    """A second rule for an already registered ``model_type``, chosen when config.json's
    ``architectures`` names ``class_name``: two models that share a type (Ling 2.5's
    BailingMoeV2_5ForCausalLM and Ling 3.0's BailingMoeV3ForCausalLM are both
    ``bailing_hybrid``). The type's Architecture lists the class, its layer kinds and a note."""
    known = _ARCHITECTURES[model_type]
    if class_name in known.architectures or not notes or "\n" in notes:
        raise ValueError(f"model_type {model_type!r}: class {class_name!r} given twice, or notes")
    unknown = sorted(set(layer_kinds) - set(LAYER_KINDS))
    if unknown:
        raise ValueError(f"model_type {model_type!r}: layer kinds {unknown} not in {LAYER_KINDS}")
    kinds = tuple(dict.fromkeys((*known.layer_kinds, *layer_kinds)))
    _ARCHITECTURES[model_type] = replace(
        known,
        layer_kinds=kinds,
        notes=f"{known.notes}; {notes}",
        architectures=(*known.architectures, class_name),
        engines=known.engines or ("vllm",),
    )
    _CLASS_RULES[(model_type, class_name)] = rule


def vision_for(model_type: str | None) -> VisionCounter | None:
    """The vision tower count of a wrapper ``model_type``; None for anything else."""
    return _VISION.get(model_type) if model_type is not None else None


def rule_for(model_type: str, classes: object = None) -> Rule | None:
    """The rule of a (non-wrapper) ``model_type``, or the one ``register_class_rule`` gave a
    class that ``classes`` (config.json's ``architectures``) names; None when not mapped."""
    if isinstance(classes, list):
        for name in classes:
            if isinstance(name, str) and (model_type, name) in _CLASS_RULES:
                return _CLASS_RULES[(model_type, name)]
    return _RULES.get(model_type)


def wrapped_type(model_type: str | None) -> str | None:
    """The text model's ``model_type`` a wrapper implies; None for anything else."""
    return _WRAPPED.get(model_type) if model_type is not None else None


def is_wrapper(model_type: str | None) -> bool:
    """True for a registered wrapper (``gemma3``, ``llama4``, ``mistral3``)."""
    return model_type in _WRAPPED


def supported_model_types() -> list[str]:
    """Every model_type the importer maps (wrappers included), sorted."""
    return sorted(_ARCHITECTURES)


def list_architectures() -> tuple[Architecture, ...]:
    """Every registered model_type's ``Architecture``, sorted by model_type."""
    return tuple(_ARCHITECTURES[name] for name in sorted(_ARCHITECTURES))
