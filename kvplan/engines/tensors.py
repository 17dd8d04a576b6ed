"""The tensors an engine allocates for its KV cache, described without torch.

A ``TensorPlan`` names every buffer (shape, dtype) and every typed view a layer reads; each engine
package that ``verify`` supports builds one from its ``CacheLayout`` (``Engine.tensor_plan``), and
``kvplan.verify.allocate`` only executes it.
"""

from __future__ import annotations

from math import prod
from typing import TYPE_CHECKING

from kvplan.engines.layout import CacheLayout, GroupRule
from kvplan.errors import KvplanError
from kvplan.record import dataclass, field
from kvplan.spec import LayerSpec, LocalAttention

if TYPE_CHECKING:
    from kvplan.engines.sharing import SharedSpans, SharingRule, Workload


class VerifyError(KvplanError):
    """verify cannot run here (no torch, no CUDA, not enough memory) or refuses what was asked."""


#: Storage dtypes verify allocates (torch attribute names) and their element size in bytes.
DTYPE_BYTES: dict[str, int] = {
    "float32": 4, "bfloat16": 2, "float16": 2, "float8_e4m3fn": 1, "float8_e5m2": 1, "int8": 1, "uint8": 1,
}
PLAIN = {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16"}
FP8 = {"fp8": "float8_e4m3fn", "fp8_e4m3": "float8_e4m3fn", "fp8_inc": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2"}


@dataclass(frozen=True)
class ViewSpec:
    """A typed tensor one layer reads, inside a buffer: ``shape`` of ``dtype`` at byte ``offset``.

    With ``pitch`` the rows (``shape[0]``) are ``pitch`` bytes apart (a field of each state page);
    without, the view is contiguous."""

    layer: int
    role: str
    """K, V, K scale, V scale, latent, conv, ssm, page padding."""
    dtype: str
    shape: tuple[int, ...]
    offset: int = 0
    pitch: int | None = None

    @property
    def nbytes(self) -> int:
        return prod(self.shape) * DTYPE_BYTES[self.dtype]

    @property
    def end(self) -> int:
        """One past the last byte the view touches."""
        if self.pitch is None or not self.shape or self.shape[0] == 0:
            return self.offset + self.nbytes
        row = prod(self.shape[1:]) * DTYPE_BYTES[self.dtype]
        return self.offset + (self.shape[0] - 1) * self.pitch + row


@dataclass(frozen=True)
class BufferSpec:
    """One allocation: a typed tensor (transformers) or a raw int8 buffer (vLLM)."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    views: tuple[ViewSpec, ...]

    @property
    def nbytes(self) -> int:
        return prod(self.shape) * DTYPE_BYTES[self.dtype]


@dataclass(frozen=True)
class LayerInfo:
    """One layer with a cache: what the decode step reads."""

    index: int
    kind: str
    component: str
    layer: LayerSpec
    attend: int
    """Tokens per sequence the decode step attends to (0 for recurrent layers)."""
    layout: str
    """'bhtd' (transformers: [batch, heads, tokens, dim]) or 'paged' (vLLM: [blocks, block, heads, dim])."""


@dataclass(frozen=True)
class BlockTable:
    """How the sequences of one KV-cache group reference the blocks of its region of the pool.

    The region is ``blocks`` consecutive block ids from ``first_block``: ``once`` ids every sequence's
    table starts with (a common prefix), then ``per_request`` ids the samples or beams of one request
    share, then ``per_sequence`` ids each sequence owns. Without sharing ``once = per_request = 0``.
    Kept as counts (not lists) so a plan stays small whatever the batch; ``row`` expands one table."""

    layers: tuple[int, ...]
    """The layers (and padding slots) of the group: each views the region's blocks."""
    first_block: int
    requests: int
    samples: int
    once: int
    per_request: int
    per_sequence: int
    default_block_size: int = 16
    """Tokens per block where neither the group nor the layout gives a page size (the engine's default page)."""

    @property
    def sequences(self) -> int:
        return self.requests * self.samples

    @property
    def blocks(self) -> int:
        return self.once + self.requests * self.per_request + self.sequences * self.per_sequence

    def row(self, request: int, sample: int) -> list[int]:
        """The block ids of sequence ``sample`` of request ``request``, in position order."""
        own = self.first_block + self.once + self.requests * self.per_request
        seq = request * self.samples + sample
        return [*range(self.first_block, self.first_block + self.once),
                *range(self.first_block + self.once + request * self.per_request,
                       self.first_block + self.once + (request + 1) * self.per_request),
                *range(own + seq * self.per_sequence, own + (seq + 1) * self.per_sequence)]


@dataclass(frozen=True)
class TensorPlan:
    """What an engine allocates for ``batch`` sequences of ``context`` tokens."""

    buffers: tuple[BufferSpec, ...]
    layers: tuple[LayerInfo, ...]
    num_blocks: int | None = None
    group_size: int | None = None
    padding_layers: int = 0
    notes: tuple[str, ...] = field(default=())
    block_tables: tuple[BlockTable, ...] = ()
    """Paged engines: how each group's sequences reference its blocks (shared blocks once)."""


def component_names(layout: CacheLayout) -> dict[int, str]:
    """Group position -> component name; groups with the same rule and sizes share a component."""
    by_key: dict[tuple[object, ...], str] = {}
    used: set[str] = {"pool padding"}
    out: dict[int, str] = {}
    for i, g in enumerate(layout.groups):
        if not g.layer.own_cache:
            continue
        if g.padding:  # every unused slot of a vLLM hybrid pool, whatever its type, is one row
            out[i] = "pool padding"
            continue
        key = (g.kind, *g.cost_key)
        if key not in by_key:
            layer = g.layer
            base = f"{g.kind} {layer.span}" if isinstance(layer, LocalAttention) else g.kind
            name, n = base, 2
            while name in used:
                name, n = f"{base} #{n}", n + 1
            used.add(name)
            by_key[key] = name
        out[i] = by_key[key]
    return out




@dataclass(frozen=True)
class HeldUnits:
    """What one sequence of a layer group holds, in tokens: all of it, the part every request shares
    (``once``) and the part the samples or beams of a request share (``shared``, ``once`` included)."""

    held: int
    once: int = 0
    shared: int = 0
    spans: SharedSpans | None = None
    """The sharing rule's ``SharedSpans`` (None: nothing shared)."""

    def counted(self, unit: int) -> tuple[int, int, int]:
        """(units every request shares, units a request's samples share, units each sequence owns)."""
        return self.once // unit, (self.shared - self.once) // unit, (self.held - self.shared) // unit


def held_units(group: GroupRule, context: int, unit: int, workload: Workload | None, rule: SharingRule,
               engine: str) -> HeldUnits:
    """A group's held, per-request-shared and all-shared tokens, each whole pages or blocks of ``unit``
    (a page-granular engine's tables cannot say anything else: an internal error otherwise)."""
    held = group.held(context)
    kind = group.kind
    if held % unit:
        raise VerifyError(f"internal: {engine} {kind} layers hold {held} tokens, not whole units of {unit}")
    if workload is None:
        return HeldUnits(held)
    spans = rule.spans(group, workload)
    once = group.tokens.prefix_held(context, spans.across_requests)
    shared = group.tokens.prefix_held(context, max(spans.across_requests, spans.across_samples))
    if once % unit or shared % unit:
        raise VerifyError(f"internal: {engine} {kind} layers share {once} / {shared} tokens, not whole units of {unit}")
    return HeldUnits(held, once, shared, spans)
