"""What users type -> a catalog name and a weight format, by one rule table.

``read_name`` is tried by ``kvplan.catalog.lookup.load_model`` after the exact lookups fail. It
reads a
name in steps, each a row of the tables below, and returns the catalog name with one line per
step (``Reading.provenance``), so every output can say how the name was read:

    Qwen/Qwen3-235B-A22B-FP8      organisation Qwen dropped; -FP8 -> fp8 weights; qwen3-235b-a22b
    Meta Llama 3.1 8B Instruct    spaces -> dashes; meta-llama-3.1-8b-instruct -> llama-3.1-8b
    llama3.1:8b-instruct-q4_K_M   Ollama family llama3.1, size 8b, q4_K_M -> q4_0 weights

Fail closed: a suffix is stripped only when it does not change the cache geometry or the
trained length. Quantization and packaging suffixes never do; a tuned release (``-it``,
``-Instruct``, ``-Base``) or a dated revision (``-0324``) is accepted only where its config.json
was checked against the catalog entry (``CHECKED_VARIANTS``); one known to differ is refused
with the reason (``DIFFERENT_VARIANTS``); any other is refused as unchecked. Nothing here reads
a file: a name costs a few regular expressions.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from kvplan.errors import ModelNotFoundError, NameRefusedError, closest
from kvplan.model.weights import whole_bits


@dataclass(frozen=True, slots=True)
class Format:
    """A weight format named in a variant: the ``weight_dtype`` that sizes it, and how near."""

    weight_dtype: str | None  # None: the spec's own weights
    note: str


@dataclass(frozen=True, slots=True)
class Reading:
    """A typed name read as a catalog entry: its name, the weights it names, how it was read."""

    name: str
    weight_dtype: str | None
    provenance: tuple[str, ...]


_FP8 = Format("fp8_e4m3", "fp8 weights, 128x128 block scales counted")
_INT8 = Format("int8", "int8 weights, one scale per output channel")
_INT4 = Format("int4", "int4 weights, fp16 scale per group of 128 (66 B per 128)")
_AWQ = Format("awq", "AWQ int4 weights, group 128, scale and zero point counted")
_GPTQ = Format("gptq", "GPTQ int4 weights, group 128, scale and zero point counted")

# Quantization suffixes of re-uploads (-FP8, -AWQ, ...) and what sizes them. Rows are tried in
# order at the end of the name; alternatives within a row longest first.
QUANT_SUFFIXES: tuple[tuple[str, Format], ...] = (
    (r"fp8[-_](?:dynamic|static|block)|fp8|w8a8[-_]fp8|float8", _FP8),
    (r"gptq[-_]int4|gptq", _GPTQ),
    # GPTQ int8 keeps a scale per group of 128 (2 B per 128 B): int8's per-channel scale
    # undercounts it by 1.5%.
    (r"gptq[-_]int8", Format("int8", "GPTQ int8 sized as int8 (its group scales add 1.5%)")),
    (r"awq", _AWQ),
    (r"quantized\.w8a8|quantized\.w8a16|w8a8|w8a16|int8", _INT8),
    (r"quantized\.w4a16|w4a16|int4", _INT4),
    (r"mxfp4", Format("mxfp4", "mxfp4 weights: 32 e2m1 values + one e8m0 scale = 17 B")),
    (r"nvfp4|fp4", Format("nvfp4", "nvfp4 weights: 16 e2m1 values + one e4m3 scale = 9 B")),
    # bitsandbytes nf4, block 64 with double-quantized absmax: 32 B + ~1 B per 64 weights,
    # 4.13 bits a weight; int4 (66 B per 128) is 4.125.
    (r"(?:unsloth[-_])?bnb[-_]4bit", Format("int4", "bitsandbytes nf4 sized as int4 (4.125 bits)")),
    # MLX: groups of 64 with a bf16 scale and bias: 32 + 4 = 36 B per 64 (4.5 bits), exactly
    # nvfp4's 9 B per 16; 8-bit: 64 + 4 = 68 B per 64 (8.5 bits), exactly q8_0's 34 B per 32.
    (r"4bit", Format("nvfp4", "MLX 4-bit (36 B per 64) sized as nvfp4, the same 4.5 bits")),
    (r"8bit", Format("q8_0", "MLX 8-bit (68 B per 64) sized as q8_0, the same 8.5 bits")),
)

# GGUF quantization tags (Ollama tags, -Q4_K_M file suffixes): the kvplan format of the same
# bits a weight (ggml-common.h block sizes), exact unless the note says otherwise.
GGUF_TAGS: dict[str, Format] = {
    **{q: Format(q, f"GGUF {q} weights") for q in ("q8_0", "q4_0", "q4_1", "q5_0", "q5_1")},
    "iq4_nl": Format("iq4_nl", "GGUF iq4_nl weights"),
    **{
        q: Format(
            "q4_0",
            f"GGUF {q}: q4_K (144 B per 256, 4.5 bits) sized as q4_0 (4.5 bits);"
            " the K-quant mix keeps some tensors wider, which the .gguf file's own"
            " tensors give exactly",
        )
        for q in ("q4_k", "q4_k_s", "q4_k_m")
    },
    **{
        q: Format(
            "q5_0",
            f"GGUF {q}: q5_K (176 B per 256, 5.5 bits) sized as q5_0 (5.5 bits);"
            " the .gguf file's own tensors give it exactly",
        )
        for q in ("q5_k", "q5_k_s", "q5_k_m")
    },
    "fp16": Format(None, "16-bit weights, as the spec has them"),
    "f16": Format(None, "16-bit weights, as the spec has them"),
    "bf16": Format(None, "16-bit weights, as the spec has them"),
    # Ollama's QAT Gemma 3 tags ship q4_0 weights.
    "qat": Format("q4_0", "Ollama QAT build: q4_0 weights"),
}
_GGUF_TAG = re.compile(r"(?:i?q\d[_a-z0-9]*|f16|fp16|bf16|qat)")

# Suffixes that name packaging or a re-uploader's build, never the model: stripped freely.
PACKAGING_SUFFIXES = r"gguf|mlx|hf|unsloth|ov|onnx"
# Suffixes that name a tuned release; accepted only through CHECKED_VARIANTS.
TUNING_SUFFIXES = r"instruct|thinking|chat|it|base|pt|text"
# A dated revision (-0324, -2507, -2501, -0528).
REVISION = r"\d{4}"

# Organisations that re-upload others' models unchanged but for the weight format. These and
# the organisations of the catalog's own HF ids are dropped; any other organisation's model of
# the same name may be a fine-tune of another shape, and is refused.
REUPLOADERS = frozenset(
    (
        *("unsloth", "redhatai", "neuralmagic", "nm-testing", "thebloke", "bartowski"),
        *("lmstudio-community", "mlx-community", "maziyarpanahi", "quantfactory", "ggml-org"),
        *("second-state", "casperhansen", "hugging-quants", "cognitivecomputations"),
        *("modelcloud", "kaitchup", "intel", "amd"),
    )
)
_HUB_PREFIXES = ("https://huggingface.co/", "http://huggingface.co/", "huggingface.co/", "hf.co/")

# (catalog name, suffix) pairs whose release was checked to have the catalog entry's cache
# geometry and max_position_embeddings, with what was checked.
CHECKED_VARIANTS: dict[tuple[str, str], str] = {
    # deepseek-ai/DeepSeek-V3-0324 config.json: DeepseekV3ForCausalLM, 61 layers, 128 heads,
    # kv_lora_rank 512, qk_rope_head_dim 64, yarn factor 40 over 4096 = max_position_embeddings
    # 163840, fp8 e4m3 with 128x128 blocks: as deepseek-ai/DeepSeek-V3.
    ("deepseek-v3", "0324"): "same MLA geometry and 163,840-token length as DeepSeek-V3",
    # deepseek-ai/DeepSeek-R1-0528 config.json: hidden_size 7168, kv_lora_rank 512,
    # qk_rope_head_dim 64, 256 routed experts, 163840 positions: as deepseek-ai/DeepSeek-R1.
    ("deepseek-r1", "0528"): "same MLA geometry and 163,840-token length as DeepSeek-R1",
    # google/gemma-2-*-it config.json: the base model's layers, heads, head_dim 128 (256 for
    # 27b: query_pre_attn_scalar 144), sliding_window 4096, max_position_embeddings 8192.
    ("gemma-2-2b", "it"): "same geometry and 8,192-token length as the base model",
    ("gemma-2-9b", "it"): "same geometry and 8,192-token length as the base model",
    ("gemma-2-27b", "it"): "same geometry and 8,192-token length as the base model",
    # Qwen/Qwen3-*-Instruct-2507 and -Thinking-2507 config.json: the same geometry and 262144
    # positions; both are aliases of the catalog's 2507 entries.
    **{
        (
            f"{name}-2507",
            tuned,
        ): f"the -{tuned.capitalize()}-2507 release is an alias of {name}-2507"
        for name in ("qwen3-4b", "qwen3-30b-a3b", "qwen3-235b-a22b")
        for tuned in ("instruct", "thinking")
    },
    # meta-llama/Llama-3.1-8B-Instruct reports general.name "Meta Llama 3.1 8B Instruct".
    ("llama-3.1-8b", "instruct"): "the catalog lists the Instruct release as an alias",
}

# (catalog name, suffix) pairs known to differ, with the difference from their config.json.
DIFFERENT_VARIANTS: dict[tuple[str, str], str] = {
    ("llama-4-maverick", "instruct"): "Llama-4-Maverick-17B-128E-Instruct's"
    " max_position_embeddings is 1048576, not the base model's 262144",
    ("glm-4-9b", "chat"): "glm-4-9b-chat's seq_length is 131072, glm-4-9b's 8192",
    **{
        (f"qwen3-{size}", "base"): f"Qwen3-{size.upper()}-Base is trained for 32,768 tokens,"
        f" Qwen3-{size.upper()} for 40,960"
        for size in ("0.6b", "4b", "8b", "14b", "30b-a3b")
    },
}

# (catalog name, suffix) pairs whose release differs and has its own catalog entry: the entry,
# and the difference from their config.json.
OWN_ENTRIES: dict[tuple[str, str], tuple[str, str]] = {
    **{
        (name, "2507"): (
            f"{name}-2507",
            "the 2507 releases are trained for 262,144 tokens (max_position_embeddings 262144),"
            " the original for 40,960",
        )
        for name in ("qwen3-4b", "qwen3-30b-a3b", "qwen3-235b-a22b")
    },
    ("kimi-k2", "0905"): (
        "kimi-k2-0905",
        "Kimi-K2-Instruct-0905 is trained for 262,144 tokens, Kimi-K2-Instruct for 131,072",
    ),
    ("mistral-nemo", "instruct"): (
        "mistral-nemo-instruct-2407",
        "Mistral-Nemo-Instruct-2407's max_position_embeddings is 1024000, the base model's 128000",
    ),
}

# The quantization Ollama's library ships under a tag that names none (its model pages list the
# default tag as Q4_K_M), and the families whose default build keeps the release's own weights
# (gpt-oss ships its MXFP4 experts as released).
OLLAMA_DEFAULT_QUANT = "q4_k_m"
OLLAMA_NATIVE_WEIGHTS = frozenset({"gpt-oss"})

# Ollama library families -> catalog names ({size} is the tag's size). Ollama's default tags
# are the instruct releases: every family here has its instruct release aliased in the catalog
# or listed in CHECKED_VARIANTS. Families whose Ollama build differs (llama4, mistral-nemo,
# command-r, the deepseek-r1 distills) are left out, so they are refused.
OLLAMA_FAMILIES: dict[str, str | dict[str, str]] = {
    "llama2": "llama-2-{size}",
    "llama3": "llama-3-{size}",
    "llama3.1": "llama-3.1-{size}",
    "llama3.2": "llama-3.2-{size}",
    "llama3.3": "llama-3.3-{size}",
    "gemma": "gemma-{size}",
    "gemma2": "gemma-2-{size}",
    "gemma3": "gemma-3-{size}",
    "qwen2.5": "qwen2.5-{size}",
    "qwen3": "qwen3-{size}",
    "qwen3-coder": {"480b": "qwen3-coder-480b-a35b"},
    "deepseek-r1": {"671b": "deepseek-r1"},
    "deepseek-v3": {"671b": "deepseek-v3"},
    "deepseek-v2": {"16b": "deepseek-v2-lite", "236b": "deepseek-v2"},
    "gpt-oss": "gpt-oss-{size}",
    "mixtral": "mixtral-{size}",
    "mistral": {"7b": "mistral-7b-v0.3"},
    "codellama": "codellama-{size}",
    "falcon": "falcon-{size}",
    "yi": "yi-{size}",
    "phi4": {"14b": "phi-4"},
    "phi4-mini": {"3.8b": "phi-4-mini"},
    "olmo2": "olmo-2-{size}",
    "granite3.1-dense": "granite-3.1-{size}",
    "granite3.3": "granite-3.3-{size}",
    "dbrx": {"132b": "dbrx"},
}
_OLLAMA_TUNING = frozenset(("instruct", "chat", "it", "text"))


def _suffix(pattern: str) -> re.Pattern[str]:
    return re.compile(rf"^(?P<rest>.+?)[-_.](?P<suffix>{pattern})$")


_QUANT_RULES = tuple((_suffix(p), fmt) for p, fmt in QUANT_SUFFIXES)
_GGUF_SUFFIX = _suffix(_GGUF_TAG.pattern)
_PACKAGING = _suffix(PACKAGING_SUFFIXES)
_TUNING = _suffix(TUNING_SUFFIXES)
_REVISION = _suffix(REVISION)
_OLLAMA = re.compile(r"^(?P<family>[a-z][a-z0-9.\-]*):(?P<tag>[a-z0-9._\-]+)$")
_SIZE = re.compile(r"^(?:\d+(?:\.\d+)?[bm]|\d+x\d+b|e\d+b)$")


def strip_hub_prefix(text: str) -> str:
    """``text`` without a leading Hub address (``hf.co/ORG/NAME`` -> ``ORG/NAME``), stripped."""
    key = text.strip()
    for prefix in _HUB_PREFIXES:
        if key.lower().startswith(prefix):
            return key[len(prefix) :]
    return key


def is_ollama_tag(text: str) -> bool:
    """Whether ``text`` has Ollama's form, ``family:tag`` with no organisation or path.

    Such a name is read by the Ollama rules even where a bundled spec lists it as an alias
    (``qwen3:8b``): the alias names the model, the tag still names Ollama's default build.
    """
    key = text.strip().lower()
    return "/" not in key and _OLLAMA.match(key) is not None


@dataclass(slots=True)
class _State:
    typed: str
    known: Mapping[str, str]
    lines: list[str]
    fmt: Format | None = None
    fmt_suffix: str = ""


def read_name(text: str, known: Mapping[str, str]) -> Reading:
    """Read ``text`` as a catalog model. ``known`` maps every lower-case catalog name, alias,
    HF id and HF id's last part to the catalog name.

    Raises NameRefusedError for a variant that differs from (or was not checked against) its
    catalog entry, and ModelNotFoundError with the nearest names when no rule finds one.
    """
    state = _State(text, known, [])
    key = strip_hub_prefix(text)
    if is_ollama_tag(key):
        return _read_ollama(state, key.lower())
    if "/" in key:
        org, key = key.rsplit("/", 1)
        _drop_organisation(state, org, key)
    key = key.strip().lower()
    if ":" in key:  # hf.co/ORG/NAME-GGUF:Q4_K_M
        key, tag = key.rsplit(":", 1)
        _gguf_format(state, tag)
    spaced = re.sub(r"\s+", "-", key)
    if spaced != key:
        state.lines.append(f"spaces -> dashes: {spaced}")
    return _peel(state, spaced)


def _drop_organisation(state: _State, org: str, rest: str) -> None:
    makers = {k.split("/", 1)[0] for k in state.known if "/" in k}
    if org.lower() in REUPLOADERS:
        state.lines.append(f"organisation {org} (a re-uploader) dropped")
    elif org.lower() in makers:
        state.lines.append(f"organisation {org} (a catalog model's maker) dropped")
    else:
        try:
            nearest = [read_name(rest, state.known).name]
        except ModelNotFoundError as e:
            nearest = list(e.suggestions)
        raise NameRefusedError(
            state.typed,
            f"{org} is neither a known re-uploader nor a catalog model's maker, and its model"
            " may be a fine-tune of another shape; pass its config.json",
            nearest,
        )


def _peel(state: _State, key: str) -> Reading:
    """Strip suffixes from the end until the name is in the catalog."""
    checks: list[str] = []
    start = key
    while True:
        name = _lookup(state, key)
        if name is not None:
            return _accept(state, name, key, checks)
        if (m := _PACKAGING.match(key)) is not None:
            state.lines.append(f"-{m['suffix']} names packaging, not the model: stripped")
        elif (m := _GGUF_SUFFIX.match(key)) is not None and m["suffix"] in GGUF_TAGS:
            _gguf_format(state, m["suffix"])
        elif (m := _quant(state, key)) is not None:
            pass
        elif (m := _REVISION.match(key) or _TUNING.match(key)) is not None:
            checks.append(m["suffix"])
        else:
            raise _not_found(state, start, key)
        key = m["rest"]


def _quant(state: _State, key: str) -> re.Match[str] | None:
    for rule, fmt in _QUANT_RULES:
        if (m := rule.match(key)) is not None:
            _set_format(state, f"-{m['suffix']}", fmt)
            return m
    return None


def _gguf_format(state: _State, tag: str) -> None:
    fmt = GGUF_TAGS.get(tag.lower())
    if fmt is None:
        raise NameRefusedError(
            state.typed,
            f"kvplan has no weight format near GGUF {tag} (it sizes q8_0, q5_*, q4_* and"
            " iq4_nl); plan with --quantization, or import the .gguf file",
            [],
        )
    _set_format(state, tag, fmt)


def _set_format(state: _State, suffix: str, fmt: Format) -> None:
    """The weight format a suffix names: the outermost one is what the files have (-AWQ-INT4
    is int4); a second suffix of another width (q4_K_M and q8_0, fp16 and q4_0) contradicts
    it, and the name is refused rather than read by whichever comes last."""
    if state.fmt is None:
        state.fmt, state.fmt_suffix = fmt, suffix
        state.lines.append(f"{suffix} -> {fmt.note}")
    elif _bits(fmt) != _bits(state.fmt):
        raise NameRefusedError(
            state.typed,
            f"{suffix.lstrip('-')} and {state.fmt_suffix.lstrip('-')} name weights of"
            f" {_bits(fmt)} and {_bits(state.fmt)} bits; name one format",
            [],
        )


def _bits(fmt: Format) -> int:
    """A format's whole bits a weight; the spec's own weights (fp16, bf16) are 16."""
    return 16 if fmt.weight_dtype is None else whole_bits(fmt.weight_dtype)


def _lookup(state: _State, key: str) -> str | None:
    for candidate in (key, key.removeprefix("meta-")):
        name = state.known.get(candidate)
        if name is not None:
            if candidate != key:
                state.lines.append(f"the maker's prefix 'meta-' dropped: {candidate}")
            return name
    return None


def _accept(state: _State, name: str, key: str, checks: list[str]) -> Reading:
    name, checks = _own_entry(state, name, checks)
    _check_variants(state, name, checks)
    state.lines.append(f"read as {name}" + (f" ({key})" if key != name else ""))
    weight = state.fmt.weight_dtype if state.fmt else None
    return Reading(name, weight, tuple(state.lines))


def _own_entry(state: _State, name: str, checks: list[str]) -> tuple[str, list[str]]:
    """The catalog entry of a release that has one of its own (``OWN_ENTRIES``), and the
    suffixes left to check against it; ``name`` and ``checks`` unchanged otherwise."""
    for suffix in checks:
        entry = OWN_ENTRIES.get((name, suffix))
        if entry is not None:
            target, why = entry
            state.lines.append(f"-{suffix}: {why}; read as its own entry {target}")
            return target, [s for s in checks if s != suffix]
    return name, checks


def _check_variants(state: _State, name: str, checks: list[str]) -> None:
    """Refuse a tuned release or dated revision of ``name`` unless it was checked."""
    for suffix in checks:
        reason = DIFFERENT_VARIANTS.get((name, suffix))
        if reason is not None:
            raise NameRefusedError(state.typed, reason, [name])
    for suffix in reversed(checks):  # innermost (the release) first
        checked = CHECKED_VARIANTS.get((name, suffix))
        if checked is None:
            what = "dated revision" if suffix.isdigit() else "tuned release"
            raise NameRefusedError(
                state.typed,
                f"the {what} -{suffix} of {name} was not checked to have its cache geometry"
                " and trained length; pass its config.json (or `kvplan import`) instead",
                [name],
            )
        state.lines.append(f"-{suffix}: {checked}")


def _read_ollama(state: _State, key: str) -> Reading:
    family, tag = key.split(":", 1)
    exact = state.known.get(key)
    parts = tag.split("-")
    size = parts[0]
    if len(parts) > 1 and re.fullmatch(r"a\d+(?:\.\d+)?b", parts[1]):
        size, parts = f"{size}-{parts[1]}", parts[1:]
    rule = OLLAMA_FAMILIES.get(family)
    name = exact or state.known.get(f"{family}:{size}")
    if name is None and rule is not None and _SIZE.match(size.split("-")[0]):
        target = rule.get(size) if isinstance(rule, dict) else rule.format(size=size)
        name = state.known.get(target) if target else None
    if name is None:
        nearest = _nearest(state.known, [f"{family}-{size}", family])
        raise NameRefusedError(
            state.typed,
            f"Ollama model {family}:{size} has no catalog entry of the same geometry",
            nearest,
        )
    state.lines.append(f"Ollama tag: family {family}, size {size}")
    for part in parts[1:]:
        if part in _OLLAMA_TUNING:
            continue
        if re.fullmatch(REVISION, part):
            name, rest = _own_entry(state, name, [part])
            _check_variants(state, name, rest)
        elif _GGUF_TAG.fullmatch(part):
            _gguf_format(state, part)
        else:
            raise NameRefusedError(
                state.typed, f"the Ollama tag part {part!r} is not understood", [name]
            )
    if state.fmt is None and family not in OLLAMA_NATIVE_WEIGHTS:
        # A tag without a quantization is Ollama's default build of the model: Q4_K_M.
        state.lines.append("no quantization in the tag: Ollama's default build, q4_K_M")
        _gguf_format(state, OLLAMA_DEFAULT_QUANT)
    state.lines.append(f"read as {name}")
    weight = state.fmt.weight_dtype if state.fmt else None
    return Reading(name, weight, tuple(state.lines))


def _nearest(known: Mapping[str, str], keys: list[str]) -> list[str]:
    found: list[str] = []
    for key in keys:
        found += [known[c] for c in closest(key, list(known), limit=8, cutoff=0.6)]
    return list(dict.fromkeys(found))[:3]


def _not_found(state: _State, start: str, core: str) -> ModelNotFoundError:
    return ModelNotFoundError(state.typed, _nearest(state.known, [start, core]))
