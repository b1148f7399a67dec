"""The job table, kept in SQLite (``spool/state.db``).

The daemon is the only writer (:class:`StateDB` opened with ``write=True``);
commands open it read-only and see a consistent snapshot even while the daemon
writes (WAL mode).  One row per job; the fields people and programs read are
columns, the rest of the submitted request is the JSON column ``spec``, the run
segments the JSON column ``segments``.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gridsched.protocol.jobs import JobState

if TYPE_CHECKING:
    from collections.abc import Callable

    from gridsched.protocol.specview import SpecView
    from gridsched.protocol.view import IdRecord, JobRow, RestRow, Usage

SCHEMA_VERSION = 1

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY,
    state TEXT NOT NULL,
    user TEXT NOT NULL,
    uid INTEGER NOT NULL,
    name TEXT NOT NULL,
    ncpus INTEGER NOT NULL,
    walltime INTEGER NOT NULL,
    submit_time REAL NOT NULL,
    start_time REAL,
    end_time REAL,
    cores TEXT NOT NULL DEFAULT '',
    exit_code INTEGER,
    exit_signal INTEGER,
    reason TEXT NOT NULL DEFAULT '',
    backfilled INTEGER NOT NULL DEFAULT 0,
    restarts INTEGER NOT NULL DEFAULT 0,
    preemptions INTEGER NOT NULL DEFAULT 0,
    checkpoints INTEGER NOT NULL DEFAULT 0,
    elapsed REAL NOT NULL DEFAULT 0,
    lost REAL NOT NULL DEFAULT 0,
    predicted_start REAL,
    segments TEXT NOT NULL DEFAULT '[]',
    run TEXT NOT NULL DEFAULT '{}',
    spec TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS jobs_state ON jobs(state);
CREATE INDEX IF NOT EXISTS jobs_end ON jobs(end_time);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

# Columns in the order of SCHEMA; a job row travels as a dict with these keys
# (``segments``, ``run`` and ``spec`` decoded from JSON).
COLUMNS = (
    "id state user uid name ncpus walltime submit_time start_time end_time cores exit_code "
    "exit_signal reason backfilled restarts preemptions checkpoints elapsed lost predicted_start "
    "segments run spec"
).split()
JSON_COLUMNS = ("segments", "run", "spec")
# Columns added to the jobs table after its first form (ALTER TABLE on an older spool, as for
# RESV_ADDED): ``devices``, the devices the job holds or last held (``gpu:0,1;fpga:2``);
# ``max_rss`` (bytes), ``cpu_user`` and ``cpu_sys`` (seconds), what the job's processes used over
# all its segments as their shepherds measured them (:func:`usage`; NULL: not measured); ``planned``, a
# pending splittable job's sub-tasks as the forecast plans them (:func:`planned_text`; '': none).
JOBS_ADDED: dict[str, tuple[str, Any]] = {
    "devices": ("TEXT NOT NULL DEFAULT ''", ""),
    "max_rss": ("INTEGER", None),
    "cpu_user": ("REAL", None),
    "cpu_sys": ("REAL", None),
    "planned": ("TEXT NOT NULL DEFAULT ''", ""),
}
ALL_COLUMNS = (*COLUMNS, *JOBS_ADDED)
# A brief row (``brief=True``): what the queue table shows and what its folding of arrays and
# splittable jobs reads, nothing more.  The columns of BRIEF_COLUMNS; ``segments`` decoded for a job
# that runs (BRIEF_SEGMENTS: its run time counts from its last segment), [] for the others; ``run``
# {}; ``spec`` holding only those of BRIEF_SPEC it has, read out of the JSON column by SQLite.  The rest
# of a row is never decoded for it.
BRIEF_COLUMNS = (
    "id state user uid name ncpus walltime submit_time start_time end_time cores exit_code exit_signal "
    "reason backfilled restarts preemptions checkpoints elapsed lost predicted_start"
).split()
BRIEF_SEGMENTS = (JobState.RUNNING, JobState.STOPPING)
BRIEF_SPEC = ("array_id", "array_index", "array_max", "array", "split_of", "hold", "split", "split_chains")


# Reservations (gresv): one row each, written by the daemon.  ``resources`` and
# ``users`` are JSON; ``start`` is set for a fixed reservation only; ``place``
# (NULL: none), ``threads_per_core`` and ``exclusive_board`` are its mapping
# requirement (added later: see RESV_ADDED).
RESV_SCHEMA = """
CREATE TABLE IF NOT EXISTS reservations (
    id INTEGER PRIMARY KEY,
    state TEXT NOT NULL,
    user TEXT NOT NULL,
    uid INTEGER NOT NULL,
    name TEXT NOT NULL,
    ncpus INTEGER NOT NULL,
    resources TEXT NOT NULL DEFAULT '{}',
    duration INTEGER NOT NULL,
    start REAL,
    create_time REAL NOT NULL,
    activate_time REAL,
    end_time REAL,
    predicted REAL,
    cores TEXT NOT NULL DEFAULT '',
    users TEXT NOT NULL DEFAULT '[]',
    kill INTEGER NOT NULL DEFAULT 1,
    reason TEXT NOT NULL DEFAULT '',
    place TEXT,
    threads_per_core INTEGER NOT NULL DEFAULT 0,
    exclusive_board INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS arrays (
    id INTEGER PRIMARY KEY,
    user TEXT NOT NULL,
    uid INTEGER NOT NULL,
    name TEXT NOT NULL,
    ncpus INTEGER NOT NULL,
    walltime INTEGER NOT NULL,
    submit_time REAL NOT NULL,
    total INTEGER NOT NULL,
    pending TEXT NOT NULL DEFAULT '',
    held TEXT NOT NULL DEFAULT '',
    cancelled TEXT NOT NULL DEFAULT '',
    reason TEXT NOT NULL DEFAULT '',
    spec TEXT NOT NULL,
    cancel_time REAL
);
CREATE TABLE IF NOT EXISTS ids (
    id INTEGER PRIMARY KEY,
    uid INTEGER,
    digest TEXT NOT NULL DEFAULT '',
    time REAL NOT NULL,
    refused TEXT
);
"""
RESV_COLUMNS = (
    "id state user uid name ncpus resources duration start create_time activate_time end_time predicted "
    "cores users kill reason place threads_per_core exclusive_board nice priority"
).split()
RESV_JSON = ("resources", "users")
# The tasks of each array not made yet (a job row is made for a task when it is about to start or is named on
# its own): the indices still pending, held (``reason`` says why) and cancelled before they were made, as range
# text; the array's public spec and the fields commands show of it.
ARRAY_COLUMNS = (
    "id user uid name ncpus walltime submit_time total pending held cancelled reason spec cancel_time".split()
)
# columns added to the arrays table after its first form (ALTER TABLE, as below): the time its last tasks not
# made yet were cancelled
# Columns added to the reservations table after its first form: the daemon adds them to the
# table of an older spool when it opens it (ALTER TABLE); readers of a table without them see
# these values.
RESV_ADDED: dict[str, tuple[str, Any]] = {
    "place": ("TEXT", None),
    "threads_per_core": ("INTEGER NOT NULL DEFAULT 0", 0),
    "exclusive_board": ("INTEGER NOT NULL DEFAULT 0", 0),
    "nice": ("INTEGER NOT NULL DEFAULT 0", 0),
    "priority": ("INTEGER", None),
}


def usage(segments: Iterable[Mapping[str, Any]]) -> Usage:
    """The usage columns of a job from its segments: CPU times summed, the largest peak memory.

    A segment whose shepherd was killed (no ``usage``) adds nothing; a job with no measured
    segment has NULLs (not measured), never zeros.
    """
    rss: int | None = None
    user: float | None = None
    sys_: float | None = None
    for seg in segments:
        u = seg.get("usage") if isinstance(seg, dict) else None
        if not isinstance(u, dict):
            continue
        try:
            r, cu, cs = int(u.get("max_rss") or 0), float(u.get("cpu_user") or 0), float(u.get("cpu_sys") or 0)
        except (TypeError, ValueError):
            continue
        rss = r if rss is None else max(rss, r)
        user = cu if user is None else user + cu
        sys_ = cs if sys_ is None else sys_ + cs
    return {
        "max_rss": rss,
        "cpu_user": None if user is None else round(user, 6),
        "cpu_sys": None if sys_ is None else round(sys_, 6),
    }


def planned_text(tasks: Iterable[tuple[int, float, float]]) -> str:
    """A splittable job's planned sub-tasks (``(index, start, end)`` in order) as the ``planned`` column keeps
    them: JSON ``[[first, last, start, end], ...]``, one run of consecutive indices per start and end."""
    runs: list[list[Any]] = []
    for i, s, e in tasks:
        s, e = round(s, 3), round(e, 3)
        last = runs[-1] if runs else None
        if last is not None and last[1] + 1 == i and last[2] == s and last[3] == e:
            last[1] = i
        else:
            runs.append([i, i, s, e])
    return json.dumps(runs, separators=(",", ":")) if runs else ""


def planned_runs(text: str) -> list[tuple[int, int, float, float]]:
    """The runs of :func:`planned_text` (``[]`` for '' or anything else it did not write)."""
    try:
        runs = json.loads(text) if text else []
        return [(int(a), int(b), float(s), float(e)) for a, b, s, e in runs]
    except (ValueError, TypeError):
        return []


# Each decoder makes a JobRow (protocol/view.py) of a row of the jobs table: built as a plain dict, typed as its
# return value (a cast per row would cost every reader of a long queue a call).


def _load_spec_of(data: object) -> SpecView:
    """:func:`gridsched.protocol.specview.spec_of`, loaded when the first row is read (gsub reads none)."""
    global _spec_of
    from gridsched.protocol.specview import spec_of

    _spec_of = spec_of
    return spec_of(data)


_spec_of: Callable[[object], SpecView] = _load_spec_of
# a row's state as its text -> the JobState (a lookup: JobState(text) costs a row six times as much)
STATE_OF = {s.value: s for s in JobState}


# the C scanner json.loads ends in (set by the decoder's __init__: not in the stubs)
_scan: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _loads(text: str) -> Any:
    """``json.loads`` of a JSON column as the daemon writes it (:func:`_json`: nothing around the value), read by
    the C scanner itself: a long table skips json.loads's steps in Python (a quarter of its cost for a spec) for
    each column of each row.  Any other text (a row written by hand) goes to json.loads, errors and all."""
    try:
        value, end = _scan(text, 0)
    except StopIteration:
        return json.loads(text)
    return value if end == len(text) else json.loads(text)


def _raw(obj: object) -> object:
    """How :func:`_json` writes what JSON has no form for: a :class:`SpecView` as its spec's JSON object."""
    raw = getattr(obj, "raw", None)
    if isinstance(raw, dict):
        return raw
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


def _json(value: object) -> str:
    """A JSON column's text (a row's spec may be a :class:`SpecView`)."""
    return json.dumps(value, separators=(",", ":"), default=_raw)


def _decode(row: sqlite3.Row | tuple[Any, ...], cols: tuple[str, ...] = ALL_COLUMNS) -> JobRow:
    d: Any = {c: default for c, (_, default) in JOBS_ADDED.items()}
    d.update(zip(cols, row))
    d["state"] = STATE_OF[d["state"]]
    d["segments"] = _loads(d["segments"])
    d["run"] = _loads(d["run"])
    d["spec"] = _spec_of(_loads(d["spec"]))
    d["backfilled"] = bool(d["backfilled"])
    return d


def _spec_sql(keys: tuple[str, ...]) -> str:
    """Two select items for the ``keys`` of the spec: whether SQLite can parse it, then (if so) their values as
    one JSON array (``json_extract`` of several paths: one parse of the spec, in C), else the spec whole (one
    with ``NaN`` in it, written by hand)."""
    paths = ", ".join(f"'$.{k}'" for k in (keys if len(keys) > 1 else keys * 2))
    return f"json_valid(spec), CASE WHEN json_valid(spec) THEN json_extract(spec, {paths}) ELSE spec END"


_NONE = {n: "[" + ",".join(["null"] * n) + "]" for n in range(2, 16)}  # what json_extract gives of n missing keys


def _spec_keys(valid: int, text: str, keys: tuple[str, ...]) -> SpecView:
    """The spec of a row read with :func:`_spec_sql`: the ``keys`` it has (not null)."""
    if valid:
        if text == _NONE.get(len(keys)):  # none of them (most jobs: no array, no split)
            return _spec_of(None)  # the one empty SpecView
        return _spec_of({k: v for k, v in zip(keys, _loads(text)) if v is not None})
    whole = _loads(text)
    return _spec_of({k: whole[k] for k in keys if isinstance(whole, dict) and whole.get(k) is not None})


def _brief_sql(have: tuple[str, ...]) -> str:
    """The select list of a brief row (``have``: the columns of the table)."""
    live = ", ".join(f"'{s}'" for s in BRIEF_SEGMENTS)
    parts = [*BRIEF_COLUMNS, f"CASE WHEN state IN ({live}) THEN segments ELSE '[]' END"]
    parts.append("devices" if "devices" in have else "''")
    return ", ".join(parts) + ", " + _spec_sql(BRIEF_SPEC)


def _decode_brief(row: tuple[Any, ...]) -> JobRow:
    n = len(BRIEF_COLUMNS)
    d: Any = dict(zip(BRIEF_COLUMNS, row[:n]))
    d["state"] = STATE_OF[d["state"]]
    d["backfilled"] = bool(d["backfilled"])
    d["segments"] = _loads(row[n]) if row[n] != "[]" else []
    d["run"] = {}
    d["devices"] = row[n + 1]
    d["spec"] = _spec_keys(row[n + 2], row[n + 3], BRIEF_SPEC)
    return d


def _decode_keys(row: tuple[Any, ...], cols: tuple[str, ...], keys: tuple[str, ...]) -> JobRow:
    """A row read with every column but ``run`` (left {}) and only the ``keys`` of ``spec``."""
    d: Any = {c: default for c, (_, default) in JOBS_ADDED.items()}
    d.update(zip(cols, row))
    d["state"] = STATE_OF[d["state"]]
    d["segments"] = _loads(d["segments"])
    d["run"] = {}
    d["spec"] = _spec_keys(row[-2], row[-1], keys)
    d["backfilled"] = bool(d["backfilled"])
    return d


def connect_ro(path: str | Path) -> sqlite3.Connection:
    """A read-only connection to the state db (``FileNotFoundError`` if there is none).

    While the daemon runs, readers share its WAL index.  When it is down the
    index is gone, and a user who may not write the spool cannot make one:
    then the file is read as immutable, which is what it is until a daemon
    starts (a read racing that start fails and is tried again by the caller).
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(str(path))
    tries = ("&immutable=1",) if os.statvfs(path).f_flag & os.ST_RDONLY else ("", "&immutable=1")
    for i, extra in enumerate(tries):
        conn = sqlite3.connect(f"file:{path}?mode=ro{extra}", uri=True, isolation_level=None, timeout=5.0)
        try:
            conn.execute("PRAGMA query_only=1")
            conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
            return conn
        except sqlite3.OperationalError as e:
            conn.close()
            # a WAL index the caller cannot open or create (no daemon has the file open) is read around; a
            # busy or locked database is being written, and reading it as immutable would miss the WAL
            if i == len(tries) - 1 or "locked" in str(e) or "busy" in str(e):
                raise
    raise AssertionError("unreachable")


def recorded_machine(path: str | Path) -> dict[str, Any]:
    """The machine the daemon recorded at its start in the job table at ``path`` ({} if none or unreadable)."""
    if not Path(path).exists():
        return {}
    try:
        db = StateDB(path)
        try:
            raw = db.meta().get("machine")
        finally:
            db.close()
        out = json.loads(raw or "{}")
    except Exception:  # noqa: BLE001 - an unreadable table only costs the better answer
        return {}
    return out if isinstance(out, dict) else {}


class StateDB:
    def __init__(self, path: str | Path, write: bool = False) -> None:
        self.path = Path(path)
        self.failed: sqlite3.Error | None = None
        self.journal: list[tuple[str, Any, bool]] = []  # writes of the open transaction
        self.unsaved: list[tuple[str, Any, bool]] = []  # writes a failed commit left to do
        self.version = 0  # how many writes were made (which of them a published copy shows)
        if write:
            self.conn = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.executescript(SCHEMA)
            self.conn.executescript(RESV_SCHEMA)
            have = self._resv_columns()
            for col, (decl, _) in RESV_ADDED.items():
                if col not in have:
                    self.conn.execute(f"ALTER TABLE reservations ADD COLUMN {col} {decl}")
            if "cancel_time" not in {r[1] for r in self.conn.execute("PRAGMA table_info(arrays)")}:
                self.conn.execute("ALTER TABLE arrays ADD COLUMN cancel_time REAL")
            have = {r[1] for r in self.conn.execute("PRAGMA table_info(jobs)")}
            for col, (decl, _) in JOBS_ADDED.items():
                if col not in have:
                    self.conn.execute(f"ALTER TABLE jobs ADD COLUMN {col} {decl}")
            self.conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        else:
            self.conn = connect_ro(self.path)
        self.conn.execute("PRAGMA busy_timeout=5000")
        self._cols: tuple[str, ...] | None = None

    def _job_cols(self) -> tuple[str, ...]:
        """The columns of the jobs table this db has (one written before JOBS_ADDED lacks those)."""
        if self._cols is None:
            have = {r[1] for r in self.conn.execute("PRAGMA table_info(jobs)")}
            self._cols = tuple(c for c in ALL_COLUMNS if c in have or c not in JOBS_ADDED)
        return self._cols

    def close(self) -> None:
        self.conn.close()

    # -- reading -----------------------------------------------------------
    def jobs(
        self,
        states: Iterable[str] | None = None,
        user: str | None = None,
        ids: Iterable[int] | None = None,
        brief: bool = False,
    ) -> list[JobRow]:
        """The rows in ``states`` of ``user`` with these ``ids`` (each None: any), by id; ``brief``: brief rows
        (:data:`BRIEF_COLUMNS`)."""
        return list(self.iter_jobs(states, user, ids, brief))

    def iter_jobs(
        self,
        states: Iterable[str] | None = None,
        user: str | None = None,
        ids: Iterable[int] | None = None,
        brief: bool = False,
        ended: tuple[float | None, float | None] = (None, None),
        spec_keys: tuple[str, ...] | None = None,
    ) -> Iterator[JobRow]:
        """The rows of :meth:`jobs`, decoded one at a time as they are read (memory bounded by one row).

        ``ended`` ``(start, end)``: only the rows that ended at or after ``start`` (read through the
        index on ``end_time``) and began (or were submitted) by ``end``; None: no bound.  ``spec_keys``:
        of the spec only these keys (the others, and ``run``, are not decoded).
        """
        where: list[str] = []
        args: list[Any] = []
        if states is not None:
            st = list(states)
            # with a time window, the index on end_time narrows more than the one on state
            where.append(f"{'+' if ended[0] is not None else ''}state IN ({','.join('?' * len(st))})")
            args += st
        if user is not None:
            where.append("user = ?")
            args.append(user)
        if ids is not None:
            il = list(ids)
            where.append(f"id IN ({','.join('?' * len(il))})")
            args += il
        if ended[0] is not None:
            where.append("end_time >= ?")
            args.append(ended[0])
        if ended[1] is not None:
            where.append("COALESCE(start_time, submit_time) <= ?")
            args.append(ended[1])
        return self._select(" AND ".join(where), args, brief, spec_keys)

    def _select(
        self, where: str, args: list[Any], brief: bool, spec_keys: tuple[str, ...] | None = None
    ) -> Iterator[JobRow]:
        cols = self._job_cols()
        if brief:
            what = _brief_sql(cols)
        elif spec_keys is not None:
            cols = tuple(c for c in cols if c not in ("run", "spec"))
            what = ", ".join(cols) + ", " + _spec_sql(spec_keys)
        else:
            what = ", ".join(cols)
        sql = f"SELECT {what} FROM jobs" + (f" WHERE {where}" if where else "") + " ORDER BY id"
        for r in self.conn.execute(sql, args):
            if brief:
                yield _decode_brief(r)
            elif spec_keys is not None:
                yield _decode_keys(r, cols, spec_keys)
            else:
                yield _decode(r, cols)

    def by_spec(self, key: str, value: int | Iterable[int], brief: bool = False) -> list[JobRow]:
        """The rows whose spec has ``key`` = ``value`` (``array_id``: the tasks of an array;
        ``split_of``: the pieces of a split job), or one of the ``value`` s, by id."""
        if key not in ("array_id", "split_of"):
            raise KeyError(key)
        vals = [value] if isinstance(value, int) else list(value)
        if not vals:
            return []
        # a task or piece is made after its array or job, so its id is higher: rows before that are not
        # read; the spec is parsed only where it names the key at all
        where = (
            f"id >= ? AND CASE WHEN instr(spec, '\"{key}\"') AND json_valid(spec) "
            f"THEN json_extract(spec, '$.{key}') END IN ({','.join('?' * len(vals))})"
        )
        return list(self._select(where, [min(vals), *vals], brief))

    def job(self, job_id: int) -> JobRow | None:
        rows = self.jobs(ids=[job_id])
        return rows[0] if rows else None

    def _resv_columns(self) -> set[str]:
        return {r[1] for r in self.conn.execute("PRAGMA table_info(reservations)")}

    def reservations(self, ids: Iterable[int] | None = None) -> list[dict[str, Any]]:
        """Reservation rows by id (none in a db written before reservations existed; the
        columns of :data:`RESV_ADDED` at their defaults in one written before those)."""
        have = self._resv_columns()
        cols = [c for c in RESV_COLUMNS if c in have or c not in RESV_ADDED]
        sql = f"SELECT {', '.join(cols)} FROM reservations"
        args: list[Any] = []
        if ids is not None:
            il = list(ids)
            sql += f" WHERE id IN ({','.join('?' * len(il))})"
            args = il
        try:
            rows = self.conn.execute(sql + " ORDER BY id", args).fetchall()
        except sqlite3.OperationalError as e:
            if "no such table" in str(e):
                return []
            raise
        out = []
        for r in rows:
            d: dict[str, Any] = {c: default for c, (_, default) in RESV_ADDED.items()}
            d.update(zip(cols, r))
            for c in RESV_JSON:
                d[c] = json.loads(d[c])
            d["kill"] = bool(d["kill"])
            d["exclusive_board"] = bool(d["exclusive_board"])
            out.append(d)
        return out

    def put_resv(self, resv: dict[str, Any]) -> None:
        """Insert or replace a whole reservation row."""
        vals = [
            json.dumps(resv[c]) if c in RESV_JSON else resv.get(c, RESV_ADDED[c][1]) if c in RESV_ADDED else resv[c]
            for c in RESV_COLUMNS
        ]
        self._write(
            f"INSERT OR REPLACE INTO reservations ({', '.join(RESV_COLUMNS)}) "
            f"VALUES ({', '.join('?' * len(RESV_COLUMNS))})",
            vals,
        )

    def update_resv(self, resv_id: int, **fields: Any) -> None:
        cols, vals = [], []
        for k, v in fields.items():
            if k not in RESV_COLUMNS or k == "id":
                raise KeyError(k)
            cols.append(f"{k} = ?")
            vals.append(json.dumps(v) if k in RESV_JSON else v)
        self._write(f"UPDATE reservations SET {', '.join(cols)} WHERE id = ?", [*vals, resv_id])

    def meta(self) -> dict[str, str]:
        return dict(self.conn.execute("SELECT key, value FROM meta"))

    def max_id(self) -> int:
        """The highest id recorded: of a job, a reservation or a request (ids are never used twice)."""
        return max(
            self.conn.execute(f"SELECT COALESCE(MAX(id), 0) FROM {t}").fetchone()[0]
            for t in ("jobs", "reservations", "ids")
        )

    def id_used(self, nid: int) -> bool:
        return any(
            self.conn.execute(f"SELECT 1 FROM {t} WHERE id = ?", (nid,)).fetchone()
            for t in ("jobs", "reservations", "ids")
        )

    def id_record(self, nid: int) -> IdRecord | None:
        """How the request that brought id ``nid`` was taken: ``{"uid", "digest", "time", "refused"}``
        (``refused``: the reason it was refused, or None)."""
        try:
            row = self.conn.execute("SELECT uid, digest, time, refused FROM ids WHERE id = ?", (nid,)).fetchone()
        except sqlite3.OperationalError:
            return None  # a table set older than the ids table
        return None if row is None else {"uid": row[0], "digest": row[1], "time": row[2], "refused": row[3]}

    def put_id(self, nid: int, uid: int | None, digest: str, when: float, refused: str | None = None) -> None:
        self._write("INSERT OR REPLACE INTO ids VALUES (?, ?, ?, ?, ?)", (nid, uid, digest, when, refused))

    # -- writing (daemon only) ----------------------------------------------
    def begin(self) -> None:
        """Open a write transaction; statements a failed commit left unsaved are written first."""
        self.failed = None
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as e:
            self.failed = e
        self.journal = []
        unsaved, self.unsaved = self.unsaved, []
        for stmt in unsaved:
            self._write(*stmt)

    def commit(self) -> bool:
        """Commit; on failure (a full or read-only disk) roll back and keep the statements.

        Every write is idempotent (INSERT OR REPLACE, UPDATE ... SET), so the
        next :meth:`begin` writes them again; the caller learns of the
        failure from the result (and :attr:`failed`), never from an exception.
        """
        if self.failed is None:
            try:
                self.conn.execute("COMMIT")
                self.journal = []
                return True
            except sqlite3.OperationalError as e:
                self.failed = e
        try:
            self.conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass
        self.unsaved, self.journal = self.journal, []
        return False

    def _write(self, sql: str, args: Any = (), many: bool = False) -> None:
        """Run one write statement of the open transaction, and remember it."""
        if many:
            args = list(args)
        self.journal.append((sql, args, many))
        self.version += 1
        if self.failed is not None:
            return
        try:
            if many:
                self.conn.executemany(sql, args)
            else:
                self.conn.execute(sql, args)
        except sqlite3.OperationalError as e:
            self.failed = e

    def put(self, job: JobRow) -> None:
        """Insert or replace a whole job row."""
        row: Mapping[str, object] = job
        vals = [row[c] if c in COLUMNS else row.get(c, JOBS_ADDED[c][1]) for c in ALL_COLUMNS]
        for i, c in enumerate(ALL_COLUMNS):
            if c in JSON_COLUMNS:
                vals[i] = _json(vals[i])
        self._write(
            f"INSERT OR REPLACE INTO jobs ({', '.join(ALL_COLUMNS)}) VALUES ({', '.join('?' * len(ALL_COLUMNS))})",
            vals,
        )

    def update(self, job_id: int, **fields: Any) -> None:
        cols = []
        vals = []
        for k, v in fields.items():
            if k not in ALL_COLUMNS or k == "id":
                raise KeyError(k)
            cols.append(f"{k} = ?")
            vals.append(_json(v) if k in JSON_COLUMNS else v)
        self._write(f"UPDATE jobs SET {', '.join(cols)} WHERE id = ?", [*vals, job_id])

    def set_predicted(self, items: Iterable[tuple[float | None, int]]) -> None:
        self._write("UPDATE jobs SET predicted_start = ? WHERE id = ?", items, many=True)

    def set_planned(self, items: Iterable[tuple[str, int]]) -> None:
        """Each splittable job's planned sub-tasks, ``(planned_text(...), id)``."""
        self._write("UPDATE jobs SET planned = ? WHERE id = ?", items, many=True)

    # -- the tasks of arrays not made yet (gridsched.daemon.arrays) ---------------------------------
    def array_rests(self, ids: Iterable[int] | None = None) -> list[RestRow]:
        """The rows of the ``arrays`` table (those of ``ids``), ``spec`` read as a :class:`SpecView`; [] from a
        table of an earlier release, which has none (``cancel_time`` None from a table written before it had
        that column)."""
        try:
            have = {r[1] for r in self.conn.execute("PRAGMA table_info(arrays)")}
        except sqlite3.OperationalError:
            return []
        cols = [c for c in ARRAY_COLUMNS if c in have or c != "cancel_time"]
        sql = f"SELECT {', '.join(cols)} FROM arrays"
        args: list[int] = []
        if ids is not None:
            args = list(ids)
            if not args:
                return []
            sql += f" WHERE id IN ({', '.join('?' * len(args))})"
        try:
            got = self.conn.execute(sql + " ORDER BY id", args).fetchall()
        except sqlite3.OperationalError:
            return []
        out = []
        for row in got:
            d: Any = {"cancel_time": None, **dict(zip(cols, row))}
            d["spec"] = _spec_of(_loads(d["spec"]))
            out.append(d)
        return out

    def unmade_array_ids(self) -> set[int]:
        """The ids of the arrays with tasks not made yet, pending or held (none in a table of an earlier
        release)."""
        try:
            return {r[0] for r in self.conn.execute("SELECT id FROM arrays WHERE pending != '' OR held != ''")}
        except sqlite3.OperationalError:
            return set()

    def put_array(self, rest: RestRow) -> None:
        row: Mapping[str, object] = rest
        vals = [_json(row[c]) if c == "spec" else row[c] for c in ARRAY_COLUMNS]
        self._write(
            f"INSERT OR REPLACE INTO arrays ({', '.join(ARRAY_COLUMNS)}) VALUES ({', '.join('?' * len(vals))})", vals
        )

    def update_array(self, array_id: int, **fields: Any) -> None:
        for k in fields:
            if k not in ARRAY_COLUMNS or k == "id":
                raise KeyError(k)
        vals = [_json(v) if k == "spec" else v for k, v in fields.items()]
        self._write(f"UPDATE arrays SET {', '.join(f'{k} = ?' for k in fields)} WHERE id = ?", [*vals, array_id])

    def set_meta(self, key: str, value: str) -> None:
        self._write("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def del_meta(self, key: str) -> None:
        self._write("DELETE FROM meta WHERE key = ?", (key,))
