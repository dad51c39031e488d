"""The field types every sourced catalog file shares (gpu_specs/: GPUs, systems, prices).

Imported only inside the loaders' model builders, on first use: it imports pydantic, and
``kvplan --help`` must not.
"""

import re
from typing import Annotated

from pydantic import AfterValidator, Field, StrictInt

_LABEL = re.compile(r"[a-z0-9][a-z0-9.+-]{0,63}")


def check_label(value: str) -> str:
    """A name typed after ``--gpu``: lower case, as the lookups compare them."""
    if not _LABEL.fullmatch(value):
        raise ValueError(
            f"{value[:70]!r}: use 1 to 64 lower-case letters, digits, '.', '+' or '-',"
            " starting with a letter or digit"
        )
    return value


#: a name typed after ``--gpu`` or ``--system``: lower case, as the lookups compare them
Label = Annotated[str, AfterValidator(check_label)]
#: a non-empty text (a display name, a source citation)
Text = Annotated[str, Field(min_length=1)]
#: a positive integer (bytes, bytes a second, FLOP/s, GPUs)
Positive = Annotated[StrictInt, Field(gt=0)]
