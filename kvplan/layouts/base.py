"""What every layer kind shares: the base class of the kind classes and the result of their arithmetic.

Each layer kind is one frozen dataclass in its own module of ``kvplan.layouts`` (``FullAttention`` in
full.py, ``MLA`` in mla.py, ...): its fields, their validation, what one layer stores per token and the
class-level facts engines ask (``caches_tokens``). The YAML names the kind with ``kind: <name>``; the
``kind`` field of each class is that name, the tag pydantic dispatches on at the edges.

They are plain dataclasses so that ``kvplan estimate`` starts without importing pydantic: the field
constraints below are cheap markers that pydantic reads only when it is asked to validate.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing at every start; mypy treats this name as True
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Annotated, Any, ClassVar, TypeVar

from kvplan.errors import SpecError
from kvplan.record import dataclass, required_fields

if TYPE_CHECKING:
    from kvplan.dtypes import KVDType


@dataclass(frozen=True)
class TokenCost:
    """Bytes one layer stores for one token (attention) or one sequence (recurrent state)."""

    bytes: int
    formula: str
    """How ``bytes`` is made, e.g. '8 kv heads x (128 + 128) x 2 B'."""


class _Bound:
    """A numeric bound that pydantic applies when validating (and shows in the JSON schema)."""

    def __init__(self, **bounds: int) -> None:
        self.bounds = bounds

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        schema = handler(source)
        schema.update(self.bounds)
        return schema


class Doc:
    """A field's description in the JSON schema, for fields a kind class inherits: pydantic reads attribute
    docstrings from the class it validates only, not from its bases."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __get_pydantic_json_schema__(self, schema: Any, handler: Any) -> Any:
        out = handler(schema)
        out["description"] = self.text
        return out


class Deferred:
    """A ``typing`` alias made when pydantic first needs it (``typing_names``), not at import: importing typing costs
    about 5 ms of every start, and only pydantic (at the edges) reads these aliases; everything else sees them in
    annotations, which are never evaluated."""

    __slots__ = ("make", "made")

    def __init__(self, make: Callable[[Any], object]) -> None:
        self.make = make
        self.made: object = None

    def build(self, typing: Any) -> object:
        if self.made is None:
            self.made = self.make(typing)
        return self.made


if TYPE_CHECKING:
    PositiveInt = Annotated[int, _Bound(gt=0)]
    NonNegativeInt = Annotated[int, _Bound(ge=0)]
else:
    PositiveInt = Deferred(lambda t: t.Annotated[int, _Bound(gt=0)])
    NonNegativeInt = Deferred(lambda t: t.Annotated[int, _Bound(ge=0)])

_TYPING_NAMES = ("Annotated", "Any", "ClassVar", "Literal", "Optional", "Union")


def typing_names() -> None:
    """What pydantic resolves by name in the modules of the spec's classes (``kvplan.spec``, ``kvplan.layouts.*``):
    typing's names, which those modules import for type checkers only, and the ``Deferred`` aliases made real.
    Called before pydantic reads ``ModelSpec`` (``sources/yaml_spec.spec_adapter``)."""
    import sys
    import typing

    for name, module in list(sys.modules.items()):
        if module is None or not (name == "kvplan.spec" or name.startswith("kvplan.layouts")):
            continue
        space = module.__dict__
        for word in _TYPING_NAMES:
            space.setdefault(word, getattr(typing, word))
        for key, value in list(space.items()):
            if isinstance(value, Deferred):
                space[key] = value.build(typing)

CONFIG = {"extra": "forbid", "use_attribute_docstrings": True}

# The largest sizes kvplan accepts: far above any real model, low enough to catch typos.
MAX_LAYERS = 100_000
MAX_DIM = 1 << 20

KINDS: dict[str, type[LayerSpec]] = {}
"""The kinds a spec may name (``kind: full``, ...), filled by ``register`` as each kind's module loads."""

if TYPE_CHECKING:
    _L = TypeVar("_L", bound="type[LayerSpec]")


def register(cls: _L) -> _L:
    """Make a kind class one a spec may name by its ``kind``; a class not registered (a test's) can still be
    planned by an engine whose table has it, but no YAML reaches it."""
    kind = getattr(cls, "kind", None)  # the class's kind: name (a field's default is its class attribute)
    assert isinstance(kind, str), f"{cls.__name__} fixes no kind"
    KINDS[kind] = cls
    return cls


@dataclass(frozen=True, kw_only=True)
class LayerSpec:
    """``count`` consecutive decoder layers that cache the same thing: the base of the kind classes.

    ``LayerSpec(kind="full", kv_heads=8, head_dim=128)`` builds the class registered for that kind (readers
    and tests that name the kind as data); a kind no class is registered for is refused by name.
    """

    kind: str
    """What the layers cache: the name of the kind (each kind class fixes it)."""
    count: Annotated[PositiveInt, Doc("How many consecutive layers this entry stands for.")] = 1

    __pydantic_config__ = CONFIG

    caches_tokens: ClassVar[bool] = False
    """Whether the layers keep something per token (K/V vectors, an MLA latent): the kinds a token pool,
    eviction or a host tier deals in. False: a fixed state per sequence, another layer's cache, or nothing."""
    attends_all: ClassVar[bool] = False
    """Whether every past token is attended and so stays cached (full attention, MLA): the kinds eviction, an MTP
    layer's copy and host tiers are planned for. False: a window, a chunk, a state or no cache."""
    own_cache: ClassVar[bool] = True
    """Whether the layers keep a cache of their own (per token or per sequence); False: they read another
    layer's cache (shared) or keep none."""
    bounded: ClassVar[tuple[str, ...]] = ()
    """Size fields kept within 1..MAX_DIM (a typo, not a model, beyond)."""

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: Any, handler: Any) -> Any:
        # a spec names every group's kind (the tag validation dispatches on), although the class fixes it
        schema = handler(core_schema)
        own = handler.resolve_ref_schema(schema)
        own["required"] = ["kind", *own.get("required", [])]
        return schema

    def __new__(cls, *args: Any, **fields_: Any) -> LayerSpec:
        if cls is not LayerSpec:  # a kind class built directly, or by pickle / dataclasses.replace / pydantic
            return super().__new__(cls)
        kind = fields_.get("kind")
        target = KINDS.get(kind) if isinstance(kind, str) else None
        if target is None:
            raise SpecError(f"unknown layer kind {kind!r} (known: {', '.join(KINDS)})")
        missing = [name for name in required_fields(target) if fields_.get(name) is None]
        if missing:
            raise SpecError(f"a '{kind}' layer needs {', '.join(missing)}")
        return super().__new__(target)  # Python then runs target.__init__ with the same fields

    def __post_init__(self) -> None:
        # a reader may pass None for a field it could not find: the field is named, not a None computed with
        missing = [name for name in required_fields(self) if getattr(self, name) is None]
        if missing:
            raise SpecError(f"a '{self.kind}' layer needs {', '.join(missing)}")
        for name in self.bounded:
            value = getattr(self, name)
            if value is not None and not 0 < value <= MAX_DIM:
                raise SpecError(f"{name}={value} is outside 1..{MAX_DIM}")
        if self.count > MAX_LAYERS:
            raise SpecError(f"count={self.count} layers is not a real model")

    def token_cost(self, dtype: KVDType) -> TokenCost:
        """Bytes one layer stores per held token, the kind's plain layout (engines that store it otherwise say
        so in their table)."""
        raise NotImplementedError(f"a '{self.kind}' layer has no bytes per token")

    def cache_shape(self) -> tuple[object, ...]:
        """What this layer caches per token, for telling whether two layers cache alike (a speculative draft
        sharing its target's pool)."""
        return (self.kind,)

    def check_position(self, index: int) -> None:
        """Refuse this layer at position ``index`` of the model where the kind depends on other layers."""

    def in_stage(self, start: int) -> LayerSpec:
        """This layer in a pipeline stage whose first layer is the model's ``start`` (layer indices renumbered)."""
        return self
