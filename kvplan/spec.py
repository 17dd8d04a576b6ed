"""The model description every other part of kvplan reads.

A ``ModelSpec`` says, layer by layer, what a model keeps in its cache while it decodes. Layers are
stored run-length encoded (``LayerSpec.count`` consecutive identical layers), which is both the YAML
format of ``model_specs/`` and what keeps sweeps fast: arithmetic runs per group, not per layer.

Each layer group is an object of its kind's class (``FullAttention``, ``SlidingWindow``, ``ChunkedLocal``,
``MLA``, ``Recurrent``, ``SharedKV``, ``NoCache``; one module each in ``kvplan.layouts``), named in YAML by
its ``kind``. These are plain frozen dataclasses so that ``kvplan estimate`` starts without importing
pydantic. pydantic validates them at the edges (user YAML, JSON schema) through ``TypeAdapter``: the field
constraints are cheap markers that pydantic reads only when it is asked to validate.
"""

from __future__ import annotations


TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Annotated, Any, Literal

from kvplan.errors import SpecError
from kvplan.layouts.base import (  # the kind classes' base, and the bounds ModelSpec shares with them
    CONFIG as _CONFIG,
)
from kvplan.layouts.base import (
    KINDS,
    Deferred,
    LayerSpec,
    NonNegativeInt,
    PositiveInt,
)
from kvplan.layouts.base import (
    MAX_LAYERS as _MAX_LAYERS,
)
from kvplan.record import dataclass, field, field_names

# each kind's module registers its class as it loads, in this order (the order the kinds are listed in)
from kvplan.layouts.full import FullAttention, KVAttention, LocalAttention  # isort: skip
from kvplan.layouts.sliding import SlidingWindow  # isort: skip
from kvplan.layouts.chunked import ChunkedLocal  # isort: skip
from kvplan.layouts.mla import MLA  # isort: skip
from kvplan.layouts.recurrent import Recurrent  # isort: skip
from kvplan.layouts.shared import NoCache, SharedKV  # isort: skip

__all__ = [
    "KINDS", "LAYER_KINDS", "MLA", "MODEL_DTYPE_BYTES", "AnyLayer", "ChunkedLocal", "FullAttention", "KVAttention",
    "LayerSpec", "LocalAttention", "ModelSpec", "NoCache", "NonNegativeInt", "PositiveInt", "Recurrent",
    "RopeScaling", "SharedKV", "SlidingWindow", "group_layers", "layer_from_fields",
]

LAYER_KINDS: tuple[str, ...] = tuple(KINDS)
"""The kinds a spec may name, one class each (kvplan.layouts)."""

# Model (activation) dtypes a checkpoint may declare, with their element size in bytes.
MODEL_DTYPE_BYTES: dict[str, int] = {"float32": 4, "bfloat16": 2, "float16": 2}


def layer_from_fields(fields: dict[str, Any]) -> LayerSpec:
    """The kind class a mapping names with its ``kind`` (``{"kind": "full", "kv_heads": 8, ...}``), built from
    the rest; an unknown kind, or a missing field, is refused by name."""
    return LayerSpec(**fields)


class _OneOfTheKinds:
    """For pydantic only: a layer group is validated as the class its ``kind`` names (a tagged union), so a
    missing field names the field of that kind and the JSON schema shows each kind's own fields."""

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        from typing import Annotated, Union

        from pydantic import Discriminator

        return handler.generate_schema(Annotated[Union[tuple(KINDS.values())], Discriminator("kind")])


if TYPE_CHECKING:
    AnyLayer = Annotated[LayerSpec, _OneOfTheKinds()]
else:  # made by layouts.base.typing_names when pydantic first reads the spec
    AnyLayer = Deferred(lambda t: t.Annotated[LayerSpec, _OneOfTheKinds()])


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
    layers: tuple[AnyLayer, ...]
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
            layer.check_position(index)

    def __hash__(self) -> int:
        """The hash of the fields, as a frozen dataclass's, worked out once per instance: a spec is in every plan's
        cache key (``kvplan check`` looks thousands up, each hash walking the layer groups). Kept beside the
        instance, not in it: a pickled copy must hash afresh in its own process."""
        found = _HASHES.get(id(self))
        if found is not None and found[0] is self:
            return found[1]
        value = hash(tuple(getattr(self, name) for name in _HASHED))
        if len(_HASHES) >= 1024:  # bounded: the specs of one run; the entry holds the spec so its id stays its own
            _HASHES.clear()
        _HASHES[id(self)] = (self, value)
        return value

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


_HASHES: dict[int, tuple[ModelSpec, int]] = {}
_HASHED: tuple[str, ...] = field_names(ModelSpec)  # every field is compared, so hashed
"""The fields a spec's hash reads (those its dataclass hash reads)."""


def group_layers(layers: list[LayerSpec]) -> tuple[LayerSpec, ...]:
    """Run-length encode a per-layer list (each entry count 1) into groups."""
    from kvplan.record import replace

    groups: list[LayerSpec] = []
    for layer in layers:
        if groups and replace(groups[-1], count=1) == replace(layer, count=1):
            groups[-1] = replace(groups[-1], count=groups[-1].count + layer.count)
        else:
            groups.append(layer)
    return tuple(groups)
