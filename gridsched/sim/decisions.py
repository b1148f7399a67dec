"""Carrying out the core's decisions on a replay (:class:`~gridsched.sim.replay.Replay`), as the daemon
carries them out on the machine: one function per kind of decision, each checking first that the
decision can be carried out (else :class:`~gridsched.sim.records.SimulationError`)."""

from __future__ import annotations

from bisect import insort
from heapq import heappush
from typing import assert_never

from gridsched.core import devices as coredev
from gridsched.core.placement import claimed
from gridsched.core.split import in_order
from gridsched.core.types import (
    Activate,
    Cancel,
    CancelSubtree,
    EndReservation,
    HoldSubtree,
    Kill,
    Plan,
    Preempt,
    Reclaim,
    Resume,
    Resv,
    Running,
    Start,
    StartTasks,
    Waiting,
)
from gridsched.sim.records import SimulationError
from gridsched.sim.replay import DONE, NO_DEV, PENDING, RUNNING, Replay, job_name


def apply(r: Replay, plan: Plan, now: float) -> bool:
    """Carry out ``plan``'s decisions at ``now``; whether the core must pass again at once (something
    other than a start changed what it saw: a preemption, a kill, a reservation's end, a cancellation)."""
    started: list[int] = []
    again = False
    n = r.n
    for d in plan.decisions:
        if type(d) is Start:  # the common decision first
            start(r, d, now)
            started.append(d.job)
            continue
        r.smallest = None  # the queue changes in other ways than by starts
        match d:  # every kind of decision (assert_never: a new kind is a type error until handled)
            case Start():
                start(r, d, now)
                started.append(d.job)
            case EndReservation():  # its resources return; the core passes again
                end_reservation(r, d)
                again = True
            case Activate():
                if activate(r, d, now):
                    started.append(d.resv)
            case Cancel() if r.gated and 0 <= d.job < n and r.state[d.job] == PENDING:
                cancel(r, d.job)
                again = True  # a job waiting for it may be eligible now: pass again
            case Cancel() | Reclaim() | Resume() | CancelSubtree() | HoldSubtree():
                raise SimulationError(f"policy decided {d}, which a trace has no part for")
            case StartTasks():
                start_tasks(r, d, now)
            case Kill():  # it overran the estimate it was backfilled on: it ends now, as timed out
                kill(r, d.job, now)
                again = True
            case Preempt():
                preempt(r, d.job, now)
                again = True
            case _:
                assert_never(d)
    pending, state = r.pending, r.state
    for i in started:  # pending stays sorted by job id (= submit order)
        if i >= n:  # a flexible reservation's entry
            pending[:] = [w for w in pending if w.id != i]
            continue
        k = r.position(i)
        if k < len(pending) and pending[k].id == i and state[i] == RUNNING:
            del pending[k]
    return again


def start(r: Replay, d: Start, now: float) -> None:
    """Start job ``d.job`` on its cores and devices, for the rest of its walltime."""
    i = d.job
    if not 0 <= i < r.n or r.state[i] != PENDING:
        raise SimulationError(f"policy started job {job_name(r.trace, i)}, which is not waiting")
    n_i = r.size[i]
    if n_i > r.free:
        raise SimulationError(f"policy started job {job_name(r.trace, i)} on {n_i} cores with {r.free} free")
    r.free -= n_i
    if n_i == r.smallest:  # it may have been the only one of that size
        r.smallest = None
    free_set = r.free_set
    if free_set is not None:
        on = set(d.cores)
        if len(on) != n_i or not on <= free_set:
            raise SimulationError(f"policy placed job {job_name(r.trace, i)} on cores not free")
        r_i = r.req_of(i)
        hold = claimed(r.machine, d.cores, r_i) if r_i is not None else frozenset(on)  # type: ignore[arg-type]
        r.held[i] = hold
        r.free_set = free_set - hold
    d_keys: tuple[tuple[str, int], ...] = NO_DEV
    d_held: tuple[tuple[str, int], ...] = NO_DEV
    dev_asks = r.dev_asks
    if dev_asks and dev_asks[i]:
        d_keys = tuple(d.devices)
        if len(set(d_keys)) != sum(a.count for a in dev_asks[i]):
            raise SimulationError(
                f"policy started job {job_name(r.trace, i)} on devices {list(d_keys)}, "
                f"not the {sum(a.count for a in dev_asks[i])} it asks for"
            )
        d_held = coredev.held(d_keys, r.devices, False)
    if r.mem_res:
        d_held = coredev.merge(d_held, r.mres(i))
    r.state[i] = RUNNING
    if r.first[i] < 0:
        r.first[i] = now
    debt = r.debt[i]
    done = r.done[i]
    left = r.wall[i] - done + debt
    preemptable, user = r.preemptable, r.users[i]
    if r.gated:
        r.states[i] = "RUNNING"
        a = r.g_arrays.get(i)
        ru = Running(
            i,
            n_i,
            now,
            left,
            tuple(d.cores),
            d.backfilled,
            preemptable,
            d.planned,
            False,
            user,
            d_held,
            name=r.g_names.get(i, ""),
            array=a[0] if a else None,
            devices=d_keys,
        )
    elif d_held:
        ru = Running(
            i, n_i, now, left, d.cores, d.backfilled, preemptable, d.planned, False, user, d_held, devices=d_keys
        )
    else:
        ru = Running(i, n_i, now, left, d.cores, d.backfilled, preemptable, d.planned, False, user)
    r.running[i] = ru
    if d.planned is None:
        if d.backfilled and preemptable:
            r.reclaim[i] = (now + left, n_i)
        else:
            r.fixed[i] = (now + left, n_i)  # (its start + estimate)
    else:
        r.special[i] = ru
    r.seg_begin[i] = now
    heappush(r.ends, (now + debt + r.work[i] - done, i, r.seg[i]))
    r.run_dirty = True


def end_reservation(r: Replay, d: EndReservation) -> None:
    """Reservation ``d.resv`` ends: the resources of an active one return."""
    rv = r.rv_live.pop(d.resv, None)
    if rv is None:
        raise SimulationError(f"policy ended reservation {d.resv - r.n + 1}, which is not live")
    if rv.active:
        r.free += rv.ncpus
        if r.free_set is not None:
            r.free_set = r.free_set | r.held.pop(d.resv, frozenset())


def activate(r: Replay, d: Activate, now: float) -> bool:
    """Reservation ``d.resv`` becomes active on its cores until ``d.end``; whether it was a flexible one
    (its entry leaves the queue)."""
    rv = r.rv_live.get(d.resv)
    if rv is None or rv.active or rv.ncpus > r.free:
        raise SimulationError(f"policy activated reservation {d.resv - r.n + 1}, which cannot be")
    r.free -= rv.ncpus
    if r.free_set is not None:
        r.held[d.resv] = (
            claimed(r.machine, d.cores, rv.place)  # type: ignore[arg-type]
            if rv.place is not None
            else frozenset(d.cores)
        )
        r.free_set = r.free_set - r.held[d.resv]
    r.rv_live[d.resv] = Resv(
        rv.id,
        rv.ncpus,
        rv.duration,
        rv.resources,
        rv.start,
        True,
        tuple(d.cores),
        d.end,
        place=rv.place,
    )
    r.activated[d.resv - r.n] = now
    heappush(r.rv_events, (d.end, d.resv))
    return rv.start is None


def cancel(r: Replay, i: int) -> None:
    """Pending job ``i`` is cancelled: its dependencies can never be met."""
    r.state[i] = DONE
    r.states[i] = "CANCELLED"
    r.cancelled.append(i)
    r.ungated.discard(i)
    r.pending[:] = [w for w in r.pending if w.id != i]


def start_tasks(r: Replay, d: StartTasks, now: float) -> None:
    """A piece of splittable job ``d.job`` starts: its chains of sub-tasks, on cores of their own; the job
    keeps the rest of its sub-tasks at its place in the queue (sub-tasks of their own sizes: on the cores
    they need at once, and it runs them for their own times)."""
    i = d.job
    k = len(d.tasks)
    st = r.sub.get(i) if 0 <= i < r.n else None
    width = sum(d.widths) if d.widths else len(d.chains)
    if (
        not 0 <= i < r.n
        or r.state[i] != PENDING
        or not r.splittable[i]
        or k > r.tasks_left[i]
        or width > r.free
        or (r.free_set is not None and len(d.cores) != width)
        or (st is not None and not set(d.tasks) <= set(r.left[i]))
    ):
        raise SimulationError(f"policy split job {job_name(r.trace, i)}, which cannot be")
    pid = r.next_piece
    r.next_piece += 1
    r.free -= width
    if r.free_set is not None:
        got = frozenset(d.cores)
        if not got <= r.free_set:
            raise SimulationError(f"policy placed sub-tasks of {job_name(r.trace, i)} on cores not free")
        r.held[pid] = got
        r.free_set = r.free_set - got
    if st is None:
        longest = max(map(len, d.chains))
        estimate, runs = longest * r.wall[i], longest * r.work[i]
    else:
        estimate = max(sum(st.sizes[x][1] for x in ch) for ch in d.chains)
        runs = max(sum(st.runs[x] for x in ch) for ch in d.chains)
    r.running[pid] = Running(pid, width, now, estimate, tuple(d.cores), True, False, None, False, r.users[i])
    r.piece_of[pid] = i
    heappush(r.piece_ends, (now + runs, pid))
    r.outstanding[i] += 1
    if r.first[i] < 0:
        r.first[i] = now
    r.tasks_left[i] -= k
    if st is None:
        left = r.size[i] = r.tasks_left[i]
    else:
        taken = set(d.tasks)
        rest = r.left[i] = tuple(x for x in r.left[i] if x not in taken)
        left = len(rest)
        if rest:  # as the daemon: on the cores they need at once, for the time they take in order there
            n = r.size[i] = min(r.size[i], sum(st.sizes[x][0] for x in rest))
            r.work[i] = in_order(((st.sizes[x][0], st.runs[x]) for x in rest), n)
    r.n_pieces += 1
    r.n_tasks += k
    pos = r.position(i)
    if left == 0:
        r.state[i] = DONE  # its end is the end of its last piece
        del r.pending[pos]
    else:
        undone = r.split_info(i)
        r.pending[pos] = (
            r.waiting(i, r.size[i], r.wall[i], 0.0, undone)
            if r.gated
            else Waiting(i, r.size[i], r.wall[i], r.preemptable, r.users[i], 0.0, place=r.req_of(i), split=undone)
        )
    r.run_dirty = True


def kill(r: Replay, i: int, now: float) -> None:
    """Running job ``i`` ends now, as at its walltime (it overran the estimate it was backfilled on)."""
    if not 0 <= i < r.n or r.state[i] != RUNNING:
        raise SimulationError(f"policy killed job {job_name(r.trace, i)}, which is not running")
    r.state[i] = DONE
    r.end[i] = now
    del r.running[i]
    if r.fixed.pop(i, None) is None and r.reclaim.pop(i, None) is None:
        del r.special[i]
    r.free += r.size[i]
    if r.free_set is not None:
        r.free_set = r.free_set | r.held.pop(i)
    if i in r.segs:
        r.segs[i].append((r.seg_begin[i], now))
    r.killed.append(i)
    r.run_dirty = True


def preempt(r: Replay, i: int, now: float) -> None:
    """Running job ``i`` is preempted: checkpointed (its work kept, the checkpoint's cost paid on
    its next run) or requeued (its work lost); it returns to the queue at its place, to run whole."""
    if not 0 <= i < r.n or r.state[i] != RUNNING:
        raise SimulationError(f"policy preempted job {job_name(r.trace, i)}, which is not running")
    if not r.preemptable:
        raise SimulationError(f"policy preempted job {job_name(r.trace, i)}, which is not preemptable")
    n_i = r.size[i]
    began = r.seg_begin[i]
    ran = now - began
    debt, done = r.debt, r.done
    paid = debt[i] if debt[i] < ran else ran
    r.overhead_cs += paid * n_i
    progress_made = ran - paid
    if r.requeue:
        r.lost_cs += (done[i] + progress_made) * n_i
        done[i] = 0.0
        debt[i] -= paid
    else:
        done[i] += progress_made
        debt[i] += 2.0 * r.overhead - paid
    r.ckpts[i] += 1
    r.segs.setdefault(i, []).append((began, now))
    r.seg[i] += 1
    r.state[i] = PENDING
    del r.running[i]
    if r.fixed.pop(i, None) is None and r.reclaim.pop(i, None) is None:
        del r.special[i]
    r.free += n_i
    if r.free_set is not None:
        r.free_set = r.free_set | r.held.pop(i)
    left = r.wall[i] - done[i] + debt[i]
    insort(
        r.pending,
        r.waiting(i, n_i, left, done[i], None)
        if r.gated
        else Waiting(i, n_i, left, True, r.users[i], done[i], r.dres(i), place=r.req_of(i), devices=r.dask(i)),
        key=r.key,
    )  # runs whole from now on
    r.run_dirty = True
