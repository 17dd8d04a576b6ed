"""One class per layer kind (issue 20): each kind's fields, validation and bytes per token on its class in
``kvplan/layouts/<kind>.py``; each engine's layout one ``{kind class: rule}`` table (``RULES``).

A spec names the kind as before (``kind: sliding``); adding a kind touches the kind's module and each engine's
table, which the dummy kind below shows: a new class plus one entry in one table is planned by ``estimate``.
"""

from __future__ import annotations

import importlib
from dataclasses import MISSING, dataclass, fields
from typing import ClassVar

import pytest

import kvplan
from kvplan.dtypes import KVDType
from kvplan.engines import ENGINE_NAMES
from kvplan.engines.layout import GroupRule
from kvplan.engines.rules import AllTokens
from kvplan.errors import ConfigError, KvplanError, SpecError
from kvplan.layouts.base import LayerSpec, TokenCost
from kvplan.safe_io import load_yaml
from kvplan.sources.yaml_spec import dump_spec_yaml, spec_from_trusted_dict, spec_to_dict, validate_spec
from kvplan.spec import (
    LAYER_KINDS,
    MLA,
    ChunkedLocal,
    FullAttention,
    ModelSpec,
    NoCache,
    Recurrent,
    SharedKV,
    SlidingWindow,
)

from conftest import dense

# one group of every kind, with every field it has set (the first layer is full: a shared layer needs an owner)
GROUPS = {
    "full": "{kind: full, count: 2, kv_heads: 8, head_dim: 128, v_head_dim: 64}",
    "sliding": "{kind: sliding, count: 3, kv_heads: 4, head_dim: 256, window: 4096}",
    "chunked": "{kind: chunked, count: 1, kv_heads: 8, head_dim: 128, chunk: 8192}",
    "mla": "{kind: mla, count: 61, v_head_dim: 128, kv_lora_rank: 512, qk_rope_head_dim: 64, qk_nope_head_dim: 128, "
           "num_heads: 128}",
    "recurrent": "{kind: recurrent, count: 4, mixer: mamba2, conv_dim: 8192, conv_kernel: 4, "
                 "ssm_state: [128, 64, 128]}",
    "shared": "{kind: shared, count: 2, shares_with: 0}",
    "none": "{kind: none, count: 5}",
}
CLASSES = {"full": FullAttention, "sliding": SlidingWindow, "chunked": ChunkedLocal, "mla": MLA,
           "recurrent": Recurrent, "shared": SharedKV, "none": NoCache}
OWNER = "{kind: full, count: 1, kv_heads: 2, head_dim: 64}"


def _text(kind: str, group: str | None = None) -> str:
    return (f"id: test/{kind}\nmodel_type: llama\ndtype: bfloat16\nlayers:\n  - {OWNER}\n"
            f"  - {group or GROUPS[kind]}\n")


def test_every_kind_has_a_class_and_a_yaml_case():
    assert set(LAYER_KINDS) == set(GROUPS) == set(CLASSES)
    assert all(cls.kind == kind for kind, cls in CLASSES.items())


@pytest.mark.parametrize("kind", sorted(GROUPS))
def test_every_kind_round_trips_yaml_object_yaml(kind):
    text = _text(kind)
    checked = validate_spec(load_yaml(text, "t.yaml"), "t.yaml")  # the pydantic edge (user files)
    trusted = spec_from_trusted_dict(load_yaml(text, "t.yaml"), "t.yaml")  # the fast path (bundled files)
    assert checked == trusted
    layer = checked.layers[1]
    assert type(layer) is CLASSES[kind] and layer.kind == kind
    out = dump_spec_yaml(checked)
    assert f"  - {GROUPS[kind]}\n" in out  # the same line back, field order and all
    assert validate_spec(load_yaml(out, "again.yaml"), "again.yaml") == checked
    # and a kind built in Python dumps the same fields
    assert spec_to_dict(checked)["layers"][1] == load_yaml(GROUPS[kind], "g")


def _required(cls: type[LayerSpec]) -> list[str]:
    return [f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING]


@pytest.mark.parametrize("kind", sorted(GROUPS))
def test_a_missing_field_is_named(kind):
    required = _required(CLASSES[kind])
    assert required or kind == "none"
    group = load_yaml(GROUPS[kind], "g")
    for name in required:
        data = load_yaml(_text(kind), "t.yaml")
        data["layers"][1] = {k: v for k, v in group.items() if k != name}
        with pytest.raises(ConfigError, match=rf"t\.yaml: layers\.1\.{name}: Field required"):
            validate_spec(data, "t.yaml")
        with pytest.raises(ConfigError, match=rf"a '{kind}' layer needs {name}"):
            spec_from_trusted_dict(data, "t.yaml")
        with pytest.raises(SpecError, match=rf"a '{kind}' layer needs {name}"):  # a reader that found None
            CLASSES[kind](**{**{k: v for k, v in group.items() if k != "kind"}, name: None})


def test_a_field_of_another_kind_and_an_unknown_kind_are_refused_by_name():
    with pytest.raises(ConfigError, match=r"layers\.1\.window: Unexpected keyword argument"):
        validate_spec(load_yaml(_text("full", "{kind: full, kv_heads: 8, head_dim: 128, window: 4096}"), "t"), "t")
    with pytest.raises(ConfigError, match=r"layers\.1\.kind: unknown layer kind 'linear' \(known: full, sliding"):
        validate_spec(load_yaml(_text("x", "{kind: linear, count: 2}"), "t"), "t")
    with pytest.raises(ConfigError, match=r"layers\.1\.kind: Field required"):
        validate_spec(load_yaml(_text("x", "{count: 2}"), "t"), "t")
    with pytest.raises(SpecError, match="unknown layer kind 'linear'"):
        LayerSpec(kind="linear", count=2)


def test_the_schema_has_one_definition_per_kind():
    from kvplan.sources.yaml_spec import spec_adapter

    schema = spec_adapter().json_schema()
    mapping = schema["properties"]["layers"]["items"]["discriminator"]["mapping"]
    assert mapping == {kind: f"#/$defs/{cls.__name__}" for kind, cls in CLASSES.items()}
    for cls in CLASSES.values():
        definition = schema["$defs"][cls.__name__]
        assert definition["required"][0] == "kind" and set(_required(cls)) <= set(definition["required"])
        assert all(prop.get("description") for prop in definition["properties"].values())


def _layout_module(engine: str) -> object:
    return importlib.import_module(f"kvplan.engines.{engine.split('-')[0]}.layout")


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_every_engine_table_has_every_kind(engine):
    assert set(_layout_module(engine).RULES) == set(CLASSES.values())  # type: ignore[attr-defined]


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_an_engine_table_lacking_a_kind_refuses_it_by_name(engine, monkeypatch):
    base = dense("test/no-rule", 4, 8, 128)
    spec = ModelSpec(id=base.id, model_type=base.model_type, layers=(*base.layers, SlidingWindow(
        count=2, kv_heads=8, head_dim=128, window=512)))
    kvplan.estimate(spec, contexts=[1024], batches=[1], engine=engine)  # planned while the table has it
    monkeypatch.delitem(_layout_module(engine).RULES, SlidingWindow)  # type: ignore[attr-defined]
    with pytest.raises(KvplanError, match=r"no cache rule for a 'sliding' layer \(layers 4 to 5\)"):
        kvplan.estimate(spec, contexts=[1024], batches=[1], engine=engine)


@dataclass(frozen=True, kw_only=True)
class _Linear(LayerSpec):
    """A dummy kind: linear attention keeping ``width`` values per token (not registered: no YAML names it)."""

    kind: str = "linear"
    width: int

    caches_tokens: ClassVar[bool] = True

    def token_cost(self, dtype: KVDType) -> TokenCost:
        return TokenCost(dtype.vector_bytes(self.width), f"{self.width} values")


def _linear_rule(layer: _Linear, first: int, context: object) -> GroupRule:
    return GroupRule(layer, first, layer.token_cost(context.dtype), AllTokens())  # type: ignore[attr-defined]


def test_a_new_kind_is_planned_with_its_class_and_one_table_entry(monkeypatch):
    hf_layout = _layout_module("hf")
    plain = dense("test/linear", 4, 8, 128)
    spec = ModelSpec(id=plain.id, model_type=plain.model_type, layers=(*plain.layers, _Linear(count=3, width=1000)))
    with pytest.raises(KvplanError, match="transformers has no cache rule for a 'linear' layer"):
        kvplan.estimate(spec, contexts=[1024], batches=[1], engine="hf")
    monkeypatch.setitem(hf_layout.RULES, _Linear, _linear_rule)  # type: ignore[attr-defined]
    before = kvplan.estimate(plain, contexts=[1024], batches=[1], engine="hf").rows[0].kv_bytes
    after = kvplan.estimate(spec, contexts=[1024], batches=[1], engine="hf").rows[0].kv_bytes
    assert after - before == 3 * 1024 * 1000 * 2  # 3 layers x 1,024 tokens x 1,000 bf16 values
    with pytest.raises(KvplanError, match="vLLM has no cache rule for a 'linear' layer"):  # only hf learned it
        kvplan.estimate(spec, contexts=[1024], batches=[1], engine="vllm")
