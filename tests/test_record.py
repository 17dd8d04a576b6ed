"""kvplan.record's ``dataclass`` behaves as the standard one on everything kvplan's classes do: the same fields,
defaults, equality, hashing, repr, frozenness, ``replace``/``fields``/``asdict``, inheritance, and the standard
decorator's own refusals for what it does not cover."""

from __future__ import annotations

import dataclasses
import copy
import sys
import types
from typing import ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvplan import record


def _pair(body: str, decorator: str = "dataclass(frozen=True)") -> tuple[type, type]:
    """The same class source under the standard decorator and under kvplan.record's."""
    made = []
    for module in (dataclasses, record):
        home = types.ModuleType(f"kvplan_record_test_{module.__name__.replace('.', '_')}")
        sys.modules[home.__name__] = home  # dataclasses reads a string ClassVar through the class's module
        home.__dict__.update({"dataclass": module.dataclass, "field": module.field, "ClassVar": ClassVar})
        exec(f"from __future__ import annotations\nfrom typing import ClassVar\n@{decorator}\nclass C:\n{body}",
             home.__dict__)  # noqa: S102
        made.append(home.C)
    return made[0], made[1]


BODY = """    a: int
    b: str = "x"
    c: tuple = ()
    d: list = field(default_factory=list)
    e: int | None = field(default=None, compare=False)
    f: int = field(default=0, hash=False)
    g: object = field(default=None, compare=False, repr=False)
    k: ClassVar[int] = 7
"""


@pytest.mark.parametrize("decorator", ["dataclass(frozen=True)", "dataclass", "dataclass(eq=False)",
                                       "dataclass(frozen=True, eq=False)"])
def test_the_same_class_behaves_the_same(decorator):
    std, own = _pair(BODY, decorator)
    for cls in (std, own):
        one, two = cls(1), cls(1, "x", (), [], 5)
        assert [f.name for f in dataclasses.fields(cls)] == ["a", "b", "c", "d", "e", "f", "g"]
        assert cls.k == 7 and cls.__match_args__ == ("a", "b", "c", "d", "e", "f", "g")
        assert dataclasses.is_dataclass(cls) and dataclasses.is_dataclass(one)
        assert dataclasses.asdict(two) == {"a": 1, "b": "x", "c": (), "d": [], "e": 5, "f": 0, "g": None}
        assert dataclasses.replace(one, b="y").b == "y"
        assert one.d is not cls(1).d  # a fresh default per instance
    s1, s2 = std(1, "x", (), [], 5), std(1)
    o1, o2 = own(1, "x", (), [], 5), own(1)
    assert (s1 == s2) == (o1 == o2)
    assert repr(o1).replace(own.__qualname__, "C") == repr(s1).replace(std.__qualname__, "C")
    assert (std.__hash__ is None) == (own.__hash__ is None)
    assert (getattr(std, "b", None), hasattr(std, "d")) == (getattr(own, "b", None), hasattr(own, "d"))
    frozen = "frozen=True" in decorator
    for obj in (s2, o2):
        if frozen:
            with pytest.raises(dataclasses.FrozenInstanceError):
                obj.a = 2
            with pytest.raises(dataclasses.FrozenInstanceError):
                del obj.a
        else:
            obj.a = 2
            assert obj.a == 2


@given(st.integers(), st.text(max_size=5), st.integers(), st.text(max_size=5))
def test_equality_and_hash_by_value(a1, b1, a2, b2):
    std, own = _pair(BODY.replace("list = field(default_factory=list)", "frozenset = field(default_factory=frozenset)"))
    assert (own(a1, b1) == own(a2, b2)) == (std(a1, b1) == std(a2, b2))
    assert hash(own(a1, b1)) == hash(std(a1, b1))  # the same tuple of compared fields
    if own(a1, b1) == own(a2, b2):
        assert hash(own(a1, b1)) == hash(own(a2, b2))
    assert hash(own(a1, b1, e=1)) == hash(own(a1, b1, e=2))  # compare=False fields are left out, as dataclasses do
    assert hash(own(a1, b1, f=1)) == hash(std(a1, b1, f=1)) and own(a1, f=1) != own(a1, f=2)  # hash=False: compared


def test_inheritance_keeps_field_order_and_overrides_defaults():
    @record.dataclass(frozen=True)
    class Base:
        kind: str = "base"
        size: int = 1

    @record.dataclass(frozen=True)
    class Child(Base):
        kind: str = "child"
        extra: str = ""

    @dataclasses.dataclass(frozen=True)
    class Standard(Child):  # a standard dataclass on a record base
        more: int = 0

    assert [f.name for f in dataclasses.fields(Child)] == ["kind", "size", "extra"]
    assert Child() == Child("child", 1, "") and Child().kind == "child" and Base().kind == "base"
    assert Child() != Base("child", 1)  # another class is never equal
    assert [f.name for f in dataclasses.fields(Standard)] == ["kind", "size", "extra", "more"]
    assert next(f.default for f in dataclasses.fields(Child) if f.name == "kind") == "child"
    with pytest.raises(dataclasses.FrozenInstanceError):
        Standard().more = 1


def test_post_init_runs_and_may_set_through_object():
    @record.dataclass(frozen=True)
    class Sized:
        n: int
        double: int = 0

        def __post_init__(self) -> None:
            object.__setattr__(self, "double", 2 * self.n)

    assert Sized(3).double == 6 and copy.deepcopy(Sized(3)) == Sized(3) == copy.copy(Sized(3))


@pytest.mark.parametrize("body, decorator", [
    ("    a: list = []\n", "dataclass(frozen=True)"),                   # a mutable default
    ("    a: int = 1\n    b: int\n", "dataclass(frozen=True)"),         # no default after a default
    ("    a: int = field(default=1, init=False)\n    b: int = 2\n", "dataclass(order=True)"),  # not covered: standard
])
def test_what_dataclasses_refuses_or_this_does_not_cover_is_the_standard_decorators(body, decorator):
    outcome = []
    for module in (dataclasses, record):
        namespace = {"dataclass": module.dataclass, "field": module.field}
        try:
            exec(f"from __future__ import annotations\n@{decorator}\nclass C:\n{body}", namespace)  # noqa: S102
            outcome.append(("made", [f.name for f in dataclasses.fields(namespace["C"])]))
        except (TypeError, ValueError) as exc:
            outcome.append((type(exc).__name__, None))
    assert outcome[0] == outcome[1]


def test_kvplan_classes_are_records_and_cheap():
    """The classes on the estimate path do not compile their methods at import (no ``__init__`` before use)."""
    from kvplan.spec import ModelSpec

    assert "__kvplan_record__" in vars(ModelSpec)


@pytest.mark.parametrize("frozen", [True, False])
def test_the_shared_init_and_the_compiled_one_make_the_same_instances(frozen):
    made = []
    for module in (dataclasses, record):
        @module.dataclass(frozen=frozen)
        class Point:
            x: int
            y: int = 2
            tags: list = module.field(default_factory=list)

        made.append(Point)
    std, own = made
    calls = [((1,), {}), ((1, 3), {}), ((), {"x": 4, "tags": [1]}), ((5,), {"y": 6})]
    for _ in range(record._COMPILE_AT // 12 + 1):  # across the switch from the shared __init__ to the compiled one
        for args, kwargs in calls * 3:
            a, b = std(*args, **kwargs), own(*args, **kwargs)
            assert (a.x, a.y, a.tags) == (b.x, b.y, b.tags)
    assert own.__dict__["__init__"] is not record._lazy_init  # compiled by now
    for args, kwargs in [((), {}), ((1, 2, [], 4), {}), ((1,), {"x": 2}), ((1,), {"z": 2})]:
        fresh = record.dataclass(frozen=frozen)(type("P", (), {"__annotations__": {"x": "int", "y": "int"},
                                                                "y": 2}))
        with pytest.raises(TypeError):
            fresh(*args, **kwargs)  # the shared __init__ refuses what the compiled one refuses
        with pytest.raises(TypeError):
            std(*args, **kwargs)


def test_once_and_cached_property_compute_once_as_functools_does() -> None:
    """``record.once`` and ``record.cached_property`` stand in for functools' (not imported at start-up)."""
    from kvplan.record import cached_property, once

    calls: list[str] = []

    @once
    def table() -> list[int]:
        """The docstring."""
        calls.append("table")
        return [1, 2]

    assert table() is table() and calls == ["table"] and table.__doc__ == "The docstring."

    @record.dataclass(frozen=True)
    class Layout:
        size: int

        @cached_property
        def doubled(self) -> int:
            calls.append("doubled")
            return 2 * self.size

    a = Layout(3)
    assert a.doubled == 6 and a.doubled == 6 and calls == ["table", "doubled"]
    assert Layout(3) == a and hash(Layout(3)) == hash(a)  # the cached value is no field
    assert isinstance(Layout.__dict__["doubled"], cached_property)


def test_a_mutable_record_that_sets_attributes_its_own_way_gets_them_set_one_by_one() -> None:
    """The shared ``__init__`` fills a record's instance dict at once only where setting the fields one by one would
    do exactly that: a class with its own ``__setattr__`` sees every field set, in order, as dataclasses' does."""
    seen: list[str] = []

    @record.dataclass
    class Watched:
        x: int
        y: int = 2

        def __setattr__(self, name: str, value: object) -> None:
            seen.append(name)
            object.__setattr__(self, name, value)

    one = Watched(1)
    assert (one.x, one.y) == (1, 2) and seen == ["x", "y"]
    assert vars(Watched(3, y=4)) == {"x": 3, "y": 4}
