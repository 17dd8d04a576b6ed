"""The parameter side of a family: the list of weight tensors a checkpoint stores, built per family.

A family's parameter rule receives a :class:`Counter` and adds tensors following the module layout
of the transformers modeling file it cites. The geometry (layers, hidden size, heads, KV heads, head
size, vocabulary) comes from the same :class:`ConfigReader` that builds the layers, so both sides
agree on every field, alias and default; the geometry's assumptions are the ModelSpec's, the
counter's ``notes`` are the count's own (how a tensor was counted).

Only the standard library is imported (no torch, no pydantic).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cached_property
from typing import Any, Protocol

from kvplan.errors import ConfigError
from kvplan.record import dataclass, field
from kvplan.sources.families.reader import (
    MAX_POSITIONS,
    MAX_VOCAB,
    VOCAB_ALIASES,
    ConfigReader,
)

COMPONENTS = (
    "embed", "attention", "ssm", "mlp", "experts", "shared_experts", "router", "norms", "lm_head",
    "mtp", "vision", "audio", "other",
)
"""Keys of ``ParamCount.by_component`` (always all present). ``ssm``: Mamba / linear-attention
mixers; ``mtp``: multi-token-prediction layers a checkpoint ships beside the main model; ``vision``:
vision tower and multimodal projector; ``audio``: audio tower and its projector (gemma4)."""




@dataclass(frozen=True)
class Tensor:
    """One weight (or ``count`` identical ones, e.g. the experts of a layer)."""

    component: str
    module: str
    """Module path in transformers naming (``model.layers.3.self_attn.q_proj``), for matching
    ``quantization_config.modules_to_not_convert``."""
    shape: tuple[int, ...]
    """``(out_features, in_features)`` for a linear weight."""
    count: int = 1
    linear: bool = False
    """A weight matrix of a decoder layer that FP8 / MXFP4 checkpoints quantize."""
    fp32: bool = False
    """Stored as float32 whatever the checkpoint dtype (DeepSeek-style ``e_score_correction_bias``)."""

    @property
    def numel(self) -> int:
        return math.prod(self.shape) * self.count


@dataclass(frozen=True)
class ParamCount:
    total: int
    by_component: dict[str, int]
    assumptions: tuple[str, ...] = ()
    tensors: tuple[Tensor, ...] = field(default=(), compare=False, repr=False)
    """The tensors counted (for the per-matrix quantization rules of ``weights_bytes``)."""


class FamilyTraits(Protocol):
    """What a count reads of its family (``registry.Family``, which names this module's ``Counter`` in its
    parameter rule: the registry stands above the counter, never the other way round)."""

    @property
    def tied_by_default(self) -> bool: ...

    def mtp_count(self, reader: ConfigReader) -> int: ...


class Counter:
    """The tensor list of one config being counted, over the reader that also builds its layers."""

    def __init__(self, reader: ConfigReader, family: FamilyTraits):
        self.reader = reader
        self.family = family
        self.top = reader.top
        self.cfg: dict = reader.cfg
        self.model_type = reader.model_type
        self.text_type = str(self.cfg.get("model_type") or self.model_type)
        self.tensors: list[Tensor] = []
        self.notes: list[str] = []

    # ---- config access (fields that are not shared geometry) ----
    def get(self, *names: str, default: Any = None) -> Any:
        for name in names:
            if name in self.cfg and self.cfg[name] is not None:
                return self.cfg[name]
        return default

    def int(self, *names: str, default: int | None = None, why: str | None = None,
            maximum: int = MAX_POSITIONS) -> int:
        """A non-negative integer field (``maximum`` bounds the work a hostile value can cause)."""
        value = self.get(*names)
        if value is None:
            if default is None:
                raise ConfigError(f"config has no {names[0]} (needed to count parameters)")
            if why:
                self.note(f"{names[0]} absent: assumed {default} ({why})")
            return default
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                or value != int(value) or value < 0:
            raise ConfigError(f"{names[0]}={value!r} is not a non-negative integer")
        if value > maximum:
            raise ConfigError(f"{names[0]}={int(value)} is larger than any real model (limit {maximum})")
        return int(value)

    def flag(self, name: str, default: bool) -> bool:
        value = self.cfg.get(name)
        return default if value is None else bool(value)

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    # ---- shared geometry: the reader's, read once ----
    @cached_property
    def hidden(self) -> int:
        return self.reader.hidden_size()  # type: ignore[return-value]

    @cached_property
    def layers(self) -> int:
        return self.reader.num_layers()

    @cached_property
    def vocab(self) -> int:
        return self.reader.int_field(*VOCAB_ALIASES, maximum=MAX_VOCAB)  # type: ignore[return-value]

    @cached_property
    def heads(self) -> int:
        return self.reader.num_heads()

    @cached_property
    def kv_heads(self) -> int:
        return self.reader.kv_heads()

    @cached_property
    def head_dim(self) -> int:
        return self.reader.head_dim()

    def tied(self) -> bool:
        value = self.top.get("tie_word_embeddings", self.cfg.get("tie_word_embeddings"))
        if value is None:
            return self.family.tied_by_default
        return bool(value)

    # ---- tensor helpers ----
    def add(self, component: str, module: str, *shape: int, count: int = 1, linear: bool = False,
            fp32: bool = False) -> None:
        self.tensors.append(Tensor(component, module, tuple(int(s) for s in shape), count, linear, fp32))

    def linear(self, component: str, module: str, n_in: int, n_out: int, *, bias: bool = False,
               count: int = 1, quantizable: bool = True) -> None:
        self.add(component, module, n_out, n_in, count=count, linear=quantizable)
        if bias:
            self.add(component, module + ".bias", n_out, count=count)

    def norm(self, module: str, dim: int, *, bias: bool = False, component: str = "norms") -> None:
        self.add(component, module, dim)
        if bias:
            self.add(component, module + ".bias", dim)

    def embed(self, module: str = "model.embed_tokens") -> None:
        self.add("embed", module, self.vocab, self.hidden)

    def lm_head(self, *, bias: bool = False) -> None:
        if self.tied():
            self.note("tie_word_embeddings: lm_head shares the embedding matrix (not counted twice)")
            return
        self.add("lm_head", "lm_head", self.vocab, self.hidden)
        if bias:
            self.add("lm_head", "lm_head.bias", self.vocab)


# ------------------------------------------------------------------------------------------------
# Pieces several families share


def gqa_attention(b: Counter, prefix: str, *, q_bias: bool, kv_bias: bool, o_bias: bool,
                  component: str = "attention", q_out_factor: int = 1) -> None:
    """q/k/v/o projections (``LlamaAttention``); phi3's fused qkv_proj has the same element count."""
    h, nh, nkv, hd = b.hidden, b.heads, b.kv_heads, b.head_dim
    b.linear(component, f"{prefix}.q_proj", h, nh * hd * q_out_factor, bias=q_bias)
    b.linear(component, f"{prefix}.k_proj", h, nkv * hd, bias=kv_bias)
    b.linear(component, f"{prefix}.v_proj", h, nkv * hd, bias=kv_bias)
    b.linear(component, f"{prefix}.o_proj", nh * hd, h, bias=o_bias)


def gated_mlp(b: Counter, prefix: str, intermediate: int, *, component: str = "mlp",
              bias: bool = False, count: int = 1) -> None:
    """gate_proj / up_proj / down_proj (SwiGLU / GeGLU)."""
    h = b.hidden
    b.linear(component, f"{prefix}.gate_proj", h, intermediate, bias=bias, count=count)
    b.linear(component, f"{prefix}.up_proj", h, intermediate, bias=bias, count=count)
    b.linear(component, f"{prefix}.down_proj", intermediate, h, bias=bias, count=count)


def intermediate(b: Counter) -> int:
    return b.int("intermediate_size", "ffn_hidden_size", "n_inner", default=4 * b.hidden,
                 why="4 x hidden_size")


def mtp_layers(b: Counter, first_index: int, layer: Callable[[str, int], None]) -> None:
    """``num_nextn_predict_layers`` multi-token-prediction layers, counted under ``mtp``.

    DeepSeek-V3's checkpoint stores them as ``model.layers.61.*``: a full decoder layer plus
    ``enorm``, ``hnorm``, ``eh_proj`` (Linear(2h, h), kept in bf16), ``shared_head.norm`` and its own
    copies of ``embed_tokens`` and ``shared_head.head`` (DeepSeek-V3 README: "685B ... includes 671B
    of the Main Model weights and 14B of the Multi-Token Prediction (MTP) Module weights"; vLLM
    ``model_executor/models/deepseek_mtp.py``). glm4_moe checkpoints follow the same layout
    (vLLM ``glm4_moe_mtp.py``).
    """
    n = b.family.mtp_count(b.reader)  # the same count as ModelSpec.mtp_layers
    if not n:
        return
    h, v = b.hidden, b.vocab
    for k in range(n):
        i = first_index + k
        prefix = f"model.layers.{i}"
        layer(prefix, i)
        b.add("mtp", f"{prefix}.enorm", h)
        b.add("mtp", f"{prefix}.hnorm", h)
        b.linear("mtp", f"{prefix}.eh_proj", 2 * h, h, quantizable=False)
        b.add("mtp", f"{prefix}.shared_head.norm", h)
        b.add("mtp", f"{prefix}.shared_head.head", v, h)
        b.add("mtp", f"{prefix}.embed_tokens", v, h)
    b.note(f"{n} MTP layer(s) (num_nextn_predict_layers) counted under 'mtp', with their own "
           "embed_tokens and shared_head copies as the published checkpoint stores them")
