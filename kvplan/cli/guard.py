"""Every user mistake as ONE line on stderr and exit status 2: kvplan's own errors (``KvplanError``, whose
``field`` names the library parameter at fault; each command's table of options turns it into the command's own
flag). The fast path (``kvplan.cli.estimate``) and the typer app (``kvplan.cli.app``) both end here.
"""

from __future__ import annotations

import sys
TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
"""A shell's status for a command ended by Ctrl-C (128 + SIGINT)."""


class Exit(Exception):
    """The end of a command with this status, raised where the verdict is found (1: does not fit; 0: a rank
    process that has said its part): the reader that ran the command returns it."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def error_line(exc: Exception, flags: Mapping[str, str]) -> str:
    """``kvplan: error: --max-model-len: must be at least 1``: the field as the command's flag."""
    field = getattr(exc, "field", None)
    message = getattr(exc, "message", None)
    if field and message is not None:
        text = f"{flags[field]}: {message}" if field in flags else f"{field}: {message}"
    else:
        text = str(exc)
    return "kvplan: error: " + " ".join(_clip(word) for word in text.split())


LONGEST_WORD = 160  # a value echoed back is cut to this: a 1 MB argument must not become a 1 MB error line


def _clip(word: str) -> str:
    return word if len(word) <= LONGEST_WORD else f"{word[:60]}...({len(word):,} characters)"


def guarded(action: Callable[[], object],
            flags: Mapping[str, str] | Callable[[], Mapping[str, str]] | None = None) -> int:
    """Run a command and return its exit status (what it returns or raises as ``Exit``; 0 for None): user
    mistakes become one line on stderr and status 2 (``flags``: the command's field -> flag table, or the
    function that makes it, called only for an error)."""
    from kvplan.errors import KvplanError

    try:
        code = action()
    except Exit as done:
        return done.code
    except KvplanError as exc:
        table = flags() if callable(flags) else flags
        sys.stderr.write(error_line(exc, table or {}) + "\n")
        return EXIT_USAGE
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:  # Ctrl-C: a line, not a traceback (a check's workers end with it: same group)
        sys.stderr.write("kvplan: interrupted\n")
        return EXIT_INTERRUPTED
    return code if isinstance(code, int) else 0
