"""One engine = one package: nothing under kvplan/ outside ``kvplan/engines/<engine>/`` names that engine.

Read from the source (AST), so a new module that names an engine fails here, whatever it does at run time.
An engine is named by importing its package, by a string equal to its name or an alias ("vllm",
"llama.cpp"), or by a one-word string built around it: a module path, an image or a launcher
("vllm.entrypoints.openai.api_server", "vllm/vllm-openai", "trtllm-serve"). Prose (a message, a docstring)
may mention an engine. The registry (kvplan/engines/__init__.py) is the one place that maps names to packages.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import kvplan.engines as registry
from kvplan.engines.serve import serving_engines

ROOT = Path(registry.__file__).resolve().parent.parent  # the kvplan package
REGISTRY = ROOT / "engines" / "__init__.py"

NOT_YET: frozenset[str] = frozenset()
"""Modules that still name an engine while a change is in flight (empty: none)."""


def _package_of() -> dict[str, str]:
    """Every engine name and alias (lower case) -> the package that owns it (``vllm``, ``hf``)."""
    owner = {name: module.rsplit(".", 1)[-1] for name, (module, _) in registry._REGISTRY.items()}
    owner.update({alias: owner[target] for alias, target in registry._ALIASES.items()})
    return owner


def _launchers() -> dict[str, str]:
    """The commands, wrappers and modules each engine package declares it is started with -> that package."""
    owner = _package_of()
    out: dict[str, str] = {}
    for serve in serving_engines():
        for word in (*serve.commands, *serve.wrappers, *serve.modules):
            out[word.lower()] = owner[serve.engine]
    return out


OWNER = _package_of()
LAUNCHERS = _launchers()
PACKAGES = frozenset(OWNER.values())


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    for node in ast.walk(tree):  # an attribute's docstring: a bare string right after its assignment
        body = getattr(node, "body", None)
        if isinstance(body, list):
            for before, stmt in zip(body, body[1:]):
                if isinstance(before, (ast.Assign, ast.AnnAssign)) and isinstance(stmt, ast.Expr) \
                        and isinstance(stmt.value, ast.Constant):
                    out.add(id(stmt.value))
    return out


def engines_named(text: str) -> set[str]:
    """The engine packages a string literal names: the whole text, or one word of a module path or image."""
    word = text.strip().lower()
    if word in OWNER:
        return {OWNER[word]}
    if word in LAUNCHERS:
        return {LAUNCHERS[word]}
    if not word or re.search(r"\s", word):
        return set()  # prose may mention an engine
    return {OWNER[part] for part in re.split(r"[./@]", word) if part in OWNER}


def findings(path: Path, source: str) -> list[str]:
    """'file:line what' for each place ``path`` names an engine whose package it is not in."""
    rel = path.relative_to(ROOT).as_posix()
    parts = rel.split("/")
    home = parts[1] if parts[0] == "engines" and len(parts) > 2 else None
    tree = ast.parse(source)
    docs = _docstrings(tree)
    out = []
    for node in ast.walk(tree):
        named: set[str] = set()
        if isinstance(node, ast.Import):
            named = {a.name.split(".")[2] for a in node.names if a.name.startswith("kvplan.engines.")
                     and a.name.split(".")[2] in PACKAGES}
        elif isinstance(node, ast.ImportFrom) and node.module:
            bits = node.module.split(".")
            if bits[:2] == ["kvplan", "engines"] and len(bits) > 2 and bits[2] in PACKAGES:
                named = {bits[2]}
            elif bits == ["kvplan", "engines"]:
                named = {a.name for a in node.names if a.name in PACKAGES}
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            named = engines_named(node.value)
        for package in sorted(named - {home}):
            shown = repr(node.value)[:60] if isinstance(node, ast.Constant) else "import"
            out.append(f"{rel}:{node.lineno} names {package}: {shown}")
    return out


def _modules() -> list[Path]:
    return sorted(p for p in ROOT.rglob("*.py") if p != REGISTRY)


def test_no_module_names_an_engine_outside_its_package() -> None:
    found = []
    for path in _modules():
        if path.relative_to(ROOT).as_posix() in NOT_YET:
            continue
        found += findings(path, path.read_text(encoding="utf-8"))
    assert found == [], "\n".join(found)


def test_the_allowlist_holds_only_files_that_still_name_an_engine() -> None:
    # an entry whose file no longer names an engine goes: the list only shrinks
    stale = [rel for rel in sorted(NOT_YET)
             if not (ROOT / rel).exists() or not findings(ROOT / rel, (ROOT / rel).read_text(encoding="utf-8"))]
    assert stale == []


@pytest.mark.parametrize("source,where", [
    ('ENGINE = "vllm"\n', "names vllm"),
    ('x = "SGLang"\n', "names sglang"),
    ('x = "llama.cpp"\n', "names llamacpp"),
    ('IMAGE = "vllm/vllm-openai"\n', "names vllm"),
    ('MODULES = {"dynamo.sglang": 1}\n', "names sglang"),
    ('x = "trtllm-serve"\n', "names trtllm"),
    ("from kvplan.engines.vllm.pool import DEFAULT_BLOCK_SIZE\n", "names vllm"),
    ("import kvplan.engines.hf.layout\n", "names hf"),
    ("from kvplan.engines import sglang\n", "names sglang"),
])
def test_each_way_of_naming_an_engine_is_caught(source: str, where: str) -> None:
    assert where in findings(ROOT / "plan.py", source)[0]


@pytest.mark.parametrize("source", [
    '"""Plans vLLM, SGLang and llama.cpp caches."""\n',
    'MESSAGE = "runs no engine kvplan reads (vllm serve MODEL)"\n',
    'SCHEME = "hf://"\n',
    'FORMAT = "vllm-chart"\n',
    "from kvplan.engines import DEFAULT_ENGINE, get_engine\n",
])
def test_prose_and_the_registry_are_not_naming(source: str) -> None:
    assert findings(ROOT / "plan.py", source) == []


def test_an_engine_package_may_name_itself_only() -> None:
    assert findings(ROOT / "engines" / "vllm" / "x.py", 'A = "vllm"\n') == []
    assert findings(ROOT / "engines" / "vllm" / "x.py", 'A = "sglang"\n') != []
    assert findings(ROOT / "engines" / "serve_format.py", 'A = "vllm"\n') != []
