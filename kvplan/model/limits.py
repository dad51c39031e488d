"""The bounds of every spec key, by the type its field names.

A spec's fields are annotated with these names (``Dim``, ``Tokens``...): a plain ``int`` or
``str`` to the dataclass in ``kvplan.model.spec``, a bounded strict type to the pydantic model
``kvplan.model.spec_schema`` builds from them. Both read them here, so neither imports the other
for them.
"""

from __future__ import annotations

#: Upper bounds of the integer keys (docs/spec.md, "Limits"): far above any real model, low
#: enough that nothing a spec says can take unbounded time or memory (the per-layer schedule
#: is a tuple of num_hidden_layers entries) or overflow a float at display.
MAX_LAYERS = 10_000
#: Heads, head and model dims, MLA ranks, recurrent-state sizes, vocabulary, MLP width.
MAX_DIM = 2**24
#: Windows, chunks and max_position_embeddings, in tokens.
MAX_TOKENS = 2**40
#: Parameter counts.
MAX_PARAMETERS = 2**50
#: A byte count of weights: 2**50 parameters of 4 bytes.
MAX_WEIGHT_BYTES = 2**52
#: Characters of a name or Hugging Face id.
MAX_NAME_CHARS = 256

# The field types: a plain int, str or bool to the dataclass; kvplan.model.spec_schema.BOUNDS
# gives each its strict type and bounds (docs/spec.md, "Limits"): Layers 1..MAX_LAYERS; Dim
# (heads, dims, ranks, vocabulary) 1..MAX_DIM; Tokens 1..MAX_TOKENS; Parameters
# 1..MAX_PARAMETERS; Count (layers that may be 0) 0..MAX_LAYERS; WeightBytes
# 0..MAX_WEIGHT_BYTES; Name at most MAX_NAME_CHARS characters.
Layers = int
Dim = int
Tokens = int
Parameters = int
Count = int
WeightBytes = int
Name = str
Text = str
Flag = bool
