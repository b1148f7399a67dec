"""Preemption for a head that asks for devices: the victims leave it distinct devices, on the right boards."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from gridsched.core import devices as dev
from gridsched.core.policy import schedule
from gridsched.core.topology import Device, board, make
from gridsched.core.types import HeadReservation, Params, Policy, Running, Snapshot, Waiting

CKPT = Params(policy=Policy.CHECKPOINT_BACKFILL, p=0.25, threshold=5.0)


def machine(devs: tuple[Device, ...]):
    return make([board(0, range(4)), board(1, range(4, 8))], list(range(8)), devices=devs)


def run(jid, cores, keys=(), devs=(), bf=True, whole=False, start=0.0, stopping=False):
    return Running(
        jid,
        len(cores),
        start,
        1000.0,
        tuple(cores),
        backfilled=bf,
        preemptable=bf,
        planned=10.0 if bf else None,
        stopping=stopping,
        devices=tuple(keys),
        whole_devices=whole,
        resources=dev.held(keys, devs, whole),
    )


def head_job(ncpus, gpus, bind="closest", excl=False):
    return Waiting(1, ncpus, 100.0, devices=(dev.DeviceAsk("gpu", gpus, "", bind, excl),))


def snap(devs, running, head, placed=True, now=50.0, more=()):
    m = machine(devs)
    busy = {c for r in running for c in r.cores}
    pend = tuple(replace(w, resources=dev.merge(w.resources, dev.slots(w.devices, devs))) for w in (head, *more))
    return Snapshot(
        now=now,
        ncores=8,
        running=tuple(running),
        pending=pend,
        params=CKPT,
        free=frozenset(range(8)) - busy if placed else None,
        machine=m if placed else None,
        devices=devs,
        head=HeadReservation(1, now),
    )


def preempted(s: Snapshot) -> list[int]:
    return [p.job for p in schedule(s).preempts]


def gpus(*boards: int, share: int = 1) -> tuple[Device, ...]:
    return tuple(Device("gpu", i, b, share=share) for i, b in enumerate(boards))


def test_two_slots_of_one_shared_gpu_are_not_two_gpus():
    devs = gpus(0, 1, share=2)
    g0, g1 = ("gpu", 0), ("gpu", 1)
    running = [
        run(10, (0, 1, 2), [g0], devs, start=3.0),  # most cores: first by count
        run(11, (3, 4), [g0], devs, start=2.0),
        run(12, (5,), [g1], devs, start=1.0),
        run(13, (6,), [g1], devs, bf=False),
    ]
    for placed in (True, False):
        got = preempted(snap(devs, running, head_job(1, 2), placed=placed))
        # by count 10 and 11 would free two slots, both of GPU 0; 10 and 12 free one slot of each GPU
        assert sorted(got) == [10, 12], placed


def test_free_slots_enough_by_count_but_on_one_gpu_still_preempt():
    devs = gpus(0, 1, share=2)
    running = [run(10, (4,), [("gpu", 1)], devs), run(11, (5,), [("gpu", 1)], devs, bf=False)]
    # GPU 0 has both its slots free: enough by count for two GPUs, but they are one GPU
    assert preempted(snap(devs, running, head_job(1, 2))) == [10]
    assert preempted(snap(devs, running, head_job(1, 1))) == []  # starts at once instead
    assert 1 in {s.job for s in schedule(snap(devs, running, head_job(1, 1))).starts}


def test_strict_frees_the_gpu_whose_board_gets_the_cores_closest_keeps_the_count_choice():
    devs = gpus(0, 1)
    running = [
        run(10, (0, 1, 2), [("gpu", 1)], devs),  # GPU on board 1, cores on board 0: first by count
        run(11, (3,), [("gpu", 0)], devs),
        run(12, (4, 5, 6, 7), (), devs, bf=False),  # board 1's cores stay busy
    ]
    assert preempted(snap(devs, running, head_job(1, 1, "strict"))) == [11]
    assert preempted(snap(devs, running, head_job(1, 1, "closest"))) == [10]


def test_nothing_is_preempted_when_no_set_of_victims_places_the_head():
    devs = gpus(0, 1)
    running = [
        run(10, (0,), [("gpu", 1)], devs),
        run(12, (4, 5, 6, 7), [("gpu", 0)], devs, bf=False),
    ]
    # GPU 0 is held by a job that cannot be preempted; 10's GPU is on board 1 where no core comes free
    assert preempted(snap(devs, running, head_job(1, 1, "strict"))) == []
    assert preempted(snap(devs, running, head_job(1, 2))) == []


def test_a_stopping_jobs_device_counts_as_coming_free():
    devs = gpus(0, 0, share=2)
    running = [
        run(10, (0,), [("gpu", 0)], devs, stopping=True),
        run(11, (1,), [("gpu", 0)], devs),
        run(12, (2,), [("gpu", 1)], devs, start=5.0),
        run(13, (3,), [("gpu", 1)], devs, bf=False),
    ]
    # GPU 0 has a slot free and one coming free; the head needs a second GPU: one of GPU 1's slots
    assert preempted(snap(devs, running, head_job(1, 2))) == [12]


def test_an_exclusive_head_needs_every_slot_of_a_gpu_freed():
    devs = gpus(0, 1, share=2)
    running = [
        run(10, (0, 1, 2), [("gpu", 0)], devs, start=3.0),
        run(11, (4,), [("gpu", 1)], devs, start=2.0),
        run(12, (5,), [("gpu", 1)], devs, start=1.0),
        run(13, (3,), [("gpu", 0)], devs, bf=False),
    ]
    # GPU 0 keeps a slot of a job that stays: only GPU 1, emptied, can be the head's whole
    assert sorted(preempted(snap(devs, running, head_job(1, 1, excl=True)))) == [11, 12]


def test_a_job_backfilled_beside_the_preemption_leaves_the_head_its_strict_cores():
    devs = gpus(0)
    running = [run(10, (0,), (), devs)]  # on board 0, where the head's GPU hangs
    head = head_job(4, 1, "strict")  # board 0 whole: core 0 must come free
    s = snap(devs, running, head, more=[Waiting(2, 1, 10.0)])
    plan = schedule(s)
    assert [p.job for p in plan.preempts] == [10]
    # job 2 would be packed on board 0 (the fullest that holds it): it must not take the head's cores there
    assert all(c >= 4 for x in plan.starts for c in x.cores)


# -- property: a preemption decided places the head on exactly what it frees ---------------


@st.composite
def scenes(draw):
    share = draw(st.integers(1, 3))
    devs = tuple(Device("gpu", i, draw(st.integers(0, 1)), share=share) for i in range(draw(st.integers(1, 4))))
    free = list(range(8))
    used: dict = {}
    running = []
    for jid in range(10, 10 + draw(st.integers(0, 6))):
        if not free:
            break
        n = draw(st.integers(1, min(3, len(free))))
        cores = draw(st.permutations(free))[:n]
        free = [c for c in free if c not in cores]
        whole = draw(st.booleans())
        keys = []
        for dv in devs:
            need = dv.share if whole else 1
            if draw(st.booleans()) and dv.share - used.get(dv.key, 0) >= need:
                keys.append(dv.key)
                used[dv.key] = used.get(dv.key, 0) + need
        bf = draw(st.booleans())
        stopping = bf and draw(st.integers(0, 5)) == 0
        running.append(run(jid, sorted(cores), keys, devs, bf=bf, whole=whole, start=float(jid % 4), stopping=stopping))
    head = head_job(
        draw(st.integers(1, 4)),
        draw(st.integers(1, len(devs))),
        draw(st.sampled_from(dev.BINDS)),
        draw(st.booleans()),
    )
    more = [
        Waiting(
            2 + i,
            draw(st.integers(1, 2)),
            10.0,
            devices=(dev.DeviceAsk("gpu", 1, "", draw(st.sampled_from(dev.BINDS))),),
        )
        for i in range(draw(st.integers(0, 3)))
    ]
    return devs, running, head, draw(st.booleans()), more


def placeable_after(s: Snapshot, head: Waiting, gone: set[int], new: Sequence[Running] = ()) -> bool:
    stay = [r for r in s.running if r.id not in gone and not r.stopping] + list(new)
    used = dev.used_slots(((r.devices, r.whole_devices) for r in stay), s.devices)
    if s.free is None:  # cores by count
        if sum(r.ncpus for r in stay) + head.ncpus > s.ncores:
            return False
        return dev.choose(head.devices, s.devices, used, None, None, head.ncpus, None) is not None
    cores = frozenset(range(8)) - {c for r in stay for c in r.cores}
    return dev.choose(head.devices, s.devices, used, s.machine, cores, head.ncpus, head.place) is not None


@settings(max_examples=300, deadline=None)
@given(scenes())
def test_a_decided_preemption_places_the_head_on_what_it_frees(scene):
    devs, running, head, placed, more = scene
    s = snap(devs, running, head, placed=placed, more=more)
    plan = schedule(s)
    started = {x.job for x in plan.starts}
    gone = {p.job for p in plan.preempts}
    cands = {r.id for r in running if r.backfilled and r.preemptable and not r.stopping}
    assert gone <= cands
    if gone:  # for the plan's head job (the first one that could not start)
        assert plan.head is not None
        hw = next(w for w in s.pending if w.id == plan.head.job)
        assert hw.id not in started
        # the jobs started beside the preemption leave the head what it is preempted for
        new = [
            Running(x.job, next(w.ncpus for w in s.pending if w.id == x.job), 50.0, 10.0, x.cores, devices=x.devices)
            for x in plan.starts
        ]
        assert placeable_after(s, hw, gone, new)
    elif 1 not in started and placeable_after(s, head, cands):
        # preempting every candidate would place it: some set must have been chosen (or it waits for stopping
        # jobs alone to give it room)
        assert placeable_after(s, head, set())
