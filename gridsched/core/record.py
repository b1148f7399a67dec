"""The core's record types: frozen dataclasses to the type checker, slotted ones with a hash at run time."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from operator import attrgetter
from typing import Any, TypeVar, dataclass_transform

_T = TypeVar("_T")


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def record(cls: type[_T]) -> type[_T]:
    """A frozen dataclass to the type checker; at run time a slotted one with a hash, not frozen.

    A frozen dataclass sets each field through ``object.__setattr__``, which makes
    building one several times slower (gsim builds hundreds of thousands of the types
    built once or more per pass: snapshots, jobs, starts, plans), and it compiles two
    more methods when its module is imported (``__setattr__``, ``__delattr__``: about
    1.4 M instructions a type, for the forty of a replay's start-up).  Nothing changes
    one (the type checker refuses it).

    Only ``__init__`` is compiled for the type: equality, hash and ``repr`` are
    the same functions for every record, reading the fields a dataclass's would
    (each compiled method costs a start-up that builds forty types).  They
    answer what a frozen dataclass's answer: equal when of the same class with
    equal fields (compared as a tuple), the hash of that tuple, and
    ``Name(field=value, ...)``.
    """
    made = dataclass(slots=True, repr=False, eq=False)(cls)
    fs = fields(made)  # type: ignore[arg-type]
    compared = _tuple_of([f.name for f in fs if f.compare])
    hashed = _tuple_of([f.name for f in fs if (f.compare if f.hash is None else f.hash)])
    shown = tuple(f.name for f in fs if f.repr)

    def __eq__(self: Any, other: object) -> bool:
        if other.__class__ is self.__class__:
            return compared(self) == compared(other)
        return NotImplemented

    def __hash__(self: Any) -> int:
        return hash(hashed(self))

    def __repr__(self: Any) -> str:
        return f"{self.__class__.__qualname__}({', '.join(f'{n}={getattr(self, n)!r}' for n in shown)})"

    for fn in (__eq__, __hash__, __repr__):
        if fn.__name__ not in cls.__dict__:  # (one of the type's own stands, as a dataclass leaves it)
            fn.__qualname__ = f"{made.__qualname__}.{fn.__name__}"
            setattr(made, fn.__name__, fn)
    return made


def _tuple_of(names: list[str]) -> Callable[[Any], tuple[Any, ...]]:
    """The fields ``names`` of a record, as a tuple (as a dataclass compares and hashes them)."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        one = attrgetter(names[0])
        return lambda x: (one(x),)
    return lambda x: ()
