"""``kvplan import`` and ``kvplan architectures``: a Hugging Face config.json, model folder or
GGUF file to a spec, and the model_types it reads."""

import sys
from typing import Annotated

import typer

from kvplan.cli.common import command, emit, guard
from kvplan.cli.options import FormatOpt, OutputFormat
from kvplan.progress import progress

PathArg = Annotated[
    str | None,
    typer.Argument(
        help="A Hugging Face config.json, or a model folder holding one (its safetensors"
        " headers or index give the exact parameter count), or a .gguf file (split files:"
        " any part; the header and tensor table give the geometry and exact weight bytes).",
        show_default=False,
    ),
]
OutOpt = Annotated[
    str | None,
    typer.Option("--output", "-o", help="Write the spec YAML here instead of stdout."),
]
ForceOpt = Annotated[bool, typer.Option("--force", help="Overwrite --output if it exists.")]
NameOpt = Annotated[
    str | None, typer.Option("--name", help="The spec's name (default: the folder's name).")
]
HubOpt = Annotated[
    str | None,
    typer.Option(
        "--hub",
        help="ORG/NAME or ORG/NAME@REVISION on the Hugging Face Hub: reads config.json, the"
        " safetensors index and headers (never the weights); honours HF_TOKEN, HF_ENDPOINT,"
        " HF_HUB_OFFLINE and the Hugging Face cache. Needs pip install 'kvplan[hub]'.",
        metavar="ORG/NAME[@REVISION]",
        show_default=False,
    ),
]


@command("import")
def import_(
    path: PathArg = None,
    out: OutOpt = None,
    force: ForceOpt = False,
    name: NameOpt = None,
    hub: HubOpt = None,
) -> None:
    """Turn a Hugging Face config.json, a model folder or a .gguf file into a kvplan spec YAML.

    Maps the KV geometry of each supported model_type with its config quirks (nested
    text_config, omitted defaults, multi_query, attn_config, hybrid layer patterns) and
    refuses the others. The spec records its source and every derived value.
    """
    from kvplan import importers
    from kvplan.errors import UnitError
    from kvplan.files import refuse_existing, write_atomic

    def run() -> None:
        if (path is None) == (hub is None):
            raise UnitError(
                "give a config.json, a model folder or a .gguf file, or --hub ORG/NAME"
                " (one of them)"
            )
        if out is not None:  # before the reading, which may take a while on the Hub
            refuse_existing(out, force=force)
        if hub is not None:
            from kvplan.importers.hub import import_from_hub

            with progress(f"reading the config and safetensors headers of {hub}"):
                imported = import_from_hub(hub, name)
        else:
            with progress(f"reading {path}"):
                source = path or ""
                if importers.is_gguf(source):
                    imported = importers.import_gguf(source, name)
                else:
                    imported = importers.import_config(source, name)
        text = importers.spec_yaml(imported)
        if out is None:
            sys.stdout.write(text)
        else:
            write_atomic(out, text, force=force)
            spec = imported.spec
            typer.echo(f"wrote {out} ({spec.name}, {spec.num_hidden_layers} layers)", err=True)

    guard(run)


@command("architectures")
def architectures(output: FormatOpt = OutputFormat.table) -> None:
    """The model_types `kvplan import` reads: each one's rules module (family), the layer
    kinds its rule can produce, the model classes config.json names for it, the engines that
    serve it, the catalog models of that type, and the config quirks it handles."""
    from kvplan.catalog.lookup import list_models
    from kvplan.importers import list_architectures
    from kvplan.views import importers as views

    def run() -> None:
        found = list_architectures()
        models: dict[str, list[str]] = {}
        for spec in list_models():
            models.setdefault(spec.model_type or "", []).append(spec.name)
        emit(
            output,
            lambda: views.architectures_to_dict(found, models),
            lambda: views.architectures_view(found, models),
        )

    guard(run)
