"""The ``kvplan`` command line: parses arguments, calls the library, renders. No arithmetic here.

``main`` is the console entry point. A plain ``kvplan estimate ...`` runs through a fast path that
never imports typer (see ``kvplan.cli.estimate``); everything else goes to the typer app.
"""

from __future__ import annotations

import sys
from collections.abc import Callable


def main(argv: list[str] | None = None, *, fast: bool = True) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if fast and args[:1] == ["estimate"]:
        from kvplan.cli.estimate import parse_fast, run

        values = parse_fast(args[1:])
        if values is not None:
            return guarded(lambda: run(**values))
    from kvplan.cli.app import run_app

    return run_app(args)


def guarded(action: Callable[[], object]) -> int:
    """Run a command: user mistakes become one line on stderr and exit status 2."""
    from kvplan.errors import KvplanError

    try:
        action()
    except KvplanError as exc:
        field = getattr(exc, "field", None)
        where = f"--{field.replace('_', '-')}: " if field else ""
        sys.stderr.write(f"kvplan: error: {where}{exc}\n")
        return 2
    except BrokenPipeError:
        return 0
    return 0
