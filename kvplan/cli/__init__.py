"""The ``kvplan`` command line: parses arguments, calls the library, renders. No arithmetic here.

``main`` is the console entry point. Each command is a module here declaring its options once (``options()``,
``ARGUMENT``, ``DOC``, ``run``); a plain invocation is read from that table by ``kvplan.cli.parse`` without
importing typer, and everything else (help, a mistake the reader leaves to the parser's words, ``kvplan mcp``) goes
to the typer app built from the same tables (``kvplan.cli.app``).

Every user mistake ends as ONE line on stderr and exit status 2: kvplan's own errors (``KvplanError``, whose
``field`` names the library parameter at fault; each command's table of options turns it into the command's own
flag) and the parser's usage errors (``kvplan.cli.usage``).
"""

from __future__ import annotations

import sys

from kvplan.cli.commands import COMMANDS
from kvplan.cli.guard import EXIT_USAGE, LONGEST_WORD, error_line, guarded

__all__ = ["COMMANDS", "EXIT_USAGE", "LONGEST_WORD", "error_line", "guarded", "main"]



def main(argv: list[str] | None = None, *, fast: bool = True) -> int:
    _frozen_at_exit()
    args = list(sys.argv[1:] if argv is None else argv)
    if args == ["--version"]:
        from kvplan._version import __version__

        sys.stdout.write(f"kvplan {__version__}\n")
        return 0
    if fast and (not args or args in (["--help"], ["-h"])):  # bare `kvplan` shows the help too, with status 2
        from kvplan.cli.commands import top_help

        sys.stdout.write(top_help())
        return 0 if args else EXIT_USAGE
    if fast and args and args[0] in COMMANDS:
        from kvplan.cli.parse import read

        name = f"kvplan.cli.{COMMANDS[args[0]]}"
        __import__(name)  # importlib.import_module, less the import of importlib and warnings (~1 ms a start)
        module = sys.modules[name]
        values = read(module, args[1:])
        if values is not None:
            from kvplan.cli.options import command_flags

            return guarded(lambda: module.run(**values), lambda: command_flags(module))
    from kvplan.cli.app import run_app

    return run_app(args)


def _frozen_at_exit() -> None:
    """At the interpreter's exit, the heap frozen (``gc.freeze``) before Python tears it down: finalization runs full
    collections over every object still alive (the ~140 modules' functions, classes and tables of a check: ~10 ms of
    its ~110, more than ``python -c pass`` takes in all); frozen, they are skipped, and the memory goes back to the
    system with the process, as for any process. Registered with ``atexit``, so it happens only at exit: a program
    that calls ``main`` and goes on collects as before."""
    import atexit
    import gc

    atexit.unregister(gc.freeze)  # once, however often main runs in one process
    atexit.register(gc.freeze)
