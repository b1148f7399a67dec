"""The core's record types: frozen dataclasses to the type checker, slotted ones with a hash at run time."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
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

    Nothing is compiled for the type when it is made: its ``__init__`` (a dataclass's, taking the same
    arguments, setting the same defaults and calling ``__post_init__``) is compiled when the first one is
    built, so a program that builds none of a type (a plain replay builds few of the core's) pays nothing
    for it.  Equality, hash and ``repr`` are
    the same functions for every record, reading the fields a dataclass's would
    (each compiled method costs a start-up that builds forty types).  They
    answer what a frozen dataclass's answer: equal when of the same class with
    equal fields (compared as a tuple), the hash of that tuple, and
    ``Name(field=value, ...)``.
    """
    made = dataclass(slots=True, repr=False, eq=False, init=False)(cls)
    fs = fields(made)  # type: ignore[arg-type]
    odd = [f.name for f in made.__dataclass_fields__.values() if f.kw_only is True or "InitVar" in str(f.type)]  # type: ignore[attr-defined]
    if odd:  # (the compiled __init__ takes every field by position or name, and no InitVar)
        raise TypeError(f"record {cls.__qualname__}: keyword-only and InitVar fields are not supported: {odd}")
    if "__init__" not in cls.__dict__:
        setattr(made, "__init__", _init_on_first_use(made))  # noqa: B010 (a method of the type, not one of its records)
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


def _init_on_first_use(cls: type) -> Callable[..., None]:
    """An ``__init__`` for record ``cls`` that compiles the real one, puts it on ``cls`` and calls it."""

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        init = _compile_init(cls)
        setattr(cls, "__init__", init)  # noqa: B010
        init(self, *args, **kwargs)

    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    __init__.__module__ = cls.__module__
    return __init__


class _Factory:
    """The default of an argument whose field has a default factory (the factory is called)."""

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


def _compile_init(cls: type) -> Callable[..., None]:
    """The ``__init__`` a dataclass would have for ``cls``: each field's argument (positional or by name,
    in order), or its default; the fields that take no argument get their default; then ``__post_init__``."""
    names: dict[str, Any] = {"_FACTORY": _FACTORY, "__name__": cls.__module__}  # (its __module__: the type's)
    args, body = [], []
    me = "__record_self__" if any(f.name == "self" for f in fields(cls)) else "self"  # (as a dataclass names it)
    for k, f in enumerate(fields(cls)):
        if f.default is not MISSING:
            names[f"_d{k}"] = f.default
            value = f"_d{k}"
        elif f.default_factory is not MISSING:
            names[f"_f{k}"] = f.default_factory
            value = f"_f{k}()"
        else:
            value = ""
        if not f.init:
            if value:
                body.append(f"{me}.{f.name} = {value}")
            continue
        if f.default_factory is not MISSING:
            args.append(f"{f.name}=_FACTORY")
            body.append(f"{me}.{f.name} = {value} if {f.name} is _FACTORY else {f.name}")
        else:
            args.append(f"{f.name}={value}" if value else f.name)
            body.append(f"{me}.{f.name} = {f.name}")
    if hasattr(cls, "__post_init__"):
        body.append(f"{me}.__post_init__()")
    source = f"def __init__({me}, {', '.join(args)}):\n    " + "\n    ".join(body or ["pass"]) + "\n"
    exec(source, names)  # noqa: S102 (the source is made here from the field names alone)
    init: Callable[..., None] = names["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init
