"""Reading a Slurm cluster's history from ``sacct`` for replay: the same :class:`~.swf.Trace` as an SWF log.

The input is what

    sacct --parsable2 --allusers --starttime 2026-01-01 --endtime 2026-02-01 \\
          --format=JobID,Submit,Start,End,Elapsed,Timelimit,AllocCPUS,ReqCPUS,ReqMem,User,State,AllocTRES

prints (``--parsable``, with a ``|`` at the end of each line, is read too): a
header line naming the fields, then one line per job and per job step.  The
fields are found by name, in any order; JobID, Submit, Elapsed and one of
ReqCPUS or AllocCPUS are needed; Timelimit, Start, User, State and AllocTRES are used
when present, the others are ignored.  How each job becomes a replayed one (gsim(1)
says the same):

- job steps (``123.batch``, ``123.extern``, ``123.0``) are left out; an array
  task (``123_4``) and a heterogeneous job's component (``123+1``) are jobs;
- submit time: Submit, as seconds from the first job's (the times are read as
  written, so a change of daylight-saving time inside the history shifts the
  later submits by an hour);
- cores: ReqCPUS, else AllocCPUS (as the SWF reader takes requested before
  allocated processors); a job of none is skipped (``no processors``);
- estimate: Timelimit (``[DD-]HH:MM:SS``, ``MM:SS``, or minutes); one without
  (UNLIMITED, Partition_Limit) gets its run time, as an SWF job without a
  requested time; run time: Elapsed, cut at the estimate;
- a job that never started (Start Unknown or None, State PENDING, or no
  resources allocated: an empty AllocTRES, as Slurm writes a job cancelled
  while it waited, with its Start equal to its End), or that has not ended
  (RUNNING, REQUEUED), is skipped (``no run time``);
- State: CANCELLED (``CANCELLED by 0`` too) counts as SWF status 5, FAILED,
  TIMEOUT, NODE_FAIL, OUT_OF_MEMORY, BOOT_FAIL, DEADLINE and PREEMPTED as
  status 0 (failed), for ``--dependencies``; sacct gives no dependencies;
- the machine's size is not in sacct's output: ``--procs`` gives it (the
  cluster's CPUs); the replay counts CPUs (``--nodes`` is refused);
- GPUs: ``gres/gpu=N`` in AllocTRES (``Trace.devices``), replayed on a
  machine given GPUs (``gsim --gpus N``); the model is not kept.

Jobs are numbered 1, 2, ... in submit order; messages name the file's line.
"""

from __future__ import annotations

import calendar
from datetime import datetime

from gridsched.core.devices import DeviceAsk
from gridsched.sim.swf import BAD_LINE, MAX_PROBLEMS, NO_PROCS, NO_RUNTIME, REASONS, TOO_LARGE, Trace, TraceError, _open

NEEDED = ("JobID", "Submit", "Elapsed")
NOT_STARTED = {"", "Unknown", "None", "N/A"}
NOT_ENDED = ("PENDING", "RUNNING", "REQUEUED", "RESIZING", "SUSPENDED", "REQUEUE_HOLD", "REQUEUE_FED")
CANCELLED = ("CANCELLED",)
FAILED = ("FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "PREEMPTED")


def _gpus(tres: str) -> int:
    """The GPUs of an AllocTRES list (``cpu=4,gres/gpu=2,gres/gpu:a100=2,...``); 0 for none."""
    for item in tres.split(","):
        name, _, value = item.strip().partition("=")
        if name == "gres/gpu" and value.strip().isdigit():
            return int(value)
    return 0


def duration(text: str) -> float:
    """Seconds of a Slurm duration: ``[DD-]HH:MM:SS[.mmm]``, ``MM:SS``, or ``MM``; ValueError if none."""
    days = 0
    rest = text.strip()
    if "-" in rest:
        d, _, rest = rest.partition("-")
        days = int(d)
        if days < 0:
            raise ValueError(text)
    parts = rest.split(":")
    if not 1 <= len(parts) <= 3 or any(not p.replace(".", "", 1).isdigit() for p in parts):
        raise ValueError(text)
    nums = [float(p) for p in parts]
    if len(parts) == 3:
        h, m, s = nums
    elif len(parts) == 2:
        h, m, s = (nums[0], nums[1], 0.0) if "-" in text else (0.0, nums[0], nums[1])
    else:
        h, m, s = (nums[0], 0.0, 0.0) if "-" in text else (0.0, nums[0], 0.0)
    return days * 86400 + h * 3600 + m * 60 + s


def _when(text: str) -> float:
    """Seconds of a sacct timestamp (``2026-11-23T10:00:00``), as written (no time zone applied)."""
    return float(calendar.timegm(datetime.fromisoformat(text.strip()).timetuple()))


def read(path: str, procs: int | None, strict: bool = False, limit: int | None = None) -> Trace:
    """The jobs of ``sacct`` output at ``path`` as a trace of a machine of ``procs`` cores."""
    problems: list[str] = []
    skipped = dict.fromkeys(REASONS, 0)

    def bad(lineno: int, why: str) -> None:
        msg = f"{path}:{lineno}: {why}"
        if strict:
            raise TraceError(msg)
        skipped[BAD_LINE] += 1
        if len(problems) < MAX_PROBLEMS:
            problems.append(msg)

    rows: list[
        tuple[float, int, int, float, float, str, int | None, int]
    ] = []  # submit, line, cores, est, run, user, status, GPUs
    header: list[str] | None = None
    njobs = cut = 0
    try:
        with _open(path) as f:
            for lineno, line in enumerate(f, 1):
                line = line.rstrip("\r\n")
                if not line.strip():
                    continue
                fields = line.split("|")
                if header is None:
                    header = fields[:-1] if fields and fields[-1] == "" else fields
                    missing = [n for n in NEEDED if n not in header]
                    if "ReqCPUS" not in header and "AllocCPUS" not in header:
                        missing.append("ReqCPUS or AllocCPUS")
                    if missing:
                        raise TraceError(
                            f"{path}:{lineno}: not sacct --parsable2 output with a header line: "
                            f"no field {', '.join(missing)} (see gsim(1), SLURM HISTORY)"
                        )
                    continue
                if len(fields) == len(header) + 1 and fields[-1] == "":
                    fields.pop()
                if len(fields) != len(header):
                    bad(lineno, f"{len(fields)} fields, the header has {len(header)}")
                    continue
                rec = dict(zip(header, fields))
                if "." in rec["JobID"]:
                    continue  # a job step
                if limit is not None and njobs >= limit:
                    break
                njobs += 1
                state = rec.get("State", "").split(" ")[0]
                # Slurm gives a job cancelled while it waited a Start equal to its End: no resources
                # allocated (an empty AllocTRES) tells it never ran.
                never_ran = rec.get("AllocTRES", "x").strip() == ""
                if state.startswith(NOT_ENDED) or rec.get("Start", "x").strip() in NOT_STARTED or never_ran:
                    skipped[NO_RUNTIME] += 1
                    continue
                try:
                    t_sub = _when(rec["Submit"])
                except ValueError:
                    bad(lineno, f"Submit is not a time: {rec['Submit']!r}")
                    continue
                try:
                    t_run = duration(rec["Elapsed"])
                except ValueError:
                    bad(lineno, f"Elapsed is not a duration: {rec['Elapsed']!r}")
                    continue
                limit_text = rec.get("Timelimit", "").strip()
                est = t_run
                if limit_text and limit_text[0].isdigit():
                    try:
                        est = duration(limit_text)
                    except ValueError:
                        bad(lineno, f"Timelimit is not a duration: {limit_text!r}")
                        continue
                try:
                    req = int(rec.get("ReqCPUS") or 0)
                    alloc = int(rec.get("AllocCPUS") or 0)
                except ValueError:
                    bad(lineno, f"CPUs are not a number: {rec.get('ReqCPUS')!r}, {rec.get('AllocCPUS')!r}")
                    continue
                n = req if req > 0 else alloc
                if n <= 0:
                    skipped[NO_PROCS] += 1
                    continue
                if est <= 0:
                    est = t_run
                if t_run > est:
                    t_run, cut = est, cut + 1
                status = 5 if state.startswith(CANCELLED) else 0 if state.startswith(FAILED) else None
                gpus = _gpus(rec.get("AllocTRES", ""))
                rows.append((t_sub, lineno, n, est, t_run, rec.get("User", ""), status, gpus))
    except (OSError, UnicodeDecodeError, EOFError) as e:
        raise TraceError(f"{path}: cannot read: {e}") from None
    if header is None:
        raise TraceError(f"{path}: no header line: not sacct --parsable2 output")
    if procs is None:
        raise TraceError(f"{path}: sacct does not record the machine's size: give --procs (the cluster's CPUs)")
    rows.sort()
    trace = Trace(path, procs, None, None, skipped=skipped, problems=problems, cut=cut)
    trace.lines = njobs
    first = rows[0][0] if rows else 0.0
    for t_sub, lineno, n, est, t_run, user, status, gpus in rows:
        if n > procs:
            skipped[TOO_LARGE] += 1
            msg = f"{path}:{lineno}: a job of {n} CPUs, more than the machine's {procs}"
            if strict:
                raise TraceError(msg)
            if len(problems) < MAX_PROBLEMS:
                problems.append(msg)
            continue
        trace.ids.append(len(trace.ids) + 1)
        trace.submit.append(t_sub - first)
        trace.size.append(n)
        trace.walltime.append(est)
        trace.run.append(t_run)
        trace.user.append(user)
        if status is not None:
            trace.status[len(trace.ids)] = status
        if gpus:
            trace.devices[len(trace.ids)] = (DeviceAsk("gpu", gpus),)
    if not trace.ids:
        if njobs == 0:
            raise TraceError(f"{path}: no jobs in the sacct output")
        raise TraceError(f"{path}: none of the {njobs} jobs can be replayed")
    return trace
