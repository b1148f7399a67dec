"""Reading request files from ``spool/incoming``.

A request is one JSON object.  The requesting user is the owner of the file,
as the kernel says (``fstat`` of the file opened without following links), not
what the file claims.  A file that cannot be read as a request is moved to
``spool/quarantine`` with a ``.why`` file beside it and logged; it never stops
the daemon.
"""

from __future__ import annotations

import json
import logging
import os
import stat
from dataclasses import dataclass
from typing import Any

from ..spool import SUBMIT_PREFIX, Spool

log = logging.getLogger("gschedd")

MAX_REQUEST = 8 << 20  # bytes
KINDS = ("submit", "cancel", "hold", "release", "reload")


@dataclass(slots=True)
class Request:
    name: str
    uid: int
    data: dict[str, Any]


def scan(spool: Spool) -> list[Request]:
    """The readable requests waiting in the spool: submissions first, in id order, then the rest in arrival order."""
    try:
        names = [n for n in os.listdir(spool.incoming) if not n.startswith(".")]
    except FileNotFoundError:
        return []
    names.sort(key=lambda n: (not n.startswith(SUBMIT_PREFIX), n.split("-", 1)[-1] if not n.startswith(SUBMIT_PREFIX) else n))
    out = []
    for n in names:
        req = _read(spool, n)
        if req is not None:
            out.append(req)
    return out


def _read(spool: Spool, name: str) -> Request | None:
    path = spool.incoming / name
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as e:
        quarantine(spool, name, f"cannot open: {e.strerror}")
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            quarantine(spool, name, "not a regular file")
            return None
        if st.st_nlink != 1:
            quarantine(spool, name, "has more than one link")
            return None
        if st.st_size > MAX_REQUEST:
            quarantine(spool, name, f"too large ({st.st_size} bytes)")
            return None
        raw = b""
        while len(raw) <= MAX_REQUEST:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            raw += chunk
    finally:
        os.close(fd)
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        quarantine(spool, name, f"not valid JSON ({e})")
        return None
    if not isinstance(data, dict) or data.get("type") not in KINDS:
        quarantine(spool, name, "not a request (no known 'type')")
        return None
    return Request(name, st.st_uid, data)


def quarantine(spool: Spool, name: str, why: str) -> None:
    log.warning("quarantined request %s: %s", name, why)
    spool.quarantine.mkdir(parents=True, exist_ok=True)
    src = spool.incoming / name
    dst = spool.quarantine / name
    try:
        os.rename(src, dst)
    except OSError:
        try:
            os.unlink(src)
        except OSError:
            pass
    try:
        (spool.quarantine / (name + ".why")).write_text(why + "\n")
    except OSError:
        pass


def done(spool: Spool, req: Request) -> None:
    try:
        os.unlink(spool.incoming / req.name)
    except FileNotFoundError:
        pass


def check_spec(job: Any) -> str | None:
    """Why a submitted job spec cannot be taken, or None."""
    if not isinstance(job, dict):
        return "job is not an object"
    need = {
        "id": int, "name": str, "ncpus": int, "walltime": int, "script": str, "args": list,
        "workdir": str, "stdout": str, "stderr": str, "env": dict, "submit_time": (int, float),
        "checkpoint": str, "hold": bool,
    }
    for k, t in need.items():
        if k not in job:
            return f"missing field {k!r}"
        if not isinstance(job[k], t) or (t is int and isinstance(job[k], bool)):
            return f"field {k!r} has the wrong type"
    if job["id"] <= 0 or job["ncpus"] <= 0 or job["walltime"] <= 0:
        return "id, ncpus and walltime must be positive"
    if job["checkpoint"] not in ("none", "signal", "suspend", "requeue"):
        return f"unknown checkpoint mode {job['checkpoint']!r}"
    if not all(isinstance(a, str) for a in job["args"]):
        return "args must be strings"
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in job["env"].items()):
        return "env must map strings to strings"
    return None
