"""The options of a submission (:class:`Options`), a frozen record that is a plain class at run time.

A dataclass compiles its methods when its module is imported, and loads :mod:`dataclasses` (and
:mod:`inspect` under it): about a tenth of what gsub costs to start.  :func:`plain_record` makes a class
what the type checker takes for a frozen dataclass (keyword construction with defaults, equality, a
representation, no assignment) without either; :func:`replace` is ``dataclasses.replace`` for such a
record.
"""

from __future__ import annotations

from typing import Any, TypeVar, dataclass_transform

R = TypeVar("R")


@dataclass_transform(frozen_default=True)
def plain_record(cls: type[R]) -> type[R]:
    """``cls`` with an ``__init__`` that takes its annotated fields (by keyword or in order, a class
    attribute of the same name being the default), ``__eq__`` and ``__hash__`` of the fields, ``__repr__``,
    and no assignment: as ``dataclass(frozen=True)`` makes them."""
    names: tuple[str, ...] = tuple(cls.__dict__.get("__annotations__", {}))
    defaults = {n: cls.__dict__[n] for n in names if n in cls.__dict__}

    def __init__(self: Any, *args: Any, **kw: Any) -> None:
        if len(args) > len(names):
            raise TypeError(f"{cls.__name__}() takes {len(names)} positional arguments but {len(args)} were given")
        values = dict(zip(names, args))
        for n, v in kw.items():
            if n not in names or n in values:
                why = "unexpected" if n not in names else "multiple values for"
                raise TypeError(f"{cls.__name__}() got {why} keyword argument {n!r}")
            values[n] = v
        for n in names:
            if n not in values:
                if n not in defaults:
                    raise TypeError(f"{cls.__name__}() missing required argument: {n!r}")
                values[n] = defaults[n]
        self.__dict__.update(values)

    def __setattr__(self: Any, name: str, value: Any) -> None:
        raise AttributeError(f"cannot assign to field {name!r}")

    def __eq__(self: Any, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in names)

    def __hash__(self: Any) -> int:
        return hash(tuple(getattr(self, n) for n in names))

    def __repr__(self: Any) -> str:
        return f"{cls.__qualname__}({', '.join(f'{n}={getattr(self, n)!r}' for n in names)})"

    methods = {"__init__": __init__, "__setattr__": __setattr__, "__eq__": __eq__, "__hash__": __hash__}
    for name, fn in {**methods, "__repr__": __repr__}.items():
        fn.__qualname__ = f"{cls.__qualname__}.{name}"
        setattr(cls, name, fn)
    cls.__match_args__ = names  # type: ignore[attr-defined,misc]  # the fields in order, as a dataclass has
    return cls


def replace(obj: R, **changes: Any) -> R:
    """A copy of ``obj`` (a :func:`plain_record`) with the fields ``changes`` names set."""
    return type(obj)(**{**{n: getattr(obj, n) for n in type(obj).__match_args__}, **changes})  # type: ignore[attr-defined]


@plain_record
class Options:
    """The submission options (None: the configuration's default, or none)."""

    name: str | None = None
    ncpus: int | None = None
    walltime: int | None = None
    mem: int | None = None
    output: str | None = None
    error: str | None = None
    chdir: str | None = None
    hold: bool = False
    checkpoint: str | None = None
    depend: str | None = None
    array: str | None = None  # --array range text (gridsched.protocol.arrays)
    split: int | None = None  # --split: number of sub-tasks
    task_time: int | None = None  # --task-time: walltime of one sub-task
    split_file: str | None = None  # --split-file: one sub-task per line (read_split_file)
    split_retries: int | None = None  # --split-retries: runs again of a failed or timed-out sub-task
    split_devices: list[dict[str, Any]] | None = None  # --split with --gpus-per-task: each sub-task's devices
    split_device_wave: int | None = None  # the sub-tasks those devices allow at once on the machine
    parent: int | None = None  # --parent: the job this one is a child of (default: the job gsub runs in)
    no_parent: bool = False  # --no-parent: not a child even inside a job
    recoverable: bool = False  # --recoverable: the subtree is kept (held) if this job fails
    shell: str | None = None  # what runs a script without #! on line 1 (choose_shell); None: /bin/sh
    join: str | None = None  # --join: "oe" (error into the output file), "eo" (output into the error file), "n"
    default_output: str | None = None  # the output file's template when -o is not given (slurm-%j.out)
    task_sep: str = "_"  # between the job id and an array task's index in the default names (NAME.oID_INDEX)
    paths_from_submit_dir: bool = False  # a relative -o/-e is taken from the submit directory, not from -D
    defaults_in_workdir: bool = False  # the default files go in the working directory, not the submit directory
    no_index: str = "0"  # what %a is in the paths of a job that is not an array
    begin: float | None = None  # --begin: not before this time (seconds since the epoch)
    open_mode: str | None = None  # --open-mode: "append" or "truncate" (the default)
    # --export: the whole submitting environment, or (False) a login's basics and export_names of it
    export_all: bool = True
    export_names: tuple[str, ...] = ()
    env_set: tuple[tuple[str, str], ...] = ()  # --export VAR=VALUE: set over what the job gets
    exclusive: bool = False  # --exclusive: the job takes all the machine's cores and runs alone
