"""A layer kind an engine has no rule for is refused by name, never counted as 0 bytes (issue 20).

Every engine's layout has one table of layer kinds (``RULES``, read by ``engines.layout.group_by_kind``):
shared and cache-less layers hold no tokens; a kind missing from the table (a kind added to the spec
before an engine learns it) is a one-line error naming the kind and the engine.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest

import kvplan
from kvplan.engines import ENGINE_NAMES
from kvplan.errors import KvplanError
from kvplan.spec import LayerSpec, ModelSpec

from conftest import dense


def _with_layer(layer: LayerSpec) -> ModelSpec:
    base = dense("test/unknown-kind", 4, 8, 128)
    return replace(base, layers=(*base.layers, layer))


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_an_unknown_kind_is_refused_by_name(engine):
    # a kind class no engine's table has, as a kind the spec has learned and an engine has not would arrive
    @dataclass(frozen=True, kw_only=True)
    class LinearAttention(LayerSpec):
        kind: str = "linear_attention"

    novel = LinearAttention(count=2)
    with pytest.raises(KvplanError, match="no cache rule for a 'linear_attention' layer") as caught:
        kvplan.estimate(_with_layer(novel), contexts=[1024], batches=[1], engine=engine)
    assert "layers 4 to 5" in str(caught.value)


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_cacheless_kinds_still_hold_no_tokens(engine):
    plain = kvplan.estimate(dense("test/unknown-kind", 4, 8, 128), contexts=[1024], batches=[1], engine=engine)
    with_none = kvplan.estimate(_with_layer(LayerSpec(kind="none", count=3)), contexts=[1024], batches=[1],
                                engine=engine)
    assert with_none.rows[0].kv_bytes == plain.rows[0].kv_bytes
