"""The bundled model catalog: find a spec by short name, Hugging Face id, alias or path.

A question about one model reads one file: the short name is the file name, and an HF id
is tried by its last component (``meta-llama/Llama-3.1-8B`` -> ``llama-3.1-8b.yaml``) before
the whole catalog is read. Only aliases and misspellings pay for a full scan.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache
from pathlib import Path

from kvplan.arguments import as_flag, wrong_type
from kvplan.errors import (
    HubNotFoundError,
    HubUnavailableError,
    ModelNotFoundError,
    SpecError,
    UnitError,
)
from kvplan.files import bundled_dir, is_file, path_exists
from kvplan.model.spec import ModelSpec, load_spec
from kvplan.validation import read_yaml

_SPEC_SUFFIXES = (".yaml", ".yml", ".json")
_FILE_SUFFIXES = (*_SPEC_SUFFIXES, ".gguf")


@cache
def specs_dir() -> Path:
    """The folder of bundled specs: inside the installed package, or the source checkout's."""
    return bundled_dir("model_specs")


def _bundled_files() -> list[Path]:
    return sorted(specs_dir().glob("*.yaml"))


def bundled_names() -> list[str]:
    """The bundled models' short names (their file names), sorted; reads no spec."""
    return [p.stem for p in _bundled_files()]


@cache
def _load_bundled(path: Path) -> ModelSpec:
    # Bundled specs are checked as files by the test suite (tests/test_catalog.py), so they
    # are built without the file check and a command that reads them never loads pydantic.
    # A file that does not build this way is checked in full, for its message.
    data, _ = read_yaml(path)
    try:
        return ModelSpec.from_checked({"name": path.stem, **data})
    except (TypeError, ValueError):
        return load_spec(path)


def list_models() -> list[ModelSpec]:
    """Every bundled spec, sorted by name."""
    return sorted((_load_bundled(p) for p in _bundled_files()), key=lambda s: s.name)


def _names_of(spec: ModelSpec) -> set[str]:
    names = {spec.name, *spec.aliases}
    if spec.hf_id:
        names.add(spec.hf_id)
    return {n.lower() for n in names}


def load_model(model: str | Path, *, paths: bool = True) -> ModelSpec:
    """A spec by catalog name, HF id or alias (case-insensitive), or by path to a spec file,
    a Hugging Face config.json, a model folder or a ``.gguf`` file (imported by
    ``kvplan.importers``).

    Any other name is read by ``kvplan.catalog.names`` (re-uploads, quantized variants, Ollama
    tags); the spec then carries ``resolved_from`` and its ``provenance``. ``paths=False``
    reads names only, never a file: for a name found inside an input file (a log's
    ``model=``), which must not make kvplan open another file. Raises ModelNotFoundError
    with the closest names when nothing matches (NameRefusedError for a variant that differs
    from its catalog entry), SpecError when a file is invalid, ArgumentTypeError (a TypeError)
    for a model that is neither a str nor a Path.
    """
    if not isinstance(model, str | Path):
        raise wrong_type("model", "a model's name or a path", model)
    as_flag(paths, "paths")
    text = str(model)
    path = Path(text)
    if not paths:
        if isinstance(model, Path):
            raise UnitError("a model name is asked for here, not a path")
    elif isinstance(model, Path) or path.suffix in _FILE_SUFFIXES or path_exists(path):
        from kvplan.importers import import_config, import_gguf, is_gguf, is_hf_config

        if is_gguf(path):
            return import_gguf(path).spec
        if is_hf_config(path):
            return import_config(path).spec
        return load_spec(path)
    key = text.strip().lower()
    from kvplan.catalog.names import is_ollama_tag

    if is_ollama_tag(key):
        # Before the alias lookup: a spec's alias `qwen3:8b` names the model, but the tag
        # names Ollama's default build (q4_K_M), which kvplan.catalog.names reads for every
        # family.
        return _read_name(text, _known_specs())
    for stem in dict.fromkeys((key, key.rsplit("/", 1)[-1])):
        candidate = specs_dir() / f"{stem}.yaml"
        if is_file(candidate):
            spec = _load_bundled(candidate)
            if key in _names_of(spec):
                return spec
    known = _known_specs()
    if key in known:
        return known[key]
    try:
        return _read_name(text, known)
    except ModelNotFoundError as refused:
        if not paths and not _HUB_FROM_FILES.get() and (_gguf_id(text) or is_hub_id(text)):
            raise _with_reason(refused, _NOT_FROM_FILES) from None
        gguf = _gguf_id(text)
        if gguf is not None:
            return _from_hub(gguf[0], refused, lambda: _gguf_spec(*gguf))
        if not is_hub_id(text):
            raise
        return _from_hub(text.strip(), refused, lambda: _hub_spec(text.strip()))


def _gguf_id(text: str) -> tuple[str, str] | None:
    """``ORG/NAME-GGUF:QUANT`` (llama.cpp's ``-hf``; ``hf.co/`` allowed) -> (Hub id, quant)."""
    from kvplan.catalog.names import strip_hub_prefix

    repo, colon, tag = strip_hub_prefix(text.strip()).rpartition(":")
    if not colon or not re.fullmatch(r"[A-Za-z0-9_]{1,32}", tag) or not is_hub_id(repo):
        return None
    return repo, tag


@cache
def _gguf_spec(hub_id: str, tag: str) -> ModelSpec:
    """The spec of a GGUF repository's file of quantization ``tag``, read by its header."""
    from kvplan.importers.hub_gguf import import_gguf_from_hub

    imported, commit, kept = import_gguf_from_hub(hub_id, tag)
    where = "kvplan's cache of the Hub" if kept else "the Hub"
    line = f"read from {where}: {hub_id} at {commit}, the {tag} .gguf file's header"
    return imported.spec.with_provenance(line, resolved_from=f"{hub_id}:{tag}")


def is_hub_id(text: str) -> bool:
    """Whether ``text`` has the shape of a Hub repository id: ``org/name[@revision]``."""
    from kvplan.importers.hub import parse_hub_id

    if text.strip().count("/") - text.partition("@")[2].count("/") != 1:
        return False
    try:
        parse_hub_id(text)
    except UnitError:
        return False
    return True


def _from_hub(hub_id: str, refused: ModelNotFoundError, read: Callable[[], ModelSpec]) -> ModelSpec:
    """The spec of a Hub id the catalog does not hold, read as ``kvplan import --hub`` reads
    it (config.json, the safetensors headers; never the weights), and where it came from.

    The catalog's refusal stands, with why the Hub did not answer, when the Hub has no such
    repository, when huggingface_hub is not installed, or offline when the cache lacks it;
    a Hub that cannot be reached, or a gated repository, is a HubUnavailableError (exit 3)."""
    from kvplan.importers.hub import HUB_HINT, offline

    try:
        return read()
    except HubNotFoundError as e:
        why = e.args[0].split(": ", 1)[-1]
        raise _with_reason(refused, f"nor is it on the Hub ({why})") from None
    except HubUnavailableError as e:
        if HUB_HINT in str(e):
            raise _with_reason(refused, f"a Hub id is read from the Hub with {_EXTRA}") from None
        if offline():
            raise _with_reason(refused, "HF_HUB_OFFLINE is set and the cache lacks it") from None
        raise HubUnavailableError(
            f"model {hub_id!r} is not in the catalog; {str(e).split(': ', 1)[-1]}"
        ) from None


@cache
def _hub_spec(hub_id: str) -> ModelSpec:
    """A Hub id's spec, once a process: a budget or a comparison may name it many times."""
    from kvplan.importers.config import import_config
    from kvplan.importers.hub import fetch_from_hub

    checkpoint = fetch_from_hub(hub_id)
    commit = checkpoint.folder.name
    where = "the Hugging Face cache" if checkpoint.from_cache else "the Hub"
    if checkpoint.adapter_base is not None:
        return _adapter_spec(hub_id, checkpoint.adapter_base, f"{where}: {hub_id} at {commit}")
    imported = import_config(
        checkpoint.folder, None, hf_id=checkpoint.repo_id, weights=checkpoint.weights
    )
    counted = "; weights from its safetensors headers" if checkpoint.weights else ""
    line = f"read from {where}: {checkpoint.repo_id} at {commit}{counted}"
    return imported.spec.with_provenance(line, resolved_from=hub_id)


def _adapter_spec(hub_id: str, base: str, read: str) -> ModelSpec:
    """A LoRA adapter is served on its base model's cache: the base's spec (a catalog name or
    a Hub id, read as a name), saying so. An adapter whose base is an adapter is refused."""
    if _IN_ADAPTER.get():
        problem = f"the base is itself a LoRA adapter (on {base}); kvplan reads one adapter"
        raise SpecError(hub_id, [problem])
    token = _IN_ADAPTER.set(True)
    try:
        with hub_from_files():  # the adapter was asked for: its base may be read as well
            spec = load_model(base, paths=False)
    finally:
        _IN_ADAPTER.reset(token)
    line = (
        f"a LoRA adapter read from {read}, served on its base {base}"
        " (the adapter's own weights are not counted)"
    )
    return spec.with_provenance(line, resolved_from=hub_id)


_IN_ADAPTER: ContextVar[bool] = ContextVar("in_adapter", default=False)
#: Whether a Hub id named inside an input file (a budget's model:) may be read from the Hub.
_HUB_FROM_FILES: ContextVar[bool] = ContextVar("hub_from_files", default=False)
_NOT_FROM_FILES = (
    "a Hub id named inside a file is read from the Hub only with --allow-hub (kvplan check);"
    " the file cannot make kvplan reach the network or fill the cache"
)


@contextmanager
def hub_from_files() -> Iterator[None]:
    """Within this block, a Hub id named inside an input file (a budget's ``model:``, read with
    ``load_model(..., paths=False)``) is read from the Hub as a typed one is. Outside it, such
    a name is the catalog's refusal: an untrusted file does not make kvplan reach the network
    or write the cache (``kvplan check --allow-hub`` opens it)."""
    token = _HUB_FROM_FILES.set(True)
    try:
        yield
    finally:
        _HUB_FROM_FILES.reset(token)


_EXTRA = "pip install 'kvplan[hub]'"


def _with_reason(refused: ModelNotFoundError, reason: str) -> ModelNotFoundError:
    """The catalog's refusal, one line, ending with why the Hub gave no spec either."""
    refused.args = (f"{refused.args[0]}; {reason}",)
    return refused


def _known_specs() -> dict[str, ModelSpec]:
    """Every bundled spec by each of its lower-case names (name, aliases, HF id)."""
    return {name: spec for spec in list_models() for name in _names_of(spec)}


def _read_name(text: str, known: dict[str, ModelSpec]) -> ModelSpec:
    """A variant's name read by ``kvplan.catalog.names`` (an organisation, a quantization, an
    Ollama
    tag...): the catalog spec, in the weight format the name gives, carrying how it was read."""
    from kvplan.catalog.names import read_name

    names = {key: spec.name for key, spec in known.items()}
    for key, spec in known.items():  # an HF id's last part: Meta-Llama-3.1-8B-Instruct
        names.setdefault(key.rsplit("/", 1)[-1], spec.name)
    by_name = {spec.name: spec for spec in known.values()}
    reading = read_name(text, names)
    spec = by_name[reading.name]
    if reading.weight_dtype is not None and reading.weight_dtype != spec.weight_dtype:
        # Only the weight fields change: every parameter past the embeddings and the output
        # head is in the named format (weights.model_weights caps it there).
        spec = spec.model_copy(
            update={"weight_dtype": reading.weight_dtype, "num_quantized_parameters": None}
        )
    return spec.with_provenance(*reading.provenance, resolved_from=text)


def as_spec(model: object, name: str = "spec") -> ModelSpec:
    """A ModelSpec as given, or the one a name or path resolves to; ``name`` is the parameter
    named by the ArgumentTypeError (a TypeError) that anything else raises."""
    if isinstance(model, ModelSpec):
        return model
    if isinstance(model, (str, Path)):
        return load_model(model)
    raise wrong_type(name, "a ModelSpec or a model's name", model)
