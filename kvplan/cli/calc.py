"""``kvplan calc``, ``models`` and ``show``: one model's cache, the catalog, one spec."""

from enum import Enum
from typing import Annotated

import typer

from kvplan.cli.common import (
    auto_none,
    command,
    dtype_option,
    emit,
    given_options,
    guard,
    option,
)
from kvplan.cli.llamacpp_options import (
    CacheTypeKOpt,
    CacheTypeVOpt,
    FlashAttnOpt,
    KvUnifiedOpt,
    MmapOpt,
    NoFlashAttnOpt,
    OptionalLlamaBatchOpt,
    SwaFullOpt,
    UbatchOpt,
    flash_attn_on,
)
from kvplan.cli.options import (
    EngineOpt,
    EngineVersionOpt,
    FormatOpt,
    KvCacheDtypeOpt,
    ModelArg,
    OptionalMaxModelLenOpt,
    OutputFormat,
)

SequencesOpt = Annotated[
    int,
    typer.Option(
        "--batch",
        "--parallel",
        "-np",
        "-n",
        min=1,
        help="Concurrent sequences (llama.cpp -np; -n as plan's --concurrency). -b is"
        " llama.cpp's logical batch in tokens, --batch-size.",
    ),
]
ExplainOpt = Annotated[
    bool, typer.Option("--explain", help="Work the formula with the model's numbers substituted.")
]
CacheImplementationOpt = Annotated[
    str,
    typer.Option(
        "--cache-implementation",
        help="transformers: dynamic (DynamicCache) or static (StaticCache, pre-allocated).",
    ),
]


#: calc's parameters as the flag that names them in a refusal (answers.calc.CALC_READS)
_FLAGS = {
    "context": "-c",
    "batch": "-np",
    "kv_dtype": "--kv-cache-dtype",
    "k_dtype": "-ctk",
    "v_dtype": "-ctv",
    "explain": "--explain",
    "engine_version": "--engine-version",
    "ubatch_size": "-ub",
    "batch_size": "-b",
    "swa_full": "--swa-full",
    "flash_attn": "-fa",
    "no_flash_attn": "-fa",
    "kv_unified": "--kv-unified",
    "cache_implementation": "--cache-implementation",
    "mmap": "--mmap",
}


@command("calc")
def calc(
    ctx: typer.Context,
    model: ModelArg,
    context: OptionalMaxModelLenOpt = None,
    batch: SequencesOpt = 1,
    kv_dtype: KvCacheDtypeOpt = "auto",
    k_dtype: CacheTypeKOpt = None,
    v_dtype: CacheTypeVOpt = None,
    output: FormatOpt = OutputFormat.table,
    explain: ExplainOpt = False,
    engine: EngineOpt = "ideal",
    engine_version: EngineVersionOpt = None,
    ubatch_size: UbatchOpt = 512,
    batch_size: OptionalLlamaBatchOpt = None,
    swa_full: SwaFullOpt = False,
    flash_attn: FlashAttnOpt = "auto",
    no_flash_attn: NoFlashAttnOpt = False,
    kv_unified: KvUnifiedOpt = False,
    cache_implementation: CacheImplementationOpt = "dynamic",
    mmap: MmapOpt = True,
) -> None:
    """KV-cache bytes for a context and batch: total, per token, by layer kind and K/V.

    Without -c, the context is the model's trained length (max_position_embeddings). -c is
    one sequence's tokens with every engine: llama-server's -c, the cells of all sequences,
    is -c times -np (printed). The llama.cpp flags mean what they mean to llama-server: -np
    the sequences, -b the logical batch in tokens (the sequences were -b before; --batch
    keeps that meaning). A flag the engine does not read is refused, naming the engines that
    read it.
    """
    from kvplan.answers.calc import CalcRequest, calculate, context_tokens, refuse_unread
    from kvplan.catalog.lookup import load_model
    from kvplan.errors import UnitError
    from kvplan.units import parse_tokens
    from kvplan.views import estimate as views

    def run() -> None:
        spec = load_model(model)
        given = None if context is None else option("--context", parse_tokens, context)
        tokens = context_tokens(spec, given)
        # checked here; --k-dtype and --v-dtype pass on as given (llama.cpp refuses "auto")
        dtype_option("--kv-dtype", kv_dtype)
        dtype_option("--k-dtype", k_dtype)
        dtype_option("--v-dtype", v_dtype)
        if engine == "transformers" and cache_implementation not in ("dynamic", "static"):
            raise UnitError(
                f"--cache-implementation: {cache_implementation!r}; allowed: dynamic, static"
            )
        llama = engine in ("llama.cpp", "ik_llama.cpp")
        if batch_size is not None and not llama:
            raise UnitError(
                f"-b/--batch-size {batch_size}: llama.cpp's logical batch in tokens, read with"
                " --engine llama.cpp or ik_llama.cpp; for concurrent sequences use --batch N"
                " (or -np N)"
            )
        asked = given_options(ctx)
        refuse_unread(engine, tuple(dict.fromkeys(_FLAGS[n] for n in _FLAGS if n in asked)))
        gguf = model if model.lower().endswith(".gguf") else None
        if "mmap" in asked and gguf is None:
            raise UnitError("--mmap/--no-mmap: read with a .gguf file, whose CPU buffers it sets")
        # llama.cpp takes the physical batch at most the logical one: min(-ub, -b)
        ubatch = min(ubatch_size, batch_size) if batch_size is not None else ubatch_size
        request = CalcRequest(
            context_tokens=tokens,
            batch_size=batch,
            kv_dtype=auto_none(kv_dtype),
            k_dtype=k_dtype,
            v_dtype=v_dtype,
            ubatch_size=ubatch,
            swa_full=swa_full,
            flash_attn=flash_attn_on(flash_attn, no_flash_attn),
            kv_unified=kv_unified,
            cache_implementation=cache_implementation,
            version=engine_version,
            gguf_path=gguf,
            use_mmap=mmap,
        )
        answer = calculate(spec, engine, request)
        emit(
            output,
            lambda: views.calc_to_dict(answer, spec, request, with_explain=explain),
            lambda: views.calc_view(answer, spec, request, with_explain=explain),
        )

    guard(run)


class KindWord(str, Enum):
    full = "full"
    sliding = "sliding"
    chunked = "chunked"
    mla = "mla"
    mamba = "mamba"
    linear = "linear"


class SortKey(str, Enum):
    name = "name"
    params = "params"
    kv = "kv"


QueryArg = Annotated[
    str | None,
    typer.Argument(
        help="Keep models whose name, Hugging Face id, an alias, family or model_type"
        " contains this text (any case): qwen, deepseek-ai/, gemma3.",
        show_default=False,
    ),
]
KindFilterOpt = Annotated[
    KindWord | None,
    typer.Option(
        "--kind",
        help="Keep models with at least one layer of this cache kind.",
        show_default=False,
    ),
]
FamilyOpt = Annotated[
    str | None,
    typer.Option(
        "--family",
        help="Keep models of this importer family (the FAMILY column of `kvplan"
        " architectures`: qwen, llama, gemma...) or of this model_type.",
        show_default=False,
    ),
]
SortOpt = Annotated[
    SortKey,
    typer.Option(
        "--sort",
        help="Order by name, params (total parameters) or kv (KV bytes per token); ties by name.",
    ),
]
ReverseOpt = Annotated[bool, typer.Option("--reverse", help="Reverse the order.")]
KvContextOpt = Annotated[
    str | None,
    typer.Option(
        "--context",
        "-c",
        help="The context KV/token is taken at: the bytes one more token of one sequence adds"
        " there (sliding layers add nothing past their window). Default: a short context.",
        show_default=False,
    ),
]


@command("models")
def models(
    query: QueryArg = None,
    kind: KindFilterOpt = None,
    family: FamilyOpt = None,
    sort: SortOpt = SortKey.name,
    reverse: ReverseOpt = False,
    context: KvContextOpt = None,
    output: FormatOpt = OutputFormat.table,
) -> None:
    """The bundled catalog: one row per model, with its KV bytes per token (KV/token: what one
    more token of one sequence adds to the cache, at --context)."""
    from dataclasses import replace

    from kvplan.catalog.query import CatalogQuery, catalog_rows, known_families, select
    from kvplan.cli.common import tokens_option
    from kvplan.model.estimator import bytes_per_token
    from kvplan.views import estimate as views

    def run() -> None:
        tokens = None if context is None else tokens_option("--context", context)
        rows = catalog_rows()
        if tokens is not None:
            rows = [
                replace(r, bytes_per_token=bytes_per_token(r.spec, context_tokens=tokens))
                for r in rows
            ]
        asked = CatalogQuery(query, kind.value if kind else None, family, sort.value, reverse)
        kept = select(rows, asked)
        emit(
            output,
            lambda: views.models_to_dict(kept, asked, len(rows), context_tokens=tokens),
            lambda: views.models_view(
                kept, asked, len(rows), known_families(), context_tokens=tokens
            ),
        )

    guard(run)


@command("show")
def show(model: ModelArg, output: FormatOpt = OutputFormat.table) -> None:
    """A spec's fields and its resolved per-layer cache schedule."""
    from kvplan.catalog.lookup import load_model
    from kvplan.views import estimate as views

    def run() -> None:
        spec = load_model(model)
        emit(output, lambda: views.spec_to_dict(spec), lambda: views.spec_view(spec))

    guard(run)
