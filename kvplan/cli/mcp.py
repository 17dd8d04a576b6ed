"""``kvplan mcp``: kvplan's commands as tools over the Model Context Protocol, on stdio.

Each tool is one command (``estimate``, ``max_batch``, ``check``, ``log``, ``fit``); its input schema is
generated from that command's own option declarations (the click parameters typer builds from them), so a flag
the CLI gains is a tool argument at once, with the same help. A call runs the command (a child ``python -m
kvplan``, time-limited) with ``-f json`` and returns exactly what ``-f json`` prints (as text and as structured
content); a usage mistake (exit 2) is a tool error carrying kvplan's one-line message; exit 1 (does not fit, a check that fails) is a
result, not an error. The protocol's official Python SDK is an optional extra (``pip install "kvplan[mcp]"``).
"""

from __future__ import annotations

import json
from typing import Any

from kvplan.cli.options import Arg, Opt

TOOLS = {"estimate": "estimate", "max_batch": "max-batch", "check": "check", "log": "log", "fit": "fit"}
"""Tool name -> command. MCP tool names are identifiers: max-batch is max_batch."""
_SKIPPED = {"fmt", "format", "help", "plot", "plot_file", "output"}  # the tool always answers JSON; files are the CLI's


ARGUMENT: Arg | None = None
OPTIONS: tuple[Opt, ...] = ()


def options() -> tuple[Opt, ...]:
    return OPTIONS


DOC = """Serve kvplan's commands as Model Context Protocol tools on stdin/stdout (for agents).

    Tools: estimate, max_batch, check, log, fit; each takes the command's options by name (the same help as
    `kvplan COMMAND --help`) and returns what `-f json` prints.

    Example (an MCP client's server entry):

      {"command": "kvplan", "args": ["mcp"]}
    """


def run() -> None:
    try:
        import anyio
        from mcp.server.lowlevel import Server
        from mcp.server.stdio import stdio_server
    except ImportError:
        from kvplan.errors import UsageError

        raise UsageError('kvplan mcp needs the MCP SDK: pip install "kvplan[mcp]"', field="mcp") from None
    import typer

    from kvplan.cli.app import app

    server = build_server(Server, typer.main.get_command(app))  # the CLI's own commands, from the same tables

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(serve)


def _commands(group: Any) -> dict[str, Any]:
    """The tools' commands in the CLI's command group."""
    return {tool: group.commands[name] for tool, name in TOOLS.items() if name in group.commands}


def _json_type(param: Any) -> dict[str, Any]:
    """Switches are booleans; every other value is text the command parses itself (numbers are accepted and
    passed as the command line would carry them: ``8k``, ``0.9``, ``8192``)."""
    if getattr(param, "is_flag", False):
        return {"type": "boolean"}
    return {"type": ["string", "number"]}


def input_schema(cmd: Any) -> dict[str, Any]:
    """A JSON schema for a command's parameters: one property per option or argument, by its name."""
    props: dict[str, Any] = {}
    required = []
    for p in cmd.params:
        if p.name in _SKIPPED:
            continue
        schema = _json_type(p)
        if getattr(p, "nargs", 1) == -1:
            schema = {"type": "array", "items": schema}
        help_text = getattr(p, "help", None) or (f"the {p.name}" if p.param_type_name == "argument" else "")
        if help_text:
            schema["description"] = " ".join(help_text.split())
        if p.param_type_name == "option" and p.default not in (None, False, ()) and not callable(p.default):
            schema["default"] = p.default
        props[p.name] = schema
        if p.required:
            required.append(p.name)
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


def argv_for(tool: str, cmd: Any, arguments: dict[str, Any]) -> list[str]:
    """The command line a tool call stands for (values as the CLI reads them), ending in ``-f json``."""
    from kvplan.errors import UsageError

    params = {p.name: p for p in cmd.params if p.name not in _SKIPPED}
    unknown = sorted(set(arguments) - set(params))
    if unknown:
        raise UsageError(f"{tool} has no argument '{unknown[0]}' (known: {', '.join(params)})", field=unknown[0])
    argv: list[str] = [TOOLS[tool]]
    for name, value in arguments.items():
        p = params[name]
        values = value if isinstance(value, list) else [value]
        if p.param_type_name == "argument":
            argv += [str(v) for v in values]
        elif getattr(p, "is_flag", False):
            if value is True:
                argv.append(p.opts[0])
        elif value is not None:
            for v in values:
                argv += [p.opts[0], str(v)]
    return [*argv, "-f", "json"] if "fmt" in {p.name for p in cmd.params} else argv


CALL_SECONDS = 600
"""A tool call that runs longer is stopped (an answer never takes this long; a hostile input might)."""


def call(group: Any, tool: str, arguments: dict[str, Any]) -> tuple[int, str, str]:
    """Run a tool as its command, in a child ``python -m kvplan`` (a crash or hang stays there; the server's
    stdin and stdout stay the protocol's): (exit status, stdout, stderr)."""
    import subprocess
    import sys

    from kvplan.errors import KvplanError

    commands = _commands(group)
    if tool not in commands:
        return 2, "", f"kvplan: error: unknown tool '{tool}' (known: {', '.join(commands)})"
    try:
        argv = argv_for(tool, commands[tool], arguments)
    except KvplanError as exc:
        return 2, "", f"kvplan: error: {exc}"
    try:
        done = subprocess.run([sys.executable, "-m", "kvplan", *argv], capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=CALL_SECONDS)
    except subprocess.TimeoutExpired:
        return 2, "", f"kvplan: error: {tool} ran past {CALL_SECONDS} s and was stopped"
    return done.returncode, done.stdout, done.stderr


def build_server(server_class: Any, group: Any) -> Any:
    """An MCP server (the SDK's low-level ``Server``) with the tools of the CLI's command ``group``."""
    import mcp.types as types

    from kvplan._version import __version__

    commands = _commands(group)

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=[
            types.Tool(name=tool, description=(cmd.help or "").split("\n\n")[0].strip(),
                       inputSchema=input_schema(cmd)) for tool, cmd in commands.items()])

    async def call_tool(ctx: Any, params: Any) -> Any:
        code, out, err = call(group, params.name, dict(params.arguments or {}))
        if code == 2 or not out.strip():
            return types.CallToolResult(content=[types.TextContent(type="text", text=err.strip() or out)],
                                        isError=True)
        try:
            doc = json.loads(out)
        except ValueError:
            doc = None
        structured = doc if isinstance(doc, dict) else ({"results": doc} if doc is not None else None)
        return types.CallToolResult(content=[types.TextContent(type="text", text=out)],
                                    structuredContent=structured, isError=False)

    return server_class("kvplan", version=__version__, on_list_tools=list_tools, on_call_tool=call_tool)
