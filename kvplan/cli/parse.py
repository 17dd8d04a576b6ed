"""One reader of every command's option table (``kvplan.cli.options.Opt``), so a plain invocation runs without
importing typer, which costs more than most commands' work (docs/performance.md).

It accepts what click accepts for these tables (``--opt value``, ``--opt=value``, ``-o value``, ``-ovalue``,
one-dash names of several letters (``-ep``), switches, the last repeat winning, options between arguments, ``--`` ending the options) and gives up (None) on
anything else: help, an unknown or incomplete option, a value that is not a whole number where one is needed, a
missing argument or required option. typer, built from the same tables, then reports it in its own words, so
both readers accept and refuse alike (tests/test_cli_fastpath.py).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Any

if TYPE_CHECKING:
    from kvplan.cli.options import Arg, Opt

HELP = frozenset(("-h", "--help"))


def parse(args: list[str], table: tuple[Opt, ...], argument: Arg | None, *,
          paths_as_text: bool = False) -> dict[str, Any] | None:
    """The values of ``args`` (the words after the command's name) by the command's ``run`` keywords, or None;
    ``paths_as_text``: a path option's value is the text of the Path typer would hand over (for a ``run`` that takes
    a path as text or a Path alike, and so never imports pathlib)."""
    by_name = {name: opt for opt in table for name in opt.names}
    values: dict[str, Any] = {opt.dest: opt.default for opt in table}
    given: set[str] = set()
    words: list[str] = []
    i, ended = 0, False
    while i < len(args):
        arg = args[i]
        i += 1
        if ended or not arg.startswith("-") or arg == "-":
            words.append(arg)
            continue
        if arg == "--":
            ended = True
            continue
        if arg in HELP:
            return None
        opt, eq, inline = _option(arg, by_name)
        if opt is None:
            return None
        if opt.flag:
            if opt.file_dest is not None and (eq or _names_file(opt, args[i:i + 1])):
                values[opt.file_dest] = inline if eq else args[i]
                i += 0 if eq else 1
                continue
            if eq or inline:
                return None
            values[opt.dest] = True
            continue
        if eq or inline:
            value = inline
        elif i < len(args):
            value, i = args[i], i + 1
        else:
            return None
        values[opt.dest] = value
        given.add(opt.dest)
    if any(opt.required and opt.dest not in given for opt in table):
        return None
    for opt in table:
        if opt.dest in given and not _convert(opt, values, paths_as_text):
            return None
    return _with_argument(values, words, argument)


def _names_file(opt: Opt, following: list[str]) -> bool:
    """Whether the word after a switch that may take a file is that file (``--plot kv.svg``)."""
    return bool(following) and following[0].lower().endswith(opt.file_suffixes)


def _option(arg: str, by_name: dict[str, Opt]) -> tuple[Opt | None, str, str]:
    """The option ``arg`` names, as click finds it: the whole word up to '=' where that is a long name (``--x``, or
    a one-dash name of several letters such as vLLM's ``-ep``), else a one-letter ``-x`` with the rest its value."""
    head, eq, inline = arg.partition("=")
    opt = by_name.get(head)
    if opt is not None and (arg.startswith("--") or len(head) > 2):
        return opt, eq, inline
    if arg.startswith("--"):
        return None, "", ""
    return by_name.get(arg[:2]), "", arg[2:]


def _convert(opt: Opt, values: dict[str, Any], paths_as_text: bool = False) -> bool:
    """The value as typer hands it to ``run`` (an int, a Path, or that Path's text); False where it is not one."""
    if opt.integer:
        try:
            values[opt.dest] = int(values[opt.dest])
        except ValueError:
            return False
    elif opt.path and paths_as_text:
        from kvplan.safe_io import path_text  # str(Path(value)), without pathlib's import

        values[opt.dest] = path_text(values[opt.dest])
    elif opt.path:
        from pathlib import Path  # only when a path is given: pathlib costs more than a plain estimate

        values[opt.dest] = Path(values[opt.dest])
    return True


def _with_argument(values: dict[str, Any], words: list[str], argument: Arg | None) -> dict[str, Any] | None:
    if argument is None:
        return values if not words else None
    if argument.many:
        return {argument.dest: words, **values} if words else None
    if len(words) > 1 or (not words and argument.default is None):
        return None
    return {argument.dest: words[0] if words else argument.default, **values}


def read(module: Any, args: list[str]) -> dict[str, Any] | None:
    """The values of a command module's invocation, or None (its ``fast_options`` first where it has them: a table
    read without importing what only some flags or the help need; then the whole table)."""
    argument = getattr(module, "ARGUMENT", None)
    as_text = getattr(module, "PATHS_AS_TEXT", False)
    quick = getattr(module, "fast_options", None)
    if quick is not None:
        values = parse(args, quick(), argument, paths_as_text=as_text)
        if values is not None:
            return values
    return parse(args, module.options(), argument, paths_as_text=as_text)
