"""Decoding a shared workload step by step over a paged pool: block tables, reference counts, no torch.

``verify --decode`` with a shared prefix, ``n`` or beams (vLLM) grows every sequence one token a step
from its prompt to its full length and keeps, per KV-cache group, what vLLM's ``BlockPool`` keeps:

- a block per (group, position block) a sequence holds, found by what its tokens are: the blocks of
  the common prefix are one block for every request, the prompt's blocks one per request (its samples
  or beams), the rest each sequence's own -- as far as the engine's sharing rule (``spans``) shares
  them; a block another sequence already holds is referenced (``BlockPool.touch``: a reference
  count), one nobody holds is taken from the free list and written;
- sliding and chunked layers drop the blocks their token rule no longer holds (``held``); a block
  nobody references goes back to the free list (``BlockPool.free_blocks``);
- a sequence writes only into blocks it alone references: appending into a shared block would need a
  copy first. vLLM V1 never does it: the block holding the prompt's last token is each child's own
  (the hit stops at ``prompt - 1`` tokens, ``KVCacheManager.get_computed_blocks``) and is recomputed
  by every child -- ``own_prompt_blocks`` counts those copies. A write into a shared block is an error.

Every write is recorded with the token it stores (a tag: whose token at which position), so the tensor
side (``kvplan.verify.decode_shared``) can write them into the real pool and read every sequence's
tokens back through its block table.
"""

from __future__ import annotations

from collections.abc import Iterator

from kvplan.engines.layout import CacheLayout, GroupRule
from kvplan.engines.sharing import SharingRule, Workload
from kvplan.engines.tensors import BlockTable
from kvplan.record import dataclass
from kvplan.spec import Recurrent
from kvplan.verify.errors import VerifyError

COMMON, REQUEST, SEQUENCE = 0, 1, 2
"""Whose token a position holds: the common prefix's, the request's prompt's, the sequence's own."""

#: At most this many steps are checked (the first and the last always); the others are still stepped.
MAX_CHECKED_STEPS = 256
#: Most tokens x sequences x groups one decode simulation steps (bounded time: about a minute).
MAX_WORK = 20_000_000


def tag(kind: int, owner: int, position: int) -> int:
    """One token's identity, as an int64: what a slot must hold for a sequence reading it."""
    return (kind << 60) | (owner << 32) | position


@dataclass(frozen=True)
class GroupState:
    """One group's block tables at a step: every sequence holds the same count of blocks, from ``lo``."""

    table_index: int
    lo: int
    """Position block of each table's first column (sliding layers have dropped the ones before)."""
    rows: tuple[tuple[int, ...], ...]
    """Block ids per sequence, in position order."""
    distinct: int
    """Blocks referenced (by the reference counts)."""
    own_prompt_blocks: int
    """Blocks holding prompt tokens that are a sequence's own although other sequences have the same tokens."""


@dataclass(frozen=True)
class Step:
    step: int
    """Output tokens generated (0: just after the prefill)."""
    length: int
    """Tokens each sequence holds: prompt + step + speculative slots."""
    checked: bool
    groups: tuple[GroupState, ...]
    writes: tuple[tuple[int, tuple[int, ...], tuple[int, ...], tuple[int, ...]], ...]
    """Per group with writes: (table index, block ids, offsets in the block, tags)."""
    freed: bool = False
    """A block went back to the free list this step (it may be written again, by another sequence)."""


class _Group:
    """One KV-cache group's pool region: the free list, the reference counts, each sequence's blocks."""

    def __init__(self, index: int, table: BlockTable, rule: GroupRule, block: int | None = None) -> None:
        self.index, self.table, self.rule = index, table, rule
        # the group's own page size, else the layout's (token pools page all layers alike)
        self.block = rule.block_size or block or table.default_block_size
        self.recurrent = isinstance(rule.layer, Recurrent)
        self.free = list(range(table.first_block + table.blocks - 1, table.first_block - 1, -1))
        self.ref: dict[tuple[int, ...], list[int]] = {}  # key -> [block id, references]
        self.held: list[dict[int, tuple[int, ...]]] = [{} for _ in range(table.sequences)]
        self.shape: tuple[int, int, int, int] | None = None  # (lo, hi, shared blocks, request blocks)
        self.freed = False

    def take(self, key: tuple[int, ...], step: int) -> int:
        if not self.free:
            raise VerifyError(f"decode step {step}: layers {self.table.layers[0]}-{self.table.layers[-1]} need more "
                              f"blocks than the {self.table.blocks:,} the prediction gives their region")
        block = self.free.pop()
        self.ref[key] = [block, 1]
        return block

    def drop(self, key: tuple[int, ...]) -> None:
        entry = self.ref[key]
        entry[1] -= 1
        if entry[1] == 0:
            del self.ref[key]
            self.free.append(entry[0])
            self.freed = True

    def advance(self, t: int, length: int, before: int, sharing: SharingRule, now: Workload,
                writes: list[tuple[int, int, int]]) -> None:
        """Grow every sequence from ``before`` to ``length`` tokens; append (block, offset, tag) writes."""
        self.freed = False
        sequences, samples = self.table.sequences, now.samples
        if self.recurrent:  # one state per sequence, the same block throughout
            for seq in range(sequences):
                if not self.held[seq]:
                    self.take((SEQUENCE, seq, 0), t)
                    self.held[seq][0] = (SEQUENCE, seq, 0)
            self.shape = (0, 1, 0, 0)
            return
        block = self.block
        spans = sharing.spans(self.rule, now)
        if spans.across_requests % block or spans.across_samples % block:
            raise VerifyError(f"internal: {self.rule.kind} layers share {spans.across_requests} / "
                              f"{spans.across_samples} tokens, not whole blocks of {block}")
        held = self.rule.held(length)
        if held % block:
            raise VerifyError(f"internal: {self.rule.kind} layers hold {held} tokens, not whole blocks of {block}")
        hi = -(-length // block)
        shape = (hi - held // block, hi, spans.across_requests // block, spans.across_samples // block)
        lo, _, all_blocks, request_blocks = shape
        fast = shape == self.shape  # the same blocks as the last step: only the newest tokens to append
        self.shape = shape

        def wanted(seq: int) -> dict[int, tuple[int, ...]]:
            return {j: ((COMMON, j) if j < all_blocks else (REQUEST, seq // samples, j) if j < request_blocks
                        else (SEQUENCE, seq, j)) for j in range(lo, hi)}

        def release(mine: dict[int, tuple[int, ...]], want: dict[int, tuple[int, ...]]) -> None:
            for j, key in list(mine.items()):
                if want.get(j) != key:
                    self.drop(key)
                    del mine[j]

        if not fast and now.beam_width > 1:
            # vLLM's beam search sends a step's beams as new requests (LLM.beam_search calls LLM.generate,
            # max_tokens=1, once a step; generate runs the engine until every request finished), so the
            # last step's blocks are all freed (BlockPool.free_blocks) before any beam of this step is
            # allocated one: a block the window dropped or the cache now shares is never held twice
            for seq in range(sequences):
                release(self.held[seq], wanted(seq))
        for seq in range(sequences):
            mine = self.held[seq]
            if fast:
                self._append(seq, t, range(before, length), mine, writes, now)
                continue
            want = wanted(seq)
            release(mine, want)  # a running request frees its skipped blocks, then allocates (allocate_slots)
            for j, key in want.items():
                if j in mine:  # held since the last step: append the new tokens into it
                    self._append(seq, t, range(max(j * block, before), min((j + 1) * block, length)), mine, writes,
                                 now)
                elif key in self.ref:  # a cached block: referenced (BlockPool.touch), not written
                    self.ref[key][1] += 1
                    mine[j] = key
                else:  # a new block: the sequence computes every token it holds there
                    bid = self.take(key, t)
                    mine[j] = key
                    for position in range(j * block, min((j + 1) * block, length)):
                        writes.append((bid, position - j * block,
                                       expected_tag(seq, samples, now.prompt_len, now.shared_prefix, position)))

    def _append(self, seq: int, t: int, positions: range, mine: dict[int, tuple[int, ...]],
                writes: list[tuple[int, int, int]], now: Workload) -> None:
        block = self.block
        for position in positions:
            key = mine[position // block]
            bid, refs = self.ref[key]
            if refs != 1:
                raise VerifyError(f"decode step {t}: sequence {seq} would append into block {bid}, which {refs} "
                                  "sequences reference (a copy-on-write vLLM never needs)")
            writes.append((bid, position % block,
                           expected_tag(seq, now.samples, now.prompt_len, now.shared_prefix, position)))

    def state(self, prompt: int, prefix: int, samples: int) -> GroupState:
        lo, hi = (0, 1) if self.recurrent else self.shape[:2]  # type: ignore[index]  # advance() set shape first
        rows = tuple(tuple(self.ref[self.held[seq][j]][0] for j in range(lo, hi))
                     for seq in range(self.table.sequences))
        # own blocks holding tokens another sequence also has: the prompt's (siblings), or the prefix's
        common = prompt if samples > 1 else prefix
        own = 0 if self.recurrent else sum(1 for held in self.held for j, key in held.items()
                                           if key[0] == SEQUENCE and j * self.block < common)
        return GroupState(self.index, lo, rows, len(self.ref), own)


def check_bounded(tables: tuple[BlockTable, ...], workload: Workload) -> None:
    """Refuse (``field=decode``) a decode that would step more than ``MAX_WORK`` tokens x sequences x groups."""
    sequences = tables[0].sequences if tables else 0
    work = workload.context * sequences * len(tables)
    if work > MAX_WORK:
        raise VerifyError(f"decoding {sequences} sequences of {workload.context:,} tokens in {len(tables)} KV-cache "
                          f"group(s) steps {work:,} token-slots, more than verify's {MAX_WORK:,}: lower --batch, "
                          "--prompt-len or --output-len", field="decode")


def steps(layout: CacheLayout, tables: tuple[BlockTable, ...], workload: Workload, extra: int,
          sharing: SharingRule) -> Iterator[Step]:
    """Every step from the prefill (step 0) to ``workload.output_len - extra`` tokens generated.

    ``workload`` is the final one (its output includes the ``extra`` speculative slots each sequence
    holds); ``sharing`` the engine's rule bound to ``layout``. Yields every step; ``checked`` marks the
    first, the last and those where a group's tables changed shape (at most ``MAX_CHECKED_STEPS``).
    Refused (``field=decode``) beyond ``MAX_WORK`` sequence-group steps: bounded time."""
    rule_of: dict[int, GroupRule] = {}
    for rule in layout.groups:
        for index in range(rule.first_layer, rule.first_layer + rule.count):
            rule_of[index] = rule
    groups = [_Group(i, t, rule_of[t.layers[0]], layout.block_size) for i, t in enumerate(tables)]
    prompt, prefix = workload.prompt_len, workload.shared_prefix
    output = workload.output_len - extra
    if output < 0:
        raise VerifyError("internal: fewer output tokens than speculative slots")
    check_bounded(tables, workload)
    stride = max(1, -(-(output + 1) // MAX_CHECKED_STEPS))
    before, last_checked = 0, 0
    shapes: list[tuple[int, int, int, int] | None] = []
    for t in range(output + 1):
        length = prompt + t + extra
        now = Workload(prompt, t + extra, prefix, workload.n, workload.beam_width, workload.proposer)
        writes = []
        for g in groups:
            out: list[tuple[int, int, int]] = []
            g.advance(t, length, before, sharing, now, out)
            if out:
                ids, offsets, tags = zip(*out)
                writes.append((g.index, ids, offsets, tags))
        shape = [g.shape for g in groups]
        # the tables change shape at block boundaries (and when a window drops a block): check those,
        # at least ``stride`` steps apart
        checked = t in (0, output) or (shape != shapes and t - last_checked >= stride)
        if checked:
            shapes, last_checked = shape, t
        before = length
        states = tuple(g.state(prompt, prefix, workload.samples) for g in groups) if checked else ()
        yield Step(t, length, checked, states, tuple(writes), any(g.freed for g in groups))


def expected_tag(seq: int, samples: int, prompt: int, prefix: int, position: int) -> int:
    """The tag sequence ``seq`` (of requests of ``samples`` sequences) must read at ``position``."""
    if position < prefix:
        return tag(COMMON, 0, position)
    if position < prompt:
        return tag(REQUEST, seq // samples, position)
    return tag(SEQUENCE, seq, position)
