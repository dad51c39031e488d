"""Results -> rich renderables for a terminal, or JSON-ready dicts with stable keys.

One module per topic, beside what it shows (estimate, plan, engines, budget, probe, perf,
charts, hardware), and one table helper (``table``). No arithmetic beyond formatting.

Every JSON document carries ``schema_version``: keys are only ever added within a version;
a removed or renamed key bumps it. docs/json.md describes each document.
"""

SCHEMA_VERSION = 1

#: a layer kind as tables show it, where space is short
SHORT_KIND = {
    "full_attention": "full",
    "sliding_attention": "sliding",
    "chunked_attention": "chunked",
    "mla_latent": "mla",
    "linear_attention": "linear",
    "no_cache": "none",
}
