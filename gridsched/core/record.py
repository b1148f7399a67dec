"""The core's record types: frozen dataclasses to the type checker, slotted ones with a hash at run time."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar, dataclass_transform

_T = TypeVar("_T")


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
def record(cls: type[_T]) -> type[_T]:
    """A frozen dataclass to the type checker; at run time a slotted one with a hash, not frozen.

    A frozen dataclass sets each field through ``object.__setattr__``, which makes
    building one several times slower (gsim builds hundreds of thousands of the types
    built once or more per pass: snapshots, jobs, starts, plans), and it compiles two
    more methods when its module is imported (``__setattr__``, ``__delattr__``: about
    1.4 M instructions a type, for the forty of a replay's start-up).  Nothing changes
    one (the type checker refuses it); equality, hash and ``repr`` are a frozen one's.
    """
    return dataclass(slots=True, unsafe_hash=True)(cls)
