"""``CacheLayout.total_bytes`` summed once per layout (``_linear_bytes``), or over its groups merged by cost key
(``_merged_groups``), equals summing its groups one by one, for every bundled model on every engine: searches call it
thousands of times, and no number may move."""

from __future__ import annotations

import pytest

from kvplan.dtypes import resolve_kv_dtype
from kvplan.engines import PACKAGE_ENGINES, get_engine
from kvplan.engines.protocol import make_engine_options
from kvplan.engines.version import parse_version
from kvplan.errors import KvplanError
from kvplan.sources.bundled import bundled_ids, load_bundled

POINTS = [(c, b) for c in (0, 1, 15, 16, 17, 255, 4096, 4097, 131071, 1 << 20) for b in (0, 1, 3, 64)]


@pytest.mark.parametrize("engine_name", PACKAGE_ENGINES)
def test_linear_total_bytes_equals_the_sum_over_groups(engine_name):
    engine = get_engine(engine_name)
    version = parse_version(engine.default_version)
    linear = merged = 0
    for model in bundled_ids():
        spec = load_bundled(model)
        for kv in ("auto", "fp8"):
            try:
                layouts = engine.stage_layouts(spec, resolve_kv_dtype(kv, spec.dtype), version,
                                               make_engine_options(tp=1), 1)
            except KvplanError:
                continue
            for layout in layouts:
                if layout._linear_bytes is not None:
                    linear += 1
                elif len(layout._merged_groups) < len(layout.groups):
                    merged += 1
                for c, b in POINTS:
                    assert layout.total_bytes(c, b) == sum(g.count * g.layer_bytes(c, b) for g in layout.groups), \
                        (model, kv, c, b)
    assert linear > 0 and merged > 0
