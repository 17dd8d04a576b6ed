"""What an engine's layout rules produce: how it holds each group of layers for one model and dtype.

An engine turns a ModelSpec and a KV dtype into a ``CacheLayout``: per group of identical layers,
the bytes per held token, the fixed bytes per sequence (recurrent state) and the ``TokenRule`` for how
many tokens a sequence of ``context`` tokens occupies. Everything downstream (estimate sweeps,
by-layer tables, pools, verify's tensor shapes) reads this.
"""

from __future__ import annotations


TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any, ClassVar, TypeVar

from kvplan.dtypes import KVDType
from kvplan.engines.rules import NO_TOKENS, AllTokens, TokenRule, WholePages
from kvplan.errors import UsageError
from kvplan.layouts.base import TokenCost
from kvplan.record import cached_property, dataclass, field
from kvplan.spec import LayerSpec, ModelSpec, NoCache, Recurrent, SharedKV


@dataclass(frozen=True)
class GroupRule:
    """How the engine holds ``count`` consecutive identical layers, per sequence."""

    refuses_points: ClassVar[bool] = False
    """True where ``layer_bytes`` may refuse one (context, batch) with a UsageError: a streamed sweep over
    such a group is computed whole before anything is printed, so a refusal still prints nothing."""

    layer: LayerSpec
    first_layer: int
    """Index of the group's first layer in the model."""
    token: TokenCost
    """Bytes per held token per layer (zero for recurrent and cache-less layers)."""
    tokens: TokenRule = NO_TOKENS
    """Tokens a sequence occupies in one layer of this group."""
    state: TokenCost | None = None
    """Fixed bytes per sequence per layer (recurrent state)."""
    block_size: int | None = None
    """Tokens per page of this group, for paged engines (vLLM may page layer types differently)."""
    cache_kind: str | None = None
    """The kind of cache the engine gives these layers where it differs from theirs (vLLM 0.10-0.12
    holds chunked layers as full attention)."""
    padding: bool = False
    """Unused layer slots the engine allocates like ``layer`` but no layer reads (vLLM pads the groups
    of hybrid models): counted in the bytes, shown apart from the model's layers."""

    @property
    def count(self) -> int:
        return self.layer.count

    @property
    def kind(self) -> str:
        return self.layer.kind

    @property
    def held_formula(self) -> str:
        """The token rule as text, for display only."""
        return self.tokens.formula()

    def held(self, context: int) -> int:
        return self.tokens.held(context)

    def tokens_for(self, context: int, batch: int) -> int:
        """Tokens ``batch`` sequences of ``context`` tokens occupy in one layer of this group."""
        return self.tokens.batch_tokens(context, batch)

    def layer_bytes(self, context: int, batch: int) -> int:
        """Bytes ``batch`` sequences of ``context`` tokens hold in one layer of this group."""
        state = batch * self.state.bytes if self.state is not None else 0
        return self.token.bytes * self.tokens_for(context, batch) + state

    def layer_bytes_many(self, contexts: Sequence[int], batch: int, layers: int = 1) -> list[int]:
        """``layers`` x ``layer_bytes`` at each of ``contexts`` (a sweep's block): the bytes per token and the state
        of all ``layers`` worked out once, one product and one sum per context (whole bytes: exact). A group that
        overrides ``layer_bytes`` overrides this too."""
        per_token = layers * self.token.bytes
        state = layers * batch * self.state.bytes if self.state is not None else 0
        return [per_token * t + state for t in self.tokens.batch_tokens_many(contexts, batch)]

    @property
    def cost_key(self) -> tuple[TokenRule, int, int]:
        """Groups with equal keys hold equal bytes per layer at every (context, batch)."""
        return (self.tokens, self.token.bytes, self.state.bytes if self.state is not None else 0)


HOST_POOL = "host"
"""``CacheLayout.pool`` of a cache the engine keeps in host memory (llama.cpp --no-kv-offload): the GPU holds
none of it and attention over it runs on the CPU."""


@dataclass(frozen=True)
class CacheLayout:
    engine: str
    engine_version: str
    kv_dtype: KVDType
    block_size: int | None
    """Tokens per page for paged engines; None where the engine does not page."""
    groups: tuple[GroupRule, ...]
    assumptions: tuple[str, ...] = field(default=())
    pool: Any = None
    """The engine's own pool structure for these layers (vLLM's KV-cache groups), where it has one."""

    def total_bytes(self, context: int, batch: int) -> int:
        """Bytes the engine holds for ``batch`` sequences of ``context`` tokens, all layers."""
        line = self._linear_bytes
        if line is not None:  # the same integers, summed once per layout rather than once per call
            per_token, state, page = line
            return batch * (per_token * (-(-context // page) * page) + state)
        return sum(count * g.layer_bytes(context, batch) for count, g in self._merged_groups)

    @cached_property
    def _merged_groups(self) -> tuple[tuple[int, GroupRule], ...]:
        """(layers, one group of them) per distinct ``cost_key``: groups with equal keys hold equal bytes per layer
        at every (context, batch), so their sum is one product (Gemma 3's interleaved windows: ~10 groups, 2 keys)."""
        merged: dict[Any, list[Any]] = {}
        for g in self.groups:
            key: tuple[type[GroupRule], object]
            try:
                key = (type(g), g.cost_key)
                hash(key)
            except TypeError:  # a rule holding a mutable value: a key of its own
                key = (type(g), id(g))
            if key in merged:
                merged[key][0] += g.count
            else:
                merged[key] = [g.count, g]
        return tuple((count, g) for count, g in merged.values())

    @cached_property
    def _linear_bytes(self) -> tuple[int, int, int] | None:
        """``(bytes per token, state bytes, page)`` with ``total_bytes(c, b) == b x (bytes per token x
        ceil_to(c, page) + state bytes)``, where every group holds all its tokens in whole pages of one size (or
        none) at whole bytes: searches over contexts and batches call ``total_bytes`` thousands of times.
        None for any other layout (windows, chunks, shared cells), which sums its groups each time."""
        per_token = state = 0
        page = 0
        for g in self.groups:
            rule = g.tokens
            if type(rule) is WholePages and type(rule.inner) is AllTokens and type(rule.page) is int and rule.page > 0:
                this = rule.page
            elif type(rule) is AllTokens:
                this = 1
            elif type(rule) is TokenRule:  # holds no token: its state only
                this = 0
            else:
                return None
            if type(g.token.bytes) is not int or (g.state is not None and type(g.state.bytes) is not int) \
                    or type(g.count) is not int:
                return None
            if this:
                if page and this != page:
                    return None
                page = this
                per_token += g.count * g.token.bytes
            if g.state is not None:
                state += g.count * g.state.bytes
        return per_token, state, page or 1


@dataclass(frozen=True)
class EngineOptions:
    """Per-run knobs an engine's rules depend on."""

    block_size: int | None = None
    """Override the engine's page size in tokens (vLLM --block-size, SGLang --page-size, ...)."""
    tp: int = 1
    """Tensor-parallel ranks: the layout is then what one rank holds."""
    swa_full: bool = False
    """Give sliding-window layers a full-size cache (llama.cpp --swa-full)."""
    async_scheduling: bool | None = None
    """Two batches in flight (vLLM's async scheduling); None: the engine version's default."""
    kv_cache: str | None = None
    """A cache other than the engine's default: 'quantized' (transformers' QuantizedCache)."""
    backend: str | None = None
    """The quantized cache's backend (transformers: quanto, hqq, fp8)."""
    nbits: int | None = None
    """Bits per quantized element (None: the backend's default)."""
    residual_length: int | None = None
    """Tokens kept in full precision between re-quantizations (None: the backend's default)."""
    q_group_size: int | None = None
    """Elements sharing one scale and zero point (None: the backend's default)."""
    axis_key: int | None = None
    axis_value: int | None = None
    """The backend's grouping axis for keys and values (None: the backend's default)."""
    prompt_len: int | None = None
    """Tokens of the prefill; the rest of the context was decoded one token at a time (None: the worst case)."""
    evict: tuple[tuple[str, int], ...] | None = None
    """A token budget per full-attention layer: (("sink", 4), ("window", 4092)) (StreamingLLM) or
    (("heavy", h), ("recent", r)) (H2O)."""
    press: str | None = None
    """An NVIDIA kvpress press applied at prefill (snapkv, knorm, pyramidkv, adakv, ...)."""
    compression_ratio: float | None = None
    """The press's fraction of prompt tokens to remove."""
    kv_offloading_bytes: int | None = None
    """A host-memory KV tier for the whole deployment (vLLM --kv-offloading-size)."""
    swap_space_bytes: int | None = None
    """Host swap space per GPU (vLLM V0 --swap-space)."""
    hicache_ratio: float | None = None
    """SGLang --enable-hierarchical-cache: host pool = ratio x the device pool (SGLang's default 2.0)."""
    hicache_size_gb: float | None = None
    """SGLang --hicache-size: host pool GB (10^9 B) per rank, instead of the ratio."""
    host_cache_bytes: int | None = None
    """TensorRT-LLM kv_cache_config.host_cache_size: bytes of host memory per rank for its secondary block pool."""
    offload_link: str | None = None
    """The GPU-host link an offload tier copies over (links.yaml; default pcie5-x16)."""
    lmcache: Any = None
    """vLLM with LMCacheConnectorV1: LMCache's settings, a mapping or sorted (name, value) pairs of its config
    names (chunk_size, max_local_cpu_size, ...; engines/vllm/lmcache.py), None: no LMCache."""
    no_kv_offload: bool = False
    """llama.cpp --no-kv-offload (-nkvo): the KV cache stays in host memory."""

    def __post_init__(self) -> None:
        # sizes are whole bytes (ints), 0 or more: a negative or float one planned negative or fractional blocks
        for name in ("kv_offloading_bytes", "swap_space_bytes"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise UsageError(f"{value!r} must be a whole number of bytes, 0 or more", field=name)


def cacheless_group(layer: Recurrent | SharedKV | NoCache, first: int, state: TokenCost | None = None) -> GroupRule:
    """A group that holds no tokens: recurrent layers (a fixed ``state`` per sequence), shared or none."""
    return GroupRule(layer, first, layer.token_cost(), NO_TOKENS, state=state)


def holds_nothing(layer: SharedKV | NoCache, first: int, context: object) -> GroupRule:
    """The rule of every engine's table for layers with no cache of their own (shared, none)."""
    return cacheless_group(layer, first)


if TYPE_CHECKING:
    C = TypeVar("C")
    KindRules = Mapping[type[LayerSpec], Callable[[Any, int, C], GroupRule]]
else:
    KindRules = dict  # the engines' tables import the name; what it says is for type checkers
"""An engine's one table of layer kinds: the kind's class -> its rule ``(layer, first layer index, the engine's
context) -> GroupRule``. Each rule takes the kind its entry names."""


def group_by_kind(rules: KindRules[C], layer: LayerSpec, first: int, context: C, engine: str) -> GroupRule:
    """The rule ``rules`` holds for this layer's kind; a kind the engine's table lacks is refused by name, never
    counted as 0 bytes."""
    rule = rules.get(type(layer))
    if rule is None:
        raise UsageError(f"{engine} has no cache rule for a '{layer.kind}' layer (layers {first} to "
                         f"{first + layer.count - 1}): kvplan cannot plan this model on it")
    return rule(layer, first, context)


def build_groups(spec: ModelSpec, make: Callable[[LayerSpec, int], GroupRule]) -> tuple[GroupRule, ...]:
    """``make(layer, first_layer_index)`` for every group of the model, in order."""
    return tuple(make(layer, first) for layer, first in zip(spec.layers, layer_index_ranges(spec)))


def layer_index_ranges(spec: ModelSpec) -> list[int]:
    """First layer index of every group."""
    firsts, index = [], 0
    for group in spec.layers:
        firsts.append(index)
        index += group.count
    return firsts


def check_kv_dtype(title: str, accepted: frozenset[str], kv_dtype: KVDType) -> None:
    if kv_dtype.name not in accepted:
        known = ", ".join(["auto", *sorted(accepted)])
        raise UsageError(f"{title} has no '{kv_dtype.name}' KV cache (it accepts: {known})", field="kv_dtype")


def no_tensor_parallel(title: str, options: EngineOptions) -> None:
    if options.tp != 1:
        raise UsageError(f"{title} does not split the KV cache by tensor parallelism here "
                         "(it places whole layers per GPU): use pipeline parallelism", field="tp")
