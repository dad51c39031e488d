"""What users bring -> a kvplan spec: Hugging Face ``config.json`` files, model folders and
the Hub, and GGUF files (``gguf``: header and tensor table only; ``gguf_format`` reads the
container, ``gguf_archs`` maps each GGUF architecture as llama.cpp reads it).

- ``config``: reads a config.json and drives the mapping; ``reading``: the safe reader and the
  value checks; ``safetensors``: exact parameter counts from shard headers; ``hub``: downloads.
- ``families``: one module per model family holding its rules, each registered in
  ``registry`` (``model_type`` -> rule, plus the ``Architecture`` that
  ``kvplan architectures`` lists). Importing this package loads every family once.

How to add a family: docs/importers.md.
"""

from kvplan.importers import families  # noqa: F401  (registers every family's rules, once)
from kvplan.importers.config import (
    Imported,
    import_config,
    is_hf_config,
    parameters_from_config,
    spec_from_config,
    spec_yaml,
)
from kvplan.importers.gguf import GGUFImported, GGUFWeights, import_gguf, is_gguf
from kvplan.importers.gguf_archs import supported_architectures as supported_gguf_architectures
from kvplan.importers.hub import HUB_HINT, download_from_hub
from kvplan.importers.reading import CONFIG_NAME
from kvplan.importers.registry import Architecture, list_architectures, supported_model_types
from kvplan.importers.safetensors import (
    WeightCount,
    count_parameters,
    read_safetensors_header,
    weights_in_folder,
)

__all__ = [
    "CONFIG_NAME",
    "HUB_HINT",
    "Architecture",
    "GGUFImported",
    "GGUFWeights",
    "Imported",
    "WeightCount",
    "count_parameters",
    "download_from_hub",
    "import_config",
    "import_gguf",
    "is_gguf",
    "is_hf_config",
    "list_architectures",
    "parameters_from_config",
    "read_safetensors_header",
    "spec_from_config",
    "spec_yaml",
    "supported_gguf_architectures",
    "supported_model_types",
    "weights_in_folder",
]
