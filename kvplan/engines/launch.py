"""The command that starts a planned deployment, ready to paste (``kvplan fit``'s launch column).

Each engine package writes its own (``engines/<engine>/launch.py``, the ``Engine.launch`` attribute) from a
``Deployment``: the flags are the ones its ``check`` reader (``Engine.serve``) reads back, so a launch command
``kvplan fit`` prints plans, through ``kvplan check``, to the same row.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True

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


if TYPE_CHECKING:
    from collections.abc import Callable

    Launch = Callable[[Deployment], str]

_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-")
"""The characters ``shlex.quote`` leaves a word bare with (its pattern ``[^\\w@%+=:,./-]`` under ``re.ASCII``)."""


def quote(word: str) -> str:
    """``shlex.quote(word)``, without importing shlex and re (~3 ms of ``kvplan fit``'s start): a word of safe
    characters bare, any other in single quotes, its own single quotes written ``'"'"'``
    (tests/test_by_hand_matches.py holds it to shlex)."""
    if word and all(c in _SAFE for c in word):
        return word
    return "'" + word.replace("'", "'\"'\"'") + "'"


def join(words: list[str]) -> str:
    """Words as a shell line (a model path with spaces stays one argument)."""
    return " ".join(quote(w) for w in words)
