"""The command that starts a planned deployment, ready to paste (``kvplan fit``'s launch column).

Each engine package writes its own (``engines/<engine>/launch.py``, the ``Engine.launch`` attribute) from a
``Deployment``: the flags are the ones its ``check`` reader (``Engine.serve``) reads back, so a launch command
``kvplan fit`` prints plans, through ``kvplan check``, to the same row.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable

from kvplan.record import dataclass


@dataclass(frozen=True)
class Deployment:
    """What a launch command sets: the model, its parallel split, the longest request and the KV dtype."""

    model: str
    tp: int = 1
    pp: int = 1
    dp: int = 1
    max_model_len: int | None = None
    kv_dtype: str | None = None
    """The engine's own spelling of the KV dtype asked for; None: the engine's default (``auto``)."""
    expert_parallel: bool = False


Launch = Callable[[Deployment], str]


def join(words: list[str]) -> str:
    """Words as a shell line (a model path with spaces stays one argument)."""
    return " ".join(shlex.quote(w) for w in words)
