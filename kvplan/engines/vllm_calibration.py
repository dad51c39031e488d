"""One site's corrections to vLLM's budget terms, fitted from its own start-up logs.

``kvplan calibrate LOG...`` (kvplan.logs.calibrate) fits a ``Calibration`` from the logs of one
GPU model, vLLM release line and parallel layout: the ratio of the peak activation and of the
CUDA-graph estimate vLLM printed to kvplan's model of them, the non-torch memory it printed,
and what is left of the pool after those (``other_bytes``, the median difference between the
pool kvplan then gives and the pool the logs print).
``kvplan.engines.vllm_overhead.calibrated`` puts them on kvplan's modelled ``Overhead`` of a
GPU; weights are not corrected (kvplan counts them from the checkpoint's
shapes). Ratios are parts per million, every figure an integer of bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.arguments import as_int, as_str
from kvplan.errors import UnitError

__all__ = ["PPM", "Calibration"]

#: a ratio of 1 in the calibration's parts per million
PPM = 1_000_000


@dataclass(frozen=True, slots=True)
class Calibration:
    """A site's fitted corrections (see the module docstring): where they were fitted (``gpu``
    as the catalog names it, ``version_line``, the parallel sizes) and what they change."""

    gpu: str
    version_line: str
    tensor_parallel_size: int = 1
    activation_ppm: int = PPM
    cuda_graph_ppm: int = PPM
    non_torch_bytes: int | None = None
    other_bytes: int = 0
    num_logs: int = 0

    def __post_init__(self) -> None:
        as_str(self.gpu, "gpu", "the catalog name of the GPU the logs ran on")
        as_str(self.version_line, "version_line", "a vLLM release line such as '0.32'")
        as_int(self.tensor_parallel_size, "tensor_parallel_size", minimum=1, maximum=1024)
        as_int(self.activation_ppm, "activation_ppm", minimum=0, maximum=100 * PPM)
        as_int(self.cuda_graph_ppm, "cuda_graph_ppm", minimum=0, maximum=100 * PPM)
        if self.non_torch_bytes is not None:
            as_int(self.non_torch_bytes, "non_torch_bytes", minimum=0, maximum=2**40)
        as_int(self.other_bytes, "other_bytes", minimum=-(2**40), maximum=2**40)
        as_int(self.num_logs, "num_logs", minimum=0, maximum=10**6)

    @property
    def site(self) -> str:
        """Where it was fitted, in words: ``h100-sxm, vLLM 0.32, TP 1``."""
        return f"{self.gpu}, vLLM {self.version_line}, TP {self.tensor_parallel_size}"

    def check_site(self, gpu: str, version_line: str, tp: int, pp: int = 1) -> None:
        """UnitError unless a question asks the site this was fitted on: a calibration of one
        GPU, line and TP (without pipeline parallelism) says nothing of another."""
        asked = f"{gpu}, vLLM {version_line}, TP {tp}" + (f", PP {pp}" if pp > 1 else "")
        if asked != self.site:
            raise UnitError(
                f"--calibration: fitted on {self.site}; this question asks {asked}"
                " (calibrate from that site's logs)"
            )
