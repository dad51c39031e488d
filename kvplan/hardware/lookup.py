"""The GPU a user names: a catalog entry, or ``local``, the GPUs of this machine.

``kvplan.hardware.gpus`` holds the catalog and ``kvplan.hardware.local`` reads the machine's
tools, matching what they print against the catalog; this module is the one door to both, so
neither needs the other's lookup.
"""

from __future__ import annotations

from kvplan.arguments import as_str, wrong_type
from kvplan.hardware.gpus import GPU, LOCAL, catalog_gpu, normalize_gpu_name


def find_gpu(name: str) -> GPU:
    """A catalog GPU by name, alias or the product name its driver prints
    (``kvplan.hardware.gpus.catalog_gpu``), or, for ``local``, the GPU of this machine
    (``kvplan.hardware.local``: runs nvidia-smi or rocm-smi). Raises UnknownGPUError with the
    nearest names, LocalGPUError when ``local`` finds none, ArgumentTypeError (a TypeError)
    for anything but a str."""
    if normalize_gpu_name(as_str(name, "name", "a GPU's name (a str)")) == LOCAL:
        from kvplan.hardware.local import local_gpus

        return local_gpus().gpu
    return catalog_gpu(name)


def as_gpu(gpu: object, name: str = "gpu") -> GPU:
    """A GPU as given, or the GPU a name resolves to (``find_gpu``); ``name`` is the parameter
    named by the ArgumentTypeError (a TypeError) that anything else raises."""
    if isinstance(gpu, GPU):
        return gpu
    if isinstance(gpu, str):
        return find_gpu(gpu)
    raise wrong_type(name, "a GPU or a GPU's name", gpu)
