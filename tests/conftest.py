"""Shared test helpers: the data folder, small spec builders, and the harness of the hostile-input tests
(a hang turned into a failure, the CLI run in-process, an HF token in the environment)."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# No test reaches the real Hugging Face Hub: ids that are neither files nor bundled resolve against the
# HF cache only (tests/test_hub.py runs kvplan against its own Hub on 127.0.0.1).
os.environ["HF_HUB_OFFLINE"] = "1"

from kvplan.spec import LayerSpec, ModelSpec, group_layers

DATA = Path(__file__).parent / "data"
REPO = Path(__file__).parent.parent


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


@pytest.fixture
def data_dir() -> Path:
    return DATA


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
