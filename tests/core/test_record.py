"""A core record (:func:`gridsched.core.record.record`) answers equality, hash and ``repr`` as the frozen dataclass
it stands for, and works with the functions of :mod:`dataclasses`."""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import KW_ONLY, InitVar, dataclass, field

import pytest

from gridsched.core.record import record


@record
class Rec:
    a: int
    b: tuple[int, ...] = ()
    c: str | None = None
    hidden: float = field(default=0.0, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Frozen:
    a: int
    b: tuple[int, ...] = ()
    c: str | None = None
    hidden: float = field(default=0.0, compare=False, repr=False)


@record
class One:
    x: int


@record
class Own:
    x: int

    def __repr__(self) -> str:
        return f"<own {self.x}>"


def test_a_record_answers_as_the_frozen_dataclass() -> None:
    for args in [(1,), (1, (2, 3)), (1, (2,), "z", 4.5)]:
        r, f = Rec(*args), Frozen(*args)
        assert repr(r) == repr(f).replace("Frozen(", "Rec(")
        assert hash(r) == hash(f)
        assert r == Rec(*args) and not r != Rec(*args)
    assert Rec(1, hidden=1.0) == Rec(1, hidden=2.0)  # a field not compared
    assert Rec(1) != Rec(2) and Rec(1, (2,)) != Rec(1, (3,))
    assert Rec(1) != Frozen(1) and Rec(1) != (1, (), None)  # another class is never equal
    assert hash(One(7)) == hash((7,)) and One(7) == One(7) and One(7) != One(8)
    assert repr(One(7)) == "One(x=7)"
    assert len({Rec(1), Rec(1), Rec(2)}) == 2


def test_a_records_own_methods_stand() -> None:
    assert repr(Own(3)) == "<own 3>"


def test_a_record_is_a_dataclass_to_the_dataclasses_functions() -> None:
    r = Rec(1, (2,), "z", 4.5)
    assert dataclasses.is_dataclass(r)
    assert [f.name for f in dataclasses.fields(r)] == ["a", "b", "c", "hidden"]
    assert dataclasses.replace(r, a=5) == Rec(5, (2,), "z", 4.5)
    assert dataclasses.asdict(r) == {"a": 1, "b": (2,), "c": "z", "hidden": 4.5}
    assert pickle.loads(pickle.dumps(r)) == r


@record
class Made:
    """Every kind of field a record's ``__init__`` sets."""

    a: int
    items: list[int] = field(default_factory=list)
    b: str = "b"
    later: tuple[int, ...] = field(init=False, default=(), compare=False)
    derived: int = field(init=False, compare=False)

    def __post_init__(self) -> None:
        self.derived = self.a * 2


@dataclass
class MadeByDataclass:
    a: int
    items: list[int] = field(default_factory=list)
    b: str = "b"
    later: tuple[int, ...] = field(init=False, default=())
    derived: int = field(init=False)

    def __post_init__(self) -> None:
        self.derived = self.a * 2


def test_a_records_init_is_compiled_when_the_first_one_is_built() -> None:
    @record
    class Late:
        """A record none of which is built before the test asks."""

        a: int
        b: int = 0

    waiting = Late.__init__
    assert waiting.__module__ == __name__
    assert Late(1).b == 0  # the first one compiles the real __init__
    assert Late.__init__ is not waiting
    assert Late.__init__.__qualname__.endswith("Late.__init__") and Late.__init__.__module__ == __name__
    assert Late(2, b=3) == Late(2, 3) and Late(a=4).a == 4


def test_a_records_init_takes_and_sets_what_a_dataclasss_does() -> None:
    for args, kw in [((1,), {}), ((1, [2]), {}), ((1,), {"b": "x"}), ((), {"a": 3, "items": [4], "b": "y"})]:
        r, d = Made(*args, **kw), MadeByDataclass(*args, **kw)  # type: ignore[arg-type]
        assert (r.a, r.items, r.b, r.later, r.derived) == (d.a, d.items, d.b, d.later, d.derived)
    first, second = Made(1), Made(1)
    first.items.append(5)
    assert second.items == []  # a fresh default from the factory for each
    for bad_args, bad_kw in [((), {}), ((1, [], "b", 9), {}), ((1,), {"later": ()}), ((1,), {"c": 2})]:
        try:
            MadeByDataclass(*bad_args, **bad_kw)  # type: ignore[arg-type]
        except TypeError as e:
            expected = str(e).replace("MadeByDataclass", "Made")
        try:
            Made(*bad_args, **bad_kw)  # type: ignore[arg-type]
        except TypeError as e:
            assert str(e).endswith(expected.split("__init__()", 1)[1])
        else:
            raise AssertionError(f"Made{bad_args} {bad_kw} was built")


@record
class Selfish:
    """A record with a field named ``self``."""

    self: int
    other: int = 1


def test_a_field_may_be_named_self() -> None:
    assert (Selfish(3).self, Selfish(self=4, other=5).other) == (3, 5)


def test_what_the_compiled_init_cannot_take_is_refused_when_the_type_is_made() -> None:
    with pytest.raises(TypeError, match="keyword-only and InitVar fields are not supported: \\['b'\\]"):

        @record
        class KwOnly:
            a: int
            _: KW_ONLY
            b: int = 0

    with pytest.raises(TypeError, match="keyword-only and InitVar fields are not supported: \\['scale'\\]"):

        @record
        class WithInitVar:
            a: int
            scale: InitVar[int] = 1
