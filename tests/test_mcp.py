"""``kvplan mcp`` in a real session with the MCP SDK's own client: the tools are listed with schemas built from
the commands' options, and a call returns what ``-f json`` prints; a mistake is a tool error with one line."""

from __future__ import annotations

import json
import os
import sys

import pytest

from conftest import REPO, run_cli

pytest.importorskip("mcp")
import anyio  # noqa: E402
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402


def _session(body):
    """Run ``body(session)`` against ``python -m kvplan mcp`` in a subprocess (the transport agents use)."""
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "HF_HUB_OFFLINE": "1"}
    params = StdioServerParameters(command=sys.executable, args=["-m", "kvplan", "mcp"], env=env)

    async def go():
        with anyio.fail_after(120):
            async with stdio_client(params) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return await body(session)

    return anyio.run(go)


@pytest.mark.slow
def test_tools_and_a_call_equal_the_cli_json() -> None:
    async def body(session):
        tools = await session.list_tools()
        result = await session.call_tool("estimate", {"model": "meta-llama/Llama-3.1-8B", "context": "8k,32k",
                                                      "kv_dtype": "auto,fp8"})
        plan = await session.call_tool("max_batch", {"model": "Qwen/Qwen3-8B", "gpu": "H100", "max_model_len": "32k"})
        bad = await session.call_tool("max_batch", {"model": "Qwen/Qwen3-8B", "gpu": "NoSuchGPU"})
        unknown = await session.call_tool("estimate", {"model": "Qwen/Qwen3-8B", "nonsense": 1})
        return tools, result, plan, bad, unknown

    tools, result, plan, bad, unknown = (x.model_dump(by_alias=True) for x in _session(body))  # the wire form
    by_name = {t["name"]: t for t in tools["tools"]}
    assert {"estimate", "max_batch", "check", "log"} <= set(by_name)
    props = by_name["max_batch"]["inputSchema"]["properties"]
    assert "gpu_memory_utilization" in props and "model" in by_name["max_batch"]["inputSchema"]["required"]
    assert props["gpu"]["description"]  # the CLI's help
    assert "format" not in props and "fmt" not in props  # always JSON

    code, out, _ = run_cli(["estimate", "meta-llama/Llama-3.1-8B", "-c", "8k,32k", "--kv-dtype", "auto,fp8", "-f",
                            "json"])
    assert code == 0 and not result["isError"]
    assert json.loads(result["content"][0]["text"]) == json.loads(out)
    code, out, _ = run_cli(["max-batch", "Qwen/Qwen3-8B", "--gpu", "H100", "--max-model-len", "32k", "-f", "json"])
    assert json.loads(plan["content"][0]["text"]) == json.loads(out) == plan["structuredContent"]

    line = bad["content"][0]["text"].strip()
    assert bad["isError"] and "NoSuchGPU" in line and "\n" not in line
    assert unknown["isError"] and "nonsense" in unknown["content"][0]["text"]
