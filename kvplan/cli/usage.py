"""The parser's usage errors as kvplan's one line: ``kvplan: error: --batch: 'x' is not a whole number``.

click (under typer) raises these; in its standalone mode it prints a five-line box. The app runs click
with ``standalone_mode=False`` and hands every ``Any`` here.
"""

from __future__ import annotations

import importlib
from typing import Any

import typer

# typer 0.28+ carries its own trimmed copy of click (typer._click); older typer uses click itself. The
# exception classes come from whichever module typer's own BadParameter comes from; parameters are told
# apart by click's ``param_type_name`` ("option" / "argument"), which both define.
exceptions: Any = importlib.import_module(typer.BadParameter.__module__)
Abort: Any = typer.Abort


def flag_of(param: Any) -> str | None:
    if param is None:
        return None
    if param.param_type_name == "option":
        longs = [o for o in param.opts if o.startswith("--")]
        return (longs or param.opts)[0]
    return (param.name or "").upper() or None


def _sentence(text: str) -> str:
    """click's 'No such option: --x.' -> 'no such option: --x' (one line, no trailing period)."""
    text = " ".join(text.split()).rstrip(".")
    return text[:1].lower() + text[1:] if text[:2] != text[:2].upper() else text


def usage_line(exc: Any) -> str:
    """One line for a usage error; the command is named where the mistake is not in an option."""
    command = exc.ctx.command_path if exc.ctx is not None else "kvplan"
    if isinstance(exc, exceptions.MissingParameter):
        what = flag_of(exc.param) or "a value"
        kind = "argument" if getattr(exc.param, "param_type_name", "") == "argument" else "option"
        return f"{what}: missing (the {kind} is required; see {command} --help)"
    if isinstance(exc, exceptions.BadParameter):
        flag = flag_of(exc.param)
        message = _sentence(exc.message)
        return f"{flag}: {message}" if flag else message
    if isinstance(exc, exceptions.NoSuchOption):
        close = getattr(exc, "possibilities", None)
        hint = f" (did you mean {', '.join(sorted(close))}?)" if close else f" (see {command} --help)"
        return f"{exc.option_name}: no such option for {command}{hint}"
    if isinstance(exc, exceptions.BadOptionUsage):
        if "requires" in exc.message and "argument" in exc.message:
            return f"{exc.option_name}: needs a value"
        if "does not take a value" in exc.message:
            return f"{exc.option_name}: is a switch and takes no value"
        return f"{exc.option_name}: {_sentence(exc.message)}"
    no_such_command = getattr(exceptions, "NoSuchCommand", None)
    if no_such_command is not None and isinstance(exc, no_such_command):
        close = getattr(exc, "possibilities", None)
        hint = f" (did you mean {', '.join(sorted(close))}?)" if close else " (see kvplan --help)"
        return f"{_sentence(exc.message)}{hint}"
    message = _sentence(exc.message)
    head, sep, close = message.partition(". Did you mean ")
    if sep:  # click < 8.2 words a wrong command this way
        message = f"{head} (did you mean {close.rstrip('?')}?)"
    return f"{command}: {message}"


def flag_table(command: Any, aliases: dict[str, str]) -> dict[str, str]:
    """Library field -> this command's flag: each parameter under its own name, then the library's names
    for them (``aliases``: field -> parameter, e.g. ``{"kv_dtype": "kv_cache_dtype"}``)."""
    table = {p.name: flag for p in command.params if p.name and (flag := flag_of(p))}
    table.update({field: table[name] for field, name in aliases.items() if name in table})
    return table
