"""What users bring -> a kvplan spec: Hugging Face ``config.json`` files, model folders and
the Hub (GGUF next).

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
    spec_from_config,
    spec_yaml,
)
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
    "Imported",
    "WeightCount",
    "count_parameters",
    "download_from_hub",
    "import_config",
    "is_hf_config",
    "list_architectures",
    "read_safetensors_header",
    "spec_from_config",
    "spec_yaml",
    "supported_model_types",
    "weights_in_folder",
]
