"""The jobs a spool knows of, as the commands and the Python API read them.

The state db (written by the daemon) is read-only here; submit requests the
daemon has not taken in yet are shown as pending jobs.  The per-job checks of
gdel, ghold and grls live here too, so the commands and
:mod:`gridsched.api.client` refuse the same things with the same words.

Standard library only (sqlite3 is imported when a db exists).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict, cast

from gridsched.protocol.jobs import TERMINAL, JobState
from gridsched.protocol.specview import SpecView

if TYPE_CHECKING:
    from typing import TypeVar

    from gridsched.protocol.spool import Spool
    from gridsched.protocol.state import StateDB
    from gridsched.protocol.tree import Yielded

LIVE_STATES = tuple(s for s in JobState if s not in TERMINAL)
CHUNK = 500  # ids in one SQL statement at most (within SQLite's limit on the number of parameters)
# The state db's reader (:mod:`gridsched.protocol.state`) gives each row as a JobRow (a brief row or one read
# with some keys of its spec has fewer, as JobRow says); they are cast to ViewRow, the rows a view adds keys to,
# where they are read here.


class QueueError(Exception):
    """The state db cannot be read, or a request cannot be written into the spool; the message says why."""


class IdRecord(TypedDict):
    """How the request that brought an id was taken (the state db's ``ids`` table): who sent it, its digest,
    when, and the reason it was refused (None: taken in)."""

    uid: int | None
    digest: str
    time: float
    refused: str | None


# For the type checker only: a class made at run time would cost every command that reads the queue (gstat's
# start) for nothing (a TypedDict's fields are compiled as forward references: about 0.1 M instructions each).
if TYPE_CHECKING:

    class JobRow(TypedDict):
        """A job's row as the commands read it from the state db (:data:`gridsched.protocol.state.ALL_COLUMNS`,
        decoded): ``segments`` and ``run`` parsed from their JSON, ``spec`` read as a :class:`SpecView`, ``backfilled``
        a bool.  A reader that asks for only some keys of the spec gets only those; ``run`` is then ``{}``.  The
        columns added after the table's first form (``devices``, ``max_rss``, ``cpu_user``, ``cpu_sys``, ``planned``)
        have their defaults in a row written before them, and are absent from a brief row."""

        id: int
        state: JobState
        user: str
        uid: int | None
        name: str
        ncpus: int
        walltime: int
        submit_time: float
        start_time: float | None
        end_time: float | None
        cores: str
        exit_code: int | None
        exit_signal: int | None
        reason: str
        backfilled: bool
        restarts: int
        preemptions: int
        checkpoints: int
        elapsed: float
        lost: float
        predicted_start: float | None
        segments: list[Segment]
        run: RunInfo
        spec: SpecView
        devices: NotRequired[str]  # the devices it holds or last held: gpu:0,1;fpga:2
        max_rss: NotRequired[int | None]  # bytes, over all its segments (None: not measured)
        cpu_user: NotRequired[float | None]  # seconds
        cpu_sys: NotRequired[float | None]  # seconds
        # a pending splittable job's planned sub-tasks (gridsched.protocol.state.planned_text)
        planned: NotRequired[str]

    class Segment(TypedDict, total=False):
        """One run of a job, as the daemon records it in its row's ``segments``: when it started and ended
        (absent or None: it runs), on which cores, boards and devices, whether it resumed a suspended run, how
        it ended (``outcome``), its private temporary directory, and what its processes used as its shepherd
        measured it (``usage``: ``max_rss`` bytes, ``cpu_user``, ``cpu_sys`` seconds)."""

        start: float
        end: float | None
        cores: str
        boards: str
        devices: str
        resumed: bool
        outcome: str
        tmpdir: str
        usage: dict[str, float | int | None]

    class RunInfo(TypedDict, total=False):
        """What the daemon keeps of a live job's run in its row (``run``), to find it again after a restart: its
        segment, when it started, its shepherd (pid and start ticks), why and when it was told to stop, its
        deadline, its planned end, the cores it holds beyond its own and lends, and the warning signal and
        time-limit mails sent.  ``{}`` in a row read without it."""

        segment: int
        start: float | None
        shepherd: int | None
        ticks: int | None
        stop: str | None  # a Stop, as its text
        kill_at: float | None
        deadline: float | None
        planned: float | None
        checkpoint: str  # a Checkpoint, as its text
        held: list[int]
        lent: list[list[float | None]]
        warned: bool
        mailed: int

    class Usage(TypedDict):
        """What a job's processes used over all its segments (the jobs table's usage columns, summed from its
        segments' ``usage``): peak memory in bytes, CPU seconds (None: not measured)."""

        max_rss: int | None
        cpu_user: float | None
        cpu_sys: float | None

    class ViewRow(JobRow, total=False):
        """A job row as the commands show it (what :func:`load_jobs` and the other readers here give): a
        :class:`JobRow`, and what a view adds to it.  The row of an array's tasks not made yet, in one state
        (:func:`unmade_rows`), has their indices (``unmade``, range text), ``count`` and when the cancelled ones
        were last cancelled (``cancel_time``); gstat adds the id it shows (``label``: ``7_[0-9]``), a ``note``, a
        splittable job's sub-task counts (``split_counts``), and for gstat -f the job's ``children`` and what
        it has ``yielded``."""

        unmade: str
        count: int
        cancel_time: float | None
        label: str
        note: str
        split_counts: dict[str, int]
        children: list[int]
        yielded: Yielded | None

    class RestRow(TypedDict):
        """The record of an array's tasks not made yet (the state db's ``arrays`` table): the array's id, owner,
        name, cores and walltime, how many tasks it has (``total``), the indices still pending, held (``reason``
        says why) and cancelled before they were made (range text), when the last were cancelled, and the
        array's public spec."""

        id: int
        user: str
        uid: int
        name: str
        ncpus: int
        walltime: int
        submit_time: float
        total: int
        pending: str
        held: str
        cancelled: str
        reason: str
        spec: SpecView
        cancel_time: float | None

    _Keyed = TypeVar("_Keyed", bound=Mapping[str, Any])  # a submit request's spec, or a row: each has an id


def from_submit(spec: Mapping[str, Any]) -> ViewRow:
    """A job row for a submit request the daemon has not taken in yet (its values as its writer wrote them:
    the daemon checks them when it takes the request in)."""
    row: dict[str, Any] = {
        "id": spec["id"],
        "name": spec.get("name", ""),
        "user": spec.get("user", ""),
        "uid": spec.get("uid"),
        "state": JobState.HELD if spec.get("hold") else JobState.PENDING,
        "ncpus": spec.get("ncpus"),
        "walltime": spec.get("walltime"),
        "submit_time": spec.get("submit_time"),
        "start_time": None,
        "end_time": None,
        "elapsed": 0.0,
        "lost": 0.0,
        "predicted_start": None,
        "cores": "",
        "exit_code": None,
        "exit_signal": None,
        "reason": "submitted, not yet taken in by the daemon",
        "restarts": 0,
        "preemptions": 0,
        "checkpoints": 0,
        "backfilled": False,
        "segments": [],
        "run": {},
        "spec": spec if isinstance(spec, SpecView) else SpecView(dict(spec)),
    }
    return cast("ViewRow", row)


def private(spool: Spool, job: ViewRow) -> ViewRow:
    """``job`` with the private part of its spec (environment, arguments, paths) when the caller may read it.

    The daemon keeps that part in ``jobs/ID/private.json``, readable by the
    job's owner and root only; for anyone else the job comes back unchanged.
    """
    from gridsched.protocol.jobs import PRIVATE_FILE

    try:
        with open(spool.job_dir(job["id"]) / PRIVATE_FILE, "rb") as f:
            extra = json.loads(f.read(1 << 22))
    except (OSError, ValueError):
        return job
    if isinstance(extra, dict):
        job = {**job, "spec": SpecView({**job["spec"].raw, **extra})}
    return job


def load_jobs(
    spool: Spool, ids: Iterable[int] | None = None, live: bool = False, brief: bool = False, folded: bool = False
) -> list[ViewRow]:
    """Every job the spool knows of, by id: the state db's rows, and submits not yet taken in.

    The submits are listed first: the daemon removes a request only after
    committing its row, so a job whose request vanished in between is in the
    db when it is read next, and no job is ever missed.

    ``live``: only the jobs that have not ended (the rows of a finished job are not read at all), with
    what a view of them needs of the others: the pieces of a live splittable job (its sub-task counts)
    and, ``folded``, every task of an array with a task that has not ended (its row shows them all).
    ``brief``: brief rows (:data:`gridsched.protocol.state.BRIEF_COLUMNS`), for the queue table.
    """
    idl = None if ids is None else list(ids)
    waiting = spool.pending_submits()
    rows: dict[int, ViewRow] = {}
    if spool.db.exists():
        import sqlite3

        from gridsched.protocol.state import StateDB

        try:
            db = StateDB(spool.db)
            try:
                for j in cast(
                    "Iterator[ViewRow]", db.iter_jobs(states=LIVE_STATES if live else None, ids=idl, brief=brief)
                ):
                    rows[j["id"]] = j
                if live:
                    _live_extras(db, rows, brief, folded)
                    waiting = _not_taken(db, waiting)
            finally:
                db.close()
        except sqlite3.Error as e:
            raise QueueError(f"cannot read {spool.db}: {e}") from None
    for spec in waiting:
        jid = spec.get("id")
        if isinstance(jid, int) and jid not in rows and (idl is None or jid in idl):
            rows[jid] = from_submit(spec)
    return [rows[k] for k in sorted(rows)]


def iter_jobs(spool: Spool, live: bool = False) -> Iterator[ViewRow]:
    """The jobs of :func:`load_jobs` (``live``: those that have not ended), each decoded as it is read from
    the state db, in id order with the submits not yet taken in (memory bounded by one row)."""
    waiting: dict[int, ViewRow] = {}
    for spec in spool.pending_submits():
        jid = spec.get("id")
        if isinstance(jid, int) and jid not in waiting:
            waiting[jid] = from_submit(spec)
    rows: Iterator[ViewRow] = iter(())
    db = None
    if spool.db.exists():
        import sqlite3

        from gridsched.protocol.state import StateDB

        try:
            db = StateDB(spool.db)
            rows = cast("Iterator[ViewRow]", db.iter_jobs(states=LIVE_STATES if live else None))
            if live:
                waiting = {s["id"]: s for s in _not_taken(db, list(waiting.values()))}
        except sqlite3.Error as e:
            raise QueueError(f"cannot read {spool.db}: {e}") from None
    try:
        yield from _merged(rows, [waiting[k] for k in sorted(waiting)])
    except Exception as e:
        import sqlite3

        if isinstance(e, sqlite3.Error):
            raise QueueError(f"cannot read {spool.db}: {e}") from None
        raise
    finally:
        if db is not None:
            db.close()


def _merged(rows: Iterator[ViewRow], waiting: list[ViewRow]) -> Iterator[ViewRow]:
    """The db's ``rows`` and the ``waiting`` submits, both in id order, merged; a db row wins over a submit."""
    i = 0
    for j in rows:
        while i < len(waiting) and waiting[i]["id"] < j["id"]:
            yield waiting[i]
            i += 1
        if i < len(waiting) and waiting[i]["id"] == j["id"]:
            i += 1
        yield j
    yield from waiting[i:]


def split_pieces(spool: Spool, jid: int) -> list[ViewRow]:
    """The pieces of splittable job ``jid`` (every state), as the daemon recorded them."""
    if not spool.db.exists():
        return []
    import sqlite3

    from gridsched.protocol.state import StateDB

    try:
        db = StateDB(spool.db)
        try:
            return cast("list[ViewRow]", db.by_spec("split_of", jid))
        finally:
            db.close()
    except sqlite3.Error as e:
        raise QueueError(f"cannot read {spool.db}: {e}") from None


def _not_taken(db: StateDB, submits: list[_Keyed]) -> list[_Keyed]:
    """The ``submits`` whose id has no row in the db (a read of live rows alone does not show it)."""
    ids = [jid for s in submits if isinstance(jid := s.get("id"), int)]
    taken: set[int] = set()
    for lo in range(0, len(ids), CHUNK):
        part = ids[lo : lo + CHUNK]
        taken.update(
            r[0] for r in db.conn.execute(f"SELECT id FROM jobs WHERE id IN ({','.join('?' * len(part))})", part)
        )
    return [s for s in submits if s.get("id") not in taken]


def _live_extras(db: StateDB, rows: dict[int, ViewRow], brief: bool, folded: bool) -> None:
    """Add to the live ``rows`` the ended pieces of their splittable jobs and, ``folded``, the ended tasks of
    their arrays (:meth:`.StateDB.by_spec`: the rows from the lowest of those ids on, the spec parsed by SQLite
    only where it names the key)."""
    splits = [j["id"] for j in rows.values() if j["spec"].split is not None]
    arrays = {a for j in rows.values() if (a := j["spec"].array_id) is not None} if folded else set()
    if folded:  # an array with tasks not made yet is live too: its folded row counts its ended tasks
        arrays |= db.unmade_array_ids()
    for key, vals in (("split_of", splits), ("array_id", sorted(arrays))):
        for lo in range(0, len(vals), CHUNK):
            for j in cast("list[ViewRow]", db.by_spec(key, vals[lo : lo + CHUNK], brief)):
                rows.setdefault(j["id"], j)


def _owner_check(job: ViewRow | None, uid: int) -> str | None:
    if job is None:
        return "no such job"
    owner = job.get("uid")
    if uid != 0 and owner is not None and owner != uid:
        return f"owned by {job.get('user') or owner}"
    return None


def check_cancel(job: ViewRow | None, uid: int) -> str | None:
    """Why the job cannot be cancelled by ``uid``, or None if it can."""
    if job is not None and job["state"] in TERMINAL:
        return f"already {job['state']}"
    return _owner_check(job, uid)


def check_hold(job: ViewRow | None, uid: int) -> str | None:
    """Why the job cannot be held by ``uid``, or None if it can."""
    why = _owner_check(job, uid)
    if why is None and job is not None and job["state"] is not JobState.PENDING:
        why = f"is {job['state']}, only pending jobs can be held"
    return why


def check_release(job: ViewRow | None, uid: int) -> str | None:
    """Why the job cannot be released by ``uid``, or None if it can."""
    why = _owner_check(job, uid)
    if why is None and job is not None and job["state"] is not JobState.HELD:
        why = f"is {job['state']}, only held jobs can be released"
    return why


CHECKS = {"cancel": check_cancel, "hold": check_hold, "release": check_release}
NONE_LEFT = {"cancel": "every task has ended", "hold": "no task is pending", "release": "no task is held"}


def array_rows(spool: Spool, array_id: int) -> list[ViewRow]:
    """The tasks of array ``array_id`` (the submission itself while the daemon has not taken it in); [] if none.

    Its tasks not made yet are a row for each of their states (:func:`unmade_rows`)."""
    rows: list[ViewRow] = []
    if spool.db.exists():
        import sqlite3

        from gridsched.protocol.state import StateDB

        try:
            db = StateDB(spool.db)
            try:
                rows = cast("list[ViewRow]", db.by_spec("array_id", array_id))
                rows += unmade_records(db, [array_id])
            finally:
                db.close()
        except sqlite3.Error as e:
            raise QueueError(f"cannot read {spool.db}: {e}") from None
    if not rows:
        rows = [from_submit(s) for s in spool.pending_submits() if s.get("id") == array_id and "array" in s]
    return rows


UNMADE_STATES = (("pending", JobState.PENDING), ("held", JobState.HELD), ("cancelled", JobState.CANCELLED))


def unmade_rows(spool: Spool, ids: Iterable[int] | None = None) -> list[ViewRow]:
    """The tasks of arrays not made yet (of the arrays ``ids``): a row for each array and state, as a job row
    with the array's id and no index, and ``unmade`` (their indices, range text) and ``count``."""
    if not spool.db.exists():
        return []
    import sqlite3

    from gridsched.protocol.state import StateDB

    try:
        db = StateDB(spool.db)
        try:
            return unmade_records(db, ids)
        finally:
            db.close()
    except sqlite3.Error as e:
        raise QueueError(f"cannot read {spool.db}: {e}") from None


def unmade_records(db: StateDB, ids: Iterable[int] | None = None) -> list[ViewRow]:
    """The rows of :func:`unmade_rows` from an open state db."""
    from gridsched.protocol.arrays import Indices

    out = []
    for r in db.array_rests(ids):
        texts = {"pending": r["pending"], "held": r["held"], "cancelled": r["cancelled"]}
        for col, state in UNMADE_STATES:
            if not texts[col]:
                continue
            row = from_submit(SpecView({**r["spec"].raw, "id": r["id"], "array_index": None}))  # a job row not started
            row["state"] = state
            row["user"] = r["user"]
            row["uid"] = r["uid"]
            row["reason"] = (
                r["reason"] if state is JobState.HELD else "cancelled before it started" if col == "cancelled" else ""
            )
            row["devices"] = ""
            row["unmade"] = texts[col]
            row["count"] = len(Indices.from_text(texts[col]))
            row["cancel_time"] = r.get("cancel_time") if col == "cancelled" else None
            out.append(row)
    return out


def unmade_tasks(spool: Spool, array_id: int, indices: Iterable[int], kind: str, uid: int) -> tuple[str, str | None]:
    """Of the tasks ``indices`` of array ``array_id``, those not made yet that a ``kind`` request (cancel,
    hold, release, alter) applies to, as range text ("" for none), and why the sender may not act on them."""
    from gridsched.protocol.arrays import Indices

    rows = unmade_rows(spool, [array_id])
    if not rows:
        return "", None
    want = indices if isinstance(indices, Indices) else Indices.of(indices)
    waiting = (JobState.PENDING, JobState.HELD)
    states = {"cancel": waiting, "hold": (JobState.PENDING,), "release": (JobState.HELD,), "alter": waiting}
    got = Indices()
    for r in rows:
        if r["state"] in states[kind]:
            got = got.union(Indices.from_text(r["unmade"]).only(want))
    return got.text, _owner_check(rows[0], uid) if got else None


def resolve(spool: Spool, ref: str) -> int:
    """The job id of ``ID`` or of array task ``ARRAYID_INDEX``; :class:`LookupError` or ``ValueError`` (a bad form)."""
    from gridsched.protocol.arrays import parse_ref

    jid, index = parse_ref(ref)
    if index is None:
        return jid
    for row in array_rows(spool, jid):
        if row["spec"].array_index == index:
            return int(row["id"])
        if row.get("unmade") and _has(row["unmade"], index):
            raise LookupError(
                f"job {jid}_{index}: {row['state'].lower()}, not started yet (gstat {jid} shows its array)"
            )
    raise LookupError(f"job {jid}_{index}: no such array task")


def _has(text: str, index: int) -> bool:
    from gridsched.protocol.arrays import Indices

    return index in Indices.from_text(text)


def control(
    spool: Spool,
    kind: str,
    ids: list[int],
    uid: int,
    single: Collection[int] = (),
    unmade: Mapping[int, str] | None = None,
) -> tuple[list[int], list[tuple[int, str]]]:
    """Send a ``kind`` request (cancel, hold, release) for the ids ``uid`` may act on.

    An id that is an array's acts on every task of the array the request
    applies to (sent as ``arrays``), unless it is in ``single``: the array's
    first task alone (which has the array's id).  Returns the ids sent and ``(id, why)``
    for the others; nothing is sent when no id passes its check.  A request
    that cannot be written (a full or read-only spool) is a :class:`QueueError`
    and leaves nothing behind.
    """
    check = CHECKS[kind]
    known = {j["id"]: j for j in load_jobs(spool, ids)}
    good: list[int] = []
    whole: list[int] = []
    bad: list[tuple[int, str]] = []
    for jid in ids:
        tasks = [] if jid in single else array_rows(spool, jid)
        if tasks:
            why = _owner_check(tasks[0], uid)
            if why is None and all(check(t, uid) for t in tasks):
                why = NONE_LEFT[kind]
            if why:
                bad.append((jid, why))
            else:
                whole.append(jid)
            continue
        why = check(known.get(jid), uid)
        if why:
            bad.append((jid, why))
        else:
            good.append(jid)
    if good or whole or unmade:
        try:
            extra: dict[str, Any] = {}
            if whole:
                extra["arrays"] = whole
            if unmade:  # array tasks not made yet, by index
                extra["tasks"] = [[aid, text] for aid, text in unmade.items()]
            spool.request(kind, jobs=good, **extra)
        except OSError as e:  # a full or read-only spool, or an incoming/ the caller may not write
            raise QueueError(f"cannot write the {kind} request to {spool.root}: {e.strerror or e}") from None
    return good + whole, bad
