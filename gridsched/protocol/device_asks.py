"""How a user asks for devices (``--gpus``, ``--gres``) and how a job's devices are written down: the values
the commands, the boundary and the daemon share."""

from __future__ import annotations

import re
from collections.abc import Iterable

from gridsched.core.devices import DeviceAsk, label, refusal  # noqa: F401 - how the commands and the daemon name them


def format_keys(keys: Iterable[tuple[str, int]]) -> str:
    """``gpu:0,1;fpga:2``: a job's devices in one short text (empty for none)."""
    per: dict[str, list[int]] = {}
    for t, i in sorted(set(keys)):
        per.setdefault(t, []).append(i)
    return ";".join(f"{t}:{','.join(map(str, ix))}" for t, ix in per.items())


def parse_keys(text: str) -> tuple[tuple[str, int], ...]:
    """The inverse of :func:`format_keys` (what cannot be read is left out)."""
    out = []
    for part in (text or "").split(";"):
        t, _, ix = part.partition(":")
        for i in ix.split(","):
            if t and i.strip().isdigit():
                out.append((t, int(i)))
    return tuple(sorted(set(out)))


TYPE_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}\Z")
MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}\Z")


class AskError(ValueError):
    """A device request that cannot be read: the message names the option and the value."""


def _count(opt: str, text: str) -> int:
    t = text.strip()
    if not t.isdigit():
        raise AskError(f"{opt}: {t!r} is not a count of devices")
    n = int(t)
    if n < 1:
        raise AskError(f"{opt}: at least 1 device is needed")
    if n > 4096:
        raise AskError(f"{opt}: at most 4096 devices")
    return n


def parse_gpus(text: str, opt: str = "--gpus") -> tuple[str, int]:
    """``--gpus N`` or ``--gpus MODEL:N`` (as Slurm's ``--gpus [type:]N``): ``(model, count)``."""
    shown = f"{opt} {text}"
    model, _, n = text.strip().rpartition(":")
    if model and not MODEL_NAME.match(model):
        raise AskError(f"{shown}: {model!r} is not a model name")
    return model, _count(shown, n)


def parse_gres(text: str, opt: str = "--gres") -> tuple[str, str, int]:
    """``--gres NAME[:MODEL][:N]`` (Slurm's form; N defaults to 1): ``(type, model, count)``."""
    shown = f"{opt} {text}"
    parts = text.strip().split(":")
    name = parts[0].lower()
    if not TYPE_NAME.match(name):
        raise AskError(f"{shown}: {parts[0]!r} is not a device type (such as gpu)")
    if len(parts) == 1:
        return name, "", 1
    if len(parts) == 2:
        if parts[1].strip().isdigit() or parts[1].strip().lstrip("-").isdigit():
            return name, "", _count(shown, parts[1])
        if not MODEL_NAME.match(parts[1]):
            raise AskError(f"{shown}: {parts[1]!r} is not a model name")
        return name, parts[1], 1
    if len(parts) == 3:
        if not MODEL_NAME.match(parts[1]):
            raise AskError(f"{shown}: {parts[1]!r} is not a model name")
        return name, parts[1], _count(shown, parts[2])
    raise AskError(f"{shown}: expected NAME[:MODEL][:COUNT] such as gpu:2 or gpu:a100:2")


def asks_to_spec(asks: Iterable[DeviceAsk]) -> list[dict[str, object]]:
    """The ``devices`` of a job's spec."""
    return [
        {"type": a.type, "count": a.count, "model": a.model, "bind": a.bind, "exclusive": a.exclusive} for a in asks
    ]


def asks_from_spec(raw: object) -> tuple[DeviceAsk, ...]:
    """The inverse of :func:`asks_to_spec` for a spec already checked at the boundary."""
    if not isinstance(raw, list):
        return ()
    return tuple(
        DeviceAsk(
            str(x["type"]),
            int(x["count"]),
            str(x.get("model", "")),
            str(x.get("bind", "closest")),
            bool(x.get("exclusive", False)),
        )
        for x in raw
        if isinstance(x, dict)
    )
