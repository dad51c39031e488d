"""The bundled model catalog: what users type (a name, an alias, an Ollama tag, a path) -> a
ModelSpec, and the listing ``kvplan models`` prints."""
