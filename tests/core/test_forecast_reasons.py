"""Why a pending job waits, as the core's forecast says it (:func:`gridsched.core.policy.forecast_reasons`).

Machine for the placement cases: two boards of four cores, SMT pairs: board 0 = cores 0-3,
board 1 = cores 4-7.  Expected values are worked out in the comments.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from gridsched.core import depend, topology
from gridsched.core.placement import Request
from gridsched.core.policy import forecast, forecast_reasons
from gridsched.core.types import HeadReservation as HR
from gridsched.core.types import Params, Policy, Resv, Running, Snapshot, Wait, Waiting, WaitKind

R, W = Running, Waiting
ALL = [Params(policy=p) for p in Policy]
MACHINE = topology.make(
    [topology.board(0, range(4), [(0, 1), (2, 3)]), topology.board(1, range(4, 8), [(4, 5), (6, 7)])], range(8)
)
EVERY = frozenset(range(8))


def cores(asks: int, has: int, free: int) -> Wait:
    """The next job's wait for cores: it asks for ``asks``, ``free`` of the ``has`` in service are free."""
    return Wait(WaitKind.RESOURCES, what="cores", asks=asks, has=has, free=free)


def mapped(running=(), pending=(), *, drained=frozenset(), resvs=(), params=ALL[1], floating=None) -> Snapshot:
    """A snapshot on the two-board map: free = every core less running jobs, active reservations and drained."""
    running = tuple(running)
    busy = set().union(*(set(r.cores) | r.held for r in running)) if running else set()
    for rv in resvs:
        if rv.active:
            busy |= set(rv.cores)
    return Snapshot(
        now=0.0,
        ncores=8,
        running=running,
        pending=tuple(pending),
        params=params,
        free=frozenset(EVERY - busy - drained),
        reservations=tuple(resvs),
        machine=MACHINE,
        drained=frozenset(drained),
        floating=floating or {},
    )


def counted(running=(), pending=(), *, ncores=4, params=ALL[1], floating=None, states=None) -> Snapshot:
    return Snapshot(
        now=0.0,
        ncores=ncores,
        running=tuple(running),
        pending=tuple(pending),
        params=params,
        floating=floating or {},
        states=states or {},
    )


@pytest.mark.parametrize("params", ALL, ids=lambda p: p.policy.value)
def test_the_next_job_waits_for_resources_the_others_for_priority(params):
    # four cores, all busy until 100: job 1 is next (Resources), job 2 comes after it (Priority)
    s = counted([R(9, 4, 0.0, 100.0)], [W(1, 2, 50.0), W(2, 2, 50.0), W(3, 4, 50.0)], params=params)
    fc = forecast_reasons(s)
    assert fc.reasons == {
        1: cores(2, 4, 0),
        2: Wait(WaitKind.PRIORITY),
        3: Wait(WaitKind.PRIORITY),
    }
    assert fc.times == forecast(s) and fc.times[1] == 100.0


def test_a_job_that_starts_now_has_no_reason_and_a_backfilled_one_neither():
    # easy: six of eight cores busy until 100; job 1 (4 cores) waits for them (Resources); job 2
    # (2 cores, ends by 100) backfills now; job 3 (2 cores) finds nothing free now (Priority)
    s = counted([R(9, 6, 0.0, 100.0)], [W(1, 4, 50.0), W(2, 2, 50.0), W(3, 2, 50.0)], ncores=8)
    fc = forecast_reasons(s)
    assert fc.times[2] == 0.0 and 2 not in fc.reasons
    # (job 1 lacks cores: of the two free now, job 2 takes both)
    assert fc.reasons == {1: cores(4, 8, 0), 3: Wait(WaitKind.PRIORITY)}


def test_the_head_keeps_resources_when_a_job_ahead_of_it_was_requeued():
    # checkpoint-backfill: job 5 is the head (its reservation at 100 kept from the last pass); job 1,
    # requeued ahead of it, waits behind it
    ckpt = Params(policy=Policy.CHECKPOINT_BACKFILL)
    s = replace(counted([R(9, 4, 0.0, 100.0)], [W(1, 4, 500.0), W(5, 4, 50.0)], params=ckpt), head=HR(5, 100.0))
    fc = forecast_reasons(s)
    assert fc.reasons[5] == cores(4, 4, 0) and fc.reasons[1] == Wait(WaitKind.PRIORITY)


def test_eligibility_reasons_are_typed():
    pending = [
        W(1, 1, 60.0, held="held by its owner"),
        W(2, 1, 60.0, begin=1000.0),
        W(3, 1, 60.0, deps=depend.parse("afterok:20")),
        W(4, 1, 60.0, deps=depend.parse("afterok:21")),
        W(5, 1, 60.0, array=7, array_max=1),
        W(6, 1, 60.0, array=7, array_max=1),
    ]
    s = counted([], pending, states={20: "RUNNING", 21: "FAILED"})
    fc = forecast_reasons(s)
    assert fc.reasons[1] == Wait(WaitKind.HELD, "held by its owner")
    assert fc.reasons[2] == Wait(WaitKind.BEGIN_TIME, "not before 1000")
    assert fc.reasons[3] == Wait(WaitKind.DEPENDENCY, "waiting for dependency afterok:20: job 20 is RUNNING")
    assert fc.reasons[4].kind is WaitKind.DEPENDENCY_NEVER
    assert 5 not in fc.reasons and fc.times[5] == 0.0  # the first task of the throttled array starts
    assert fc.reasons[6] == Wait(WaitKind.ARRAY_LIMIT, "array 7: 1 tasks already running (%1)")


def test_never_fits_says_what_is_missing_cores_licences_or_an_unknown_resource():
    s = counted(
        [],
        [W(1, 5, 60.0), W(2, 1, 60.0, resources=(("matlab", 3),)), W(3, 1, 60.0, resources=(("nope", 1),))],
        floating={"matlab": 2},
    )
    fc = forecast_reasons(s)
    assert all(fc.times[j] == math.inf for j in (1, 2, 3))
    assert fc.reasons[1] == Wait(WaitKind.NEVER_FITS, what="cores", asks=5, has=4)
    assert fc.reasons[2] == Wait(WaitKind.NEVER_FITS, what="matlab", asks=3, has=2)
    assert fc.reasons[3] == Wait(WaitKind.NEVER_FITS, what="unknown", text="nope")


def test_never_while_drained_and_waiting_behind_drained_cores():
    drained = frozenset(range(4, 8))
    # five cores can never be had while board 1 is drained; they could with it in service
    fc = forecast_reasons(mapped([], [W(1, 5, 60.0)], drained=drained))
    assert fc.times[1] == math.inf
    assert fc.reasons[1] == Wait(WaitKind.DRAINED, never=True, cores=drained)
    # a job on core 0 until 100: a --place board job of four waits for board 0, while board 1
    # (drained) would take it now
    board = W(2, 4, 60.0, place=Request(4, "board"))
    fc = forecast_reasons(mapped([R(9, 1, 0.0, 100.0, (0,))], [board], drained=drained))
    assert fc.times[2] == 100.0
    assert fc.reasons[2] == Wait(WaitKind.DRAINED, cores=drained)
    # with nothing drained and a job on each board, the same job is simply next (Resources)
    fc = forecast_reasons(mapped([R(9, 1, 0.0, 100.0, (0,)), R(8, 1, 0.0, 50.0, (4,))], [board]))
    assert fc.times[2] == 50.0 and fc.reasons[2] == Wait(WaitKind.RESOURCES)


@pytest.mark.parametrize("params", ALL, ids=lambda p: p.policy.value)
def test_a_placement_no_board_can_hold_never_fits_drained_or_not(params):
    five = W(1, 5, 60.0, place=Request(5, "board"))
    fc = forecast_reasons(mapped([], [five], params=params))
    assert fc.times[1] == math.inf
    assert fc.reasons[1] == Wait(WaitKind.NEVER_FITS, what="placement", asks=5, has=4)
    # core 4 drained: no board would hold five cores with it back either
    fc = forecast_reasons(mapped([], [five], drained=frozenset({4})))
    assert fc.reasons[1] == Wait(WaitKind.NEVER_FITS, what="placement", asks=5, has=4)
    # cores 3 and 4 drained: a --place board job of four could have either board back
    four = W(2, 4, 60.0, place=Request(4, "board"))
    fc = forecast_reasons(mapped([], [four], drained=frozenset({3, 4})))
    assert fc.times[2] == math.inf
    assert fc.reasons[2] == Wait(WaitKind.DRAINED, never=True, cores=frozenset({3, 4}))


def test_bound_jobs_never_in_their_reservation_say_why():
    # active reservation 1 on board 0 until 100, ending its jobs: a job of 200 s never ends in it
    active = Resv(1, 4, 100.0, active=True, cores=(0, 1, 2, 3), end=100.0)
    fc = forecast_reasons(mapped([], [W(2, 1, 200.0, bind=1), W(3, 1, 50.0, bind=1)], resvs=[active]))
    assert fc.reasons[2] == Wait(WaitKind.BOUND_NEVER, what="time", resv=1)
    assert 3 not in fc.reasons and fc.times[3] == 0.0
    # spread over two boards (cores 0-1 and 4-5): a --place board job of four is never held by them
    spread = Resv(1, 4, 100.0, active=True, cores=(0, 1, 4, 5), end=100.0)
    fc = forecast_reasons(mapped([], [W(2, 4, 50.0, bind=1, place=Request(4, "board"))], resvs=[spread]))
    assert fc.reasons[2] == Wait(WaitKind.BOUND_NEVER, what="place", resv=1)
    # all its cores busy until 60: the next bound job waits for room in it
    busy = [R(8, 4, 0.0, 60.0, (0, 1, 2, 3), bind=1)]
    fc = forecast_reasons(mapped(busy, [W(2, 1, 10.0, bind=1)], resvs=[active]))
    assert fc.times[2] == 60.0 and fc.reasons[2] == Wait(WaitKind.RESOURCES, resv=1)


def test_a_job_bound_to_a_waiting_reservation_waits_for_it():
    # flexible reservation 1 of eight cores waits for the running job (until 100); its bound job waits for it
    resv = Resv(1, 8, 100.0)
    s = mapped([R(9, 2, 0.0, 100.0, (0, 1))], [W(1, 8, 100.0, flex=True), W(2, 1, 10.0, bind=1)], resvs=[resv])
    fc = forecast_reasons(s)
    assert fc.times[2] == 100.0
    assert fc.reasons[2] == Wait(WaitKind.RESERVATION, resv=1)


# -- what binds: cores, a licence, a device type ------------------------------------------------


@pytest.mark.parametrize("params", ALL, ids=lambda p: p.policy.value)
def test_a_job_that_lacks_only_a_licence_waits_for_licenses(params):
    # four cores, one busy; matlab=2, both held by job 9 until 100: job 1 (one core, one matlab) lacks
    # only the licence; job 2 (one core, no licence) starts now, or under fcfs waits behind job 1
    s = counted(
        [R(9, 1, 0.0, 100.0, resources=(("matlab", 2),))],
        [W(1, 1, 50.0, resources=(("matlab", 1),)), W(2, 1, 50.0)],
        params=params,
        floating={"matlab": 2},
    )
    fc = forecast_reasons(s)
    assert fc.reasons[1] == Wait(WaitKind.LICENSES, what="matlab", asks=1, has=2, free=0)
    assert fc.times[1] == 100.0
    if params.policy is Policy.FCFS:
        assert fc.reasons[2] == Wait(WaitKind.PRIORITY)
    else:
        assert fc.times[2] == 0.0 and 2 not in fc.reasons


def test_a_job_that_lacks_cores_and_a_licence_waits_for_the_cores():
    # four cores all busy, and the licence: the job needs both to come free, so it is Resources (cores)
    s = counted(
        [R(9, 4, 0.0, 100.0, resources=(("matlab", 2),))],
        [W(1, 1, 50.0, resources=(("matlab", 1),))],
        floating={"matlab": 2},
    )
    assert forecast_reasons(s).reasons == {1: cores(1, 4, 0)}


@pytest.mark.parametrize("params", ALL, ids=lambda p: p.policy.value)
def test_behind_the_head_a_job_lacking_a_licence_says_so_where_the_policy_backfills(params):
    # four cores all busy until 100: job 1 (4 cores) is next; job 2 (1 core, matlab) comes after it.
    # Then two cores free (job 8 ends): job 2 would backfill if matlab were free -- Licenses, but
    # under fcfs it waits behind job 1 whatever it lacks (Priority)
    running = [R(9, 2, 0.0, 100.0, resources=(("matlab", 1),)), R(8, 2, 0.0, 200.0)]
    pending = [W(1, 4, 50.0), W(2, 1, 10.0, resources=(("matlab", 1),))]
    fc = forecast_reasons(counted(running, pending, params=params, floating={"matlab": 1}))
    assert fc.reasons[1] == cores(4, 4, 0)
    assert fc.reasons[2] == Wait(WaitKind.PRIORITY)  # no core free: not the licence alone
    fc = forecast_reasons(counted(running[:1], pending, params=params, floating={"matlab": 1}))
    assert fc.reasons[1] == cores(4, 4, 2)
    if params.policy is Policy.FCFS:
        assert fc.reasons[2] == Wait(WaitKind.PRIORITY)
    else:
        assert fc.reasons[2] == Wait(WaitKind.LICENSES, what="matlab", asks=1, has=1, free=0)


def test_a_job_that_lacks_only_gpus_waits_for_resources_naming_them():
    from gridsched.core import devices as dev
    from gridsched.core.devices import DeviceAsk
    from gridsched.core.topology import Device

    gpus = tuple(Device("gpu", i, i // 2) for i in range(4))
    held = dev.held([("gpu", i) for i in range(4)], gpus, False)
    gpu_job = R(9, 1, 0.0, 100.0, (0,), devices=tuple(("gpu", i) for i in range(4)), resources=held)
    ask = (DeviceAsk("gpu", 2),)
    w = W(1, 1, 50.0, devices=ask, resources=dev.slots(ask, gpus))
    s = replace(mapped([gpu_job], [w]), devices=gpus)
    fc = forecast_reasons(s)
    assert fc.reasons == {1: Wait(WaitKind.RESOURCES, what="device:gpu", asks=2, has=4, free=0)}
    assert fc.times[1] == 100.0
    # two of the four come free: it starts now, without a reason
    half = replace(gpu_job, devices=(("gpu", 0), ("gpu", 1)), resources=dev.held([("gpu", 0), ("gpu", 1)], gpus, False))
    fc = forecast_reasons(replace(mapped([half], [w]), devices=gpus))
    assert fc.times[1] == 0.0 and fc.reasons == {}
