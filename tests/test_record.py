"""`@record` (vllmlint.model.record) behaves as `@dataclasses.dataclass` for what the package uses:
each case builds the same class both ways and compares what they do."""
from __future__ import annotations

import dataclasses
import pickle

import pytest

from vllmlint.model.record import MISSING, FrozenInstanceError, field, record, replace


def both(**options):
    """The same class body as a dataclass and as a record."""
    def make(deco, fld):
        class Point:
            x: int
            y: int = 0
            tags: list = fld(default_factory=list)
            memo: object = fld(default=None, repr=False, compare=False)

            def norm(self):
                return abs(self.x) + abs(self.y)
        return deco(**options)(Point)
    return make(dataclasses.dataclass, dataclasses.field), make(record, field)


@pytest.mark.parametrize("options", [{}, {"frozen": True}, {"eq": False}, {"frozen": True, "eq": False},
                                     {"slots": True, "unsafe_hash": True}, {"unsafe_hash": True}])
def test_same_behaviour_as_dataclass(options):
    dc, rc = both(**options)
    for cls in (dc, rc):
        cls.__qualname__ = "Point"
    a_dc, a_rc = dc(1, 2, ["t"], memo="m"), rc(1, 2, ["t"], memo="m")
    assert repr(a_dc) == repr(a_rc)
    assert (a_dc == dc(1, 2, ["t"])) == (a_rc == rc(1, 2, ["t"]))        # memo is not compared
    assert (a_dc == dc(1, 3, ["t"])) == (a_rc == rc(1, 3, ["t"]))
    assert (dc.__hash__ is None) == (rc.__hash__ is None)
    if dc.__hash__ is not None and options.get("eq", True):
        assert hash(dc(1, 2, ("t",))) == hash(dc(1, 2, ("t",)))
        assert hash(rc(1, 2, ("t",))) == hash(rc(1, 2, ("t",)))
    assert dc(5).tags == rc(5).tags == [] and dc(5).tags is not dc(5).tags and rc(5).tags is not rc(5).tags
    assert rc(3, -4).norm() == 7
    assert hasattr(a_dc, "__dict__") == hasattr(a_rc, "__dict__")
    if options.get("frozen"):
        with pytest.raises(FrozenInstanceError):
            a_rc.x = 9
        with pytest.raises(AttributeError):
            del a_rc.y
    else:
        a_rc.x = 9
        assert a_rc.x == 9


def test_defaults_stay_class_attributes_and_order_is_checked():
    @record
    class C:
        a: int = 1
        b: list = field(default_factory=list)
    assert C.a == 1 and not hasattr(C, "b")
    with pytest.raises(TypeError):
        @record
        class Bad:
            a: int = 1
            b: int


def test_inheritance_body_methods_and_exceptions():
    @record(frozen=True)
    class Base:
        x: int
        y: int = 0

    @record(frozen=True)
    class Sub(Base):
        z: str = "z"

        def __repr__(self):
            return "mine"
    s = Sub(1, 2, "q")
    assert (s.x, s.y, s.z) == (1, 2, "q") and repr(s) == "mine"
    assert s == Sub(1, 2, "q") and s != Base(1, 2) and hash(s) == hash(Sub(1, 2, "q"))
    assert replace(s, y=5) == Sub(1, 5, "q")

    @record
    class Failure(Exception):
        why: str
    with pytest.raises(Failure) as caught:
        raise Failure("because")
    assert caught.value.why == "because"


def test_recursive_repr_and_pickle():
    @record
    class Node:
        name: str
        peers: list = field(default_factory=list)
    a = Node("a")
    a.peers.append(a)
    assert repr(a) == "test_recursive_repr_and_pickle.<locals>.Node(name='a', peers=[...])"
    back = pickle.loads(pickle.dumps(Word("w", 3)))
    assert back == Word("w", 3) and hash(back) == hash(Word("w", 3))


def test_unsupported_options_raise():
    with pytest.raises(TypeError):
        record(order=True)
    with pytest.raises(TypeError):
        @record(frozen=True, slots=True)
        class FrozenSlots:
            a: int


@record(slots=True, unsafe_hash=True)
class Word:                      # module level: pickle finds classes by name
    text: str
    start: int = 0


def _package_records():
    import importlib
    import pathlib
    root = pathlib.Path(__file__).resolve().parent.parent / "vllmlint"
    found = {}
    for room in ("model", "parsers", "lint", "knowledge"):
        for path in sorted((root / room).rglob("*.py")):
            name = "vllmlint." + ".".join(path.relative_to(root).with_suffix("").parts)
            if name.endswith("__init__"):
                name = name[: -len(".__init__")]
            module = importlib.import_module(name)
            for obj in vars(module).values():
                if isinstance(obj, type) and "__record_fields__" in vars(obj) and obj.__module__ == name:
                    found[f"{name}.{obj.__qualname__}"] = obj
    return found


RECORDS = _package_records()


def test_the_package_builds_its_records_with_record():
    assert len(RECORDS) > 40
    assert {"vllmlint.parsers.shell_lex.Word", "vllmlint.model.launch.Arg", "vllmlint.model.launch.Edit"} <= set(RECORDS)


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_every_records_init_sets_its_fields(name):
    """A hand-written __init__ (the hot classes) takes the fields in order, by name or position,
    sets each, and applies the same defaults and factories as the fields say."""
    import inspect
    cls = RECORDS[name]
    fields = cls.__record_fields__
    params = list(inspect.signature(cls.__init__).parameters)[1:]
    if params != ["args", "kwargs"]:                       # written by hand: the fields, in order
        assert params == [f.name for f in fields]
    given = {f.name: object() for f in fields}
    by_name = cls(**given)
    by_position = cls(*given.values())
    for f in fields:
        assert getattr(by_name, f.name) is given[f.name] and getattr(by_position, f.name) is given[f.name]
    required = {f.name: given[f.name] for f in fields
                if f.default is MISSING and f.default_factory is MISSING}
    bare, other = cls(**required), cls(**required)
    for f in fields:
        if f.default is not MISSING:
            assert getattr(bare, f.name) == f.default
        elif f.default_factory is not MISSING:
            made = getattr(bare, f.name)
            assert made == f.default_factory() and (made is not getattr(other, f.name) or made == ())
