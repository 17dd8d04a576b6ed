"""Each command pays only for what it uses: the set of packages it imports is held here, so a change that pulls the
parser library, pydantic, yaml, rich, the Hub client, a plotting library or the MCP SDK onto a path that does not
need it fails CI (its cost is measured by benchmarks/startup.py; no timing is asserted here).

The probe runs the command in a fresh interpreter, its output captured, and lists the top-level modules it loaded;
only the packages in ``WATCHED`` are compared (the rest of the standard library varies with the Python release)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import REPO

PROBE = ("import sys, io\n"  # no contextlib here: it is one of the modules watched
         "from kvplan.cli import main\n"
         "out, err, sys.stdout, sys.stderr = sys.stdout, sys.stderr, io.StringIO(), io.StringIO()\n"
         "try:\n"
         "    code = main({argv!r})\n"
         "finally:\n"
         "    sys.stdout, sys.stderr = out, err\n"
         "loaded = sorted({{m.split('.')[0] for m in sys.modules}})  # before the json that prints it\n"
         "print(__import__('json').dumps([code, loaded]))\n")
WATCHED = {
    "typer", "click",                                                   # the parser: help only
    "pydantic", "pydantic_core", "annotated_types",                     # validation at the edges
    "yaml", "rich", "huggingface_hub", "httpx", "requests",             # files, the terminal, the Hub
    "matplotlib", "PIL", "numpy", "mcp", "anyio", "starlette", "uvicorn", "torch",  # optional extras
    "dataclasses", "inspect",                                           # the standard decorator (kvplan.record)
}
LOG = "tests/data/logs/vllm-0.6-10517-llama31-8b-3090-29k.log"

EXPECTED: list[tuple[list[str], set[str]]] = [
    (["estimate", "meta-llama/Llama-3.1-8B", "-c", "8k", "-f", "json"], set()),
    (["estimate", "meta-llama/Llama-3.1-8B", "-c", "8k", "-f", "csv"], set()),
    (["estimate", "meta-llama/Llama-3.1-8B", "-c", "8k"], set()),  # piped: the plain table (render/plain.py)
    # the GPU catalog is read from its JSON twin (kvplan/data/gpus.json): no yaml to look up a GPU
    (["max-batch", "meta-llama/Llama-3.1-70B", "--gpu", "H100", "--tp", "4", "-f", "json"], set()),
    # piped, the tables of max-batch, log, models and gpus are written without rich (render/grid.py)
    (["max-batch", "meta-llama/Llama-3.1-70B", "--gpu", "H100", "--tp", "4"], set()),
    # a kvplan deployment file and a pinned spec, both valid: read without pydantic (deploy/kvplan_fast.py,
    # sources/spec_fast.py); pydantic validates (and words) only what those readers leave to it
    (["check", "examples/pass", "--specs", "examples/specs", "-f", "json"], {"yaml"}),
    # a Kubernetes manifest: yaml, but not the kvplan deployment file's pydantic models
    (["check", "examples/pass/k8s-vllm-deployment.yaml", "-f", "json"], {"yaml"}),
    # fit: its table piped through render/grid.py like max-batch's, its launch commands quoted without shlex
    (["fit", "meta-llama/Llama-3.1-8B", "-c", "8k", "--concurrency", "32", "--gpus", "H100,L4"], set()),
    (["fit", "meta-llama/Llama-3.1-8B", "-c", "8k", "--concurrency", "32", "--gpus", "H100,L4", "-f", "json"], set()),
    (["log", LOG, "-f", "json"], set()),
    (["log", LOG], set()),
    (["models", "-f", "json"], set()),
    (["models"], set()),
    (["gpus", "-f", "json"], set()),
    (["gpus"], set()),
    (["--help"], set()),
    (["--version"], set()),
]


def imported(argv: list[str]) -> tuple[int, set[str]]:
    done = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv)], capture_output=True, text=True,
                          cwd=REPO, timeout=120)
    code, modules = json.loads(done.stdout.strip().splitlines()[-1])
    return code, set(modules)


@pytest.mark.parametrize("argv, expected", EXPECTED, ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_each_command_imports_only_what_it_uses(argv: list[str], expected: set[str]) -> None:
    code, modules = imported(argv)
    assert code == 0
    assert modules & WATCHED == expected


STANDARD = {"typing", "re", "enum", "json", "importlib", "warnings", "dataclasses", "inspect", "contextlib", "pathlib",
            "urllib", "ipaddress", "fnmatch", "base64"}
"""Standard-library modules that cost start-up time out of proportion to what kvplan would use them for (typing ~5 ms,
re with enum ~6 ms, json ~2 ms more, contextlib ~1 ms, pathlib with urllib.parse and ipaddress ~5 ms, base64 with
struct ~1 ms on a 2-core machine): the planners below leave them out (no runtime typing: ``TYPE_CHECKING`` as a module
constant; JSON through ``kvplan.jsontext``; modules looked up without importlib; paths named by ``kvplan.safe_io``'s
``path_*``; PyYAML's base64 deferred by ``safe_io.yaml_module``; the few patterns on these paths compiled where a value
needs them, or matched by hand where every run does)."""

EXPECTED_STANDARD: list[tuple[list[str], set[str]]] = [
    (["estimate", "meta-llama/Llama-3.1-8B", "-c", "8k", "-f", "json"], set()),
    (["estimate", "meta-llama/Llama-3.1-8B", "-c", "8k"], set()),  # piped: the plain table
    (["max-batch", "meta-llama/Llama-3.1-70B", "--gpu", "H100", "--tp", "4", "-f", "json"], set()),
    (["max-batch", "meta-llama/Llama-3.1-70B", "--gpu", "H100", "--tp", "4"], set()),  # piped: render/grid.py
    (["fit", "meta-llama/Llama-3.1-8B", "-c", "8k", "--concurrency", "32", "--gpus", "H100,L4"], set()),
    (["fit", "meta-llama/Llama-3.1-8B", "-c", "8k", "--concurrency", "32", "--gpus", "H100,L4", "-f", "json"], set()),
    (["fit", "Qwen/Qwen3-8B", "-c", "32k", "--concurrency", "4", "--gpus", "H100", "--beside", "Qwen/Qwen3-0.6B"],
     set()),
    # check reads YAML (PyYAML imports re, with enum); its readers, planners and report leave out typing, json and
    # the rest (the check issue: `TYPE_CHECKING` constants, JSON through kvplan.jsontext, patterns compiled on first
    # use or matched by hand), and it names files as pathlib would without importing it (the start-up issue:
    # kvplan.safe_io's path_* helpers, --specs walked with os.scandir; fnmatch only for a glob)
    (["estimate", "meta-llama/Llama-3.1-8B", "-c", "8k", "-f", "markdown"], set()),
    (["max-batch", "meta-llama/Llama-3.1-70B", "--gpu", "H100", "--tp", "4", "-f", "markdown"], set()),
    (["max-batch", "meta-llama/Llama-3.1-70B", "--gpu", "H100", "--tp", "4", "-f", "csv"], {"re", "enum"}),  # csv's
    (["gpus"], set()),
    (["gpus", "-f", "json"], set()),
    (["models"], set()),
    (["models", "-f", "json"], set()),
    # a log is read with patterns: re, but not typing and the rest
    (["log", LOG], {"re", "enum"}),
    (["log", LOG, "-f", "json"], {"re", "enum"}),
    (["log", LOG, "--compare", "--model", "meta-llama/Llama-3.1-8B"], {"re", "enum"}),
    (["check", "examples/pass", "--specs", "examples/specs", "-f", "json"], {"re", "enum"}),
    (["check", "examples/pass", "--specs", "examples/specs"], {"re", "enum"}),  # piped table
    (["check", "examples/pass/k8s-vllm-deployment.yaml", "-f", "json"], {"re", "enum"}),
]


@pytest.mark.parametrize("argv, expected", EXPECTED_STANDARD, ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_planners_leave_out_the_costly_standard_modules(argv: list[str], expected: set[str]) -> None:
    code, modules = imported(argv)
    assert code == 0
    assert modules & STANDARD == expected


def test_help_of_a_command_is_typers() -> None:
    """The parser library is reached for a command's help (built from the same tables)."""
    code, modules = imported(["estimate", "--help"])
    assert code == 0 and "typer" in modules


RARE = {"kvplan.engines.sglang.sharing", "kvplan.engines.trtllm.sharing", "kvplan.engines.vllm.sharing",
        "kvplan.engines.device", "kvplan.engines.vllm.device",
        # multimodal models only (sources/tower_names.py says which may have a tower)
        "kvplan.sources.vision_towers", "kvplan.engines.vllm.encoder_profile",
        # SGLang with a draft model, SGLang serving a model with recurrent state, a prebuilt TensorRT-LLM engine
        "kvplan.engines.sglang.speculative", "kvplan.engines.sglang.mamba", "kvplan.engines.trtllm.tied_head",
        # shell words with single quotes, escapes or comments (deploy/flags.py splits the rest by hand)
        "shlex",
        # a literal command (`kvplan check -- vllm serve ...`, `kvplan check -`), not files
        "kvplan.cli.literal",
        # a fleet of files, checked by worker processes (deploy/workers.py), not a few
        "kvplan.deploy.workers", "multiprocessing", "concurrent.futures"}
"""Modules for what few deployments ask: the engines' rules for requests that share a prefix or samples
(``Engine.sharing_for``) and for GPUs shared with other processes (``device``), the vision towers of multimodal
models, SGLang's speculative and Mamba rules, TensorRT-LLM's tied lm_head copy of a prebuilt engine, and shlex. A
check of deployments that ask for none of them leaves them out (each module is ~0.3 ms of a check's start, shlex with
its pattern ~0.6 ms)."""


def test_check_leaves_out_the_rules_its_deployments_do_not_ask_for() -> None:
    probe = PROBE.replace("{{m.split('.')[0] for m in sys.modules}}", "set(sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe.format(argv=["check", "examples/pass", "--specs",
                                                                      "examples/specs", "-f", "json"])],
                          capture_output=True, text=True, cwd=REPO, timeout=120, check=True)
    code, modules = json.loads(done.stdout.strip().splitlines()[-1])
    assert code == 0
    planned = {"kvplan.engines.vllm", "kvplan.engines.sglang", "kvplan.engines.trtllm"}  # all three engines plan
    assert planned <= set(modules)
    assert set(modules) & RARE == set()
