"""The one table of model families: ``model_type`` -> :class:`Family`.

A family module registers, for each ``model_type`` it reads, the rule that builds the cached layers
and the rule that lists the parameter tensors; both read the config through the same
:class:`~kvplan.sources.families.reader.ConfigReader` with the same transformers defaults. The
text model's ``model_type`` (``text_config.model_type``) is looked up first, then the outer one; a
``model_type`` no module registers is read with the generic llama-like family, which says so in the
assumptions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from kvplan.record import dataclass, field

if TYPE_CHECKING:
    from kvplan.sources.families.reader import ConfigReader
    from kvplan.sources.families.tensors import Counter
    from kvplan.spec import LayerSpec

    LayerRule = Callable[[ConfigReader], list[LayerSpec]]
    ParamRule = Callable[[Counter], None]
    MtpRule = Callable[[ConfigReader], int]
else:
    LayerRule = ParamRule = MtpRule = Callable
Defaults = Mapping[str, tuple[Any, str]]


@dataclass(frozen=True)
class Family:
    """How kvplan reads one ``model_type``: its layers, its parameters, its config-class defaults."""

    name: str
    """The model_type it was registered under (``"generic"`` for the fallback)."""
    layers: LayerRule
    params: ParamRule | None = None
    """``None``: no rule of its own; counted with the llama-like rule, and the count says so."""
    defaults: Defaults = field(default_factory=dict)
    """transformers config-class defaults a Hub config may rely on by leaving the field out."""
    mha: bool = False
    """Multi-head attention architecture: a config without a KV-head field is not an assumption."""
    tied_by_default: bool = False
    """The transformers config class defaults ``tie_word_embeddings`` to True."""
    own_towers: bool = False
    """The parameter rule counts its vision/audio towers itself (no generic vision tower)."""
    known: bool = True
    """False for the generic fallback: reading a model_type kvplan does not know is an assumption."""
    mtp: MtpRule | None = None
    """The MTP layers the checkpoint ships (``ModelSpec.mtp_layers``); None: ``num_nextn_predict_layers``,
    0 when absent (:meth:`ConfigReader.mtp_layers`). The parameter rule counts the same number."""

    def mtp_count(self, reader: ConfigReader) -> int:
        """The MTP layers the checkpoint ships, by this family's rule: what the layers and the
        parameter count both read."""
        return self.mtp(reader) if self.mtp is not None else reader.mtp_layers()


_TABLE: dict[str, Family] = {}


def register(*model_types: str, layers: LayerRule, params: ParamRule | None = None,
             defaults: Defaults | None = None, mha: bool = False, tied_by_default: bool = False,
             own_towers: bool = False, mtp: MtpRule | None = None) -> None:
    """Register one family under each of ``model_types`` (a model_type is registered once)."""
    for model_type in model_types:
        if model_type in _TABLE:
            raise RuntimeError(f"model_type {model_type!r} registered twice")  # a programming error
        _TABLE[model_type] = Family(model_type, layers, params, dict(defaults or {}), mha, tied_by_default,
                                    own_towers, mtp=mtp)


def registered(model_type: str) -> Family | None:
    return _TABLE.get(model_type)


def model_types() -> frozenset[str]:
    return frozenset(_TABLE)
