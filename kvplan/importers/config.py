"""A Hugging Face ``config.json`` (or a model folder holding one) -> a validated kvplan spec.

The mapping itself is generic: the text model's ``model_type`` picks a ``Rule`` from the
registry (the family modules hold every model-specific quirk), and this module reads the keys
all families share (layers, heads, hidden size, dtype, context length, vocabulary) under
their several historical names. An unmapped ``model_type`` is refused, never guessed, and a
value of a type or range no rule anticipated is a SpecError naming the file, not a traceback.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, TypeVar

from kvplan.arguments import as_instance, as_path, check_strs
from kvplan.errors import SpecError
from kvplan.files import is_file, is_folder, read_text
from kvplan.importers.parameters import Count, multimodal_block, quantized_format
from kvplan.importers.reading import (
    CONFIG_NAME,
    NESTED,
    Config,
    Reading,
    compact_layer_types,
    mapping,
    read_json,
    whole,
)
from kvplan.importers.registry import (
    is_wrapper,
    rule_for,
    supported_model_types,
    vision_for,
    wrapped_type,
)
from kvplan.importers.rules import Rule
from kvplan.importers.safetensors import WeightCount, weights_in_folder
from kvplan.model.limits import MAX_DIM
from kvplan.model.spec import ModelSpec, parse_spec
from kvplan.units import abbreviate

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Imported:
    """An imported spec: the validated spec, its mapping (for YAML) and the derivation notes."""

    spec: ModelSpec
    data: dict[str, Any]
    notes: tuple[str, ...]
    config_path: str


# --- the mapping ------------------------------------------------------------------------------


#: the most multi-token-prediction modules read from a config (released models carry 1 to 3)
MAX_MTP_LAYERS = 64


def spec_from_config(config: Config, path: str = CONFIG_NAME) -> tuple[dict[str, Any], list[str]]:
    """A spec mapping from a parsed ``config.json``, and the notes on how it was derived.

    Raises SpecError naming ``path`` for an unmapped model_type or a malformed config.
    """
    r, _ = _guarded(_map, config, path)
    return r.spec, r.notes


def parameters_from_config(config: Config, path: str = CONFIG_NAME) -> Count:
    """The parameters of the model a ``config.json`` describes, from its shapes alone
    (``kvplan.importers.parameters``), its vision tower included. Raises SpecError naming
    ``path`` when the config lacks a size the count needs."""
    return _guarded(_count, config, path)


def _guarded(step: Callable[[Config], T], config: Config, path: str) -> T:
    try:
        return step(config)
    except SpecError as e:
        raise SpecError(path, e.problems) from None
    except (TypeError, ValueError, AttributeError, ArithmeticError, RecursionError) as e:
        # A value of a type or range no rule anticipated: refused, never a traceback.
        raise SpecError(path, [f"malformed config: {str(e)[:200]}"]) from None


def _count(config: Config) -> Count:
    r, rule = _map(config)
    count = rule.parameters(r)
    vision = vision_for(config.get("model_type") if is_wrapper(config.get("model_type")) else None)
    if vision is not None:
        count += vision(config, r.spec["hidden_size"])
    return count


def _map(config: Config) -> tuple[Reading, Rule]:
    if not isinstance(config, Mapping):
        raise SpecError("", ["a config.json must be a JSON object"])
    model_type, rule, text, notes = _text_model(config)
    r = Reading(model_type, text, rule.defaults, notes=notes)
    n = _geometry(r, rule)
    r.spec["torch_dtype"] = _model_dtype(r, rule, config)
    max_len = r.get("max_position_embeddings", "n_positions", "max_seq_len", "seq_length")
    if max_len is not None:
        r.spec["max_position_embeddings"] = max_len
    rule.layers(r, n)
    for key in rule.extra:
        if text.get(key) is not None:
            r.spec[key] = text[key]
    rule.state(r)
    _sizes(r, config)
    mtp = text.get("mtp_num_hidden_layers", text.get("num_nextn_predict_layers"))
    if isinstance(mtp, int) and not isinstance(mtp, bool) and 0 < mtp <= MAX_MTP_LAYERS:
        r.spec["mtp_layers"] = mtp  # vLLM's n_predict: the drafter of --speculative-config mtp
    reader = multimodal_block(config)
    if reader is not None:  # a vision or audio model: its encoder, kept apart
        r.spec["multimodal"] = reader(config, r.spec)
    return r, rule


def _text_model(config: Config) -> tuple[str, Rule, Config, list[str]]:
    """The text model's ``model_type``, its rule and config (a wrapper's nested one), and a
    note when it is nested. Raises SpecError listing the supported types when not mapped."""
    stated = config.get("model_type")
    outer_type = stated if isinstance(stated, str) else None
    notes: list[str] = []
    text: Config = config
    model_type = outer_type
    unmapped = outer_type is None or rule_for(outer_type) is None
    for key in NESTED:
        inner = config.get(key)
        if isinstance(inner, Mapping) and (is_wrapper(outer_type) or unmapped):
            text = inner
            model_type = inner.get("model_type") or wrapped_type(outer_type)
            notes.append(f"text model from {key} (top-level model_type {outer_type})")
            break
    if text is config:
        _refuse_unread_nesting(config, outer_type)
    classes = config.get("architectures")
    rule = rule_for(model_type, classes) if isinstance(model_type, str) else None
    if not isinstance(model_type, str) or rule is None:
        shown = abbreviate(model_type if isinstance(model_type, str) else stated)
        named = [c for c in classes if isinstance(c, str)] if isinstance(classes, list) else []
        also = f" (config.json architectures: {abbreviate(', '.join(named))})" if named else ""
        raise SpecError(
            "",
            [
                f"model_type: {shown} is not an architecture kvplan can import{also};"
                f" `kvplan architectures` lists the {len(supported_model_types())} it reads;"
                " write a spec by hand instead (docs/spec.md lists its keys) or add the"
                " family's rules (docs/importers.md)"
            ],
        )
    return model_type, rule, text, notes


def _looks_like_hub_id(text: str) -> bool:
    """Whether a config's ``_name_or_path`` names a Hub repository (``org/name``), not the
    folder it was saved from (``vicuna-13b-v1.5-16k/``, ``./out``, ``/data/ckpt``)."""
    org, slash, name = text.partition("/")
    return bool(slash) and all(
        part and _HUB_PART.fullmatch(part) and not part.startswith(".") for part in (org, name)
    )


_HUB_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}")
_LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")


def _refuse_unread_nesting(config: Config, model_type: str | None) -> None:
    """Refuse a text model's type whose sizes sit in a nested config it does not read: every
    size would otherwise be its config class's default, silently (a ``ministral3`` config
    holding a Mistral 3 ``text_config``)."""
    if any(config.get(k) is not None for k in _LAYER_KEYS):
        return
    for key in NESTED:
        inner = config.get(key)
        if isinstance(inner, Mapping) and any(inner.get(k) is not None for k in _LAYER_KEYS):
            raise SpecError(
                "",
                [
                    f"{key}: model_type {abbreviate(str(model_type))} reads its sizes from the"
                    f" top level, and they are in {key}; a multimodal wrapper's model_type"
                    " (mistral3, gemma3, llama4, ...) reads a nested text model"
                ],
            )


def _geometry(r: Reading, rule: Rule) -> int:
    """Layers, hidden size, heads, K/V heads and head_dim into the spec; returns the layers,
    bounded before any rule builds a per-layer list."""
    n = r.get("num_hidden_layers", "n_layer", "num_layers", "n_layers")
    heads = r.get("num_attention_heads", "n_head", "n_heads")
    hidden = r.get("hidden_size", "n_embd", "d_model")
    if n is None or heads is None:
        raise SpecError("", ["num_hidden_layers, num_attention_heads: required in the config"])
    n = whole(n, "num_hidden_layers")
    heads = whole(heads, "num_attention_heads", maximum=MAX_DIM)
    s = r.spec
    s["model_type"] = r.model_type
    s["num_hidden_layers"] = n
    if hidden is not None:
        s["hidden_size"] = hidden
    s["num_attention_heads"] = heads
    kv = rule.kv_heads(r)
    if kv is not None:
        s["num_key_value_heads"] = kv
    head_dim = r.get("head_dim", "kv_channels", "attention_head_dim")
    if head_dim is not None and rule.reads_head_dim:
        s["head_dim"] = head_dim
    return n


def _model_dtype(r: Reading, rule: Rule, config: Config) -> str:
    """The stated ``torch_dtype``/``dtype`` (the text model's, then the wrapper's), else the
    rule's default with a note. A value that is not a name is refused, not read as float32."""
    for source in (r.config, config):
        for key in ("torch_dtype", "dtype"):
            value = source.get(key)
            if isinstance(value, str):
                return value
            if value is not None:
                raise SpecError("", [f"{key}: must be a dtype name, got {abbreviate(value)}"])
    r.notes.append(f"torch_dtype {rule.default_dtype}: not in the file")
    return rule.default_dtype


def _sizes(r: Reading, config: Config) -> None:
    """Vocabulary, MLP width and embedding tying, which size the weights, not the cache."""
    for key, names in (
        ("vocab_size", ("vocab_size", "padded_vocab_size")),
        ("intermediate_size", ("intermediate_size", "ffn_dim", "n_inner", "ffn_hidden_size")),
        ("tie_word_embeddings", ("tie_word_embeddings",)),
    ):
        value = r.get(*names)
        if value is None and key == "tie_word_embeddings":
            value = config.get("tie_word_embeddings")  # a wrapper may state it outside
        if value is not None:
            r.spec[key] = value


# --- files ------------------------------------------------------------------------------------


def is_hf_config(path: Path) -> bool:
    """True for a model folder or a transformers config.json (not a kvplan spec in JSON)."""
    if is_folder(path):
        return True
    if path.suffix != ".json" or not is_file(path):
        return False
    if path.name == CONFIG_NAME:
        return True
    try:
        data = json.loads(read_text(path))
    except (SpecError, ValueError, RecursionError):  # the spec reader reports the problem
        return False
    return isinstance(data, dict) and any(
        k in data for k in ("architectures", "transformers_version", *NESTED)
    )


def import_config(
    path: str | Path,
    name: str | None = None,
    hf_id: str | None = None,
    weights: WeightCount | None = None,
) -> Imported:
    """Read a config.json, or a model folder holding one, into a validated spec.

    From a folder the safetensors headers (or the index) add the exact parameter count, its
    formats and, with ``quantization_config``, how many parameters are quantized; ``weights``
    gives that count when the headers were read elsewhere (the Hub). Raises SpecError naming
    the file for anything unmapped, malformed or invalid, ArgumentTypeError (a TypeError) for
    an argument of the wrong type.
    """
    path = Path(as_path(path, "path"))
    check_strs(optional=True, name=name, hf_id=hf_id)
    if weights is not None:
        as_instance(weights, WeightCount, "weights", "a WeightCount (from the safetensors headers)")
    folder = path if is_folder(path) else None
    config_path = path / CONFIG_NAME if folder else path
    if folder is not None and not is_file(config_path):
        raise SpecError(str(path), [f"{CONFIG_NAME}: not in this folder"])
    shown = str(config_path)
    config = read_json(config_path)
    data, notes = spec_from_config(config, shown)
    count = weights
    if count is None and folder is not None:
        try:
            count = weights_in_folder(folder, config, data["torch_dtype"])
        except SpecError as e:
            raise SpecError(e.path or shown, e.problems, e.lines) from None
    if count is not None:
        _add_weights(data, notes, count)
        _add_read_experts(data, notes, config, count, shown)
    try:
        quant = mapping(config.get("quantization_config"), "quantization_config")
    except SpecError as e:
        raise SpecError(shown, e.problems) from None
    computed = None if count is not None else _add_computed(data, notes, config, quant, shown)
    if quant and "weight_dtype" not in data:
        notes.append(f"quantization_config {quant.get('quant_method')}: weights not counted")
    label = name or (hf_id.rsplit("/", 1)[-1].lower() if hf_id else _default_name(path, config))
    ordered: dict[str, Any] = {"name": label}
    hub = hf_id or config.get("_name_or_path")
    if isinstance(hub, str) and (hub == hf_id or _looks_like_hub_id(hub)):
        ordered["hf_id"] = hub
    origin = f"{hf_id} {CONFIG_NAME}" if hf_id else shown
    ordered["source"] = origin + (f"; {'; '.join(notes)}" if notes else "")
    compact_layer_types(data)  # after the counts, which read the layer kinds one by one
    ordered.update(data)
    spec = parse_spec(ordered, shown)
    if computed is not None:
        spec = spec.with_provenance(computed)
    return Imported(spec, ordered, tuple(notes), origin)


def _add_computed(
    data: dict[str, Any], notes: list[str], config: Config, quant: Config, shown: str
) -> str | None:
    """With no weights to read, the parameter count from the config's shapes, and the weight
    format its ``quantization_config`` names; returns the provenance line, or None (with a
    note) when the config lacks a size the count needs."""
    try:
        count = parameters_from_config(config, shown)
    except SpecError as e:
        notes.append(f"num_parameters not computed: {e.problems[0]}")
        return None
    line = (
        f"num_parameters computed from the config's shapes: {count.total:,}"
        " (no weights in the folder)"
    )
    data["num_parameters"] = count.total
    if count.inactive:
        data["num_active_parameters"] = count.total - count.inactive
        line += f"; {count.total - count.inactive:,} active per token"
    if count.experts:
        data["num_expert_parameters"] = count.experts
        line += f"; {count.experts:,} in the routed experts"
    found = quantized_format(quant, count) if quant else None
    if found is not None and found[1]:
        data["weight_dtype"], data["num_quantized_parameters"] = found
        line += f"; {found[1]:,} in {found[0]} (quantization_config)"
    notes.append(line)
    return line


def _add_weights(data: dict[str, Any], notes: list[str], count: WeightCount) -> None:
    data["num_parameters"] = count.num_parameters
    if count.weight_dtype is not None and count.num_quantized_parameters:
        data["weight_dtype"] = count.weight_dtype
        data["num_quantized_parameters"] = count.num_quantized_parameters
    formats = ", ".join(f"{k} {v:,}" for k, v in count.dtypes.items())
    notes.append(f"num_parameters {count.num_parameters:,} from {count.how} ({formats})")


def _add_read_experts(
    data: dict[str, Any], notes: list[str], config: Config, count: WeightCount, shown: str
) -> None:
    """The routed experts' parameters from the tensors named as experts; when none are named
    so but the config's shapes count experts, a note that the key is left unset."""
    if count.num_expert_parameters:
        data["num_expert_parameters"] = count.num_expert_parameters
        notes.append(
            f"num_expert_parameters {count.num_expert_parameters:,} from the tensors under"
            " .experts."
        )
        return
    try:
        counted = parameters_from_config(config, shown).experts
    except SpecError:
        return
    if counted:
        notes.append(
            "num_expert_parameters not set: no tensor is named as a routed expert (.experts.),"
            f" though the config's shapes count {counted:,} in them; state it by hand for"
            " expert parallelism to split them exactly"
        )


def _default_name(path: Path, config: Config) -> str:
    """The folder's name (``models/Llama-3.1-8B/config.json`` -> ``llama-3.1-8b``), or the
    file's stem when it is not called config.json."""
    if is_folder(path) or path.name == CONFIG_NAME:
        folder = path if is_folder(path) else path.parent
        stem = folder.resolve().name
    else:
        stem = path.stem
    return (stem or str(config.get("model_type", "imported"))).lower()


# --- output -----------------------------------------------------------------------------------


def spec_yaml(imported: Imported) -> str:
    """The imported spec as YAML that reads like a bundled one (model_specs/*.yaml): a comment
    with each derivation, then one ``key: value`` line per key in the spec's own key order,
    ``source`` on one line, lists of layer kinds in brackets on one line, a nested mapping
    (``stored_weight_bytes``) indented below its key."""
    lines = [f"# Imported from {_one_line(imported.config_path)} by kvplan import."]
    lines += [f"# - {_one_line(note)}" for note in imported.notes]
    order = {f.name: i for i, f in enumerate(fields(ModelSpec))}
    keys = sorted(imported.data, key=lambda k: order.get(k, len(order)))
    lines += _yaml_lines(imported.data, keys, "")
    return "\n".join(lines) + "\n"


def _one_line(text: str) -> str:
    """``text`` with every run of whitespace (line breaks included: a value read from a file
    may hold one) as one space, so a comment stays one comment line."""
    return " ".join(text.split())


def _yaml_lines(data: Mapping[str, Any], keys: list[str], indent: str) -> list[str]:
    """Block-style ``key: value`` lines: a scalar or a list of scalars on the key's line (a
    list in brackets), a mapping on the lines below, indented two spaces."""
    lines: list[str] = []
    for key in keys:
        value = data[key]
        if isinstance(value, Mapping):
            lines.append(f"{indent}{key}:")
            lines += _yaml_lines(value, list(value), indent + "  ")
        elif isinstance(value, list | tuple):
            lines.append(f"{indent}{key}: [{', '.join(_scalar(v) for v in value)}]")
        else:
            lines.append(f"{indent}{key}: {_scalar(value)}")
    return lines


def _scalar(value: Any) -> str:
    """One YAML scalar on one line: plain where YAML reads it back as the same value, else in
    double quotes (a JSON string is a YAML double-quoted scalar), as ``source`` needs for its
    ``key: value`` notes."""
    import yaml

    text: str = yaml.safe_dump(value, default_flow_style=True, width=1 << 30, allow_unicode=True)
    text = text.removesuffix("\n").removesuffix("\n...")
    if isinstance(value, str) and text.startswith(("'", '"')):
        return json.dumps(value, ensure_ascii=False)
    return text
