"""`@record`: the subset of `@dataclasses.dataclass` this package uses, at a tenth of its cost.

Why not dataclasses: one `vllmlint check FILE` builds ~40 of them before reading its file, and
in CPython 3.11 each costs ~0.5 ms (one `exec` per generated method, five per class) plus the
`inspect` import dataclasses pulls in (~8 ms): 30 ms of a 60 ms run, measured with
`bench/run.py`'s single-file rows. `@record` runs no code generation at all
(no `exec`: tests/test_security.py holds the package to that): its methods are closures over the
fields, and a class built often writes its own `__init__` (Word, Arg, ...).

Supported, with dataclasses' semantics: fields from annotations (inherited fields first),
`field(default=, default_factory=, repr=, compare=)`, `frozen`, `eq`, `unsafe_hash`, `slots`,
a method the class body defines itself is kept; `replace(obj, **changes)`. Anything else
(`order`, `kw_only`, `init=False`, `ClassVar`, `InitVar`) raises, so a new use cannot quietly
get other semantics; reach for dataclasses there.
"""
from __future__ import annotations

from operator import attrgetter

__all__ = ["record", "field", "replace", "FrozenInstanceError", "MISSING"]


class FrozenInstanceError(AttributeError):
    """Assigning to a field of a frozen record."""


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


MISSING = _Missing()


class Field:
    __slots__ = ("name", "default", "default_factory", "repr", "compare")

    def __init__(self, default=MISSING, default_factory=MISSING, repr: bool = True, compare: bool = True):
        if default is not MISSING and default_factory is not MISSING:
            raise ValueError("cannot specify both default and default_factory")
        self.name = ""
        self.default, self.default_factory, self.repr, self.compare = default, default_factory, repr, compare


def field(*, default=MISSING, default_factory=MISSING, repr: bool = True, compare: bool = True) -> Field:
    return Field(default, default_factory, repr, compare)


def _own_fields(cls) -> list[Field]:
    out = []
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
        if text.startswith(("ClassVar", "typing.ClassVar", "InitVar", "dataclasses.InitVar")):
            raise TypeError(f"{cls.__name__}.{name}: ClassVar/InitVar are not supported by @record")
        value = cls.__dict__.get(name, MISSING)
        f = value if isinstance(value, Field) else Field(default=value)
        f.name = name
        if isinstance(value, Field):               # as dataclasses: the default stays a class attribute
            if f.default is MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, f.default)
        out.append(f)
    return out


def _key(names: list[str]):
    """self -> the tuple of the named fields (what __eq__ and __hash__ compare)."""
    if not names:
        return lambda self: ()
    if len(names) == 1:
        one = attrgetter(names[0])
        return lambda self: (one(self),)
    return attrgetter(*names)


def _generic_init(cls, fields: list[Field], slots: bool):
    """An __init__ for a class that writes none: keyword or positional, defaults, factories.
    A class built often writes its own (this one costs ~1 us more per instance); tests hold
    a hand-written one to the fields (tests/test_record.py)."""
    names = tuple(f.name for f in fields)
    nameset = frozenset(names)
    defaults = {f.name: f.default for f in fields if f.default is not MISSING}
    factories = {f.name: f.default_factory for f in fields if f.default_factory is not MISSING}
    n = len(names)

    def complete(args, kwargs) -> list:
        """The arguments of a call that did not give every field by position, in field order."""
        if len(args) > n:
            raise TypeError(f"{cls.__name__}() takes {n} positional arguments but {len(args)} were given")
        for k in kwargs:
            if k not in nameset:
                raise TypeError(f"{cls.__name__}() got an unexpected keyword argument {k!r}")
            if names.index(k) < len(args):
                raise TypeError(f"{cls.__name__}() got multiple values for argument {k!r}")
        values = list(args)
        for k in names[len(args):]:
            if k in kwargs:
                values.append(kwargs[k])
            elif k in defaults:
                values.append(defaults[k])
            elif k in factories:
                values.append(factories[k]())
            else:
                raise TypeError(f"{cls.__name__}() missing required argument: {k!r}")
        return values

    def __init__(self, *args, **kwargs):
        if kwargs or len(args) != n:
            args = complete(args, kwargs)
        if slots:
            for k, v in zip(names, args):
                setattr(self, k, v)
        else:                                   # a frozen record's own __setattr__ is bypassed
            self.__dict__.update(zip(names, args))
    return __init__


def _build(cls, frozen: bool, eq: bool, unsafe_hash: bool, slots: bool):
    fields: dict[str, Field] = {}
    for base in reversed(cls.__mro__[1:]):
        for f in getattr(base, "__record_fields__", ()):
            fields[f.name] = f
    for f in _own_fields(cls):
        fields[f.name] = f
    all_fields = list(fields.values())
    seen_default = False
    for f in all_fields:
        if f.default is not MISSING or f.default_factory is not MISSING:
            seen_default = True
        elif seen_default:
            raise TypeError(f"{cls.__name__}: non-default field {f.name!r} follows a default one")
    own = dict(cls.__dict__)
    names = tuple(f.name for f in all_fields)
    if slots:
        cls = _slotted(cls, names)
    methods: dict[str, object] = {}
    if "__init__" not in own:
        methods["__init__"] = _generic_init(cls, all_fields, slots)
    if "__repr__" not in own:
        shown = tuple(f.name for f in all_fields if f.repr)
        running: set[int] = set()

        def __repr__(self):
            if id(self) in running:             # a record that holds itself (Launch <-> EnvEntry)
                return "..."
            running.add(id(self))
            try:
                inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in shown)
            finally:
                running.discard(id(self))
            return f"{self.__class__.__qualname__}({inner})"
        methods["__repr__"] = __repr__
    key = _key([f.name for f in all_fields if f.compare])
    if eq and "__eq__" not in own:
        def __eq__(self, other):
            if other.__class__ is self.__class__:
                return key(self) == key(other)
            return NotImplemented
        methods["__eq__"] = __eq__
    if frozen:
        fieldset = frozenset(names)

        def __setattr__(self, name, value):
            if type(self) is cls or name in fieldset:
                raise FrozenInstanceError(f"cannot assign to field {name!r}")
            super(cls, self).__setattr__(name, value)

        def __delattr__(self, name):
            if type(self) is cls or name in fieldset:
                raise FrozenInstanceError(f"cannot delete field {name!r}")
            super(cls, self).__delattr__(name)
        methods["__setattr__"], methods["__delattr__"] = __setattr__, __delattr__
    # dataclasses' hash table: eq and frozen (or unsafe_hash) hash the compared fields; eq alone
    # makes instances unhashable; no eq keeps object's hash. A __hash__ of the body is kept.
    class_hash = own.get("__hash__", MISSING)
    explicit_hash = not (class_hash is MISSING or (class_hash is None and "__eq__" in own))
    if unsafe_hash and explicit_hash:
        raise TypeError(f"{cls.__name__}: unsafe_hash with a __hash__ of its own")
    if (unsafe_hash or (eq and frozen)) and not explicit_hash:
        def __hash__(self):
            return hash(key(self))
        methods["__hash__"] = __hash__
    elif eq and not frozen and not explicit_hash:
        methods["__hash__"] = None
    for name, fn in methods.items():
        if fn is not None:
            fn.__qualname__ = f"{cls.__qualname__}.{name}"
        setattr(cls, name, fn)
    cls.__record_fields__ = tuple(all_fields)
    cls.__match_args__ = names
    return cls


def _slotted(cls, names: tuple[str, ...]):
    """A new class with __slots__ for the fields (as dataclasses' slots=True)."""
    inherited = set()
    for base in cls.__mro__[1:-1]:
        inherited.update(getattr(base, "__slots__", ()))
    body = dict(cls.__dict__)
    for n in names:
        body.pop(n, None)
    body.pop("__dict__", None)
    body.pop("__weakref__", None)
    body["__slots__"] = tuple(n for n in names if n not in inherited)
    new = type(cls)(cls.__name__, cls.__bases__, body)
    new.__qualname__ = cls.__qualname__
    return new


def record(cls=None, /, *, frozen: bool = False, eq: bool = True, unsafe_hash: bool = False,
           slots: bool = False):
    """Class decorator: `@record` or `@record(frozen=True, ...)`; see the module's docstring."""
    def wrap(c):
        if slots and frozen:
            raise TypeError(f"{c.__name__}: frozen slotted records are not supported (pickling)")
        return _build(c, frozen, eq, unsafe_hash, slots)
    return wrap if cls is None else wrap(cls)


def replace(obj, /, **changes):
    """A copy of a record with some fields changed (as dataclasses.replace)."""
    for f in obj.__record_fields__:
        if f.name not in changes:
            changes[f.name] = getattr(obj, f.name)
    return obj.__class__(**changes)
