"""One registry of model families for ``config.json``: the layers and the parameter count of each.

Each family is one module that registers, per ``model_type``, a layer rule (what each decoder layer
caches: the ``ModelSpec`` layers) and a parameter rule (the tensors a checkpoint stores), both
reading the config through one :class:`ConfigReader` with the family's transformers defaults:

    reader.py      ConfigReader: field aliases, validation, defaults, assumptions
    registry.py    Family and the model_type -> Family table
    tensors.py     Counter (tensor list), ParamCount, pieces several families share
    llama.py       the generic rules (the fallback) and the llama-like families
    qwen.py, qwen3_next.py, qwen3_5.py, gemma.py (+ cohere), gemma4.py (+ gemma4_towers.py), deepseek.py,
    llama4.py, gpt_oss.py, grok.py (model_type git), gpt.py (gpt2, gptj, phi, falcon, gpt_bigcode), mamba.py (+ mamba2, jamba)
    mllama.py      Llama 3.2 Vision: refused (per-request cross-attention cache)
    qwen3_omni.py  Qwen3-Omni: refused (its decoder is nested in thinker_config)
    vision.py      vision towers of multimodal configs without a rule of their own

Adding a family: a module with a layer rule and a parameter rule, a ``register(...)`` call naming
its model_types (and the config-class defaults it relies on), and an import below.

Only the standard library and kvplan's pydantic-free modules are imported.
"""

from __future__ import annotations

from kvplan.errors import ConfigError
from kvplan.sources.families import (  # noqa: F401  (importing a family module registers it)
    deepseek,
    gemma,
    gemma4,
    gpt,
    gpt_oss,
    grok,
    llama,
    llama4,
    mamba,
    mllama,
    qwen,
    qwen3_5,
    qwen3_next,
    qwen3_omni,
)
from kvplan.sources.families.reader import ConfigReader, json_kind, model_type_of
from kvplan.sources.families.registry import Family, model_types, registered
from kvplan.sources.families.tensors import COMPONENTS, Counter, ParamCount
from kvplan.sources.families.vision import vision_tower
from kvplan.spec import LayerSpec

__all__ = ["COMPONENTS", "GENERIC", "ConfigReader", "Counter", "Family", "ParamCount", "count", "family_for",
           "known_model_types", "layers_of", "mtp_layers_of", "open_config", "param_count", "tensors_of"]

GENERIC = Family("generic", layers=llama.generic_layers, params=llama.llama_like, known=False)
"""The fallback for a model_type no module registers: generic layers, the llama-like count."""

_LLAMA_LIKE_NOTE = ("has no parameter rule of its own: counted with the llama-like rule (gated MLP, q/k/v/o, "
                    "2 RMSNorms per layer)")


def family_for(config: dict) -> Family:
    """The family of ``config``: its text model's model_type first (nested multimodal configs), then its own."""
    if not isinstance(config, dict):
        raise ConfigError(f"config is {json_kind(config)}, expected an object")
    model_type = model_type_of(config)
    text = config.get("text_config")
    inner = text.get("model_type") if isinstance(text, dict) else None
    family = registered(inner) if isinstance(inner, str) and inner else None
    return family or registered(model_type) or GENERIC


def known_model_types() -> frozenset[str]:
    return model_types()


def open_config(config: dict) -> tuple[ConfigReader, Family]:
    """A reader over ``config`` with its family's defaults, and the family."""
    family = family_for(config)
    return ConfigReader(config, family.defaults, mha=family.mha), family


def layers_of(reader: ConfigReader, family: Family) -> list[LayerSpec]:
    layers = family.layers(reader)
    if not family.known:
        reader.note(f"model_type '{reader.model_type}' is not one kvplan knows; read with the generic rules")
    return layers


def mtp_layers_of(reader: ConfigReader, family: Family) -> int:
    """The MTP layers the checkpoint ships (``ModelSpec.mtp_layers``), by the family's rule."""
    return family.mtp_count(reader)


def tensors_of(reader: ConfigReader, family: Family) -> Counter:
    """The tensors ``family``'s parameter rule lists for the config ``reader`` reads."""
    counter = Counter(reader, family)
    rule = family.params
    if rule is None or not family.known:
        counter.note(f"model_type {counter.model_type!r} {_LLAMA_LIKE_NOTE}")
        rule = llama.llama_like
    try:
        rule(counter)
    except ConfigError:
        raise
    except (TypeError, ValueError, KeyError, ZeroDivisionError, OverflowError) as exc:
        raise ConfigError(f"cannot count parameters of this {counter.model_type} config: {exc}") from exc
    # a vision_config beside a top-level text model (Qwen2-VL as first published) is a tower too
    if not family.own_towers and (reader.nested or isinstance(reader.top.get("vision_config"), dict)):
        vision_tower(counter)
    return counter


def param_count(counter: Counter, extra_notes: list[str] | None = None) -> ParamCount:
    by = dict.fromkeys(COMPONENTS, 0)
    for t in counter.tensors:
        by[t.component] += t.numel
    total = sum(by.values())
    if total <= 0:
        raise ConfigError("config describes a model with no parameters")
    notes = dict.fromkeys([*counter.notes, *(extra_notes or ())])
    return ParamCount(total=total, by_component=by, assumptions=tuple(notes), tensors=tuple(counter.tensors))


def count(config: dict) -> tuple[Counter, ParamCount]:
    """The tensors and the parameter count of ``config`` (the layer and MTP rules run first, so that the
    geometry assumptions stay with the ModelSpec and the count keeps only its own)."""
    reader, family = open_config(config)
    try:
        layers_of(reader, family)
        family.mtp_count(reader)
    except ConfigError:
        pass  # a config whose cache kvplan cannot describe may still be counted
    mark = len(reader.assumptions)
    counter = tensors_of(reader, family)
    return counter, param_count(counter, reader.assumptions[mark:])
