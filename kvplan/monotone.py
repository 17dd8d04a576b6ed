"""Searching a monotone predicate: the one galloping bisection max-batch and verify both use."""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from collections.abc import Callable

LIMIT = 1 << 26


def largest(ok: Callable[[int], bool], guess: int = 1, limit: int = LIMIT) -> int:
    """The largest n in [0, limit] with ok(n), ok monotone (true then false), searched from ``guess``:
    gallop away from it, then bisect, so a right guess costs two calls."""
    guess = min(max(1, guess), limit)
    if ok(guess):
        lo, step = guess, 1
        while lo + step <= limit and ok(lo + step):
            lo, step = lo + step, step * 2
        hi = min(lo + step, limit + 1)
    else:
        hi, step, lo = guess, 1, 0
        while hi - step >= 1:
            if ok(hi - step):
                lo = hi - step
                break
            hi, step = hi - step, step * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo
