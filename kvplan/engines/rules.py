"""How many tokens a layer holds: one small frozen class per rule.

An engine gives every group of layers a ``TokenRule``: the tokens one sequence of ``context`` tokens
occupies in one layer (whole blocks, a window, a chunk, n_ctx cells ...). Rules are values: two
groups with equal rules hold the same tokens at every context, so ``estimate`` merges them and
``verify`` names them by equality, never by their text. The text (``formula``) is rendered from the
fields for ``--explain``.
"""

from __future__ import annotations


TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Protocol
else:
    Protocol = object  # a protocol is for type checkers: at run time nothing subclasses or checks it

from kvplan.record import dataclass, replace


def ceil_to(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


@dataclass(frozen=True)
class TokenRule:
    """Base class: a rule that holds nothing (recurrent state, shared and cache-less layers)."""

    def held(self, context: int) -> int:
        """Tokens one sequence of ``context`` tokens occupies in one layer."""
        return 0

    def batch_tokens(self, context: int, batch: int) -> int:
        """Tokens ``batch`` sequences occupy in one layer (``batch x held`` unless the cache is shared)."""
        return batch * self.held(context)

    def held_many(self, contexts: Sequence[int]) -> list[int]:
        """``held`` at each of ``contexts``, in order: a sweep's block of points at once. A variant whose ``held``
        is a closed form overrides this with the same arithmetic over the list (no call per point); the
        tests hold every variant's to ``held``."""
        return [self.held(c) for c in contexts]

    def batch_tokens_many(self, contexts: Sequence[int], batch: int) -> list[int]:
        """``batch_tokens`` at each of ``contexts``; a variant that overrides ``batch_tokens`` overrides this too."""
        held = self.held_many(contexts)
        return held if batch == 1 else [batch * h for h in held]

    def prefix_held(self, context: int, prefix: int) -> int:
        """Of the tokens one sequence holds, those at positions below ``prefix`` (the part a shared
        prefix can cover; ``prefix`` is aligned to the rule's page by the engine's sharing rule)."""
        return 0

    @property
    def per_sequence(self) -> bool:
        """False where a whole batch shares one cache (llama.cpp's cells), so bytes are not batch-linear."""
        return True

    @property
    def windowed(self) -> bool:
        """True where the rule keeps a bounded part of a long sequence (windows, chunks)."""
        return False

    def formula(self) -> str:
        return "0"

    def with_block(self, block: int) -> TokenRule:
        """The same rule over pages of ``block`` tokens (vLLM's page unification raises blocks)."""
        return self

    def __str__(self) -> str:
        return self.formula()


NO_TOKENS = TokenRule()


@dataclass(frozen=True)
class AllTokens(TokenRule):
    """Every token of the sequence (transformers' DynamicCache, full attention)."""

    def held(self, context: int) -> int:
        return context

    def held_many(self, contexts: Sequence[int]) -> list[int]:
        return list(contexts)

    def prefix_held(self, context: int, prefix: int) -> int:
        return min(context, prefix)

    def formula(self) -> str:
        return "context"


@dataclass(frozen=True)
class KeepLast(TokenRule):
    """At most ``window - less`` tokens: a sliding window kept exactly (transformers, static caches)."""

    window: int
    less: int = 0

    def held(self, context: int) -> int:
        keep = self.window - self.less
        return context if context < keep else keep

    def held_many(self, contexts: Sequence[int]) -> list[int]:
        keep = self.window - self.less
        return [c if c < keep else keep for c in contexts]

    def prefix_held(self, context: int, prefix: int) -> int:
        start = max(0, context - (self.window - self.less))
        return max(0, min(context, prefix) - start)

    @property
    def windowed(self) -> bool:
        return True

    def formula(self) -> str:
        return f"min(context, {self.window} - {self.less})" if self.less else f"min(context, {self.window})"


@dataclass(frozen=True)
class WholePages(TokenRule):
    """``inner``'s tokens rounded up to whole pages of ``page`` tokens (token pools, paged caches)."""

    inner: TokenRule
    page: int

    def held(self, context: int) -> int:
        return ceil_to(self.inner.held(context), self.page)

    def held_many(self, contexts: Sequence[int]) -> list[int]:
        page = self.page
        return [-(-h // page) * page for h in self.inner.held_many(contexts)]

    def prefix_held(self, context: int, prefix: int) -> int:
        # whole pages of the prefix only: a page holding a token past the prefix is per sequence
        return min(self.held(context), self.inner.prefix_held(context, prefix) // self.page * self.page)

    @property
    def windowed(self) -> bool:
        return self.inner.windowed

    def with_block(self, block: int) -> TokenRule:
        return replace(self, page=block)

    def formula(self) -> str:
        inner = self.inner.formula()
        return inner if self.page == 1 else f"ceil({inner} / {self.page}) x {self.page}"


@dataclass(frozen=True)
class WindowBlocks(TokenRule):
    """vLLM sliding layers while the token at position ``context`` is written: the blocks from the one
    holding the first unskipped token to the last. Skipped tokens are those before
    ``computed - window + 1`` (``SlidingWindowManager.get_num_skipped_tokens``), and the scheduler frees
    with the tokens computed so far (``remove_skipped_blocks(request, total_computed - in_flight)``):
    ``computed = context - lag``, lag 1 with synchronous scheduling and 2 with async (one batch more in
    flight, so freeing lags one step)."""

    block: int
    window: int
    lag: int = 1

    def held(self, context: int) -> int:
        return (-(-context // self.block) - self._freed_blocks(context)) * self.block

    def held_many(self, contexts: Sequence[int]) -> list[int]:
        # ``held`` inlined: nothing is freed up to context window - 1 + lag, after that what ``_freed_blocks``
        # frees; before any token is computed (context <= lag) what it frees then
        block, lag, window = self.block, self.lag, self.window
        edge = window - 1 + lag
        early = max(0, 1 - window) // block
        return [(-(-c // block) - ((c - lag - window + 1) // block if c > edge else 0)) * block if c > lag
                else (-(-c // block) - early) * block for c in contexts]

    def _freed_blocks(self, context: int) -> int:
        computed = max(0, context - self.lag)
        return max(0, computed - self.window + 1) // self.block

    def prefix_held(self, context: int, prefix: int) -> int:
        # the same freeing as ``held``: with the scheduling lag, so a prefix block in the one-step gap is
        # still the shared one
        last = min(-(-context // self.block), prefix // self.block)
        return max(0, last - self._freed_blocks(context)) * self.block

    @property
    def windowed(self) -> bool:
        return True

    def with_block(self, block: int) -> TokenRule:
        return replace(self, block=block)

    def formula(self) -> str:
        return f"blocks of {self.block} covering the last {self.window} - 1 tokens{_lag_text(self.lag)}"


@dataclass(frozen=True)
class ChunkBlocks(TokenRule):
    """vLLM chunked local attention: the blocks from the start of the chunk holding the last computed
    token (``ChunkedLocalAttentionManager``: ``computed // chunk x chunk`` tokens skipped), with the
    same scheduling lag as ``WindowBlocks``: at a chunk boundary the finished chunk is still held."""

    block: int
    chunk: int
    lag: int = 1

    def _freed_blocks(self, context: int) -> int:
        computed = max(0, context - self.lag)
        return computed // self.chunk * self.chunk // self.block

    def held(self, context: int) -> int:
        return (-(-context // self.block) - self._freed_blocks(context)) * self.block

    def held_many(self, contexts: Sequence[int]) -> list[int]:
        block, lag, chunk = self.block, self.lag, self.chunk
        return [(-(-c // block) - (c - lag) // chunk * chunk // block) * block if c > lag
                else -(-c // block) * block for c in contexts]

    def prefix_held(self, context: int, prefix: int) -> int:
        last = min(-(-context // self.block), prefix // self.block)  # freed as ``held`` frees, lag included
        return max(0, last - self._freed_blocks(context)) * self.block

    @property
    def windowed(self) -> bool:
        return True

    def with_block(self, block: int) -> TokenRule:
        return replace(self, block=block)

    def formula(self) -> str:
        return f"blocks of {self.block} from the start of the current {self.chunk}-token chunk{_lag_text(self.lag)}"


def _lag_text(lag: int) -> str:
    return ", freed one step late (async scheduling)" if lag == 2 else ""


@dataclass(frozen=True)
class UnifiedCells(TokenRule):
    """llama.cpp's unified cache: ``batch x context`` cells for the whole batch, padded to ``pad``."""

    pad: int

    def held(self, context: int) -> int:
        return ceil_to(context, self.pad)

    def batch_tokens(self, context: int, batch: int) -> int:
        return ceil_to(context * batch, self.pad)

    def batch_tokens_many(self, contexts: Sequence[int], batch: int) -> list[int]:
        pad = self.pad
        return [-(-(c * batch) // pad) * pad for c in contexts]

    @property
    def per_sequence(self) -> bool:
        return False

    def formula(self) -> str:
        return f"pad{self.pad}(batch x context)"


@dataclass(frozen=True)
class SlidingCells(TokenRule):
    """llama.cpp's sliding-window cache: ``min(n_ctx, window x n_seq + n_ubatch)`` cells, padded."""

    window: int
    ubatch: int
    pad: int

    def held(self, context: int) -> int:
        return self.batch_tokens(context, 1)

    def batch_tokens(self, context: int, batch: int) -> int:
        return ceil_to(min(context * batch, self.window * batch + self.ubatch), self.pad)

    def batch_tokens_many(self, contexts: Sequence[int], batch: int) -> list[int]:
        pad, cap = self.pad, self.window * batch + self.ubatch
        return [-(-(c * batch if c * batch < cap else cap) // pad) * pad for c in contexts]

    @property
    def per_sequence(self) -> bool:
        return False

    @property
    def windowed(self) -> bool:
        return True

    def formula(self) -> str:
        return f"pad{self.pad}(min(batch x context, {self.window} x batch + {self.ubatch}))"


@dataclass(frozen=True)
class QuantizedResidual(TokenRule):
    """transformers' ``QuantizedLayer`` (``src/transformers/cache_utils.py``, ``QuantizedLayer.update``): every
    token is held, the prefill quantized at once, decoded tokens kept in full precision until the residual
    reaches ``residual_length``, when the whole layer is re-quantized and the residual emptied. After
    ``g`` decoded tokens the residual holds ``g mod residual_length``. ``prompt_len`` None: the largest
    residual any prefill leaves, ``min(residual_length - 1, context - 1)``. ``residual_length`` 0 keeps no
    residual (the fp8 backend appends quantized tokens). Bytes are the backend's, per batch
    (``per_sequence`` is False): scales are shared across the batch."""

    residual_length: int
    prompt_len: int | None = None

    def held(self, context: int) -> int:
        return context

    @property
    def per_sequence(self) -> bool:
        return False

    def split(self, context: int) -> tuple[int, int]:
        """(quantized, full-precision) tokens of one sequence of ``context`` tokens."""
        r = self.residual_length
        if r <= 1:  # transformers re-quantizes at every step when residual + 1 >= residual_length
            return context, 0
        if self.prompt_len is None:
            residual = min(r - 1, context - 1)
        else:
            residual = (context - self.prompt_len) % r if context > self.prompt_len else 0
        return context - residual, residual

    def formula(self) -> str:
        r = self.residual_length
        if r <= 1:
            return "context, all quantized"
        if self.prompt_len is None:
            return f"context: min({r} - 1, context - 1) in full precision (worst case), the rest quantized"
        return (f"context: (context - {self.prompt_len}) mod {r} in full precision, the rest quantized")


@dataclass(frozen=True)
class SinkWindow(TokenRule):
    """StreamingLLM's attention sinks plus a recent window, or H2O's heavy hitters plus a recent window: at
    most ``keep + recent`` tokens (mit-han-lab/streaming-llm ``streaming_llm/kv_cache.py``
    ``StartRecentKVCache.__call__``; FMInference/H2O ``h2o_hf/utils_real_drop/modify_llama.py``
    ``H2OKVCache_LayerWise.__call__``: ``cache_size = hh_size + recent_size``)."""

    keep: int
    recent: int
    keep_name: str = "sink"

    def held(self, context: int) -> int:
        budget = self.keep + self.recent
        return context if context < budget else budget

    def held_many(self, contexts: Sequence[int]) -> list[int]:
        budget = self.keep + self.recent
        return [c if c < budget else budget for c in contexts]

    @property
    def windowed(self) -> bool:
        return True

    def formula(self) -> str:
        return f"min(context, {self.keep} {self.keep_name} + {self.recent} recent)"


class KeptPrompt(Protocol):
    """How many of a prompt's tokens a press keeps (``hf/eviction.py``: a ratio, or PyramidKV's per-layer share)."""

    def kept(self, tokens: int) -> int: ...

    def formula(self, tokens: str) -> str: ...


@dataclass(frozen=True)
class PrefillKept(TokenRule):
    """A press that compresses the prompt once, at prefill, and appends decoded tokens whole (NVIDIA kvpress
    ``BasePress.forward_hook`` acts only while prefilling): ``kept(prompt) + (context - prompt)``.
    ``kept`` is a frozen ``KeptPrompt``; ``prompt_len`` None: the whole context was the prompt."""

    kept: KeptPrompt
    prompt_len: int | None = None

    def held(self, context: int) -> int:
        prompt = context if self.prompt_len is None or self.prompt_len > context else self.prompt_len
        return int(self.kept.kept(prompt)) + context - prompt

    def formula(self) -> str:
        if self.prompt_len is None:
            return self.kept.formula("context")
        return f"{self.kept.formula(str(self.prompt_len))} + (context - {self.prompt_len})"
