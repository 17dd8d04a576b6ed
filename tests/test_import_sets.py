"""The JSON paths people script stay light: ``estimate -f json`` and ``max-batch -f json`` import no plotting
library and no MCP SDK (those are optional extras, imported only when a chart or the server is asked for)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import REPO

PROBE = ("import sys, io, contextlib\n"
         "from kvplan.cli import main\n"
         "with contextlib.redirect_stdout(io.StringIO()):\n"
         "    code = main({argv!r})\n"
         "print(__import__('json').dumps([code, sorted(m.split('.')[0] for m in sys.modules)]))\n")
HEAVY = {"matplotlib", "PIL", "mcp", "mcp_types", "starlette", "uvicorn", "torch"}


@pytest.mark.parametrize("argv", [
    ["estimate", "meta-llama/Llama-3.1-8B", "-c", "8k", "-f", "json"],
    ["max-batch", "meta-llama/Llama-3.1-70B", "--gpu", "H100", "--tp", "4", "-f", "json"],
])
def test_json_commands_import_no_optional_extra(argv: list[str]) -> None:
    done = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv)], capture_output=True, text=True,
                          cwd=REPO, timeout=120)
    code, modules = json.loads(done.stdout.strip().splitlines()[-1])
    assert code == 0, done.stderr
    assert not HEAVY & set(modules), sorted(HEAVY & set(modules))
