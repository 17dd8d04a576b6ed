"""Shared types of the budget modules."""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from typing import Literal

from kvplan.errors import UsageError
from kvplan.record import dataclass, field
from kvplan.spec import KVAttention, ModelSpec

GIB = 1 << 30
if TYPE_CHECKING:  # a type: no typing at run time
    Tag = Literal["given", "computed", "assumed"]


@dataclass(frozen=True)
class Settings:
    """Engine settings the user gave (None: the engine's default applies)."""

    gpu_memory_utilization: float | None = None
    kv_cache_memory_bytes: int | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    enforce_eager: bool = False
    mem_fraction_static: float | None = None
    free_gpu_memory_fraction: float | None = None
    weights_bytes: int | None = None
    """Weights per GPU, overriding the spec's checkpoint size split over the ranks."""
    activation_bytes: int | None = None
    non_torch_bytes: int | None = None
    cudagraph_bytes: int | None = None
    """Measured per-GPU items (a calibration from an engine log: kvplan.logs), replacing kvplan's estimates."""
    max_kv_tokens: int | None = None
    """A cap on the KV pool's tokens (TensorRT-LLM kv_cache_config.max_tokens): the pool holds the smaller of it
    (rounded up to whole blocks) and the tokens the memory allows."""
    engine_buffer_bytes: int | None = None
    """TensorRT-LLM's C++ runtime: its runtime buffers and decoder as a log prints them, replacing kvplan's sum."""
    usage_context: Literal["serve", "llm"] = "serve"
    """vLLM: how the engine is started (`vllm serve` or the `LLM` class); its batch defaults differ."""
    model_runner: str | None = None
    """The engine's model runner where it has two (vLLM: v1 or v2, VLLM_USE_V2_MODEL_RUNNER); None: its default."""
    vllm_engine: str | None = None
    """vLLM's engine, v0 or v1 (VLLM_USE_V1; V0 runs to 0.10, V1 is the default from 0.8); None: the release's."""
    trtllm_backend: str | None = None
    """TensorRT-LLM's backend, pytorch or engine (a prebuilt TensorRT engine); None: the release's default."""
    vllm_sampler: str | None = None
    """vLLM: the top-k/top-p path of its profiling run's sampler (sort, flashinfer, triton); None: the release's
    default (engines/vllm/sampler.py)."""
    language_model_only: bool = False
    """vLLM: the multimodal inputs are off (--language-model-only, or limit_mm_per_prompt 0 for every modality):
    no encoder runs in the profiling run (engines/vllm/encoder_profile.py)."""
    cpu_offload_bytes: int | None = None
    """Weights per GPU kept in host memory (vLLM --cpu-offload-gb); only vLLM's budget takes it."""
    expert_dp: int = 1
    """Data-parallel ranks that share one copy of the routed experts (expert parallelism across DP ranks:
    vLLM ``--data-parallel-size`` with a MoE model, SGLang / TensorRT-LLM attention DP): each GPU holds
    1 / (tp x pp x expert_dp) of them, and 1 / (tp x pp) of every other weight. 1: each replica its own."""
    device_used_bytes: int = 0
    """Memory other processes hold on each of this deployment's GPUs when its engine starts (deployments sharing
    a GPU, ``kvplan.share``); each engine's budget and start-up check read it by its own rule."""

    def __post_init__(self) -> None:
        if self.usage_context not in ("serve", "llm"):
            raise UsageError(f"'{self.usage_context}': choose serve or llm", field="usage_context")
        for name in ("gpu_memory_utilization", "mem_fraction_static", "free_gpu_memory_fraction"):
            value = getattr(self, name)
            if value is not None and not 0 < value <= 1:
                raise UsageError(f"{value} must be in (0, 1]", field=name)
        for name in ("kv_cache_memory_bytes", "max_num_batched_tokens", "max_num_seqs", "weights_bytes",
                     "cpu_offload_bytes", "max_kv_tokens"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise UsageError(f"{value} must be positive", field=name)
        if isinstance(self.expert_dp, bool) or not isinstance(self.expert_dp, int) or self.expert_dp < 1:
            raise UsageError(f"{self.expert_dp!r} must be a whole number of at least 1", field="ep")
        for name in ("activation_bytes", "non_torch_bytes", "cudagraph_bytes", "device_used_bytes",
                     "engine_buffer_bytes"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise UsageError(f"{value} must not be negative", field=name)


@dataclass(frozen=True)
class MemoryItem:
    name: str
    bytes: int
    tag: Tag
    note: str = ""


@dataclass(frozen=True)
class KvError:
    """kvplan's KV memory minus the engine's, as fractions of the GPU's memory, for about 90 % of deployments
    (5th and 95th percentiles of the errors on logs whose source was held out of every fitted size)."""

    low: float
    high: float
    basis: str
    """Which logs: the engine, its release band, how many logs and sources."""
    thin: bool = False
    """Too few logs for a 90 % band: low / high are the whole range of the few errors there are."""

    def bounds(self, kv_bytes: int, total_bytes: int) -> tuple[int, int]:
        """The engine's KV memory for ~90 % of deployments: [kv - high x total, kv - low x total]."""
        return int(kv_bytes - self.high * total_bytes), int(kv_bytes - self.low * total_bytes)


@dataclass(frozen=True)
class GpuBudget:
    """One GPU's memory as the engine would divide it."""

    total_bytes: int
    items: tuple[MemoryItem, ...]
    kv_cache_bytes: int
    """Memory left for the KV cache on this GPU (may be negative: the model does not fit)."""
    defaults: dict[str, float | int | str] = field(default_factory=dict)
    """Engine defaults kvplan applied (util, max_num_batched_tokens, ...), reported back."""
    assumptions: tuple[str, ...] = ()
    kv_error: KvError | None = None
    """How far the engine's own KV memory may lie from ``kv_cache_bytes`` (cross-validated on real logs); None
    where the KV memory is given or measured, or the engine has no such record."""

    def item(self, name: str) -> int:
        return sum(i.bytes for i in self.items if i.name == name)


TINY_KV_BYTES = 64 << 20


def given_kv_notes(settings: Settings) -> tuple[str, ...]:
    """A KV memory given in bytes that is implausibly small: said, since '30' meant '30GiB' more often."""
    given = settings.kv_cache_memory_bytes
    if given is not None and given < TINY_KV_BYTES:
        return (f"the KV memory given is {given:,} bytes (under 64 MiB): a bare number is bytes; "
                f"for GiB write e.g. {given}GiB",)
    return ()


def kv_item(settings: Settings, computed: int, how: str) -> MemoryItem:
    """The KV memory: the one the user gave (--kv-cache-memory), else what the budget leaves."""
    if settings.kv_cache_memory_bytes is not None:
        return MemoryItem("kv_cache", settings.kv_cache_memory_bytes, "given", "--kv-cache-memory")
    return MemoryItem("kv_cache", computed, "computed", how)


def weights_per_gpu(spec: ModelSpec, ranks: int, settings: Settings, mtp_rule: str | None = None) -> MemoryItem:
    """Weights one GPU holds: given, or the checkpoint split evenly over tp x pp ranks.

    ``mtp_rule``: the engine's reason (with its source) for not loading the checkpoint's MTP layers
    into the main model; the spec's ``mtp_weights_bytes`` are then left out. An MTP-speculating plan's
    spec carries ``mtp_weights_bytes`` None (the engine's ``speculate`` puts them back in the budget).
    """
    if settings.weights_bytes is not None:
        return MemoryItem("weights", settings.weights_bytes, "given", "--weights-bytes")
    if spec.weights_bytes is None:
        raise UsageError(f"{spec.id}: weights size unknown; give the weights' bytes per GPU", field="weights_bytes")
    loaded = spec.weights_bytes
    note = f"{spec.weights_bytes:,} B checkpoint"
    if mtp_rule is not None and spec.mtp_weights_bytes:
        loaded -= spec.mtp_weights_bytes
        note = (f"the checkpoint less its MTP layers ({spec.weights_bytes:,} - {spec.mtp_weights_bytes:,} B, "
                f"{spec.mtp_weights_bytes / GIB:.2f} GiB), which {mtp_rule}")
    if settings.expert_dp > 1:
        return _expert_parallel_weights(spec, loaded, ranks, settings.expert_dp, note)
    share = -(-loaded // ranks)
    note += f" / {ranks} ranks, split evenly" if ranks > 1 else ""
    return MemoryItem("weights", share, "computed", note)


def weights_on_gpu(weights: MemoryItem, offload_bytes: int, embedding_bytes: int = 0) -> MemoryItem:
    """The weights one GPU keeps with ``--cpu-offload-gb`` (``offload_bytes`` = ``int(gb x 1024**3)``): vLLM's
    rule, which SGLang's flag of that name follows (its budget reads it from here).

    ``vllm/model_executor/models/utils.py``: ``make_layers`` passes each decoder layer through
    ``maybe_offload_to_cpu``, which moves its parameters one by one to pinned host memory while the bytes
    moved so far are below the limit: the last one moved may overshoot it by up to one parameter, and
    the embedding and LM head (outside ``make_layers``) stay on the GPU. kvplan subtracts the limit
    itself, never more than the weights less ``embedding_bytes`` (one vocab x hidden matrix per GPU)."""
    moved = max(0, min(offload_bytes, weights.bytes - embedding_bytes))
    note = (f"{weights.note}; --cpu-offload-gb moves {moved:,} B of decoder-layer weights to host memory "
            "(vLLM stops at the first parameter that reaches the limit: up to one parameter more)")
    return MemoryItem("weights", weights.bytes - moved, weights.tag, note)


def _expert_parallel_weights(spec: ModelSpec, loaded: int, ranks: int, expert_dp: int, note: str) -> MemoryItem:
    """Expert parallelism across data-parallel ranks: the routed experts split over ranks x expert_dp GPUs (vLLM
    ``FusedMoEParallelConfig.make``: EP size = tp x dp, each device owns whole experts), everything else
    (attention, dense MLPs, shared experts, embeddings, lm_head) over the ranks of its own replica."""
    experts, how = spec.expert_weights_bytes, "counted by the parameter builder"
    if not experts and spec.routed_expert_params and spec.params and spec.weights_bytes:
        # no byte figure (a spec read from the Hub or a local checkpoint): the experts' share of the parameters
        experts = spec.weights_bytes * spec.routed_expert_params // spec.params
        how = (f"estimated as their share of the parameters ({spec.routed_expert_params:,} of "
               f"{spec.params:,})")
    if not experts:
        return MemoryItem("weights", -(-loaded // ranks), "computed",
                          note + (f" / {ranks} ranks, split evenly" if ranks > 1 else "")
                          + f"; no routed experts, so expert parallelism over {expert_dp} replicas changes nothing")
    experts = min(experts, loaded)
    rest = loaded - experts
    share = -(-rest // ranks) + -(-experts // (ranks * expert_dp))
    return MemoryItem("weights", share, "computed",
                      f"{note}: routed experts {experts:,} B ({experts / GIB:.2f} GiB, {how}) / {ranks * expert_dp} "
                      f"GPUs (expert parallel over {expert_dp} data-parallel replicas) + the rest {rest:,} B / "
                      f"{ranks} rank(s)")


def activation_bytes(spec: ModelSpec, tokens: int, tp: int, logits_rows: int,
                     sampler_bytes_per_logit: float | None = None, sampler_extra_bytes: int = 0,
                     forward_per_token: int | None = None) -> tuple[int, str]:
    """Peak activation of one forward pass over ``tokens`` tokens on one of ``tp`` ranks.

    A profile of the widest tensors alive at once: the MLP's gate/up output (2 x width / tp), a few
    hidden-size buffers (residual, norm, attention output, input), the q/k/v projection output, all
    in the activation dtype, plus fp32 logits for ``logits_rows`` sampled rows. Calibrated on the
    activation peaks vLLM logged (docs/accuracy.md); an estimate, tagged as one.

    ``sampler_bytes_per_logit``: an engine whose profile runs the sampler after the forward pass (vLLM)
    peaks at the larger of the two: the forward pass, or ``logits_rows x vocab`` logits times this many
    bytes (the fp32 logits and the sampler's copies of them), instead of the forward plus one fp32 copy;
    ``sampler_extra_bytes`` are buffers the forward pass leaves allocated while the sampler runs;
    ``forward_per_token``: the engine's own figure for the forward pass's bytes per token, where its code gives one.
    """
    hidden = spec.hidden_size or 4096
    width = spec.mlp_width or int(3.5 * hidden)
    heads = spec.num_attention_heads or 32
    attn = [layer for layer in spec.layers if isinstance(layer, KVAttention)]
    head_dim = attn[0].head_dim if attn else hidden // heads
    kv_heads = attn[0].kv_heads if attn else heads
    per_token = forward_per_token if forward_per_token is not None else \
        (2 * width // tp + 4 * hidden + (heads + 2 * kv_heads) * head_dim // tp) * spec.dtype_bytes
    vocab = spec.vocab_size or 32000
    if sampler_bytes_per_logit is not None:
        forward = tokens * per_token
        sampler = int(logits_rows * vocab * sampler_bytes_per_logit) + sampler_extra_bytes
        extra = f" + {sampler_extra_bytes:,} B kept from the forward" if sampler_extra_bytes else ""
        return max(forward, sampler), (f"max(forward {tokens:,} tokens x {per_token:,} B, sampler {logits_rows:,} x "
                                       f"{vocab:,} logits x {sampler_bytes_per_logit:g} B{extra})")
    logits = logits_rows * vocab * 4
    return tokens * per_token + logits, (f"{tokens:,} tokens x {per_token:,} B + {logits_rows} x "
                                         f"{spec.vocab_size or 32000:,} fp32 logits")
