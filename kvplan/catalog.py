"""The bundled model catalog: find a spec by short name, Hugging Face id, alias or path.

A question about one model reads one file: the short name is the file name, and an HF id
is tried by its last component (``meta-llama/Llama-3.1-8B`` -> ``llama-3.1-8b.yaml``) before
the whole catalog is read. Only aliases and misspellings pay for a full scan.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from kvplan.errors import ModelNotFoundError, closest
from kvplan.files import bundled_dir, is_file, path_exists
from kvplan.spec import ModelSpec, load_spec

_SPEC_SUFFIXES = (".yaml", ".yml", ".json")


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
    return load_spec(path)


def list_models() -> list[ModelSpec]:
    """Every bundled spec, sorted by name."""
    return sorted((_load_bundled(p) for p in _bundled_files()), key=lambda s: s.name)


def _names_of(spec: ModelSpec) -> set[str]:
    names = {spec.name, *spec.aliases}
    if spec.hf_id:
        names.add(spec.hf_id)
    return {n.lower() for n in names}


def load_model(model: str | Path) -> ModelSpec:
    """A spec by catalog name, HF id or alias (case-insensitive), or by path to a spec file,
    a Hugging Face config.json or a model folder (imported by ``kvplan.importers``).

    Raises ModelNotFoundError with the closest names when nothing matches, and SpecError
    when a file is invalid.
    """
    text = str(model)
    path = Path(text)
    if isinstance(model, Path) or path.suffix in _SPEC_SUFFIXES or path_exists(path):
        from kvplan.importers import import_config, is_hf_config

        if is_hf_config(path):
            return import_config(path).spec
        return load_spec(path)
    key = text.strip().lower()
    for stem in dict.fromkeys((key, key.rsplit("/", 1)[-1])):
        candidate = specs_dir() / f"{stem}.yaml"
        if is_file(candidate):
            spec = _load_bundled(candidate)
            if key in _names_of(spec):
                return spec
    known: dict[str, ModelSpec] = {}
    for spec in list_models():
        for name in _names_of(spec):
            known[name] = spec
    if key in known:
        return known[key]
    raise ModelNotFoundError(text, _suggest(key, known))


def _suggest(key: str, known: dict[str, ModelSpec]) -> list[str]:
    close = closest(key, list(known), limit=8)
    # One suggestion per model, shown by its canonical name.
    return list(dict.fromkeys(known[c].name for c in close))[:3]
