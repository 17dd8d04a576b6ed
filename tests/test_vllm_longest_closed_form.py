"""vLLM's longest fit solved in closed form (``PoolShape.linear``) gives what bisecting the admission rule gives."""

from __future__ import annotations

import random

from kvplan.engines.vllm.admission import PoolShape, _longest_linear
from kvplan.engines.vllm.pool import PoolType
from kvplan.monotone import LIMIT, largest


def _searched(pool: PoolShape, blocks: int, upper: int, batched: int) -> int:
    lo, hi = 0, upper
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if pool.blocks_per_request(mid, batched) <= blocks:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _pool(rng: random.Random) -> PoolShape:
    kinds = rng.choice([["full"], ["mla"], ["full", "recurrent"], ["recurrent"], ["full", "full"],
                        ["full", "sliding"], ["chunked", "full"]])
    block = rng.choice([1, 16, 32, 64, 256])
    types = tuple(PoolType(kind, rng.choice([None, 128, 4096]) if kind in ("sliding", "chunked") else None,
                           block if rng.random() < 0.9 else 2 * block, 1024, 4, None)  # type: ignore[arg-type]
                  for kind in kinds)
    groups = tuple(rng.randint(0, 5) for _ in types)
    return PoolShape(block, types, 4, groups, 0, 4096, in_flight_batches=rng.choice([1, 2]),
                     state_pages=rng.choice([1, 2]))


def test_closed_form_equals_the_search():
    rng = random.Random(26)
    solved = 0
    for _ in range(3000):
        pool = _pool(rng)
        line = pool.linear()
        blocks, upper, batched = rng.randint(-3, 5000), rng.choice([0, 7, 4096, 131072, -1]), rng.choice([256, 8192])
        if line is None:
            continue
        solved += 1
        for length in (0, 1, 15, 16, 17, 1000):
            constant, groups, block = line
            assert pool.blocks_per_request(length, batched) == constant + (groups * -(-length // block) if groups else 0)
        assert _longest_linear(line, blocks, upper) == _searched(pool, blocks, upper, batched)
        batch = rng.randint(1, 64)
        assert min(LIMIT, _longest_linear(line, blocks // batch, LIMIT)) == largest(
            lambda c: batch * pool.blocks_per_request(c, batched) <= blocks)
    assert solved > 1000
