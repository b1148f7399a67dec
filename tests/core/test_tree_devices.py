"""A yielding parent lends its devices with its cores: a child asking for devices runs on them."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from gridsched.core import devices as dev
from gridsched.core import endings, tree
from gridsched.core.policy import schedule
from gridsched.core.topology import Device, board, make
from gridsched.core.types import Lent, Params, Policy, Resume, Running, Snapshot, Start, Waiting

G0, G1 = ("gpu", 0), ("gpu", 1)


def machine(ngpu: int = 2, share: int = 1):
    devs = tuple(Device("gpu", i, i % 2, share=share) for i in range(ngpu))
    return make([board(0, range(4)), board(1, range(4, 8))], list(range(8)), devices=devs), devs


def run(jid, cores, devs, keys=(), start=0.0, whole=False) -> Running:
    return Running(
        jid,
        len(cores),
        start,
        1000.0,
        tuple(cores),
        devices=tuple(keys),
        whole_devices=whole,
        resources=dev.held(keys, devs, whole),
    )


def child(jid, gpus=1, n=1, excl=False, bind="closest") -> Waiting:
    asks = (dev.DeviceAsk("gpu", gpus, "", bind, excl),) if gpus else ()
    return Waiting(jid, n, 10.0, devices=asks)


def snap(m, devs, running, pending, lent, parents, policy=Policy.FCFS) -> Snapshot:
    busy = {c for r in running for c in r.cores}
    pend = tuple(replace(w, resources=dev.merge(w.resources, dev.slots(w.devices, devs))) for w in pending)
    return Snapshot(
        now=100.0,
        ncores=8,
        running=tuple(running),
        pending=pend,
        params=Params(policy=policy),
        free=frozenset(range(8)) - busy,
        machine=m,
        devices=devs,
        parents=dict(parents),
        lent=tuple(lent),
    )


def starts(plan) -> dict[int, Start]:
    return {s.job: s for s in plan.starts if isinstance(s, Start)}


def test_a_child_asking_for_a_gpu_runs_on_its_yielding_parents_gpu_and_cores():
    m, devs = machine()
    parent = run(1, (0, 1), devs, [G0])
    plan = schedule(snap(m, devs, [parent], [child(2)], [Lent(1, frozenset({0, 1}))], {2: 1}))
    s = starts(plan)[2]
    assert s.devices == (G0,) and set(s.cores) <= {0, 1} and s.backfilled


def test_a_second_gpu_child_takes_the_pools_gpu_a_cpu_child_the_other_lent_core():
    m, devs = machine()
    parent = run(1, (0, 1), devs, [G0])
    pend = [child(2), child(3), child(4, gpus=0)]
    plan = schedule(snap(m, devs, [parent], pend, [Lent(1, frozenset({0, 1}))], {2: 1, 3: 1, 4: 1}))
    st_ = starts(plan)
    assert st_[2].devices == (G0,) and set(st_[2].cores) <= {0, 1}
    assert st_[3].devices == (G1,) and not set(st_[3].cores) & {0, 1}  # from the pool: the parent's GPU is taken
    assert set(st_[4].cores) <= {0, 1} and st_[4].cores != st_[2].cores


def test_a_lent_gpu_held_by_a_running_child_is_not_lent_twice_and_no_pool_gpu_is_given():
    m, devs = machine(ngpu=1)
    parent = run(1, (0, 1), devs, [G0])
    busy = run(2, (0,), devs, [G0], start=50.0)  # a child already on the parent's GPU
    s = snap(m, devs, [parent, busy], [child(3), child(4, gpus=0)], [Lent(1, frozenset({0, 1}))], {2: 1, 3: 1, 4: 1})
    assert tree.lent_devices(s, 1) == ()
    st_ = starts(schedule(s))
    assert 3 not in st_  # the one GPU is the parent's, lent to 2: counted once, not free in the pool
    assert st_[4].cores == (1,)


def test_the_parent_is_resumed_only_after_the_child_on_its_gpu_ends():
    m, devs = machine(ngpu=1)
    parent = run(1, (0, 1), devs, [G0])
    kid = run(2, (0,), devs, [G0], start=50.0)
    lent = [Lent(1, frozenset({0, 1}), resuming=True)]
    decided, _ = endings.resumes(snap(m, devs, [parent, kid], [], lent, {2: 1}))
    assert decided == ()
    decided, _ = endings.resumes(snap(m, devs, [parent], [], lent, {}))
    assert decided == (Resume(1, False),)


def test_an_exclusive_child_needs_a_gpu_its_parent_holds_whole():
    m, devs = machine(share=2)
    lent = [Lent(1, frozenset({0, 1}))]
    for whole, expect in ((False, ()), (True, (G0,))):
        parent = run(1, (0, 1), devs, [G0], whole=whole)
        other = run(9, (4, 5, 6, 7), devs, [G1, G1], whole=False)  # the pool's other GPU is full
        st_ = starts(schedule(snap(m, devs, [parent, other], [child(2, excl=True)], lent, {2: 1})))
        assert (st_[2].devices if 2 in st_ else ()) == expect


def test_a_child_holding_its_parents_gpu_lends_it_again_to_a_grandchild():
    m, devs = machine(ngpu=1)
    parent = run(1, (0, 1), devs, [G0])
    kid = run(2, (0,), devs, [G0], start=50.0)
    lent = [Lent(1, frozenset({0, 1})), Lent(2, frozenset({0}))]
    s = snap(m, devs, [parent, kid], [child(3)], lent, {2: 1, 3: 2})
    assert tree.lent_devices(s, 2) == (replace(devs[0], share=1),)
    assert starts(schedule(s))[3].devices == (G0,) and starts(schedule(s))[3].cores == (0,)


def test_strict_bind_needs_the_lent_cores_on_the_lent_gpus_board():
    m, devs = machine()
    parent = run(1, (0, 4), devs, [G1])  # its GPU hangs on board 1
    lent = [Lent(1, frozenset({0, 4}))]
    st_ = starts(schedule(snap(m, devs, [parent], [child(2, n=1, bind="strict")], lent, {2: 1})))
    assert st_[2].devices == (G1,) and st_[2].cores == (4,)


# -- property: lent devices are never given twice ---------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    ngpu=st.integers(1, 4),
    held=st.integers(1, 4),
    kids=st.lists(st.tuples(st.integers(0, 3), st.integers(1, 3), st.booleans()), min_size=1, max_size=6),
    whole=st.booleans(),
)
def test_lent_and_pool_devices_are_never_given_twice(ngpu, held, kids, whole):
    m, devs = machine(ngpu=ngpu)
    mine = [d.key for d in devs[: min(held, ngpu)]]
    parent = run(1, (0, 1, 2, 3), devs, mine, whole=whole)
    pend = [child(10 + i, g, n, x) for i, (g, n, x) in enumerate(kids)]
    s = snap(m, devs, [parent], pend, [Lent(1, frozenset({0, 1, 2, 3}))], {w.id: 1 for w in pend})
    st_ = starts(schedule(s))
    seen: dict[tuple[str, int], int] = {}
    for jid, x in st_.items():
        w = next(p for p in pend if p.id == jid)
        want = w.devices[0].count if w.devices else 0
        assert len(set(x.devices)) == len(x.devices) == want
        for k in x.devices:
            assert k not in seen, (k, jid, seen)
            seen[k] = jid
        on_lent = set(x.cores) <= {0, 1, 2, 3}
        assert on_lent != bool(set(x.cores) & {4, 5, 6, 7})  # never split between lent cores and the pool
        if on_lent:
            assert set(x.devices) <= set(mine)  # a task on lent cores has only the lender's devices
        else:
            assert not set(x.devices) & set(mine)  # the parent's devices are never in the pool
    cores = [c for x in st_.values() for c in x.cores]
    assert len(cores) == len(set(cores))
