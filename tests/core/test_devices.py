"""Devices (GPUs) in the machine map and in the one pass: counted as resources, chosen at the start."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gridsched.core import devices as dev
from gridsched.core.policy import forecast, schedule
from gridsched.core.topology import Device, TopologyError, board, make
from gridsched.core.types import HeadReservation, Params, Policy, Running, Snapshot, Start, Waiting
from gridsched.host import topology

TOPO = """\
[[board]]
id = 0
cores = "0-3"

[[board]]
id = 1
cores = "4-7"

[[device]]
type = "gpu"
index = 0
board = 0
model = "H100"
memory = "80G"

[[device]]
type = "gpu"
index = 1
board = 0
model = "H100"

[[device]]
type = "gpu"
index = 2
board = 1
model = "A100"

[[device]]
type = "gpu"
index = 3
board = 1
model = "A100"
"""


def four_gpus(share: int = 1) -> tuple:
    m = topology.parse(TOPO)
    devs = tuple(replace(d, share=share) for d in m.devices)
    return replace(m, devices=devs), devs


# -- the topology file ------------------------------------------------------------


def test_devices_are_read_and_round_trip_through_the_text_form():
    m = topology.parse(TOPO)
    assert [(d.type, d.index, d.board, d.model) for d in m.devices] == [
        ("gpu", 0, 0, "H100"),
        ("gpu", 1, 0, "H100"),
        ("gpu", 2, 1, "A100"),
        ("gpu", 3, 1, "A100"),
    ]
    assert m.devices[0].memory == 80 << 30
    assert topology.parse(m.text()) == m
    assert m.device_summary() == "4 gpu (A100, H100)"
    assert [d.index for d in m.devices_on(1)] == [2, 3]


@pytest.mark.parametrize(
    "extra, line, why",
    [
        ('[[device]]\ntype = "gpu"\nindex = 0\nboard = 1\n', 36, "gpu 0 is declared twice"),
        ('[[device]]\ntype = "gpu"\nindex = 7\nboard = 3\n', 37, "on board 3, which does not exist"),
        ('[[device]]\ntype = "gpu"\nindex = 7\n', 34, "is on no board"),
        ('[[device]]\ntype = "GPU!"\nindex = 7\nboard = 0\n', 35, "type = 'GPU!'"),
        ('[[device]]\ntype = "gpu"\nindex = -1\nboard = 0\n', 36, "index = -1"),
        ('[[device]]\ntype = "gpu"\nindex = 9\nboard = 0\nmemory = "lots"\n', 38, "memory ="),
        ('[[device]]\ntype = "gpu"\nindex = 9\nboard = 0\nspeed = 3\n', 38, "unknown key 'speed'"),
    ],
)
def test_bad_device_tables_are_refused_naming_the_line(extra, line, why):
    with pytest.raises(TopologyError, match=why) as e:
        topology.parse(TOPO + "\n" + extra, "t.toml")
    assert str(e.value).startswith(f"t.toml:{line}: ")


def test_a_map_refuses_a_device_on_a_missing_board():
    with pytest.raises(TopologyError, match="does not exist"):
        make([board(0, range(2))], [0, 1], devices=[Device("gpu", 0, 4)])


def test_never_fits_names_what_is_missing():
    _, devs = four_gpus()
    assert dev.never_fits([dev.DeviceAsk("gpu", 5)], devs) == "the machine has 4 GPUs"
    assert dev.never_fits([dev.DeviceAsk("gpu", 3, "H100")], devs) == "the machine has 2 H100 GPUs"
    assert "no gpu of model V100" in (dev.never_fits([dev.DeviceAsk("gpu", 1, "V100")], devs) or "")
    assert dev.never_fits([dev.DeviceAsk("fpga", 1)], devs) == "the machine has no FPGAs"
    assert dev.never_fits([dev.DeviceAsk("gpu", 4)], devs) is None


# -- the pass ----------------------------------------------------------------------


def job(
    jid: int,
    ncpus: int,
    gpus: int = 0,
    model: str = "",
    bind: str = "closest",
    excl: bool = False,
    dtype: str = "gpu",
    **kw,
):
    asks = (dev.DeviceAsk(dtype, gpus, model, bind, excl),) if gpus else ()
    return Waiting(jid, ncpus, kw.pop("estimate", 100.0), resources=kw.pop("resources", ()), devices=asks, **kw)


def snap(machine, devs, pending, running=(), policy=Policy.EASY, now=0.0, placed=True):
    pend = tuple(replace(w, resources=dev.merge(w.resources, dev.slots(w.devices, devs))) for w in pending)
    busy = {c for r in running for c in r.cores}
    return Snapshot(
        now=now,
        ncores=machine.ncores,
        running=tuple(running),
        pending=pend,
        params=Params(policy=policy),
        free=frozenset(range(machine.ncores)) - busy if placed else None,
        machine=machine if placed else None,
        devices=devs,
    )


def started(plan) -> dict[int, Start]:
    return {s.job: s for s in plan.starts}


def test_two_jobs_of_two_gpus_run_the_third_waits_and_a_cpu_job_starts():
    m, devs = four_gpus()
    plan = schedule(snap(m, devs, [job(1, 1, 2), job(2, 1, 2), job(3, 1, 2), job(4, 1)]))
    st_ = started(plan)
    assert set(st_) == {1, 2, 4}
    assert set(st_[1].devices).isdisjoint(st_[2].devices)
    assert len(st_[1].devices) == len(st_[2].devices) == 2 and st_[4].devices == ()


def test_closest_takes_the_cores_on_the_devices_board():
    m, devs = four_gpus()
    running = [
        Running(9, 1, 0.0, 100.0, cores=(0,), devices=(("gpu", 0),), resources=dev.held([("gpu", 0)], devs, False))
    ]
    plan = schedule(snap(m, devs, [job(1, 2, 1)], running))
    s = started(plan)[1]
    board_of = {d.index: d.board for d in devs}
    assert all(m.board_of(c).id == board_of[s.devices[0][1]] for c in s.cores)


def test_strict_waits_for_cores_on_the_devices_board_none_does_not():
    m, devs = four_gpus()
    # board 1's GPUs are free, its cores are not; board 0's cores are free, its GPUs are not
    run = [
        Running(8, 4, 0.0, 100.0, cores=(4, 5, 6, 7)),
        Running(
            9,
            1,
            0.0,
            100.0,
            cores=(0,),
            devices=(("gpu", 0), ("gpu", 1)),
            resources=dev.held([("gpu", 0), ("gpu", 1)], devs, False),
        ),
    ]
    plan = schedule(snap(m, devs, [job(1, 2, 1, bind="strict")], run))
    assert 1 not in started(plan)
    for bind in ("closest", "none"):
        plan = schedule(snap(m, devs, [job(1, 2, 1, bind=bind)], run))
        s = started(plan)[1]
        assert s.devices[0] in {("gpu", 2), ("gpu", 3)} and set(s.cores) <= {1, 2, 3}


def test_a_model_is_honoured():
    m, devs = four_gpus()
    s = started(schedule(snap(m, devs, [job(1, 1, 2, "A100")])))[1]
    assert s.devices == (("gpu", 2), ("gpu", 3))


def test_unknown_type_or_model_never_starts_and_never_blocks():
    m, devs = four_gpus()
    w = Waiting(1, 1, 100.0, devices=(dev.DeviceAsk("fpga", 1),))
    plan = schedule(snap(m, devs, [w, job(2, 1, 1, "V100"), job(3, 1)]))
    assert set(started(plan)) == {3}
    f = forecast(snap(m, devs, [w, job(2, 1, 1, "V100"), job(3, 1)]))
    assert f[1] == math.inf and f[2] == math.inf


def test_a_machine_without_devices_never_starts_a_gpu_job():
    m = topology.parse(TOPO.split("[[device]]")[0])
    plan = schedule(snap(m, (), [job(1, 1, 1), job(2, 1)]))
    assert set(started(plan)) == {2}


def test_share_two_puts_two_jobs_on_one_gpu_never_one_job_twice():
    m, devs = four_gpus(share=2)
    devs = devs[:2]
    m = replace(m, devices=devs)
    plan = schedule(snap(m, devs, [job(i, 1, 1) for i in range(1, 6)]))
    st_ = started(plan)
    assert set(st_) == {1, 2, 3, 4}
    counts: dict = {}
    for s in st_.values():
        for k in s.devices:
            counts[k] = counts.get(k, 0) + 1
    assert counts == {("gpu", 0): 2, ("gpu", 1): 2}
    # a two-GPU job on a half-used pair still gets two distinct devices
    plan = schedule(snap(m, devs, [job(1, 1, 1), job(2, 1, 2)]))
    st_ = started(plan)
    assert len(set(st_[2].devices)) == 2


def test_exclusive_takes_every_slot_of_its_device():
    m, devs = four_gpus(share=2)
    devs = devs[:2]
    m = replace(m, devices=devs)
    plan = schedule(snap(m, devs, [job(1, 1, 1, excl=True), job(2, 1, 1), job(3, 1, 1), job(4, 1, 1)]))
    st_ = started(plan)
    assert set(st_) == {1, 2, 3}
    assert all(st_[1].devices[0] not in st_[j].devices for j in (2, 3))


def test_count_only_mode_gives_distinct_devices():
    m, devs = four_gpus()
    plan = schedule(snap(m, devs, [job(1, 1, 2), job(2, 1, 2), job(3, 1, 1)], placed=False))
    st_ = started(plan)
    assert set(st_) == {1, 2}
    assert set(st_[1].devices).isdisjoint(st_[2].devices)


def test_checkpoint_backfill_preempts_the_backfilled_job_holding_the_head_gpu():
    m, devs = four_gpus()
    devs = devs[:1]
    m = replace(m, devices=devs)
    bf = Running(
        5,
        1,
        0.0,
        10000.0,
        cores=(1,),
        backfilled=True,
        preemptable=True,
        planned=50.0,
        devices=(("gpu", 0),),
        resources=dev.held([("gpu", 0)], devs, False),
    )
    s = snap(m, devs, [job(1, 1, 1, estimate=100.0)], [bf], policy=Policy.CHECKPOINT_BACKFILL, now=60.0)
    assert schedule(s).preempts == ()  # not before the head's reservation time
    plan = schedule(replace(s, head=HeadReservation(1, 60.0)))
    assert [p.job for p in plan.preempts] == [5]
    assert 1 not in started(plan)  # the GPU comes free once job 5 has stopped


# -- properties --------------------------------------------------------------------


@st.composite
def device_workloads(draw):
    nb = draw(st.integers(1, 3))
    per = draw(st.integers(1, 3))
    ndev = draw(st.integers(1, 4))
    share = draw(st.integers(1, 3))
    models = draw(st.lists(st.sampled_from(["", "A", "B"]), min_size=ndev, max_size=ndev))
    boards = [board(b, range(b * per, (b + 1) * per)) for b in range(nb)]
    types = draw(st.lists(st.sampled_from(["gpu", "fpga"]), min_size=ndev, max_size=ndev))
    devs = tuple(Device(types[i], i, draw(st.integers(0, nb - 1)), models[i], share=share) for i in range(ndev))
    m = make(boards, list(range(nb * per)), devices=devs)
    jobs = []
    for jid in range(1, draw(st.integers(1, 12)) + 1):
        n = draw(st.integers(0, ndev + 1))
        model = draw(st.sampled_from(["", "A", "B"]))
        bind = draw(st.sampled_from(dev.BINDS))
        jobs.append(
            job(
                jid,
                draw(st.integers(1, nb * per)),
                n,
                model,
                bind,
                draw(st.booleans()),
                draw(st.sampled_from(["gpu", "fpga"])),
                estimate=float(draw(st.integers(1, 50))),
            )
        )
    policy = draw(st.sampled_from(list(Policy)))
    placed = draw(st.booleans())
    return m, devs, jobs, policy, placed


@settings(max_examples=150, deadline=None)
@given(device_workloads())
def test_devices_are_never_overcommitted_and_each_job_gets_what_it_asked(w):
    m, devs, jobs, policy, placed = w
    by_key = {d.key: d for d in devs}
    asks = {j.id: j.devices for j in jobs}
    running: list[Running] = []
    pending = list(jobs)
    now = 0.0
    for _ in range(60):
        if not pending and not running:
            break
        plan = schedule(snap(m, devs, pending, running, policy=policy, now=now, placed=placed))
        for p in plan.preempts:
            running = [r for r in running if r.id != p.job]
        for s in plan.starts:
            w_ = next(x for x in pending if x.id == s.job)
            pending = [x for x in pending if x.id != s.job]
            a = asks[s.job]
            want = a[0].count if a else 0
            assert len(s.devices) == want == len(set(s.devices))
            for k in s.devices:
                d = by_key[k]
                assert d.type == a[0].type and (not a[0].model or d.model == a[0].model)
            excl = bool(a) and a[0].exclusive
            running.append(
                Running(
                    s.job,
                    w_.ncpus,
                    now,
                    w_.estimate,
                    cores=s.cores,
                    devices=s.devices,
                    whole_devices=excl,
                    resources=dev.held(s.devices, devs, excl),
                )
            )
        used = dev.used_slots(((r.devices, r.whole_devices) for r in running), devs)
        assert all(used[k] <= by_key[k].share for k in used)
        if placed:
            cores = [c for r in running for c in r.cores]
            assert len(cores) == len(set(cores))
        ends = [r.end for r in running]
        now = min(ends) if ends else now + 1
        running = [r for r in running if r.end > now]


def test_placed_without_a_map_a_gpu_job_gets_the_lowest_free_cores():
    m, devs = four_gpus()
    s = replace(snap(m, devs, [job(1, 2, 1)]), machine=None, free=frozenset({3, 5, 6}))
    st_ = started(schedule(s))[1]
    assert st_.cores == (3, 5) and len(st_.devices) == 1
