"""Slurm's REASON codes for pending and held jobs: the one table from the core's wait kinds to squeue's words.

The core says why a job waits as a :class:`~gridsched.core.types.WaitKind`;
the daemon words it (:mod:`gridsched.daemon.reasons`, the hold handler, the
core's eligibility texts) and keeps the words as the job's reason.  gstat's
REASON column shows the code of :data:`CODES` for the kind those words tell
(:func:`kind_of`); gstat -f and --json keep the words.  gstat(1) lists every
code with its meaning.
"""

from __future__ import annotations

from gridsched.protocol.jobs import WAITING, JobState

# The value of each :class:`~gridsched.core.types.WaitKind` -> (squeue's code,
# its meaning for gstat(1)).  Keyed by the value so that gstat need not import
# the core's types (tests check that every kind has its row).
CODES: dict[str, tuple[str, str]] = {
    "Resources": ("Resources", "next to start, waiting for cores, memory or devices in use to come free"),
    "Licenses": ("Licenses", "a licence (-l NAME=N) is all it lacks: other jobs hold the units it asks for"),
    "Priority": ("Priority", "jobs ahead of it in the queue start first"),
    "Drained": ("ReqNodeNotAvail", "it needs cores that are drained (gctl drain)"),
    "NeverFits": ("BadConstraints", "the machine in service can never hold what it asks for"),
    "BoundNever": ("BadConstraints", "it can never start in the reservation it is bound to"),
    "Reservation": ("Reservation", "it is bound to a reservation that is not active yet"),
    "Held": ("JobHeldUser", "held by its owner (JobHeldAdmin: held by an admin); grls releases it"),
    "BeginTime": ("BeginTime", "its begin time (gsub --begin) is still ahead"),
    "Dependency": ("Dependency", "it waits for the jobs it depends on (gsub --dependency)"),
    "DependencyNeverSatisfied": ("DependencyNeverSatisfied", "its dependencies can never be met"),
    "JobArrayTaskLimit": ("JobArrayTaskLimit", "its array already runs as many tasks as its %MAX allows"),
    "QOSMaxCpuPerUserLimit": (
        "QOSMaxCpuPerUserLimit",
        "its owner's running jobs hold as many cores as a user may ([limits] max_cpus_per_user)",
    ),
}
HELD_ADMIN = "JobHeldAdmin"


def kind_of(state: str, reason: str) -> str | None:
    """The kind of wait (a WaitKind value) the reason a pending or held job carries tells; None when it tells none."""
    if state == JobState.HELD:
        return "Held"
    if state != JobState.PENDING or not reason:
        return None
    word, colon, _ = reason.partition(": ")
    if colon and word in ("Resources", "Licenses", "Priority", "Reservation"):
        return word
    if reason.startswith(("can never start while cores", "waiting for cores, while")):
        return "Drained"
    if reason.startswith("can never start in reservation"):
        return "BoundNever"
    if reason.startswith("can never start"):
        return "NeverFits"
    if reason.startswith(("begin time ", "not before ")):
        return "BeginTime"
    if reason.startswith("dependency never satisfied"):
        return "DependencyNeverSatisfied"
    if reason.startswith("user core limit: "):
        return "QOSMaxCpuPerUserLimit"
    if reason.startswith("array "):
        return "JobArrayTaskLimit"
    if reason.startswith(("waiting for dependency", "singleton:")):
        return "Dependency"
    return None


def code(state: str, reason: str) -> str:
    """squeue's REASON for a job in ``state`` that carries ``reason``: ``None`` when nothing holds it back."""
    kind = kind_of(state, reason)
    if kind is None:
        return "None" if state in WAITING else ""
    if kind == "Held" and "admin" in reason:
        return HELD_ADMIN
    return CODES[kind][0]
