"""The model description every other part of kvplan reads.

A ``ModelSpec`` says, layer by layer, what a model keeps in its cache while it decodes. Layers are
stored run-length encoded (``LayerSpec.count`` consecutive identical layers), which is both the YAML
format of ``model_specs/`` and what keeps sweeps fast: arithmetic runs per group, not per layer.

These are plain frozen dataclasses so that ``kvplan estimate`` starts without importing pydantic.
pydantic validates them at the edges (user YAML, JSON schema) through ``TypeAdapter``: the field
constraints below are cheap markers that pydantic reads only when it is asked to validate.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from kvplan.errors import SpecError


class _Bound:
    """A numeric bound that pydantic applies when validating (and shows in the JSON schema)."""

    def __init__(self, **bounds: int) -> None:
        self.bounds = bounds

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        schema = handler(source)
        schema.update(self.bounds)
        return schema


_POSITIVE = _Bound(gt=0)
_NON_NEGATIVE = _Bound(ge=0)
PositiveInt = Annotated[int, _POSITIVE]
NonNegativeInt = Annotated[int, _NON_NEGATIVE]

LayerKind = Literal["full", "sliding", "chunked", "mla", "recurrent", "shared", "none"]
LAYER_KINDS: tuple[str, ...] = ("full", "sliding", "chunked", "mla", "recurrent", "shared", "none")

# Model (activation) dtypes a checkpoint may declare, with their element size in bytes.
MODEL_DTYPE_BYTES: dict[str, int] = {"float32": 4, "bfloat16": 2, "float16": 2}

# The largest sizes kvplan accepts: far above any real model, low enough to catch typos.
_MAX_LAYERS = 100_000
_MAX_DIM = 1 << 20

_CONFIG = {"extra": "forbid", "use_attribute_docstrings": True}


@dataclass(frozen=True)
class LayerSpec:
    """``count`` consecutive decoder layers that cache the same thing.

    Which fields apply depends on ``kind``:
    full / sliding / chunked: kv_heads, head_dim (K), v_head_dim (V; defaults to head_dim),
    plus window (sliding) or chunk (chunked); mla: kv_lora_rank and qk_rope_head_dim (the cached
    latent), with num_heads, qk_nope_head_dim and v_head_dim for engines that expand it per head;
    recurrent: conv_dim, conv_kernel and ssm_state (shape of the state per sequence);
    shared: shares_with (index of the layer whose cache it reuses); none: nothing.
    """

    kind: LayerKind
    """What the layers cache: full, sliding, chunked, mla, recurrent, shared or none."""
    count: PositiveInt = 1
    """How many consecutive layers this entry stands for."""
    kv_heads: PositiveInt | None = None
    """Key/value heads (attention kinds)."""
    head_dim: PositiveInt | None = None
    """Key head dimension (attention kinds)."""
    v_head_dim: PositiveInt | None = None
    """Value head dimension when it differs from the key's (attention kinds; MLA: per-head V)."""
    window: PositiveInt | None = None
    """Sliding-window length in tokens (sliding)."""
    chunk: PositiveInt | None = None
    """Attention chunk length in tokens (chunked local attention)."""
    kv_lora_rank: PositiveInt | None = None
    """Width of the compressed KV latent (mla)."""
    qk_rope_head_dim: PositiveInt | None = None
    """Width of the shared rotary key cached beside the latent (mla)."""
    qk_nope_head_dim: PositiveInt | None = None
    """Per-head non-rotary key width, for engines that expand MLA per head (mla)."""
    num_heads: PositiveInt | None = None
    """Query heads, for engines that expand MLA per head (mla)."""
    mixer: str | None = None
    """Recurrent mixer family: mamba, mamba2, gated_delta_net, ... (recurrent)."""
    conv_dim: PositiveInt | None = None
    """Channels of the causal-convolution state (recurrent)."""
    conv_kernel: PositiveInt | None = None
    """Causal-convolution kernel width (recurrent)."""
    ssm_state: tuple[PositiveInt, ...] | None = None
    """Shape of the SSM / linear-attention state per sequence (recurrent)."""
    shares_with: NonNegativeInt | None = None
    """Index of the layer whose cache this one reuses (shared)."""

    __pydantic_config__ = _CONFIG

    def __post_init__(self) -> None:
        required = _REQUIRED[self.kind]
        missing = [name for name in required if getattr(self, name) is None]
        if missing:
            raise SpecError(f"a '{self.kind}' layer needs {', '.join(missing)}")
        for name in ("kv_heads", "head_dim", "v_head_dim", "kv_lora_rank", "qk_rope_head_dim",
                     "qk_nope_head_dim", "num_heads", "conv_dim", "conv_kernel"):
            value = getattr(self, name)
            if value is not None and not 0 < value <= _MAX_DIM:
                raise SpecError(f"{name}={value} is outside 1..{_MAX_DIM}")
        if self.count > _MAX_LAYERS:
            raise SpecError(f"count={self.count} layers is not a real model")

    @property
    def v_dim(self) -> int:
        """The value head dimension (the key's when none is given)."""
        return self.v_head_dim if self.v_head_dim is not None else self.head_dim  # type: ignore[return-value]


_REQUIRED: dict[str, tuple[str, ...]] = {
    "full": ("kv_heads", "head_dim"),
    "sliding": ("kv_heads", "head_dim", "window"),
    "chunked": ("kv_heads", "head_dim", "chunk"),
    "mla": ("kv_lora_rank", "qk_rope_head_dim"),
    "recurrent": ("conv_dim", "conv_kernel", "ssm_state"),
    "shared": ("shares_with",),
    "none": (),
}


@dataclass(frozen=True)
class RopeScaling:
    """Context extension declared by the config (``rope_scaling``)."""

    type: str
    """The scaling method: linear, dynamic, yarn, llama3, longrope, ..."""
    factor: float | None = None
    """Scaling factor, when the method has one."""
    original_max_position_embeddings: PositiveInt | None = None
    """Context length the model was pre-trained at."""
    extends_to: PositiveInt | None = None
    """Context length the scaling is meant to reach (original x factor), when known."""

    __pydantic_config__ = _CONFIG


@dataclass(frozen=True)
class ModelSpec:
    """A model's cache-relevant architecture, as kvplan computes with it."""

    id: str
    """Name kvplan knows the model by (usually the Hugging Face Hub id)."""
    model_type: str
    """Hugging Face ``model_type`` (llama, qwen3, deepseek_v3, ...)."""
    layers: tuple[LayerSpec, ...]
    """Decoder layers in order, run-length encoded."""
    dtype: Literal["float32", "bfloat16", "float16"] = "bfloat16"
    """Activation dtype of the checkpoint: the KV cache's dtype when kv_dtype is 'auto'."""
    source: str | None = None
    """Where the description came from: a Hub id, a file path or 'bundled'."""
    revision: str | None = None
    """Hub revision (commit) the config was read at, when known."""
    max_position_embeddings: PositiveInt | None = None
    """Longest context the config declares."""
    rope_scaling: RopeScaling | None = None
    """Context extension the config declares."""
    num_attention_heads: PositiveInt | None = None
    """Query heads of the attention layers."""
    hidden_size: PositiveInt | None = None
    """Model width."""
    vocab_size: PositiveInt | None = None
    """Vocabulary size."""
    mlp_width: PositiveInt | None = None
    """MLP width one token activates: intermediate_size for dense models, top-k x expert width plus
    shared experts for MoE (sizes activation memory in max-batch)."""
    num_experts: PositiveInt | None = None
    """Routed experts per MoE layer (MoE models)."""
    experts_per_token: PositiveInt | None = None
    """Routed experts each token activates (top-k; MoE models)."""
    routed_expert_params: PositiveInt | None = None
    """Parameters of all routed experts (MoE models): the part of the weights a decode step reads only
    for the experts its tokens are routed to."""
    mtp_layers: NonNegativeInt = 0
    """Multi-token-prediction layers the checkpoint ships beside its decoder layers (config.json
    ``num_nextn_predict_layers``: DeepSeek-V3 / R1 and GLM-4.5 ship 1, Kimi-K2 0; Qwen3-Next configs
    leave it out and ship 1). Speculative method ``mtp`` runs them; 0: the model has none to run."""
    params: PositiveInt | None = None
    """Parameter count of the published checkpoint, when known."""
    weights_bytes: PositiveInt | None = None
    """Bytes of the published checkpoint's weights (safetensors total), when known."""
    mtp_weights_bytes: NonNegativeInt | None = None
    """Bytes of weights_bytes that are the checkpoint's MTP layers (their decoder layer, projections and
    embedding / head copies), counted by the parameter builder in the same dtype rule as the total.
    Engines load them only for MTP speculation, so the budgets leave them out otherwise."""
    expert_weights_bytes: NonNegativeInt | None = None
    """Bytes of weights_bytes that are the routed experts of the decoder layers (MoE models; the MTP
    layers' own experts are in mtp_weights_bytes), counted by the parameter builder in the same dtype
    rule as the total. Expert parallelism spreads these over more GPUs than the rest of the weights
    (vLLM ``FusedMoEParallelConfig.make``: EP size = tp x dp). Not checked against weights_bytes (a spec
    whose weights_bytes is replaced keeps it): the budget caps it at the weights it loads."""
    weights_dtype: str | None = None
    """Storage dtype of the published weights (bfloat16, fp8, mxfp4, ...)."""
    weights_source: str | None = None
    """Where weights_bytes comes from."""
    aliases: tuple[str, ...] = ()
    """Other ids that name the same architecture (e.g. -Instruct variants)."""
    assumptions: tuple[str, ...] = field(default=())
    """What the reader had to assume to build this description."""

    __pydantic_config__ = _CONFIG

    def __post_init__(self) -> None:
        if not self.layers:
            raise SpecError("the model has no layers")
        total = sum(group.count for group in self.layers)
        if total > _MAX_LAYERS:
            raise SpecError(f"{total} layers is not a real model")
        if not 0 <= self.mtp_layers <= _MAX_LAYERS:
            raise SpecError(f"mtp_layers={self.mtp_layers} is outside 0..{_MAX_LAYERS}")
        if self.mtp_weights_bytes and (self.weights_bytes is None or self.mtp_weights_bytes > self.weights_bytes):
            raise SpecError(f"mtp_weights_bytes={self.mtp_weights_bytes} is not a part of weights_bytes="
                            f"{self.weights_bytes}")
        for index, layer in enumerate(self.expanded_layers()):
            if layer.kind == "shared" and layer.shares_with is not None and layer.shares_with >= index:
                raise SpecError(
                    f"layer {index} shares the cache of layer {layer.shares_with}, which is not an earlier layer"
                )

    @property
    def num_layers(self) -> int:
        return sum(group.count for group in self.layers)

    def expanded_layers(self) -> Iterator[LayerSpec]:
        """One entry per layer (each with count 1 semantics; the group object is reused)."""
        for group in self.layers:
            for _ in range(group.count):
                yield group

    def layer_kind_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for group in self.layers:
            counts[group.kind] = counts.get(group.kind, 0) + group.count
        return counts

    @property
    def dtype_bytes(self) -> int:
        return MODEL_DTYPE_BYTES[self.dtype]


def group_layers(layers: list[LayerSpec]) -> tuple[LayerSpec, ...]:
    """Run-length encode a per-layer list (each entry count 1) into groups."""
    from dataclasses import replace

    groups: list[LayerSpec] = []
    for layer in layers:
        if groups and replace(groups[-1], count=1) == replace(layer, count=1):
            groups[-1] = replace(groups[-1], count=groups[-1].count + layer.count)
        else:
            groups.append(layer)
    return tuple(groups)
