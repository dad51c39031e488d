"""Options of ``kvplan plan`` for deployments in whole nodes of real systems, with cost."""

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kvplan.errors import UnitError

if TYPE_CHECKING:
    from kvplan.model.spec import ModelSpec
    from kvplan.planner.cluster import ClusterPlan

SystemOpt = Annotated[
    str | None,
    typer.Option(
        "--system",
        help="A catalog system (hgx-h100, hgx-b200, gb200-nvl72, mi300x-platform, l40s-server"
        "...): plan in its nodes, TP inside its NVLink domain.",
        show_default=False,
    ),
]
GpusPerNodeOpt = Annotated[
    int | None,
    typer.Option(
        "--gpus-per-node",
        min=1,
        help="GPUs in one node (default: the system's).",
        show_default=False,
    ),
]
NodesOpt = Annotated[
    int | None,
    typer.Option(
        "--nodes", min=1, help="The most nodes a deployment may take.", show_default=False
    ),
]
ObjectiveOpt = Annotated[
    str | None,
    typer.Option(
        "--objective",
        help="Rank deployments by gpus (fewest GPUs in whole nodes), nodes, cost ($/hour) or"
        " throughput (output tokens/s per GPU).",
        show_default=False,
    ),
]
TopOpt = Annotated[
    int | None,
    typer.Option(
        "--top",
        min=1,
        max=100,
        help="How many ranked deployments to show (default 5).",
        show_default=False,
    ),
]
PriceOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--price",
        help="A GPU-hour price in dollars replacing the dated list price: h100=2.49 (repeat, or"
        " comma-separate).",
        show_default=False,
    ),
]
PricesFileOpt = Annotated[
    str | None,
    typer.Option(
        "--prices",
        help="A prices YAML (the format of gpu_specs/prices/) replacing the list prices.",
        show_default=False,
    ),
]
DisaggregateOpt = Annotated[
    str | None,
    typer.Option(
        "--disaggregate",
        help="Also plan prefill/decode disaggregation for prompts of this many tokens (4K): a"
        " prefill pool for the --max-num-batched-tokens worth of prompts in flight and a"
        " decode pool for the requests, each in whole nodes.",
        show_default=False,
    ),
]


@dataclass(frozen=True)
class ClusterAsk:
    """The cluster options of one ``kvplan plan`` call, as the library takes them."""

    system: str | None
    gpus_per_node: int | None
    nodes: int | None
    objective: str | None
    top: int | None
    price: list[str] | None
    prices: str | None
    disaggregate: str | None = None  # prompt tokens of the P/D candidate (--disaggregate)

    def wanted(self, a: dict[str, Any]) -> bool:
        """Whether ``kvplan plan`` with its options ``a`` is a cluster question: the
        library's rule (``kvplan.planner.cluster_route.is_cluster_question``), given what
        was asked on the command line."""
        from kvplan.planner.cluster_route import is_cluster_question

        return is_cluster_question(
            a["gpu"],
            max_model_len=a["max_model_len"],
            concurrency=a["concurrency"],
            tensor_parallel_size=a["tensor_parallel_size"],
            pipeline_parallel_size=a["pipeline_parallel_size"],
            kv_cache_memory_bytes=a["kv_cache_memory"],
            lengths=a["lengths"],
            mean_length=a["mean_length"],
            p99_length=a["p99_length"],
            gpu_memory_bytes=a["gpu_memory"],
            engine=a["engine"],
            system=self.system,
            gpus_per_node=self.gpus_per_node,
            nodes=self.nodes,
            objective=self.objective,
            top=self.top,
            prices=self.price or (),
            prices_file=self.prices or None,
            disaggregate=self.disaggregate,
        )

    def plan(self, spec: "ModelSpec", gpu: str | None, **settings: Any) -> "ClusterPlan":
        """The ranked deployments; ``settings`` are plan's own (max_model_len, concurrency,
        dtypes, overhead...), passed as the library takes them."""
        from kvplan.planner.api import plan_cluster

        if settings.get("max_model_len") is None or settings.get("concurrency") is None:
            raise UnitError(
                "a deployment in nodes (--system, --nodes, --objective, --top, --price,"
                " --disaggregate, several GPUs) needs both --max-model-len and --concurrency"
            )
        if self.disaggregate is not None:
            from kvplan.cli.common import tokens_option

            settings["disaggregate"] = tokens_option("--disaggregate", self.disaggregate)
        return plan_cluster(
            spec,
            gpu,
            system=self.system,
            gpus_per_node=self.gpus_per_node,
            nodes=self.nodes,
            objective=self.objective or "gpus",
            top=self.top or 5,
            prices=self.price or [],
            prices_file=self.prices,
            **settings,
        )
