"""``kvplan calc``, ``models`` and ``show``: one model's cache, the catalog, one spec."""

from enum import Enum
from typing import Annotated

import typer

from kvplan.cli.common import (
    FormatOpt,
    ModelArg,
    OutputFormat,
    auto_none,
    command,
    dtype_option,
    emit,
    guard,
    option,
)

ContextOpt = Annotated[
    str | None,
    typer.Option(
        "--context",
        "-c",
        help="Tokens cached per sequence: 32768, 32k (=32,000) or 32K (=32,768)."
        " Default: the model's max_position_embeddings.",
        show_default=False,
    ),
]
BatchOpt = Annotated[
    int,
    typer.Option(
        "--batch", "-b", "--parallel", "-np", min=1, help="Concurrent sequences (llama.cpp -np)."
    ),
]
KvDtypeOpt = Annotated[
    str,
    typer.Option(
        "--kv-dtype",
        "--kv-cache-dtype",
        help="Cache dtype for K and V: auto (the dtype the model is served in: a float32"
        " checkpoint in bfloat16, as the engines' --dtype auto), float16, bfloat16, float32,"
        " fp8 (e4m3), fp8_e5m2, int8, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, nvfp4, mxfp4.",
    ),
]
KDtypeOpt = Annotated[
    str | None,
    typer.Option(
        "--k-dtype",
        "--cache-type-k",
        "-ctk",
        help="K cache dtype, overriding --kv-dtype (llama.cpp -ctk).",
    ),
]
VDtypeOpt = Annotated[
    str | None,
    typer.Option(
        "--v-dtype",
        "--cache-type-v",
        "-ctv",
        help="V cache dtype, overriding --kv-dtype (llama.cpp -ctv).",
    ),
]
ExplainOpt = Annotated[
    bool, typer.Option("--explain", help="Work the formula with the model's numbers substituted.")
]
EngineOpt = Annotated[
    str,
    typer.Option(
        "--engine",
        "-e",
        help="ideal (the formula), or llama.cpp / ik_llama.cpp: their cells, padding,"
        " sliding-window cache and log lines (--context is then -c, --batch is -np).",
    ),
]
EngineVersionOpt = Annotated[
    str | None,
    typer.Option(
        "--engine-version",
        help="llama.cpp build number (b5781 or 5781), or transformers version (4.57, 5.24);"
        " default: the newest modelled.",
        show_default=False,
    ),
]
UbatchOpt = Annotated[
    int, typer.Option("--ubatch-size", "-ub", min=1, help="llama.cpp -ub: sizes the SWA cache.")
]
SwaFullOpt = Annotated[
    bool,
    typer.Option("--swa-full/--no-swa-full", help="llama.cpp: full-size cache for sliding layers."),
]
FlashAttnOpt = Annotated[
    bool, typer.Option("--flash-attn/--no-flash-attn", help="llama.cpp: flash attention (-fa).")
]
KvUnifiedOpt = Annotated[
    bool, typer.Option("--kv-unified", help="llama.cpp: one cache shared by all sequences.")
]
MmapOpt = Annotated[
    bool,
    typer.Option(
        "--mmap/--no-mmap",
        help="llama.cpp with a .gguf file: map the weights (CPU_Mapped) or copy them (CPU).",
    ),
]
CacheImplementationOpt = Annotated[
    str,
    typer.Option(
        "--cache-implementation",
        help="transformers: dynamic (DynamicCache) or static (StaticCache, pre-allocated).",
    ),
]


@command("calc")
def calc(
    model: ModelArg,
    context: ContextOpt = None,
    batch: BatchOpt = 1,
    kv_dtype: KvDtypeOpt = "auto",
    k_dtype: KDtypeOpt = None,
    v_dtype: VDtypeOpt = None,
    output: FormatOpt = OutputFormat.table,
    explain: ExplainOpt = False,
    engine: EngineOpt = "ideal",
    engine_version: EngineVersionOpt = None,
    ubatch_size: UbatchOpt = 512,
    swa_full: SwaFullOpt = False,
    flash_attn: FlashAttnOpt = True,
    kv_unified: KvUnifiedOpt = False,
    cache_implementation: CacheImplementationOpt = "dynamic",
    mmap: MmapOpt = True,
) -> None:
    """KV-cache bytes for a context and batch: total, per token, by layer kind and K/V."""
    from kvplan.catalog import load_model
    from kvplan.engine_calc import CalcRequest, calculate, context_tokens
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
        request = CalcRequest(
            context_tokens=tokens,
            batch_size=batch,
            kv_dtype=auto_none(kv_dtype),
            k_dtype=k_dtype,
            v_dtype=v_dtype,
            ubatch_size=ubatch_size,
            swa_full=swa_full,
            flash_attn=flash_attn,
            kv_unified=kv_unified,
            cache_implementation=cache_implementation,
            version=engine_version,
            gguf_path=model if model.lower().endswith(".gguf") else None,
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


@command("models")
def models(
    query: QueryArg = None,
    kind: KindFilterOpt = None,
    family: FamilyOpt = None,
    sort: SortOpt = SortKey.name,
    reverse: ReverseOpt = False,
    output: FormatOpt = OutputFormat.table,
) -> None:
    """The bundled catalog: one row per model, with its KV bytes per token."""
    from kvplan.catalog_query import CatalogQuery, catalog_rows, known_families, select
    from kvplan.views import estimate as views

    def run() -> None:
        rows = catalog_rows()
        asked = CatalogQuery(query, kind.value if kind else None, family, sort.value, reverse)
        kept = select(rows, asked)
        emit(
            output,
            lambda: views.models_to_dict(kept, asked, len(rows)),
            lambda: views.models_view(kept, asked, len(rows), known_families()),
        )

    guard(run)


@command("show")
def show(model: ModelArg, output: FormatOpt = OutputFormat.table) -> None:
    """A spec's fields and its resolved per-layer cache schedule."""
    from kvplan.catalog import load_model
    from kvplan.views import estimate as views

    def run() -> None:
        spec = load_model(model)
        emit(output, lambda: views.spec_to_dict(spec), lambda: views.spec_view(spec))

    guard(run)
