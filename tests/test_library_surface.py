"""The library as a program meets it (issue 10 item 4, issue 15 items 20 and 21): the API listed,
typed, versioned in one place; counts as people write them; a README whose tests need no torch."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

import kvplan
from kvplan.errors import UsageError
from kvplan.units import MAX_COUNT, parse_counts
from conftest import REPO


def _pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib", reason="tomllib is Python 3.11+")
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def test_all_and_dir_list_the_api():
    assert dir(kvplan) == sorted(kvplan.__all__)
    for name in ("estimate", "max_batch", "verify", "check", "load_model", "parse_counts", "KvplanError",
                 "ModelSpecError", "EstimateResult", "CapacityPlan", "GPU", "__version__"):
        assert name in kvplan.__all__, name
    for name in kvplan.__all__:
        assert getattr(kvplan, name) is not None, name


def test_import_is_light_and_functions_survive_their_submodules():
    code = ("import sys, kvplan; assert not {'typer', 'rich', 'pydantic', 'torch', 'yaml'} & set(sys.modules); "
            "from kvplan.estimate import EstimateResult; import kvplan.verify.shapes; "
            "assert callable(kvplan.estimate) and callable(kvplan.verify), (kvplan.estimate, kvplan.verify); "
            "print(kvplan.estimate('gpt2', contexts=[1024]).rows[0].kv_bytes)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                          env={"PYTHONPATH": str(REPO), "PATH": ""})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(12 * 1024 * 2 * 768 * 2)  # gpt2: 12 layers x 1024 x (K+V) x 768 x 2 B


def test_version_lives_in_one_place_and_the_package_is_typed():
    project = _pyproject()
    assert "version" not in project["project"] and project["project"]["dynamic"] == ["version"]
    assert project["tool"]["hatch"]["version"]["path"] == "kvplan/_version.py"
    assert re.fullmatch(r"\d+\.\d+\.\d+", kvplan.__version__)
    from kvplan._version import __version__

    assert kvplan.__version__ == __version__
    assert (REPO / "kvplan" / "py.typed").is_file()
    assert project["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"] == ["kvplan"]  # ships py.typed
    assert not any(dep.startswith("typer") and "<" in dep for dep in project["project"]["dependencies"])


def test_no_module_imports_the_front_door_for_its_version():
    # the version is read from kvplan/_version.py: `from kvplan import __version__` ran back up to the package
    import ast

    offenders = []
    for path in sorted((REPO / "kvplan").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "kvplan" and \
                    any(alias.name == "__version__" for alias in node.names) and path.name != "__init__.py":
                offenders.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert offenders == []


def test_readme_tests_need_no_torch_and_ci_runs_them_with_it():
    project = _pyproject()
    assert not any(dep.startswith("torch") for dep in project["project"]["optional-dependencies"]["test"])
    readme = (REPO / "README.md").read_text()
    setup = readme.split("## Set up", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```bash\n(.*?)\n```", setup, re.S)
    assert len(commands) == 2 and all("\n" not in c for c in commands)
    assert commands[0].startswith("pip install -e . && kvplan estimate ")
    test_command = commands[1]
    assert "torch" not in test_command and "pytest" in test_command
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert test_command in ci
    assert any(line.startswith("pip install torch==") for line in ci[:ci.index(test_command)])


def test_torch_tests_skip_with_a_reason_without_torch():
    source = (REPO / "tests" / "test_verify.py").read_text()
    assert 'skipif(not HAS_TORCH, reason=' in source
    tests = re.findall(r"\n((?:@[^\n]*\n)*)def (test_\w+)(.*?)(?=\n@|\ndef |\Z)", source, re.S)
    assert len(tests) > 10
    for decorators, name, body in tests:  # every test that imports torch is marked
        if "import torch" in body and "needs_torch" not in decorators:
            pytest.fail(f"{name} imports torch without @needs_torch")


@pytest.mark.parametrize("value,want", [
    (8192, [8192]), ("8k", [8192]), ("1k..8k", [1024, 2048, 4096, 8192]), ("1k..3k:1k", [1024, 2048, 3072]),
    ([1024, "2k", "4k..8k"], [1024, 2048, 4096, 8192]), ((1, 1, 2), [1, 2]), (range(1, 4), [1, 2, 3]),
    ("1,8,32", [1, 8, 32]),
])
def test_parse_counts_takes_what_people_write(value, want):
    assert parse_counts(value, "contexts") == want


@pytest.mark.parametrize("value", [True, 1.5, 0, -3, [], None, b"8k", "8q", ["x"], [1.0], "0..4", {"a": 1},
                                   MAX_COUNT + 1, "1" * 5000])
def test_parse_counts_refuses_with_the_field(value):
    with pytest.raises(UsageError) as info:
        parse_counts(value, "batches")
    assert info.value.field == "batches" and "--" not in info.value.message and "\n" not in str(info.value)


@given(st.lists(st.integers(min_value=1, max_value=1 << 30), min_size=1, max_size=30))
def test_parse_counts_ints_text_and_lists_agree(values):
    want = list(dict.fromkeys(values))
    assert parse_counts(values, "contexts") == want
    assert parse_counts(",".join(map(str, values)), "contexts") == want
    assert parse_counts([str(v) for v in values], "contexts") == want
