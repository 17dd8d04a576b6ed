"""The bytes a forward keeps alive, op by op: the activation peak where torch keeps no allocator statistics.

A ``TorchDispatchMode`` sees every tensor an op returns. Each new storage counts once, however many tensors view
it, from the op that made it until its last tensor is freed; the peak of that sum is what the pass held at its
widest moment. It is what ``max_memory_allocated`` measures less the allocator's rounding and the workspaces a
kernel takes without returning them (cuBLAS's, for one), so ``verify --activation`` uses it on the CPU, and
``tools/trace_activation.py`` and the hf activation tests use it to see which tensors the peak holds.
"""

from __future__ import annotations

import collections
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from kvplan.record import dataclass


@dataclass(frozen=True)
class LivePeak:
    bytes: int
    """The most bytes the storages made during the run held at once."""
    op: str
    """The op whose result reached the peak."""
    held: tuple[tuple[int, int, str], ...] = ()
    """With ``record``: at the peak, (bytes, storages, "dtype [shape] op that made them"), largest first."""


def trace(torch: Any, run: Callable[[], Any], exclude: Iterable[Any], *, record: bool = False,
          replace: dict[str, Callable[..., Any]] | None = None) -> tuple[Any, LivePeak]:
    """``run()``'s result and the peak of the storages it made; tensors in ``exclude`` (weights, inputs) and any
    storage they share are not counted. ``replace`` runs an op by name (``"scaled_dot_product_attention"``) through
    a stand-in, itself traced."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    before = {t.untyped_storage().data_ptr() for t in exclude}
    stand_ins = replace or {}
    live = _Storages(record)

    def dispatch(mode: Any, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        stand_in = stand_ins.get(func.overloadpacket.__name__)
        if stand_in is not None:
            with mode:
                return stand_in(*args, **kwargs)
        out = func(*args, **kwargs)
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                live.add(t, func, before)
        live.mark(func)
        return out

    # the mode is made with type(): a class statement over torch's untyped base fails the strict type check
    mode = type("LiveStorages", (TorchDispatchMode,), {"__torch_dispatch__": dispatch})()
    with mode:
        result = run()
    sizes: dict[str, int] = collections.defaultdict(int)
    counts: collections.Counter[str] = collections.Counter()
    for nbytes, what in live.at_peak:
        sizes[what] += nbytes
        counts[what] += 1
    held = tuple(sorted(((sizes[w], counts[w], w) for w in sizes), reverse=True))
    return result, LivePeak(live.peak, live.op, held)


class _Storages:
    """The storages alive now, each counted once from the op that made it until its last tensor is freed."""

    def __init__(self, record: bool) -> None:
        self.record = record
        self.held: dict[int, list[Any]] = {}  # storage address -> [bytes, live tensors, what]
        self.seen: set[int] = set()
        self.now = self.peak = 0
        self.op = ""
        self.at_peak: list[tuple[int, str]] = []

    def add(self, t: Any, func: Any, before: set[int]) -> None:
        if id(t) in self.seen:
            return
        storage = t.untyped_storage()
        ptr = storage.data_ptr()
        if ptr in before or not ptr:
            return
        entry = self.held.get(ptr)
        if entry is None:
            what = f"{str(t.dtype).removeprefix('torch.')} {list(t.shape)} {func}" if self.record else ""
            entry = self.held[ptr] = [int(storage.nbytes()), 0, what]
        if not entry[1]:
            self.now += entry[0]
        entry[1] += 1
        self.seen.add(id(t))
        weakref.finalize(t, self._gone, ptr, id(t))

    def _gone(self, ptr: int, tid: int) -> None:
        self.seen.discard(tid)
        entry = self.held.get(ptr)
        if entry is not None:
            entry[1] -= 1
            if not entry[1]:
                self.now -= entry[0]
                del self.held[ptr]

    def mark(self, func: Any) -> None:
        if self.now > self.peak:
            self.peak, self.op = self.now, str(func)
            if self.record:
                self.at_peak = [(e[0], e[2]) for e in self.held.values()]
