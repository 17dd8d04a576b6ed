"""What a deployment asks of the KV cache (``Demand``) and what one replica's KV memory serves by an engine's
pool and admission rules (``KvCapacity``): what ``Engine.capacity`` reads and returns, and what the shared pool
rules (``token_pool.py``) compute with. The engine protocol (``protocol.py``) re-exports both.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True

from kvplan.record import dataclass

if TYPE_CHECKING:
    from kvplan.engines.speculative import SpeculativeLayout


@dataclass(frozen=True)
class Demand:
    """What a deployment asks of the KV cache."""

    max_model_len: int
    context: int
    batch: int
    limit: int = 1 << 26
    """The longest context worth searching: the model's own limit (or max_model_len, if longer)."""
    shared_prefix: int = 0
    """Leading tokens common to every request (stored as the engine's sharing rule stores them)."""
    proposer: str | None = None
    """The speculative method, where one runs (it can change what a prefix-cache hit shares)."""
    n: int = 1
    """Parallel samples per request: ``batch`` and the max batch then count requests of n sequences."""
    beam_width: int = 1
    """Beams per request (as ``n``)."""
    prompt_len: int | None = None
    """The prompt part of ``context`` where requests share something (None: all of it)."""
    gpu_name: str = ""
    """The GPU's name (vLLM's batch defaults read it: A100s get the smaller tier)."""
    gpu_vendor: str = ""
    """The GPU's vendor as the catalog names it ('nvidia', 'amd'; '' unknown): SGLang's AMD attention backend
    changes its memory fraction."""
    speculative: SpeculativeLayout | None = None
    """What speculative decoding adds, where it runs (SGLang's older releases size the draft apart)."""
    dp: int = 1
    """Data-parallel replicas (vLLM builds its all-reduce fusion workspace only at DP 1)."""

    @property
    def request_tokens(self) -> int:
        """The slots one request of max_model_len holds: its speculative slots too where the engine holds them past
        max_model_len (``SpeculativeLayout.capped_at_max_model_len``; plan.py ``_held_cap``)."""
        sp = self.speculative
        return self.max_model_len + (sp.extra_tokens if sp is not None and not sp.capped_at_max_model_len else 0)


@dataclass(frozen=True)
class KvCapacity:
    """What one replica's KV memory serves, by the engine's pool and admission rules."""

    block_size: int | None
    num_blocks: int | None
    """Pool blocks, for engines that report them (vLLM)."""
    kv_cache_tokens: int
    """The token count the engine logs at start-up."""
    max_concurrency: float
    concurrency_per_replica: bool
    """True where the figure is the engine's own (logged per engine instance, not times dp)."""
    max_batch: int
    """Sequences of ``context`` tokens one replica holds at once."""
    max_context: int
    """The longest context ``batch`` sequences can each have."""
    max_model_len_fit: int
    """The longest request one sequence can have (what an engine suggests when it refuses to start)."""
    request_bytes: int
    """KV bytes one request of max_model_len needs on one GPU."""
    fits: bool
    assumptions: tuple[str, ...] = ()
    admission_note: str = ""
    """Where admission counts more than a computed sequence holds (what verify's search can fit)."""
    state_slots: int | None = None
    """Recurrent-state slots of an engine that sizes them apart from the tokens (SGLang's
    ``max_mamba_cache_size``); None where the engine keeps none apart."""
