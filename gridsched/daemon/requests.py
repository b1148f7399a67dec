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
import math
import os
import pwd
import stat
from dataclasses import dataclass
from typing import Any

from ..spool import SUBMIT_PREFIX, Spool

log = logging.getLogger("gschedd")

MAX_REQUEST = 8 << 20  # bytes
MAX_BATCH = 1000  # request files read in one turn of the daemon's loop
MAX_INT = (1 << 62) - 1  # a number the job table (SQLite) holds
KINDS = ("submit", "cancel", "hold", "release", "reload", "resv_create", "resv_delete", "drain", "resume", "yield")


@dataclass(slots=True)
class Request:
    name: str
    uid: int
    data: dict[str, Any]


def scan(spool: Spool) -> list[Request]:
    """The readable requests waiting in the spool: submissions first, in id order, then the rest in arrival order.

    At most :data:`MAX_BATCH` files are looked at in one call.
    """
    try:
        names = [n for n in os.listdir(spool.incoming) if not n.startswith(".")]
    except FileNotFoundError:
        return []
    names.sort(key=lambda n: (not n.startswith(SUBMIT_PREFIX), n.split("-", 1)[-1] if not n.startswith(SUBMIT_PREFIX) else n))
    if names and names[0].startswith(SUBMIT_PREFIX) and not _room(spool):
        # taking a job in writes its script and its row: leave submissions waiting until there is room
        names = [n for n in names if not n.startswith(SUBMIT_PREFIX)]
    out = []
    for n in names[:MAX_BATCH]:  # the rest next turn: a flood never stalls the daemon's loop
        req = _read(spool, n)
        if req is not None:
            out.append(req)
    return out


_full_logged = False


def _room(spool: Spool) -> bool:
    """Whether the spool's file system has room to take submissions in (logged once when it has not)."""
    global _full_logged
    try:
        spool.check_space()
    except OSError as e:
        if not _full_logged:
            log.warning("spool %s: %s; submissions wait in incoming/ until there is room", spool.root, e.strerror)
            _full_logged = True
        return False
    if _full_logged:
        log.info("spool %s has room again: taking submissions in", spool.root)
        _full_logged = False
    return True


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
        try:
            while len(raw) <= MAX_REQUEST:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    break
                raw += chunk
        except OSError as e:
            quarantine(spool, name, f"cannot read: {e.strerror}")
            return None
    finally:
        os.close(fd)
    if len(raw) > MAX_REQUEST:
        quarantine(spool, name, f"too large (grew past {MAX_REQUEST} bytes while read)")
        return None
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        quarantine(spool, name, f"not valid JSON ({str(e)[:200]})")
        return None
    if not isinstance(data, dict) or data.get("type") not in KINDS:
        quarantine(spool, name, "not a request (no known 'type')")
        return None
    if data["type"] == "submit" and st.st_uid != 0 and isinstance(data.get("job"), dict):
        why = _identity(data["job"], st.st_uid, st.st_gid)
        if why:
            quarantine(spool, name, why)
            return None
    return Request(name, st.st_uid, data)


def _identity(job: dict[str, Any], uid: int, file_gid: int) -> str | None:
    """Make the user a submission names the writer's; why its group cannot be the writer's, or None.

    The writer of the file is the user (see the module's docstring); the name
    it gives is replaced by that user's, and the group it asks to run with
    must be the file's group or one the user belongs to.
    """
    try:
        pw = pwd.getpwuid(uid)
    except KeyError:
        pw = None
    job["user"] = pw.pw_name if pw else str(uid)
    gid = job.get("gid")
    if gid is None:
        return None
    if not isinstance(gid, int) or isinstance(gid, bool):
        return "field 'gid' has the wrong type"
    groups = {file_gid}
    if pw is not None:
        groups.add(pw.pw_gid)
        try:
            groups.update(os.getgrouplist(pw.pw_name, pw.pw_gid))
        except OSError:
            pass
    if gid not in groups:
        return f"claims gid {gid}, which {job['user']} (uid {uid}) is not a member of"
    return None


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
    why_name = name + ".why" if len(name.encode()) <= 250 else name[:120] + "....why"
    try:
        (spool.quarantine / why_name).write_text(why + "\n")
    except OSError:
        pass


def pending_cancels(spool: Spool) -> dict[int, set[int]]:
    """``{job id: uids}`` of the cancel requests waiting in the spool, read without taking them in."""
    out: dict[int, set[int]] = {}
    try:
        names = [n for n in os.listdir(spool.incoming) if n.startswith("cancel-")]
    except OSError:
        return out
    for n in names:
        try:
            fd = os.open(spool.incoming / n, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or st.st_size > 1 << 20:
                continue
            data = json.loads(os.read(fd, 1 << 20))
        except (OSError, ValueError, UnicodeDecodeError, RecursionError):
            continue
        finally:
            os.close(fd)
        ids = data.get("jobs") if isinstance(data, dict) and data.get("type") == "cancel" else None
        if isinstance(ids, list):
            for i in ids:
                if isinstance(i, int) and not isinstance(i, bool):
                    out.setdefault(i, set()).add(st.st_uid)
    return out


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
    if max(job["id"], job["ncpus"], job["walltime"]) > MAX_INT:
        return "id, ncpus or walltime too large"
    try:
        if not math.isfinite(float(job["submit_time"])):
            raise OverflowError
    except OverflowError:
        return "field 'submit_time' is not a finite number"
    mem = job.get("mem")
    if mem is not None and (not isinstance(mem, int) or isinstance(mem, bool) or not 0 < mem <= MAX_INT):
        return "field 'mem' must be a positive number of bytes"
    if job["checkpoint"] not in ("none", "signal", "suspend", "requeue"):
        return f"unknown checkpoint mode {job['checkpoint']!r}"
    if not all(isinstance(a, str) for a in job["args"]):
        return "args must be strings"
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in job["env"].items()):
        return "env must map strings to strings"
    return None
