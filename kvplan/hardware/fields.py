"""The field types every sourced catalog file shares (gpu_specs/: GPUs, systems, prices).

Imported only inside the loaders' model builders, on first use: it imports pydantic, and
``kvplan --help`` must not.
"""

from typing import Annotated

from pydantic import AfterValidator, Field, StrictInt

from kvplan.hardware.gpus import check_label

#: a name typed after ``--gpu`` or ``--system``: lower case, as the lookups compare them
Label = Annotated[str, AfterValidator(check_label)]
#: a non-empty text (a display name, a source citation)
Text = Annotated[str, Field(min_length=1)]
#: a positive integer (bytes, bytes a second, FLOP/s, GPUs)
Positive = Annotated[StrictInt, Field(gt=0)]
