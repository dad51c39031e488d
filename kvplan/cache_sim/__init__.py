"""Request traces replayed through an engine's prefix cache: the blocks a trace reuses."""
