"""Executes a ``CachePlan`` with torch on one device, measures it, and frees everything again.

torch is imported here, lazily, and nowhere else in kvplan. Only plain device allocations
(``torch.empty`` on the device; never managed / unified memory). Before each allocation the free
memory is checked and an allocation that cannot fit is refused with a one-line ``VerifyError``; an
out-of-memory error frees everything and empties the cache before it is reported.

What is measured:
- CPU: the storage bytes of the tensors (``untyped_storage().nbytes()``); torch keeps no allocator
  statistics for the CPU, so reserved and driver views are absent.
- CUDA: ``torch.cuda.memory_allocated`` (the blocks the caching allocator handed out: each request
  rounded up to 512 B, or a whole segment where the allocator does not split it, see
  ``caching_allocator``), ``memory_reserved`` (segments the allocator took from the driver: requests
  up to 1 MiB share 2 MiB segments, 1 to 10 MiB share 20 MiB segments, larger ones get their own
  segment rounded up to 2 MiB), ``max_memory_allocated`` and the driver's ``mem_get_info`` before and
  after.
"""

from __future__ import annotations

import bisect
import gc
import os
import weakref
from collections.abc import Sequence
from typing import Any

from kvplan.record import dataclass
from kvplan.verify.errors import VerifyError
from kvplan.verify.shapes import BufferSpec, CachePlan, ViewSpec

MIN_BLOCK = 512
SMALL_SIZE = 1 << 20
SMALL_SEGMENT = 2 << 20
LARGE_SEGMENT = 20 << 20
MIN_LARGE_ALLOC = 10 << 20
ROUND_LARGE = 2 << 20

# Every tensor verify allocated and has not yet released (tests check it is empty afterwards).
_LIVE: dict[int, Any] = {}


def _track(tensor: Any) -> None:
    key = id(tensor)

    def forget(_ref: weakref.ref[Any]) -> None:
        _LIVE.pop(key, None)

    _LIVE[key] = weakref.ref(tensor, forget)


def import_torch() -> Any:
    import warnings

    # a torch wheel without numpy warns on its first tensor conversion; verify never uses numpy
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    try:
        import torch
    except ImportError:
        raise VerifyError("kvplan verify needs torch, which is not installed: pip install 'kvplan[verify]' "
                          "(CPU only: pip install torch --index-url https://download.pytorch.org/whl/cpu)") from None
    return torch


def live_tensors() -> int:
    """How many tensors verify allocated are still alive (0 once a run has returned)."""
    gc.collect()
    return sum(1 for ref in list(_LIVE.values()) if ref() is not None)


# --------------------------------------------------------------------------------------- device

@dataclass(frozen=True)
class DeviceInfo:
    spec: str
    """'cpu' or 'cuda:N' (N as torch numbers the visible devices)."""
    name: str
    total_bytes: int | None


def resolve_device(text: str | None) -> Any:
    """'cpu', 'cuda', 'cuda:N' or None (cuda:0) -> torch.device; a clear error where it cannot run."""
    torch = import_torch()
    raw = (text or "cuda:0").strip().lower()
    if raw == "cuda":
        raw = "cuda:0"
    try:
        device = torch.device(raw)
    except (RuntimeError, ValueError):
        raise VerifyError(f"'{text}' is not a device: use cpu or cuda:N", field="device") from None
    if device.type == "cpu":
        return torch.device("cpu")
    if device.type != "cuda":
        raise VerifyError(f"{raw}: verify measures on cuda:N or cpu", field="device")
    if not torch.cuda.is_available():
        build = "a CPU-only torch build" if torch.version.cuda is None else "no CUDA device is visible"
        raise VerifyError(f"no CUDA device here ({build}, torch {torch.__version__}): "
                          "run `kvplan verify ... --device cpu` to check the same tensors on the CPU")
    count = torch.cuda.device_count()
    index = device.index or 0
    if index >= count:
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        where = f" (CUDA_VISIBLE_DEVICES={visible})" if visible is not None else ""
        raise VerifyError(f"cuda:{index}: only {count} CUDA device(s) visible{where}", field="device")
    return torch.device("cuda", index)


def device_info(device: Any) -> DeviceInfo:
    torch = import_torch()
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        _, total = torch.cuda.mem_get_info(device)
        return DeviceInfo(f"cuda:{device.index}", props.name, int(total))
    return DeviceInfo("cpu", "cpu", cpu_total_bytes())


def cpu_total_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def cpu_available_bytes() -> int | None:
    """What the host, the container (cgroup) and ulimit leave (kvplan.verify.host_memory); None where unknown."""
    from kvplan.verify.host_memory import available_bytes

    return available_bytes()


def free_bytes(device: Any) -> int | None:
    """What a new allocation can still get: the driver's free memory plus the allocator's unused cache."""
    torch = import_torch()
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        cached = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        return int(free) + int(cached)
    return cpu_available_bytes()


# --------------------------------------------------------------------------------------- allocator model

def rounded(nbytes: int) -> int:
    """The caching allocator's block size for a request: whole 512 B units."""
    return -(-nbytes // MIN_BLOCK) * MIN_BLOCK if nbytes else 0


@dataclass(frozen=True)
class AllocatorModel:
    """What torch's CUDA caching allocator makes of requests made in order on an empty cache."""

    allocated: int
    """``memory_allocated`` growth: the blocks handed out."""
    reserved: int
    """``memory_reserved`` growth: the segments taken from the driver."""
    rounded: int
    """The requests rounded up to 512 B: ``allocated`` where every block was split to size."""
    unsplit: tuple[tuple[int, int], ...]
    """(request bytes, bytes its block holds beyond the 512 B rounding) for each block handed out whole."""

    @property
    def unsplit_bytes(self) -> int:
        return self.allocated - self.rounded


def caching_allocator(sizes: Sequence[int]) -> AllocatorModel:
    """Replays torch's native CUDA caching allocator (default settings) over ``sizes``, in order.

    c10/cuda/CUDACachingAllocator.cpp: a request is rounded up to 512 B (``round_size``); requests up to
    1 MiB use the small pool, larger ones the large pool; the smallest cached free block of the pool that
    fits is taken (``get_free_block``), else a new segment of 2 MiB, 20 MiB (1-10 MiB requests) or the
    request rounded up to 2 MiB (``get_allocation_size``). The block is split to size only if what is
    left is at least 512 B (small pool) or more than 1 MiB (large pool, ``should_split``); otherwise the
    whole block is handed out and ``memory_allocated`` counts all of it (``alloc_found_block`` adds
    ``block->size``). So a large buffer 0.5 KiB to 1 MiB short of a 2 MiB multiple is counted as that
    multiple: a cache whose per-layer buffers are not whole 2 MiB (sliding windows of 4,095 tokens, a
    window's extra block) shows more allocated than its tensors hold, although the reserved memory is
    the same either way. Zero-byte requests allocate nothing.
    """
    free: dict[bool, list[int]] = {True: [], False: []}  # per pool (small?): free block sizes, sorted
    allocated = reserved = plain = 0
    unsplit: list[tuple[int, int]] = []
    for n in sizes:
        if n <= 0:
            continue
        size = max(MIN_BLOCK, rounded(n))
        small = size <= SMALL_SIZE
        pool = free[small]
        at = bisect.bisect_left(pool, size)
        if at < len(pool):
            block = pool.pop(at)
        else:
            block = SMALL_SEGMENT if small else LARGE_SEGMENT if size < MIN_LARGE_ALLOC else \
                -(-size // ROUND_LARGE) * ROUND_LARGE
            reserved += block
        rest = block - size
        plain += size
        split = rest >= MIN_BLOCK if small else rest > SMALL_SIZE
        if split:
            bisect.insort(pool, rest)
            allocated += size
        else:
            allocated += block
            if rest:
                unsplit.append((n, rest))
    return AllocatorModel(allocated, reserved, plain, tuple(unsplit))


def segment_bytes(sizes: Sequence[int]) -> int:
    """Segments the caching allocator reserves for these requests, made in order on an empty cache."""
    return caching_allocator(sizes).reserved


def allocator_settings() -> str | None:
    """The allocator configuration the environment sets (``caching_allocator`` models the defaults), or None."""
    for name in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"):
        value = os.environ.get(name, "").strip()
        if value:
            return f"{name}={value}"
    return None


# --------------------------------------------------------------------------------------- snapshots

@dataclass(frozen=True)
class Snapshot:
    allocated: int | None
    reserved: int | None
    driver_used: int | None
    peak_allocated: int | None


def snapshot(device: Any) -> Snapshot:
    torch = import_torch()
    if device.type != "cuda":
        return Snapshot(None, None, None, None)
    torch.cuda.synchronize(device)
    free, total = torch.cuda.mem_get_info(device)
    return Snapshot(int(torch.cuda.memory_allocated(device)), int(torch.cuda.memory_reserved(device)),
                    int(total - free), int(torch.cuda.max_memory_allocated(device)))


def _delta(after: int | None, before: int | None) -> int | None:
    return None if after is None or before is None else after - before


# --------------------------------------------------------------------------------------- allocation

@dataclass
class Allocation:
    """Live tensors of one plan on one device; ``release()`` frees them."""

    plan: CachePlan
    device: Any
    buffers: list[Any]
    views: dict[tuple[int, str], Any]
    """(layer, role) -> typed tensor."""
    before: Snapshot

    def storage_bytes(self) -> int:
        return sum(int(t.untyped_storage().nbytes()) for t in self.buffers)

    def component_bytes(self) -> dict[str, int]:
        """Bytes of the typed views each component's layers read, measured on the tensors."""
        out: dict[str, int] = {}
        for (layer, _), view in self.views.items():
            name = self.plan.component_of(layer)
            out[name] = out.get(name, 0) + view.numel() * view.element_size()
        return out

    def release(self) -> None:
        torch = import_torch()
        self.views.clear()
        self.buffers.clear()
        gc.collect()
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.empty_cache()


def _oom_types(torch: Any) -> tuple[type[BaseException], ...]:
    types: list[type[BaseException]] = [getattr(torch.cuda, "OutOfMemoryError", RuntimeError)]
    if hasattr(torch, "OutOfMemoryError"):
        types.append(torch.OutOfMemoryError)
    return tuple(types)


def _is_cpu_oom(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "can't allocate memory" in text or "not enough memory" in text or "out of memory" in text


def allocate(plan: CachePlan, device: Any, *, fill: bool = False) -> Allocation:
    """Allocate every buffer of ``plan`` (refusing what cannot fit) and make its typed views."""
    torch = import_torch()
    total = plan.buffer_bytes
    free = free_bytes(device)
    need = segment_bytes([b.nbytes for b in plan.buffers]) if device.type == "cuda" else total
    if free is not None and need > free:
        raise VerifyError(f"the cache for batch {plan.batch} x {plan.context:,} tokens needs {_fmt(need)} on "
                          f"{_where(device)}, {_fmt(free)} is free: lower --batch or --context")
    before = snapshot(device)
    alloc = Allocation(plan, device, [], {}, before)
    try:
        for spec in plan.buffers:
            if device.type == "cuda":
                free = free_bytes(device)
                if free is not None and segment_bytes([spec.nbytes]) > free:
                    raise VerifyError(f"{spec.name} ({_fmt(spec.nbytes)}) does not fit: {_fmt(free)} free on "
                                      f"{_where(device)}")
            tensor = _empty(torch, spec, device)
            _track(tensor)
            alloc.buffers.append(tensor)
            if fill:
                tensor.view(torch.uint8).zero_()
            for view in spec.views:
                typed = make_view(torch, tensor, spec, view)
                _track(typed)
                alloc.views[(view.layer, view.role)] = typed
    except _oom_types(torch) as exc:
        alloc.release()
        raise VerifyError(f"out of memory on {_where(device)} allocating the cache for batch {plan.batch} "
                          f"({_fmt(total)}): everything freed; lower --batch or --context "
                          f"({str(exc).splitlines()[0][:120]})") from None
    except RuntimeError as exc:
        alloc.release()
        if _is_cpu_oom(exc):
            raise VerifyError(f"out of memory on {_where(device)} allocating {_fmt(total)}: everything freed; "
                              "lower --batch or --context") from None
        raise
    except BaseException:
        alloc.release()
        raise
    return alloc


def _empty(torch: Any, spec: BufferSpec, device: Any) -> Any:
    return torch.empty(spec.shape, dtype=getattr(torch, spec.dtype), device=device)


def make_view(torch: Any, tensor: Any, spec: BufferSpec, view: ViewSpec) -> Any:
    """The typed tensor ``view`` describes, sharing ``tensor``'s storage."""
    if len(spec.views) == 1 and view.offset == 0 and view.pitch is None and view.dtype == spec.dtype \
            and tuple(view.shape) == tuple(spec.shape):
        return tensor
    raw = tensor.view(torch.uint8).reshape(-1)
    dtype = getattr(torch, view.dtype)
    if view.pitch is None:
        chunk = raw[view.offset:view.offset + view.nbytes]
        return chunk.view(dtype).view(view.shape)
    rows = view.shape[0]
    row_bytes = view.nbytes // rows if rows else 0
    span = raw[view.offset:view.offset + (rows - 1) * view.pitch + row_bytes] if rows else raw[:0]
    strided = torch.as_strided(span, (rows, row_bytes), (view.pitch, 1)) if rows else span.view(0, 0)
    return strided.view(dtype).view(view.shape)


def _fmt(n: int) -> str:
    from kvplan.units import format_bytes

    return format_bytes(n)


def _where(device: Any) -> str:
    return "cpu" if device.type == "cpu" else f"cuda:{device.index}"


@dataclass(frozen=True)
class Measurement:
    storage_bytes: int
    allocated_bytes: int
    """torch.cuda.memory_allocated delta; the storage bytes on CPU."""
    reserved_bytes: int | None
    driver_bytes: int | None
    peak_allocated_bytes: int | None
    component_bytes: dict[str, int]
    allocator_bytes: int
    """What the caching allocator model (``caching_allocator``) predicts for ``allocated``."""
    segment_bytes: int
    """What it predicts for ``reserved`` on an empty cache."""
    rounded_bytes: int = 0
    """The buffers rounded up to 512 B (``allocator_bytes`` less the blocks handed out whole)."""
    unsplit_blocks: int = 0
    """Buffers whose segment the allocator did not split: counted whole by ``memory_allocated``."""


def measure(alloc: Allocation) -> Measurement:
    after = snapshot(alloc.device)
    before = alloc.before
    storage = alloc.storage_bytes()
    model = caching_allocator([b.nbytes for b in alloc.plan.buffers])  # verify allocates them in this order
    allocated = _delta(after.allocated, before.allocated)
    return Measurement(
        storage_bytes=storage,
        allocated_bytes=storage if allocated is None else allocated,
        reserved_bytes=_delta(after.reserved, before.reserved),
        driver_bytes=_delta(after.driver_used, before.driver_used),
        peak_allocated_bytes=_delta(after.peak_allocated, before.allocated),
        component_bytes=alloc.component_bytes(),
        allocator_bytes=model.allocated,
        segment_bytes=model.reserved,
        rounded_bytes=model.rounded,
        unsplit_blocks=len(model.unsplit),
    )


def allocate_weights(nbytes: int, pieces: int, device: Any) -> list[Any]:
    """Buffers standing for the model's weights (``pieces`` equal parts, e.g. one per layer)."""
    torch = import_torch()
    pieces = max(1, pieces)
    free = free_bytes(device)
    if free is not None and nbytes > free:
        raise VerifyError(f"the weights need {_fmt(nbytes)}, {_fmt(free)} is free on {_where(device)}", field="with_weights")
    part, rest = divmod(nbytes, pieces)
    out: list[Any] = []
    try:
        for i in range(pieces):
            size = part + (rest if i == pieces - 1 else 0)
            t = torch.empty(size, dtype=torch.uint8, device=device)
            _track(t)
            out.append(t)
    # a CPU allocation fails with RuntimeError; mypy does not read a starred tuple of exception types
    except (*_oom_types(torch), RuntimeError, MemoryError) as exc:  # type: ignore[misc]
        if isinstance(exc, RuntimeError) and not isinstance(exc, _oom_types(torch)) and not _is_cpu_oom(exc):
            raise
        out.clear()
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
        raise VerifyError(f"out of memory allocating {_fmt(nbytes)} of weights on {_where(device)}") from None
    return out


def allocator_notes(m: Measurement, predicted: int, buffers: int) -> list[str]:
    """Why ``memory_allocated`` differs from the prediction, where the allocator model says (CUDA only)."""
    notes: list[str] = []
    settings = allocator_settings()
    if settings is not None:
        notes.append(f"{settings}: verify's allocator model is torch's default caching allocator, so its expected "
                     "allocated and reserved figures may not apply")
    excess = m.allocated_bytes - predicted
    if m.unsplit_blocks and m.allocated_bytes == m.allocator_bytes and m.storage_bytes == predicted and excess:
        notes.append(f"memory_allocated is {excess:+,} B over the prediction, all of it the caching allocator's: "
                     f"{m.unsplit_blocks} of the {buffers} buffers fall 512 B to 1 MiB short of the free block they "
                     "take, which the allocator hands out whole (it splits a large block only when more than 1 MiB "
                     "is left), and memory_allocated counts whole blocks; the tensors hold exactly the prediction "
                     "and memory_reserved is the same either way")
    elif m.allocated_bytes != m.allocator_bytes:
        off = m.allocated_bytes - m.allocator_bytes
        notes.append(f"memory_allocated differs from verify's allocator model by {off:+,} B "
                     "(the model replays torch's default caching allocator on an empty cache: cached blocks left "
                     "before the run, --with-weights' segments or other allocator settings change it)")
    return notes
