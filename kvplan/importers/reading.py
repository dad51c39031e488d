"""Reading a config.json: the file itself, the value lookup with config-class defaults, and
the checks that turn a value of the wrong type or range into a SpecError naming the key.

Config files are third-party input: ``attn_config: "x"``, ``attn_layer_period: 0`` or a
``num_hidden_layers`` of 10**9 is refused here, never guessed and never a traceback.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvplan.errors import SpecError
from kvplan.files import read_text
from kvplan.model.limits import MAX_LAYERS
from kvplan.units import abbreviate

CONFIG_NAME = "config.json"

#: Wrappers keep their text model in one of these nested configs.
NESTED = ("text_config", "llm_config", "language_config")

Config = Mapping[str, Any]


@dataclass
class Reading:
    """What one config yields: the spec keys and how each non-obvious one was derived.

    ``defaults`` are the values the model's config class supplies when the file leaves a key
    out (transformers ``configuration_<model>.py``); using one adds a note saying so.
    """

    model_type: str
    config: Config
    defaults: Mapping[str, Any] = field(default_factory=dict)
    spec: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def get(self, *keys: str) -> Any:
        """The first of ``keys`` the file states (not null), else the config class default."""
        for key in keys:
            if self.config.get(key) is not None:
                return self.config[key]
        for key in keys:
            default = self.defaults.get(key)
            if default is not None:
                self.notes.append(
                    f"{key} {json.dumps(default)}: the {self.model_type} default (not in file)"
                )
                return default
        return None


def whole(value: Any, key: str, minimum: int = 1, maximum: int = MAX_LAYERS) -> int:
    """``value`` as an int in ``[minimum, maximum]``; SpecError naming ``key`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise SpecError(
            "",
            [f"{key}: must be an integer from {minimum} to {maximum:,}, got {abbreviate(value)}"],
        )
    return value


def mapping(value: Any, key: str) -> Mapping[str, Any]:
    """``value`` when it is a JSON object (absent: empty); SpecError naming ``key`` otherwise."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise SpecError("", [f"{key}: must be an object, got {abbreviate(value)}"])
    return value


def as_list(value: Any, key: str) -> list[Any]:
    """``value`` when it is a JSON list; SpecError naming ``key`` otherwise."""
    if not isinstance(value, list):
        raise SpecError("", [f"{key}: must be a list, got {abbreviate(value)}"])
    return value


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object from ``path`` (read through the safe reader: regular files, bounded size).

    Raises SpecError naming the file for malformed JSON, a document nested too deeply, an
    integer past Python's 4,300-digit limit, or a document that is not an object.
    """
    text = read_text(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise SpecError(str(path), [f"malformed JSON: {e.msg}"], [e.lineno]) from None
    except RecursionError:
        raise SpecError(str(path), ["malformed JSON: nested too deeply"]) from None
    except ValueError:  # Python reads at most 4,300 digits of an integer
        raise SpecError(
            str(path), ["malformed JSON: an integer of more than 4,300 digits"]
        ) from None
    if not isinstance(data, dict):
        raise SpecError(str(path), ["must be a JSON object"])
    return data


def compact_layer_types(spec: dict[str, Any]) -> None:
    """Rewrite ``spec["layer_types"]`` in the bundled specs' form: ``layer_types_pattern``
    when the kinds repeat a pattern at least twice from layer 0 (gpt-oss: 24 kinds ->
    ``[sliding_attention, full_attention]``; Gemma 3 27B: 62 kinds, a pattern of 6), no key
    when every layer is full attention and no window or chunk would make the default another
    kind, the list as it is otherwise. The layers the spec builds are the same."""
    kinds = spec.get("layer_types")
    if not isinstance(kinds, list) or not kinds:
        return
    n = len(kinds)
    period = next(p for p in range(1, n + 1) if all(kinds[i] == kinds[i % p] for i in range(n)))
    if 2 * period > n:  # not seen to repeat: the list as the file has it
        return
    del spec["layer_types"]
    default_full = all(spec.get(k) is None for k in ("sliding_window", "attention_chunk_size"))
    if not (kinds[0] == "full_attention" and period == 1 and default_full):
        spec["layer_types_pattern"] = kinds[:period]
