"""``dataclass`` and ``field`` as kvplan's classes use them, cheap to define.

The standard ``dataclasses.dataclass`` compiles six methods with ``exec`` for every class (about 1 ms each class
on a 2-core machine) and imports ``inspect``; kvplan defines some 50 classes before a plain ``kvplan estimate``
prints, which made class creation most of its start-up time (docs/performance.md). Here a class gets the same
methods and the same behaviour (frozen, compared and hashed by value, ``__match_args__``, ``__post_init__``),
with one difference in cost only:

- ``__init__`` is the code dataclasses would write, for kvplan's own classes compiled ahead (``_record_inits.py``,
  one function per shape of fields, compiled and cached as any module is) and installed at a class's first
  instance; any other class binds its arguments by a shared function until it has made ``_COMPILE_AT``
  instances, then compiles its own (one ``exec``): a class that makes a few instances costs no compile;
  ``__repr__``, ``__eq__``, ``__hash__`` and the frozen
  ``__setattr__``/``__delattr__`` are shared functions reading the class's field names;
- ``__dataclass_fields__`` and ``__dataclass_params__`` are built with the real ``dataclasses`` on first access,
  so ``dataclasses.fields``, ``replace``, ``asdict`` and ``is_dataclass`` work unchanged (and import it then).

Whatever this does not cover (``kw_only``, ``order``, ``slots``, ``unsafe_hash``, ``init=False`` fields,
``InitVar``, a field option other than ``default``/``default_factory``/``compare``, a base that is a standard
dataclass) goes to ``dataclasses.dataclass`` itself: never a silent difference. mypy checks the classes as
standard dataclasses (the ``TYPE_CHECKING`` branch), and tests/test_record.py holds both to the same behaviour.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own constant costs an import of typing; mypy treats this name as True
if TYPE_CHECKING:
    from dataclasses import MISSING, dataclass, field, fields, replace
    from collections.abc import Callable
    from functools import cached_property
    from typing import TypeVar

    T = TypeVar("T")

    def required_fields(obj: object) -> tuple[str, ...]: ...

    def field_defaults(obj: object) -> dict[str, object]: ...

    def field_names(obj: object) -> tuple[str, ...]: ...

    def once(func: Callable[[], T]) -> Callable[[], T]: ...
else:
    __all__ = ["MISSING", "cached_property", "dataclass", "field", "field_defaults", "field_names", "fields", "once",
               "replace", "required_fields"]

    class cached_property:  # noqa: N801 - functools' name, functools' behaviour
        """``functools.cached_property`` for kvplan's classes (computed on first read, kept in the instance's
        ``__dict__``, which a frozen class's ``__setattr__`` does not guard), without importing functools and
        collections on every start."""

        def __init__(self, func):
            self.func = func
            self.attrname = func.__name__
            self.__doc__ = func.__doc__

        def __set_name__(self, owner, name):
            self.attrname = name

        def __get__(self, obj, owner=None):
            if obj is None:
                return self
            value = obj.__dict__[self.attrname] = self.func(obj)
            return value

    def replace(obj, /, **changes):
        """``dataclasses.replace``: a copy with ``changes`` (a record is rebuilt from its fields without importing
        dataclasses; anything else goes to dataclasses)."""
        record = getattr(type(obj), "__kvplan_record__", None)
        if record is None or (changes and not {f[0] for f in record[0]}.issuperset(changes)):  # one set, not one a name
            import dataclasses

            return dataclasses.replace(obj, **changes)
        values = {f[0]: changes[f[0]] if f[0] in changes else getattr(obj, f[0]) for f in record[0]}
        return type(obj)(**values)

    def fields(obj):
        import dataclasses

        return dataclasses.fields(obj)

    def required_fields(obj):
        """The names of the fields without a default, in order (a class or an instance)."""
        cls = obj if isinstance(obj, type) else type(obj)
        record = getattr(cls, "__kvplan_record__", None)
        if record is not None:
            return tuple(f[0] for f in record[0] if f[1] is _MISSING and f[2] is _MISSING)
        import dataclasses

        return tuple(f.name for f in dataclasses.fields(cls)
                     if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)

    def field_names(obj):
        """The names of the fields, in order (a class or an instance)."""
        cls = obj if isinstance(obj, type) else type(obj)
        record = getattr(cls, "__kvplan_record__", None)
        if record is not None:
            return tuple(f[0] for f in record[0])
        import dataclasses

        return tuple(f.name for f in dataclasses.fields(cls))

    def field_defaults(obj):
        """The fields with a plain default (not a factory): name -> default, in order."""
        cls = obj if isinstance(obj, type) else type(obj)
        record = getattr(cls, "__kvplan_record__", None)
        if record is not None:
            return {f[0]: f[1] for f in record[0] if f[1] is not _MISSING}
        import dataclasses

        return {f.name: f.default for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING}

    def once(func):
        """``functools.lru_cache(maxsize=None)`` of a function without arguments (its value made on the first call,
        kept), without importing functools on every start."""
        made = []

        def cached():
            if not made:
                made.append(func())
            return made[0]

        cached.__name__, cached.__qualname__, cached.__doc__ = func.__name__, func.__qualname__, func.__doc__
        cached.__wrapped__ = func
        return cached

    def __getattr__(name):
        if name == "MISSING":
            import dataclasses

            return dataclasses.MISSING
        raise AttributeError(name)

    _MISSING = object()
    _SIMPLE = frozenset(("default", "default_factory", "compare", "hash", "repr"))

    class _Field:
        """What ``field(...)`` leaves in the class body until the decorator reads it."""

        __slots__ = ("kwargs",)

        def __init__(self, kwargs: dict) -> None:
            self.kwargs = kwargs

    def field(**kwargs):
        return _Field(kwargs)

    def dataclass(cls=None, /, **params):
        """``@dataclass``, ``@dataclass(frozen=True)``, ``@dataclass(eq=False)``; anything else: the standard one."""
        if cls is None:
            return lambda c: _make(c, params)
        return _make(cls, params)

    def _standard(cls, params):
        import dataclasses

        for name, value in list(vars(cls).items()):
            if isinstance(value, _Field):
                setattr(cls, name, dataclasses.field(**value.kwargs))
        return dataclasses.dataclass(cls, **params)

    def _own_fields(cls, kw_only):
        """(name, default, factory, compare, kw_only, hashed, repr) of the fields this class declares, or None where it needs
        the standard decorator."""
        annotations = cls.__dict__.get("__annotations__", {})
        found = []
        for name, kind in annotations.items():
            text = kind if isinstance(kind, str) else getattr(kind, "__name__", "")
            if "ClassVar" in text or "InitVar" in text or not isinstance(kind, str):
                if "ClassVar" in text and isinstance(kind, str):
                    continue  # a class variable, as dataclasses leaves it
                return None
            value = getattr(cls, name, _MISSING)  # an inherited class attribute is a default, as in dataclasses
            default, factory, compare, hashed, shown = value, _MISSING, True, None, True
            if isinstance(value, _Field):
                if not set(value.kwargs) <= _SIMPLE:
                    return None
                default = value.kwargs.get("default", _MISSING)
                factory = value.kwargs.get("default_factory", _MISSING)
                compare = value.kwargs.get("compare", True)
                hashed = value.kwargs.get("hash")
                shown = value.kwargs.get("repr", True)
            if default is not _MISSING and default.__class__.__hash__ is None:
                return None  # a mutable default: dataclasses refuses it, in its words
            found.append((name, default, factory, compare, kw_only, compare if hashed is None else hashed, shown))
        return found

    def _make(cls, params):
        frozen = params.get("frozen", False)
        eq = params.get("eq", True)
        if set(params) - {"frozen", "eq", "kw_only"} or "__slots__" in cls.__dict__:
            return _standard(cls, params)
        own = _own_fields(cls, params.get("kw_only", False))
        if own is None:
            return _standard(cls, params)
        inherited = {}
        for base in cls.__mro__[-1:0:-1]:
            table = base.__dict__.get("__kvplan_record__")
            if table is not None:
                if table[1] != frozen:
                    return _standard(cls, params)  # dataclasses refuses the mix: let it say so
                inherited.update({f[0]: f for f in table[0]})
            elif "__dataclass_fields__" in base.__dict__:
                return _standard(cls, params)  # a standard dataclass base
        fields = dict(inherited)
        fields.update({f[0]: f for f in own})
        ordered = tuple(fields.values())
        seen_default = False
        for name, default, factory, _, kw, _, _ in ordered:
            if kw:
                continue  # keyword-only: no order between defaults
            has = default is not _MISSING or factory is not _MISSING
            if seen_default and not has:
                return _standard(cls, params)  # dataclasses' own TypeError, in its words
            seen_default = seen_default or has
        for name, default, factory, *_ in own:
            if factory is not _MISSING or isinstance(cls.__dict__.get(name), _Field):
                if default is _MISSING:
                    if name in cls.__dict__:
                        delattr(cls, name)
                else:
                    setattr(cls, name, default)
        cls.__kvplan_record__ = (ordered, frozen)
        cls.__kvplan_compared__ = _COMPARED  # made on first use: most classes are never compared nor hashed
        cls.__kvplan_hashed__ = _HASHED
        if "__init__" not in cls.__dict__:
            cls.__init__ = _lazy_init
        if "__repr__" not in cls.__dict__:
            cls.__repr__ = _repr
        if eq and "__eq__" not in cls.__dict__:
            cls.__eq__ = _eq
        own_hash = cls.__dict__.get("__hash__", _MISSING)
        if own_hash is _MISSING or (own_hash is None and "__eq__" in cls.__dict__):  # dataclasses' rule
            if eq and frozen:
                cls.__hash__ = _hash
            elif eq:
                cls.__hash__ = None
        if frozen:
            cls.__setattr__ = _frozen_setattr
            cls.__delattr__ = _frozen_delattr
        if "__match_args__" not in cls.__dict__:
            cls.__match_args__ = tuple(f[0] for f in ordered if not f[4])
        cls.__dataclass_fields__ = _LAZY_FIELDS
        cls.__dataclass_params__ = _LAZY_PARAMS
        return cls

    class _LazyKey:
        """``__kvplan_compared__`` / ``__kvplan_hashed__`` of a record class: the key of an instance (its compared,
        or hashed, fields; ``_key``), made when first read and kept on the class in its place."""

        def __init__(self, name, index):
            self.name, self.index = name, index

        def __get__(self, obj, owner):
            holder = next(b for b in owner.__mro__ if "__kvplan_record__" in b.__dict__)
            key = _key(tuple(f[0] for f in holder.__kvplan_record__[0] if f[self.index]))
            type.__setattr__(holder, self.name, staticmethod(key))
            return key

    _COMPARED = _LazyKey("__kvplan_compared__", 3)
    _HASHED = _LazyKey("__kvplan_hashed__", 5)

    class _Lazy:
        """``__dataclass_fields__`` / ``__dataclass_params__``, made by the real dataclasses when first read."""

        def __init__(self, what):
            self.what = what

        def __get__(self, obj, owner):
            import dataclasses

            record = owner.__dict__.get("__kvplan_record__")
            if record is None:  # a plain subclass: its record base's
                holder = next(b for b in owner.__mro__ if "__kvplan_record__" in b.__dict__)
                return getattr(holder, self.what_attr())
            ordered, frozen = record
            if self.what == "params":
                value = _params(dataclasses, frozen, "__eq__" in owner.__dict__ and owner.__eq__ is _eq)
            else:
                value = {}
                for name, default, factory, compare, kw, hashed, shown in ordered:
                    kwargs = {"compare": compare, "kw_only": kw, "hash": None if hashed == compare else hashed,
                              "repr": shown}
                    if default is not _MISSING:
                        kwargs["default"] = default
                    if factory is not _MISSING:
                        kwargs["default_factory"] = factory
                    made = dataclasses.field(**kwargs)
                    made.name = name
                    made.type = _annotation(owner, name)
                    made._field_type = dataclasses._FIELD
                    value[name] = made
            type.__setattr__(owner, self.what_attr(), value)
            return value

        def what_attr(self):
            return "__dataclass_fields__" if self.what == "fields" else "__dataclass_params__"

    _LAZY_FIELDS = _Lazy("fields")
    _LAZY_PARAMS = _Lazy("params")

    def _params(dataclasses, frozen, eq):
        try:
            return dataclasses._DataclassParams(True, True, eq, False, False, frozen)
        except TypeError:  # later Pythons add parameters (match_args, kw_only, slots, weakref_slot)
            return dataclasses._DataclassParams(True, True, eq, False, False, frozen, True, False, False, False)

    def _annotation(owner, name):
        for base in owner.__mro__:
            found = base.__dict__.get("__annotations__", {})
            if name in found:
                return found[name]
        return None

    _COMPILE_AT = 128
    """Instances a class of a shape kvplan does not ship makes through the shared ``__init__`` before it compiles
    its own: most classes make a few (no ``compile``, ~0.5 ms each cold, for them), a sweep's rows make thousands
    (they get the fast one). kvplan's own classes skip both: a check of a few files makes ~900 instances of ~60
    classes, ~4 us each bound by hand against ~1 us compiled, plus ~30 us a class to work out its binding."""

    def _lazy_init(self, *args, **kwargs):
        """The shared ``__init__``: a class's first instance installs its compiled ``__init__`` where kvplan ships one
        of its shape (``_record_inits.py``); else it binds the arguments as the compiled one would, and the class's
        ``_COMPILE_AT``-th instance compiles its own (the code dataclasses writes) and uses it from then on."""
        plan = type(self).__dict__.get("__kvplan_bind__")
        if plan is None:
            owner = next(b for b in type(self).__mro__ if b.__dict__.get("__init__") is _lazy_init)
            if "__kvplan_bind__" not in owner.__dict__:  # the class's first instance
                shipped = _shipped_init(owner)
                if shipped is not None:
                    owner.__init__ = shipped
                    shipped(self, *args, **kwargs)
                    return
            plan = _binding(owner)
        made = plan[-1]
        made[0] += 1
        if made[0] >= _COMPILE_AT:
            owner = plan[0]
            owner.__init__ = _compile_init(owner)
            owner.__init__(self, *args, **kwargs)
            return
        _bind(plan, self, args, kwargs)

    def _binding(owner):
        """What binding needs, worked out once per class (kept in its ``__dict__``: setting a class attribute is
        slow, so the count of instances is a list in it)."""
        plan = owner.__dict__.get("__kvplan_bind__")
        if plan is None:
            ordered, frozen = owner.__kvplan_record__
            positional = tuple(f[0] for f in ordered if not f[4])
            required = tuple(f[0] for f in ordered if f[1] is _MISSING and f[2] is _MISSING)
            plan = (owner, f"{owner.__qualname__}.__init__()", positional, frozenset(f[0] for f in ordered),
                    required, tuple((f[0], f[1], f[2]) for f in ordered), object.__setattr__ if frozen else setattr,
                    hasattr(owner, "__post_init__"), _direct(owner, ordered, frozen, positional, required), [0])
            type.__setattr__(owner, "__kvplan_bind__", plan)
        return plan

    def _direct(owner, ordered, frozen, positional, required):
        """How a record's instance dict is filled in C: (its fields in order with their defaults, for each count of
        positional arguments a call gives the pair (the fields they give, the required fields keywords must give
        then), the fields with a factory, how many leading fields are required); None where the fields are set one
        by one as written: a base holds a descriptor of a field's name (a slot, a property: object.__setattr__ would
        call it), a class of a mutable record sets attributes its own way (``__setattr__``), or a required field is
        keyword-only."""
        names = {f[0] for f in ordered}
        if positional[:len(required)] != required or any(
                hasattr(type(base.__dict__[n]), "__set__") for base in owner.__mro__[1:] for n in names
                if n in base.__dict__):
            return None
        if not frozen and any("__setattr__" in base.__dict__ for base in owner.__mro__[:-1]):
            return None
        template = {f[0]: f[1] for f in ordered}  # a factory's or a required field's value is _MISSING here
        heads = {}  # filled by _bind, for the counts of positional arguments calls give
        return template, heads, tuple((f[0], f[2]) for f in ordered if f[2] is not _MISSING), len(required)

    def _bind(plan, self, args, kwargs):
        """The arguments bound as the compiled ``__init__`` binds them: a call that binds cleanly goes the short way
        (set and dict operations in C: a check makes ~900 instances of classes that never compile their own), one
        that does not goes the long way, which raises the compiled one's TypeError."""
        owner, _, positional, known, _, fields, set_field, post_init, direct, _ = plan
        if direct is not None and type(self) is owner:  # a subclass may hold descriptors of its own: one by one
            template, heads, factories, lead = direct
            given = len(args)
            head = heads.get(given)
            if head is None:
                if given > len(positional):
                    return _bind_checked(plan, self, args, kwargs)
                head = heads[given] = (frozenset(positional[:given]), frozenset(positional[given:lead]))
            before, needed = head
            if kwargs:
                keys = kwargs.keys()
                if not (keys <= known and keys >= needed and keys.isdisjoint(before)):
                    return _bind_checked(plan, self, args, kwargs)
            elif needed:
                return _bind_checked(plan, self, args, kwargs)
            values = template.copy()  # the fields' order, as setting them one by one gives the instance dict
            if given:
                values.update(zip(positional, args))
            if kwargs:
                values.update(kwargs)
            for field_name, factory in factories:
                if values[field_name] is _MISSING:
                    values[field_name] = factory()
            self.__dict__.update(values)
        else:
            given = len(args)
            if given > len(positional) or (kwargs and not (known.issuperset(kwargs) and
                                                           kwargs.keys().isdisjoint(positional[:given]))):
                return _bind_checked(plan, self, args, kwargs)
            values = dict(zip(positional, args))
            if kwargs:
                values.update(kwargs)
            if len(values) < len(fields) and not all(field_name in values for field_name in plan[4]):
                return _bind_checked(plan, self, args, kwargs)
            for field_name, default, factory in fields:
                set_field(self, field_name, values[field_name] if field_name in values else
                          factory() if factory is not _MISSING else default)
        if post_init:
            self.__post_init__()
        return None

    def _bind_checked(plan, self, args, kwargs):
        _, name, positional, known, required, fields, set_field, post_init, _, _ = plan
        if len(args) > len(positional):
            raise TypeError(f"{name} takes {len(positional) + 1} positional arguments but {len(args) + 1} were given")
        values = dict(zip(positional, args))
        for key, value in kwargs.items():
            if key not in known:
                raise TypeError(f"{name} got an unexpected keyword argument '{key}'")
            if key in values:
                raise TypeError(f"{name} got multiple values for argument '{key}'")
            values[key] = value
        if len(values) < len(fields):
            missing = [field_name for field_name in required if field_name not in values]
            if missing:
                raise TypeError(f"{name} missing {len(missing)} required argument(s): "
                                f"{', '.join(map(repr, missing))}")
        for field_name, default, factory in fields:
            if field_name in values:
                set_field(self, field_name, values[field_name])
            else:
                set_field(self, field_name, factory() if factory is not _MISSING else default)
        if post_init:
            self.__post_init__()

    def _shape(cls):
        """What a record class's compiled ``__init__`` depends on, as text: frozen and has ``__post_init__`` (two
        digits), then each field, its name followed by ``=`` for a default or ``=()`` for a factory, a keyword-only
        one after a ``*``: ``10:text,line=,shell=``. The defaults are the function's, not its code's: classes of one
        shape share the code."""
        ordered, frozen = cls.__kvplan_record__
        fields = ",".join(f"{'*' if f[4] else ''}{f[0]}{'=()' if f[2] is not _MISSING else '=' if f[1] is not _MISSING else ''}"
                          for f in ordered)
        return f"{int(bool(frozen))}{int(hasattr(cls, '__post_init__'))}:{fields}"

    def _init_source(shape, name="__init__"):
        """The text of the ``__init__`` of a shape, the code dataclasses writes (``_D`` stands for each default;
        a factory's field defaults to ``__MISSING``, then calls its ``__factory_<name>``)."""
        flags, _, fields = shape.partition(":")
        frozen, post_init = flags[0] == "1", flags[1] == "1"
        params, keywords, lines = ["self"], [], []
        for text in fields.split(",") if fields else ():
            field_name, equals, default = text.lstrip("*").partition("=")
            how = "f" if default == "()" else "d" if equals else "r"
            where = keywords if text.startswith("*") else params
            if how == "f":
                where.append(f"{field_name}=_D")
                value = f"__factory_{field_name}() if {field_name} is __MISSING else {field_name}"
            else:
                where.append(f"{field_name}=_D" if how == "d" else field_name)
                value = field_name
            lines.append(f"__object_setattr(self, {field_name!r}, {value})" if frozen else f"self.{field_name} = {value}")
        if post_init:
            lines.append("self.__post_init__()")
        body = "\n".join(f"    {line}" for line in lines or ["pass"])
        if keywords:  # dataclasses puts keyword-only fields after the others, behind a '*'
            params += ["*", *keywords]
        return f"def {name}({', '.join(params)}):\n{body}\n"

    def _install(cls, code):
        """``code`` (an ``__init__`` of the class's shape) as the class's ``__init__``: its defaults, its factories and
        its name (which a TypeError of a bad call says) the class's own."""
        ordered = cls.__kvplan_record__[0]
        namespace = {"__object_setattr": object.__setattr__, "__MISSING": _MISSING}
        defaults, kw_defaults = [], {}
        for field_name, default, factory, _, kw, *_ in ordered:
            if factory is not _MISSING:
                namespace[f"__factory_{field_name}"] = factory
                default = _MISSING
            elif default is _MISSING:
                continue
            if kw:
                kw_defaults[field_name] = default
            else:
                defaults.append(default)
        qualname = f"{cls.__qualname__}.__init__"
        code = code.replace(co_name="__init__", co_qualname=qualname, co_filename=f"<kvplan.record {qualname}>") \
            if hasattr(code, "co_qualname") else code.replace(co_name="__init__", co_filename=f"<kvplan.record {qualname}>")
        init = _function_type(code, namespace, "__init__", tuple(defaults) or None)
        if kw_defaults:
            init.__kwdefaults__ = kw_defaults
        init.__qualname__ = qualname
        return init

    _function_type = type(_install)

    def _compile_init(cls):
        """The class's own ``__init__``, compiled here."""
        namespace = {"_D": None}
        # exec of the text, not of compile(): the builtin compile() builds the ast module's ~120 node types on its
        # first call in a process (it checks whether it was handed an AST), about 2.5 ms of every start
        exec(_init_source(_shape(cls)), namespace)  # noqa: S102
        return _install(cls, namespace["__init__"].__code__)

    _SHIPPED = []

    def _shipped_init(cls):
        """The class's ``__init__`` from the code shipped compiled for its shape (``kvplan/_record_inits.py``,
        written by ``tools/build_record_inits.py``), or None for a shape it lacks (a class defined outside kvplan's
        modules, or one added since: tests/test_record_inits.py fails then)."""
        if not _SHIPPED:
            from kvplan._record_inits import INITS

            _SHIPPED.append(INITS)
        made = _SHIPPED[0].get(_shape(cls))
        return None if made is None else _install(cls, made.__code__)

    def _repr(self):
        shown = [f[0] for f in type(self).__kvplan_record__[0] if f[6]]
        return f"{type(self).__qualname__}({', '.join(f'{name}={getattr(self, name)!r}' for name in shown)})"

    def _key(names):
        """The tuple of these fields of an instance, read in C (``operator.attrgetter``), as dataclasses' generated
        ``(self.a, self.b)``."""
        from operator import attrgetter

        if not names:
            return lambda obj: ()
        if len(names) == 1:
            one = attrgetter(names[0])
            return lambda obj: (one(obj),)
        return attrgetter(*names)

    def _eq(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        key = self.__kvplan_compared__
        return key(self) == key(other)

    def _hash(self):
        return hash(self.__kvplan_hashed__(self))

    def _frozen_setattr(self, name, value):
        if type(self).__dict__.get("__kvplan_record__") is not None or name in _names(self):
            import dataclasses

            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super(_owner(self), self).__setattr__(name, value)

    def _frozen_delattr(self, name):
        if type(self).__dict__.get("__kvplan_record__") is not None or name in _names(self):
            import dataclasses

            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super(_owner(self), self).__delattr__(name)

    def _names(self):
        return {f[0] for f in type(self).__kvplan_record__[0]}

    def _owner(self):
        return next(b for b in type(self).__mro__ if "__kvplan_record__" in b.__dict__)
