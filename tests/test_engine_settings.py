"""Each engine's settings are declared once, as data (``kvplan/engines/<engine>/settings.py``), and max-batch's
command line is generated from them: no engine flag is declared by hand, a flag given for an engine that lacks
it is refused by name, and an engine registered later gets its flags without any change to ``kvplan/cli``."""

from __future__ import annotations

import ast
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer

import kvplan.engines as engines
from kvplan.engines.settings import Setting, settings_of, union
from tests.conftest import run_cli

CLI = Path(__file__).parent.parent / "kvplan" / "cli"


def _max_batch_flags() -> set[str]:
    from kvplan.cli.app import app

    command = typer.main.get_command(app).commands["max-batch"]  # type: ignore[attr-defined]
    return {name for p in command.params if p.param_type_name == "option" for name in p.opts}


def test_max_batch_flags_are_the_neutral_table_and_the_engines_tables() -> None:
    from kvplan.cli import max_batch

    table = union(engines.all_engines())
    engine_flags = {flag for owned in table.values() for flag in owned.setting.flags}
    neutral = {name for opt in max_batch.NEUTRAL for name in opt.names} | {"--engine", "-e"}
    assert not neutral & engine_flags  # no engine flag declared by hand in the command
    assert _max_batch_flags() == neutral | engine_flags


def _foreign_cases() -> list[tuple[str, str, str]]:
    """(flag, an engine that lacks it, an engine that has it) for every engine setting with a flag."""
    table = union(engines.all_engines())
    cases = []
    for owned in table.values():
        if owned.setting.flags:
            other = next(name for name in engines.ENGINE_NAMES if name not in owned.engines)
            cases.append((owned.setting.flag, other, owned.engines[0]))
    return cases


@pytest.mark.parametrize("flag, other, owner", _foreign_cases(), ids=lambda x: str(x))
def test_an_engine_flag_with_another_engine_is_refused_by_name(flag: str, other: str, owner: str) -> None:
    owned = next(o for o in union(engines.all_engines()).values() if o.setting.flag == flag)
    value = [] if owned.setting.switch else ["1"]
    code, out, err = run_cli(["max-batch", "gpt2", "--gpu", "H100", "-e", other, flag, *value])
    assert code == 2 and out == ""
    assert err.startswith(f"kvplan: error: {flag}: ") and err.count("\n") == 1, err
    # and several engines: refused for the one that lacks it, whichever comes first
    code, _, err = run_cli(["max-batch", "gpt2", "--gpu", "H100", "-e", f"{owner},{other}", flag, *value])
    assert code == 2 and err.startswith(f"kvplan: error: {flag}: "), err


def test_the_help_says_which_engines_have_a_flag() -> None:
    code, out, _ = run_cli(["max-batch", "--help"])
    assert code == 0
    words = " ".join(out.replace("│", " ").split())
    assert "(vLLM, SGLang)" in words  # --cpu-offload-gb, --enforce-eager: generated from the tables
    for name in engines.ENGINE_NAMES:  # --engine lists the registry
        assert name in words


@dataclass(frozen=True)
class _DummyEngine:
    name: str = "dummy"
    title: str = "Dummy"
    settings: tuple[Setting, ...] = (
        Setting("dummy_knob", ("--dummy-knob",), "A knob only the dummy engine has.", "options"),)


def test_a_registered_engine_gets_its_flag_in_max_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    import kvplan.cli.app as cli_app

    module = types.ModuleType("kvplan_test_dummy_engine")
    module.DUMMY = _DummyEngine()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(engines._REGISTRY, "dummy", (module.__name__, "DUMMY"))
    monkeypatch.setattr(engines, "ENGINE_NAMES", (*engines.ENGINE_NAMES, "dummy"))
    monkeypatch.setattr(cli_app, "app", cli_app.build_app())

    assert "--dummy-knob" in _max_batch_flags()
    code, out, _ = run_cli(["max-batch", "--help"])
    words = " ".join(out.replace("│", " ").split())
    assert code == 0 and "--dummy-knob" in words and "(Dummy)" in words and "dummy" in words
    code, _, err = run_cli(["max-batch", "gpt2", "--gpu", "H100", "--dummy-knob", "x"])
    assert code == 2 and err == "kvplan: error: --dummy-knob: vLLM has no dummy-knob option\n"


def test_every_engine_package_declares_its_settings() -> None:
    for name in engines.PACKAGE_ENGINES:
        declared = settings_of(engines.get_engine(name))
        assert declared and all(isinstance(s, Setting) for s in declared), name
        assert len({s.name for s in declared}) == len(declared), name


def test_the_cli_names_no_engine_and_imports_no_engine_package() -> None:
    """Engine knowledge lives in kvplan/engines/<engine>/: kvplan/cli holds no engine name in its code (string
    literals other than docstrings) and imports no engine package."""
    packages = {f"kvplan.engines.{name}" for name in engines.PACKAGE_ENGINES}
    for path in sorted(CLI.glob("*.py")):
        tree = ast.parse(path.read_text())
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) and node.body
                      and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not any(node.module == p or node.module.startswith(p + ".") for p in packages), path
                if node.module == "kvplan.engines":
                    assert not {a.name for a in node.names} & set(engines.PACKAGE_ENGINES), path
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                assert node.value.strip().lower() not in engines.ENGINE_NAMES, (path, node.lineno, node.value)


def test_no_cli_function_is_over_80_lines() -> None:
    for path in sorted(CLI.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert node.end_lineno - node.lineno < 80, (path.name, node.name)  # type: ignore[operator]
