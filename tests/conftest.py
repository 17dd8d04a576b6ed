"""Shared test helpers: the checkout and data folders, small spec builders and estimate shortcuts, the one
parametrization of every bundled model x engine, and the harness of the hostile-input tests (a hang turned
into a failure, the CLI run in-process, an HF token in the environment).

Test modules import the plain names (``from conftest import REPO, run_cli``): pytest puts tests/ on sys.path."""

from __future__ import annotations

import contextlib
import copy
import functools
import gc
import io
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

# No test reaches the real Hugging Face Hub: ids that are neither files nor bundled resolve against the
# HF cache only (tests/test_hub.py runs kvplan against its own Hub on 127.0.0.1).
os.environ["HF_HUB_OFFLINE"] = "1"

# torch on one thread (unless the caller chose): the tensors here are small, and with its default of one
# thread per core torch's workers spin on a shared 2-core machine -- tests/test_quantized_oracle.py took
# 143 s of CPU with the default, 13 s with one thread, for the same bytes. Rank processes inherit it, as
# tests/test_verify_ranks.py already asks.
os.environ.setdefault("OMP_NUM_THREADS", "1")

# No hypothesis deadline: no test times kvplan (hangs are caught by hang_guard), and on a shared machine a
# 200 ms deadline fails a correct example that waited for the CPU.
settings.register_profile("kvplan", deadline=None)
settings.load_profile("kvplan")

from kvplan.spec import LayerSpec, ModelSpec, group_layers

REPO = Path(__file__).resolve().parent.parent  # the checkout: model_specs/, examples/, docs/, tools/
DATA = REPO / "tests" / "data"


def dense(model_id: str, layers: int, kv_heads: int, head_dim: int, *, model_type: str = "llama",
          dtype: str = "bfloat16", max_pos: int | None = None) -> ModelSpec:
    return ModelSpec(id=model_id, model_type=model_type, dtype=dtype, max_position_embeddings=max_pos,
                     layers=(LayerSpec(kind="full", count=layers, kv_heads=kv_heads, head_dim=head_dim),))


def interleaved(model_id: str, model_type: str, n: int, period: int, window: int, kv_heads: int,
                head_dim: int, *, kind: str = "sliding") -> ModelSpec:
    """Every ``period``-th layer global, the others ``kind`` with ``window`` (Gemma / gpt-oss style)."""
    per_layer = []
    for i in range(n):
        if i % period == period - 1:
            per_layer.append(LayerSpec(kind="full", kv_heads=kv_heads, head_dim=head_dim))
        elif kind == "sliding":
            per_layer.append(LayerSpec(kind="sliding", kv_heads=kv_heads, head_dim=head_dim, window=window))
        else:
            per_layer.append(LayerSpec(kind="chunked", kv_heads=kv_heads, head_dim=head_dim, chunk=window))
    return ModelSpec(id=model_id, model_type=model_type, layers=group_layers(per_layer))


def estimate_row(model: object, batch: int, context: int | None = None, **kw: object) -> Any:
    """The first row of ``kvplan.estimate`` for ``model`` at ``batch`` (and ``context`` tokens, when given)."""
    # the function itself: kvplan.estimate is the module once another test imported kvplan.estimate first
    # (kvplan/__init__.py's lazy attributes share the submodule's name)
    from kvplan.estimate import estimate

    if context is not None:
        kw["contexts"] = [context]
    return estimate(model, batches=[batch], **kw).rows[0]  # type: ignore[arg-type]


def estimate_kv(model: object, batch: int, context: int | None = None, **kw: object) -> int:
    """The KV bytes ``kvplan.estimate`` counts for ``model`` at ``batch`` (and ``context`` tokens)."""
    return int(estimate_row(model, batch, context, **kw).kv_bytes)


@pytest.fixture
def data_dir() -> Path:
    return DATA


@functools.lru_cache(maxsize=None)
def _yaml_document(path: Path) -> Any:
    import yaml

    # libyaml's safe loader where PyYAML has it (as kvplan.safe_io reads): the same documents as
    # yaml.safe_load for every file of tests/data, about 10x faster (the engine logs are 1 MB of YAML)
    return yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def data_yaml(path: Path | str) -> Any:
    """The YAML document of a data file (tests/data/...), parsed once per session; each caller gets its own copy
    (a test may change what it was given)."""
    return copy.deepcopy(_yaml_document(Path(path).resolve()))


def log_cases(*names: str) -> list[dict[str, Any]]:
    """The ``cases`` of tests/data/engine_logs_*.yaml files, in the order named (none named: every such file,
    sorted by name)."""
    paths = [DATA / name for name in names] if names else sorted(DATA.glob("engine_logs_*.yaml"))
    return [case for path in paths for case in data_yaml(path)["cases"]]


# ------------------------------------------------------------------------------------------------
# Every bundled model, x every engine: the one parametrization the sweeps share (tests/test_bundled_models.py,
# tests/test_bundled_specs.py), so that a property is checked once per model and engine, not once per file.

ENGINES = ("vllm", "sglang", "trtllm", "llamacpp", "hf", "hf-static")


def bundled_spec_files() -> list[Path]:
    from kvplan.sources.bundled import specs_dir

    return sorted(specs_dir().glob("*.yaml"))


@functools.lru_cache(maxsize=None)
def load_bundled_file(path: Path) -> ModelSpec:
    """The spec of one bundled file, read once per session (specs are frozen: sharing one is safe)."""
    from kvplan.sources.resolve import load_model

    return load_model(str(path))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``bundled_model``: each file of model_specs/ (its stem the test id); ``bundled_engine``: each engine, or
    those a test's ``@pytest.mark.engines(...)`` names."""
    if "bundled_model" in metafunc.fixturenames:
        files = bundled_spec_files()
        metafunc.parametrize("bundled_model", files, ids=[p.stem for p in files])
    if "bundled_engine" in metafunc.fixturenames:
        marker = metafunc.definition.get_closest_marker("engines")
        metafunc.parametrize("bundled_engine", marker.args if marker else ENGINES)


@pytest.fixture
def bundled_spec(bundled_model: Path) -> ModelSpec:
    return load_bundled_file(bundled_model)


# ------------------------------------------------------------------------------------------------
# The garbage collector's share of the run. By the late modules the session holds about a million objects
# (torch, transformers, hypothesis, every earlier module's caches), and each full collection walks all of
# them: verify calls gc.collect() several times a run (to prove its tensors are freed), so a verify test
# cost ~2 s in the whole suite against ~0.25 s alone. What is alive when a module starts is frozen
# (gc.freeze: left out of later collections); what a test makes is collected as before, so a test that
# checks that its objects are freed checks exactly what it did.

_frozen_for: list[object] = [None]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    module = getattr(item, "module", None)
    if module is not _frozen_for[0]:
        _frozen_for[0] = module
        gc.collect()  # what is garbage now is freed first, not frozen
        gc.freeze()


# ------------------------------------------------------------------------------------------------
# The hostile-input harness (tests/test_fuzz_cli.py, tests/test_hostile_*.py)


class Hang(BaseException):
    """Raised by the alarm: not an Exception, so that code which leaves an odd input out cannot swallow it."""


@contextlib.contextmanager
def hang_guard(seconds: float = 30, what: str = "the block") -> Iterator[None]:
    """A hang becomes a failure naming ``what`` after ``seconds`` (nothing is timed: a fixed input either
    ends or it does not; ``re`` and the interpreter see the signal between steps)."""
    def ring(signum: int, frame: object) -> None:
        raise Hang

    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except Hang:
        pytest.fail(f"{what} did not end within {seconds} s")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_cli(argv: list[str] | tuple[str, ...], *, seconds: float = 30, stdin: bytes | None = None,
            fast: bool = True) -> tuple[int, str, str]:
    """``kvplan ARGV`` in-process under :func:`hang_guard`: (exit status, stdout, stderr)."""
    from kvplan.cli import main

    out, err = io.StringIO(), io.StringIO()
    saved = sys.stdin
    if stdin is not None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin))
    try:
        with hang_guard(seconds, f"kvplan {list(argv)!r}"[:300]), contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            code = main(list(argv), fast=fast)
    finally:
        sys.stdin = saved
    return code, out.getvalue(), err.getvalue()


def checked_kv_tokens(path: Path) -> int:
    """``kvplan check PATH --format json`` in-process: the first deployment's KV-cache tokens."""
    import json

    code, out, err = run_cli(["check", str(path), "--format", "json"])
    assert code == 0, err
    doc = json.loads(out)
    return int((doc["deployments"][0] if "deployments" in doc else doc)["kv_cache_tokens"])


def k8s_h100(containers: str, name: str = "llm") -> str:
    """A Kubernetes Deployment scheduled on H100-80GB nodes, its pod's ``containers:`` list given as written (each
    line indented for it: ``      - name: vllm``)."""
    return ("apiVersion: apps/v1\nkind: Deployment\n"
            f"metadata: {{name: {name}}}\n"
            "spec:\n  template:\n    spec:\n      nodeSelector: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}\n"
            "      containers:\n" + containers)


class Terminal(io.StringIO):
    """An output stream that says it is a terminal (rich's path, not the plain writer's)."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def terminal_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """A colour terminal, whatever the environment the tests run in says."""
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")


@contextlib.contextmanager
def hf_token(token: str) -> Iterator[None]:
    """HF_TOKEN set to ``token`` for the block (a module fixture's body: hypothesis runs many cases in one
    test, where pytest's function-scoped monkeypatch does not reach)."""
    old = os.environ.get("HF_TOKEN")
    os.environ["HF_TOKEN"] = token
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("HF_TOKEN", None)
        else:
            os.environ["HF_TOKEN"] = old


def shlex_words(text: str) -> list[str] | None:
    """A shell line's words as shlex splits them (the reference kvplan's own word splitter is held to), None where
    shlex refuses it (an unclosed quote)."""
    import shlex

    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        return list(lexer)
    except ValueError:
        return None
