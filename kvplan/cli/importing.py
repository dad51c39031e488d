"""``kvplan import`` and ``kvplan architectures``: a Hugging Face config.json or model folder to
a spec, and the model_types it reads."""

import sys
from typing import Annotated

import typer

from kvplan.cli.common import FormatOpt, OutputFormat, command, emit, guard
from kvplan.progress import progress

PathArg = Annotated[
    str | None,
    typer.Argument(
        help="A Hugging Face config.json, or a model folder holding one (its safetensors"
        " headers or index give the exact parameter count).",
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
        help="Download config.json and the safetensors index (never weights) of ORG/NAME"
        " from the Hugging Face Hub; needs pip install 'kvplan[hub]'.",
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
    """Turn a Hugging Face config.json or model folder into a kvplan spec YAML.

    Maps the KV geometry of each supported model_type with its config quirks (nested
    text_config, omitted defaults, multi_query, attn_config, hybrid layer patterns) and
    refuses the others. The spec records its source and every derived value.
    """
    from kvplan import importers
    from kvplan.errors import UnitError
    from kvplan.files import write_atomic

    def run() -> None:
        if (path is None) == (hub is None):
            raise UnitError("give a config.json or model folder, or --hub ORG/NAME (one of them)")
        if hub is not None:
            with progress(f"downloading the config and index of {hub}"):
                folder = importers.download_from_hub(hub)
            imported = importers.import_config(folder, name, hf_id=hub)
        else:
            with progress(f"reading {path}"):
                imported = importers.import_config(path or "", name)
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
    kinds its rule can produce, and the config quirks it handles."""
    from kvplan.importers import list_architectures
    from kvplan.views import importers as views

    def run() -> None:
        found = list_architectures()
        emit(
            output,
            lambda: views.architectures_to_dict(found),
            lambda: views.architectures_view(found),
        )

    guard(run)
