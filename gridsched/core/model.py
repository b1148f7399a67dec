"""The leaf value types of the core: what a job asks for, each a frozen value that refers to no other
core type (pure).

* :class:`Request`: a job's mapping requirement on the machine map (placed by
  :mod:`gridsched.core.placement`);
* :class:`DeviceAsk`: devices of one type a job asks for (chosen by :mod:`gridsched.core.devices`);
* :class:`Dep`: one dependency condition (parsed and evaluated by :mod:`gridsched.core.depend`).

The snapshot and the decisions (:mod:`gridsched.core.types`) hold them; the modules that work on
them name them too, so ``gridsched.core.placement.Request`` is this ``Request``.
"""

from __future__ import annotations

from gridsched.core.record import record


@record
class Request:
    """A job's mapping requirement: ``ncpus`` cores, how to lay them out (see :mod:`gridsched.core.placement`)."""

    ncpus: int
    place: str = "pack"  # "pack" | "spread" | "board"
    threads_per_core: int = 0  # 0 = any; t >= 1: at most t threads of each physical core
    exclusive_board: bool = False


@record
class DeviceAsk:
    """``count`` devices of ``type`` (of ``model``; "" = any model), bound to the job's cores by ``bind``
    (one of :data:`gridsched.core.devices.BINDS`); ``exclusive``: every slot of each device is the job's."""

    type: str
    count: int
    model: str = ""
    bind: str = "closest"
    exclusive: bool = False


@record
class Dep:
    """One condition: ``kind`` on the jobs ``ids`` (no ids for singleton)."""

    kind: str
    ids: tuple[int, ...] = ()

    def __str__(self) -> str:
        return ":".join([self.kind, *map(str, self.ids)])
