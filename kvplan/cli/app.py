"""The typer application: one module per command; every error becomes one line and exit status 2."""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import ModuleType

import typer

from kvplan._version import __version__
from kvplan.cli.commands import DESCRIPTION, SUMMARY
from kvplan.cli.options import typer_command


def _commands() -> dict[str, ModuleType]:
    from importlib import import_module

    from kvplan.cli.commands import COMMANDS as NAMES

    return {name: import_module(f"kvplan.cli.{module}") for name, module in NAMES.items()}


COMMANDS = _commands()


def _version(value: bool) -> None:
    if value:
        typer.echo(f"kvplan {__version__}")
        raise typer.Exit()


def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """Plan KV-cache memory for LLM serving."""  # the app's help is SUMMARY and DESCRIPTION


def build_app(light: bool = False) -> typer.Typer:
    """The typer application, every command built now (from the engines registered now); ``light``: each
    command only its name and help, for the top-level help, --version and a wrong command (no command's
    options are built, so no engine is imported)."""
    built = typer.Typer(
        name="kvplan",
        help=f"{SUMMARY}\n\n{DESCRIPTION}",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    built.callback()(_root)
    for name, module in COMMANDS.items():
        built.command(name)(_stub(module) if light else typer_command(module, name))
    return built


def _stub(module: ModuleType) -> Callable[[], None]:
    def command() -> None:  # pragma: no cover - a light app lists commands, it never runs one
        raise NotImplementedError

    command.__doc__ = module.DOC
    return command


def _full() -> typer.Typer:
    built = globals().get("app")
    if built is None:
        built = globals()["app"] = build_app()
    return built


def __getattr__(name: str) -> typer.Typer:
    if name == "app":  # built on first use: the top-level help needs no command's options
        return _full()
    raise AttributeError(name)


def run_app(args: list[str]) -> int:
    """Run the app on ``args`` and return the exit status: 0, 1 (a command's verdict) or 2 (any mistake)."""
    from kvplan.cli.guard import EXIT_USAGE, error_line
    from kvplan.cli.usage import Abort, exceptions, flag_table, usage_line
    from kvplan.errors import KvplanError

    group = typer.main.get_command(_full() if args[:1] and args[0] in COMMANDS else build_app(light=True))
    try:
        code = group.main(args=args, prog_name="kvplan", standalone_mode=False)
    except getattr(exceptions, "NoArgsIsHelpError", ()) as exc:  # click >= 8.2
        sys.stdout.write(exc.ctx.get_help() + "\n")  # bare `kvplan`: the help, as before
        return EXIT_USAGE
    except exceptions.UsageError as exc:
        sys.stderr.write(f"kvplan: error: {usage_line(exc)}\n")
        return EXIT_USAGE
    except exceptions.ClickException as exc:  # e.g. a file typer could not open: bad input, so 2
        sys.stderr.write(f"kvplan: error: {' '.join(exc.format_message().split())}\n")
        return EXIT_USAGE
    except Abort:
        sys.stderr.write("kvplan: aborted\n")
        return 130
    except KvplanError as exc:
        name = args[0] if args else ""
        command = getattr(group, "commands", {}).get(name)
        aliases = getattr(COMMANDS.get(name), "FIELDS", {})
        sys.stderr.write(error_line(exc, flag_table(command, aliases) if command else {}) + "\n")
        return EXIT_USAGE
    except BrokenPipeError:
        return 0
    return code if isinstance(code, int) else 0


if __name__ == "__main__":
    raise SystemExit(run_app(sys.argv[1:]))
