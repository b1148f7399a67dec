"""Taking request files in from ``spool/incoming``: the daemon's side of the trust boundary.

Each file is opened without following links and without blocking
(``O_NOFOLLOW | O_NONBLOCK``) and ``fstat``-ed: only a regular file with one
link and at most :data:`gridsched.protocol.requests.MAX_REQUEST` bytes is read.  Its
writer is its owner, as the kernel says; :func:`gridsched.protocol.requests.parse`
turns its JSON into a typed request.  A file that cannot be taken is a
:class:`Refusal`: the daemon moves it to ``quarantine/`` (root's, where no user
writes) with the reason beside it and, when it named a new id, records the
refusal for the submitter (``gsub --wait`` and ``gstat`` read it).  Nothing
here follows a path a user can change: moving a link moves the link, and the
reason is written to a new file (``O_EXCL | O_NOFOLLOW``) then renamed.
"""

from __future__ import annotations

import hashlib
import logging
import os
import pwd
import stat
import time
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

from gridsched.protocol import requests as rq
from gridsched.protocol.spool import Spool, atomic_write

log = logging.getLogger("gschedd")

MAX_BATCH = 1000  # request files read in one turn of the daemon's loop


@dataclass(frozen=True, slots=True)
class Refusal:
    name: str
    uid: int | None  # the writer, when the file could be looked at
    new_id: int | None  # the new id its name brings, if any
    reason: str


class Senders:
    """Who a uid is (name, groups, admin), from the password and group databases, looked up again after
    :data:`FRESH` seconds (a user taken out of a group loses it for new requests within that time)."""

    FRESH = 30.0

    def __init__(self, admins: Iterable[int]) -> None:
        self.admins = frozenset(admins)
        self.cache: dict[tuple[int, int], tuple[float, rq.Sender]] = {}

    def get(self, uid: int, file_gid: int) -> rq.Sender:
        key = (uid, file_gid)
        now = time.monotonic()
        hit = self.cache.get(key)
        if hit is None or now - hit[0] > self.FRESH:
            hit = self.cache[key] = (now, sender(uid, file_gid, uid in self.admins))
        return hit[1]


def sender(uid: int, file_gid: int, admin: bool) -> rq.Sender:
    groups = {file_gid}
    try:
        pw = pwd.getpwuid(uid)
    except KeyError:
        return rq.Sender(uid, str(uid), frozenset(groups), admin)
    groups.add(pw.pw_gid)
    try:
        groups.update(os.getgrouplist(pw.pw_name, pw.pw_gid))
    except OSError:
        pass
    return rq.Sender(uid, pw.pw_name, frozenset(groups), admin)


def _order(name: str) -> tuple[bool, str]:
    """Requests that bring new ids first, by id; then the rest by their time of writing."""
    if name.startswith(rq.SUBMIT_PREFIX):
        return (False, name)
    return (True, name.split("-", 1)[-1])


def scan(
    spool: Spool, senders: Senders, room: bool = True, skip: Collection[str] = ()
) -> tuple[list[rq.Received], list[Refusal]]:
    """The requests waiting in the spool, read and parsed (at most :data:`MAX_BATCH` files), and the refusals.

    Without ``room`` (the spool's disk is full) submissions are left waiting; names in ``skip`` (served
    already, waiting to be removed) are passed over.
    """
    try:
        names = [n for n in os.listdir(spool.incoming) if not n.startswith(".") and n not in skip]
    except FileNotFoundError:
        return [], []
    names.sort(key=_order)
    if not room:
        names = [n for n in names if not n.startswith(rq.SUBMIT_PREFIX)]
    got: list[rq.Received] = []
    refused: list[Refusal] = []
    me = os.geteuid()
    for n in names[:MAX_BATCH]:  # the rest next turn: a flood never stalls the daemon's loop
        out = read(spool, n, senders, me)
        if isinstance(out, rq.Received):
            got.append(out)
        elif out is not None:
            refused.append(out)
    return got, refused


def read(spool: Spool, name: str, senders: Senders, me: int | None = None) -> rq.Received | Refusal | None:
    """One request file: parsed, refused, or None (gone, or one of the daemon's own id claims)."""
    new_id = rq.id_of_name(name)
    try:
        fd = os.open(spool.incoming / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as e:
        return Refusal(name, _owner(spool, name), new_id, f"cannot open: {e.strerror}")
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return Refusal(name, st.st_uid, new_id, "not a regular file")
        if st.st_nlink != 1:
            return Refusal(name, st.st_uid, new_id, "has more than one link")
        if st.st_size == 0 and new_id is not None and st.st_uid == (os.geteuid() if me is None else me):
            return None  # an id the daemon claims for itself while it takes an array in (Spool.claim_ids)
        if st.st_size > rq.MAX_REQUEST:
            return Refusal(name, st.st_uid, new_id, f"too large ({st.st_size} bytes)")
        chunks = []
        size = 0
        try:
            while size <= rq.MAX_REQUEST:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
        except OSError as e:
            return Refusal(name, st.st_uid, new_id, f"cannot read: {e.strerror}")
    finally:
        os.close(fd)
    raw = b"".join(chunks)
    if len(raw) > rq.MAX_REQUEST:
        return Refusal(name, st.st_uid, new_id, f"too large (grew past {rq.MAX_REQUEST} bytes while read)")
    who = senders.get(st.st_uid, st.st_gid)
    try:
        req = rq.parse(rq.loads(raw), name, who)
    except rq.Refused as e:
        return Refusal(name, st.st_uid, new_id, str(e))
    digest = hashlib.sha256(raw).hexdigest() if new_id is not None else ""
    return rq.Received(name, who, req, digest)


def _owner(spool: Spool, name: str) -> int | None:
    try:
        return os.lstat(spool.incoming / name).st_uid
    except OSError:
        return None


def quarantine(spool: Spool, name: str, why: str) -> None:
    """Move the request file ``name`` out of ``incoming/`` into ``quarantine/``, with the reason beside it."""
    why = rq.safe(why, 1000)
    log.warning("quarantined request %s: %s", rq.safe(name, 120), why)
    spool.quarantine.mkdir(parents=True, exist_ok=True)
    name_there = _move_aside(spool, name)
    why_name = name_there + ".why" if len(name_there.encode()) <= 250 else name_there[:120] + "....why"
    try:
        atomic_write(spool.quarantine / why_name, (why + "\n").encode(), mode=0o644, fsync=False)
    except OSError:
        pass


def _move_aside(spool: Spool, name: str) -> str:
    """Move ``incoming/NAME`` into ``quarantine/`` (a link is moved, never followed); the name it has there.

    Where the move fails because ``quarantine/`` holds an entry of that name that it cannot replace (a
    directory sent under the name of a file quarantined before, or the other way round), it goes under a
    new name: whatever a user puts in ``incoming/`` leaves it, so that it is not read again turn after turn
    ahead of other users' requests.
    """
    src = spool.incoming / name
    try:
        os.rename(src, spool.quarantine / name)
        return name
    except FileNotFoundError:
        return name
    except OSError:
        pass
    stem = name if len(name.encode()) <= 200 else name[:60]
    for k in range(100):
        other = f"{stem}.{time.time_ns()}.{k}"
        if os.path.lexists(spool.quarantine / other):  # only the daemon writes in quarantine/
            continue
        try:
            os.rename(src, spool.quarantine / other)
            return other
        except FileNotFoundError:
            return name
        except OSError:
            break
    try:
        os.unlink(src)
    except OSError:
        log.error("request %s cannot leave %s", rq.safe(name, 120), spool.incoming)
    return name


def make_durable(db: Path) -> bool:
    """Put the job table's committed writes on disk before the requests they answer leave ``incoming/``;
    False (logged) if that fails: the requests then stay, to be let go of after a later sync.

    The table is SQLite in WAL mode with ``synchronous=NORMAL``: a commit survives the death of the daemon
    but reaches the disk only at the next checkpoint, so a power loss could undo it.  One fsync of the log
    covers every commit made since the last, however many requests they served."""
    for path in (db.with_name(db.name + "-wal"), db):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            continue
        except OSError as e:
            log.error("cannot sync the job table %s (%s): served requests stay in incoming/", path, e)
            return False
        try:
            os.fsync(fd)
        except OSError as e:
            log.error("cannot sync the job table %s (%s): served requests stay in incoming/", path, e)
            return False
        finally:
            os.close(fd)
        return True
    return True


def done(spool: Spool, name: str) -> None:
    try:
        os.unlink(spool.incoming / name)
    except FileNotFoundError:
        pass


def pending_cancels(spool: Spool, senders: Senders) -> dict[int, set[int]]:
    """``{job id: uids}`` of the cancel requests waiting in the spool, read without taking them in."""
    out: dict[int, set[int]] = {}
    try:
        names = [n for n in os.listdir(spool.incoming) if n.startswith("cancel-")]
    except OSError:
        return out
    for n in names:
        got = read(spool, n, senders)
        if isinstance(got, rq.Received) and isinstance(got.request, rq.Cancel):
            for i in got.request.jobs:
                out.setdefault(i, set()).add(got.sender.uid)
    return out
