"""``PoolShape.longest``: the longest request a block pool admits, worked out from the admission rule's pieces
(fit's speed). It must equal the bisection over ``blocks_per_request`` that vLLM's
``_estimate_max_model_len_from_groups`` runs, for every mix of full, sliding, chunked and recurrent groups."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.engines.vllm.admission import PoolShape
from kvplan.engines.vllm.pool import PoolType


def _bisected(pool: PoolShape, blocks: int, batched: int, upper: int) -> int:
    lo, hi = 0, upper
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if pool.blocks_per_request(mid, batched) <= blocks:
            lo = mid
        else:
            hi = mid - 1
    return lo


_TYPE = st.builds(lambda kind, span, block: PoolType(kind, span, block, 1, 1, None),  # type: ignore[arg-type]
                  st.sampled_from(["full", "mla", "sliding", "chunked", "recurrent"]),
                  st.none() | st.integers(1, 40_000), st.sampled_from([1, 16, 32, 64, 528]) | st.integers(1, 300))


@settings(max_examples=400, deadline=None)
@given(types=st.lists(st.tuples(_TYPE, st.integers(1, 6)), min_size=1, max_size=4),
       batches=st.integers(1, 2), state_pages=st.integers(1, 3), batched=st.integers(1, 16_384),
       blocks=st.integers(0, 200_000), upper=st.integers(0, 300_000) | st.just(1 << 26))
def test_longest_is_the_bisection(types: list[tuple[PoolType, int]], batches: int, state_pages: int, batched: int,
                                  blocks: int, upper: int) -> None:
    pool = PoolShape(16, tuple(t for t, _ in types), 4, tuple(g for _, g in types), 0, 1024,
                     in_flight_batches=batches, state_pages=state_pages)
    assert pool.longest(blocks, batched, upper) == _bisected(pool, blocks, batched, upper)


def test_longest_full_layers_in_numbers() -> None:
    # one group of 16-token blocks: 1,000 blocks admit 16,000 tokens, capped by the upper end
    pool = PoolShape(16, (PoolType("full", None, 16, 1, 1, None),), 32, (1,), 0, 1024)  # type: ignore[arg-type]
    assert pool.longest(1000, 8192, 1 << 20) == 16_000
    assert pool.longest(1000, 8192, 12_345) == 12_345
    assert pool.longest(0, 8192, 100) == 0
    # + a sliding group of window 4,096: admitted with min(4,095 + 16,384 in flight, length) / 16 + 1 blocks
    pool = PoolShape(16, (PoolType("full", None, 16, 1, 1, None), PoolType("sliding", 4096, 16, 1, 1, None)),
                     32, (1, 1), 0, 1024)  # type: ignore[arg-type]
    assert pool.longest(3000, 8192, 1 << 20) == (3000 - 1281) * 16
