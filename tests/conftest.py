"""Shared test helpers: the data folder and small spec builders."""

from __future__ import annotations

import os
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
