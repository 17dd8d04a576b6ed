"""The ``kvplan`` command line: parses arguments, calls the library, renders. No arithmetic here.

``main`` is the console entry point. A plain ``kvplan estimate ...`` runs through a fast path that
never imports typer (see ``kvplan.cli.estimate``); everything else goes to the typer app.

Every user mistake ends as ONE line on stderr and exit status 2: kvplan's own errors
(``KvplanError``, whose ``field`` names the library parameter at fault; each command's table of
options turns it into the command's own flag) and the parser's usage errors (``kvplan.cli.usage``).
"""

from __future__ import annotations

import sys

from kvplan.cli.guard import EXIT_USAGE, LONGEST_WORD, error_line, guarded

__all__ = ["EXIT_USAGE", "LONGEST_WORD", "error_line", "guarded", "main"]


def main(argv: list[str] | None = None, *, fast: bool = True) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if fast and args[:1] == ["estimate"]:
        from kvplan.cli.estimate import flags, parse_fast, run

        values = parse_fast(args[1:])
        if values is not None:
            return guarded(lambda: run(**values), flags)
    from kvplan.cli.app import run_app

    return run_app(args)
