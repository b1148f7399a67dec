"""Splittable jobs in the core: fill_window, and the backfill step's StartTasks decisions."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from gridsched.core import devices as dev
from gridsched.core.policy import forecast, schedule
from gridsched.core.split import fill_mixed, fill_window
from gridsched.core.topology import Device
from gridsched.core.types import Params, Policy, Resv, Running, Snapshot, SplitInfo, StartTasks, Waiting

H = 3600.0


def test_window_of_4_cores_by_2_hours():
    chains = fill_window(list(range(16)), 1, H, 4, 2 * H)
    assert chains == [(0, 1), (2, 3), (4, 5), (6, 7)]  # 8 sub-tasks, 2 per core, chained


def test_fewer_tasks_than_room_use_fewer_chains_not_longer_ones():
    assert fill_window([0, 1, 2], 1, H, 4, 2 * H) == [(0,), (1,), (2,)]
    assert fill_window([0, 1, 2, 3, 4], 1, H, 4, 2 * H) == [(0, 1), (2, 3), (4,)]


def test_multi_core_sub_tasks_and_windows_too_small():
    assert fill_window(list(range(10)), 2, H, 5, 3.5 * H) == [(0, 1, 2), (3, 4, 5)]  # 2 chains of 2 cores
    assert fill_window([0, 1], 2, H, 1, 10 * H) == []  # narrower than one sub-task
    assert fill_window([0, 1], 1, H, 4, H - 1) == []  # shorter than one sub-task
    assert fill_window([], 1, H, 4, H) == []


@settings(max_examples=300, deadline=None)
@given(
    left=st.lists(st.integers(0, 500), unique=True, max_size=60),
    c=st.integers(1, 4),
    t=st.floats(1.0, 1000.0),
    width=st.integers(0, 32),
    length=st.floats(0.0, 10000.0),
)
def test_fill_window_properties(left, c, t, width, length):
    chains = fill_window(left, c, t, width, length)
    taken = [i for ch in chains for i in ch]
    assert len(taken) == len(set(taken))  # no sub-task twice
    assert set(taken) <= set(left)  # none invented; the rest stays with the job
    assert taken == left[: len(taken)]  # the lowest-placed ones first
    assert len(chains) * c <= width  # the chains' cores fit the window
    assert all(ch for ch in chains)
    assert all(len(ch) * t <= length for ch in chains)  # each chain ends inside the window
    # nothing fitting is left out: more would need a longer or a wider window
    if len(taken) < len(left):
        assert len(taken) == (width // c) * int(length // t) if length >= t and width >= c else taken == []


def snap(running, pending, policy=Policy.EASY, ncores=8, free=None):
    return Snapshot(
        now=0.0, ncores=ncores, running=tuple(running), pending=tuple(pending), params=Params(policy=policy), free=free
    )


def blocked_scene(policy=Policy.EASY, free=None):
    """8 cores; job 1 holds 4 until 2 h; head 2 needs 8; job 3 splits into 16 one-hour 1-core sub-tasks."""
    running = [Running(1, 4, 0.0, 2 * H, cores=(0, 1, 2, 3) if free is not None else ())]
    head = Waiting(2, 8, H)
    sp = Waiting(3, 8, 2 * H, split=SplitInfo(1, H, tuple(range(16))))
    return snap(running, [head, sp], policy, free=free)


def test_backfill_takes_sub_tasks_into_the_window():
    for policy in (Policy.EASY, Policy.CHECKPOINT_BACKFILL):
        plan = schedule(blocked_scene(policy, free=frozenset(range(4, 8))))
        [st_] = [d for d in plan.decisions if isinstance(d, StartTasks)]
        assert st_.job == 3
        assert st_.chains == ((0, 1), (2, 3), (4, 5), (6, 7))
        assert st_.tasks == tuple(range(8))
        assert st_.cores == (4, 5, 6, 7)
        assert st_.end == 2 * H == plan.head.time  # ends by the head's shadow time
        assert plan.starts == ()


def test_count_only_mode_and_fcfs_and_conservative():
    plan = schedule(blocked_scene())
    [st_] = [d for d in plan.decisions if isinstance(d, StartTasks)]
    assert st_.cores == () and len(st_.tasks) == 8
    assert not [d for d in schedule(blocked_scene(Policy.FCFS)).decisions if isinstance(d, StartTasks)]
    # conservative: the 4 free cores are unreserved until the head's reservation at 2 h
    plan = schedule(blocked_scene(Policy.CONSERVATIVE, free=frozenset(range(4, 8))))
    [st_] = [d for d in plan.decisions if isinstance(d, StartTasks)]
    assert st_.chains == ((0, 1), (2, 3), (4, 5), (6, 7)) and st_.cores == (4, 5, 6, 7)
    assert st_.end == 2 * H == plan.head.time


def test_a_job_that_fits_whole_is_started_whole_not_split():
    running = [Running(1, 4, 0.0, 2 * H)]
    pend = [Waiting(2, 8, H), Waiting(3, 4, H, split=SplitInfo(1, H, (0, 1, 2, 3)))]
    plan = schedule(snap(running, pend))
    assert [s.job for s in plan.starts] == [3]
    assert not [d for d in plan.decisions if isinstance(d, StartTasks)]


def test_the_head_itself_is_not_split_and_ordinary_backfill_comes_first():
    running = [Running(1, 4, 0.0, 2 * H)]
    pend = [Waiting(3, 8, 2 * H, split=SplitInfo(1, H, tuple(range(16)))), Waiting(4, 2, H)]
    plan = schedule(snap(running, pend))
    assert [s.job for s in plan.starts] == [4]  # ends before the head's shadow time
    assert not [d for d in plan.decisions if isinstance(d, StartTasks)]  # 3 is the head
    pend = [Waiting(2, 8, H), Waiting(4, 2, H), Waiting(3, 8, 2 * H, split=SplitInfo(1, H, tuple(range(16))))]
    plan = schedule(snap(running, pend))
    [st_] = [d for d in plan.decisions if isinstance(d, StartTasks)]
    assert [s.job for s in plan.starts] == [4] and st_.chains == ((0, 1), (2, 3))  # 2 cores were left


@settings(max_examples=150, deadline=None)
@given(
    run_ends=st.lists(st.tuples(st.integers(1, 4), st.floats(10.0, 5000.0)), min_size=1, max_size=4),
    head_n=st.integers(1, 16),
    n=st.integers(1, 40),
    c=st.integers(1, 3),
    t=st.floats(5.0, 2000.0),
    policy=st.sampled_from([Policy.EASY, Policy.CHECKPOINT_BACKFILL, Policy.CONSERVATIVE]),
)
def test_sub_tasks_never_delay_the_head(run_ends, head_n, n, c, t, policy):
    ncores = 16
    running, core = [], 0
    for k, (w, e) in enumerate(run_ends):
        running.append(Running(100 + k, w, 0.0, e, cores=tuple(range(core, core + w))))
        core += w
    free = frozenset(range(core, ncores))
    head = Waiting(1, head_n, 100.0)
    sp = Waiting(2, min(n, ncores // c) * c, n * t, split=SplitInfo(c, t, tuple(range(n))))
    plan = schedule(Snapshot(0.0, ncores, tuple(running), (head, sp), Params(policy=policy), free=free))
    splits = [d for d in plan.decisions if isinstance(d, StartTasks)]
    for d in splits:
        assert plan.head is not None
        if policy is not Policy.CONSERVATIVE:  # EASY's window ends at the shadow time; conservative's
            assert d.end <= plan.head.time  # where a reservation needs the cores (checked below)
        assert len(d.cores) == len(d.chains) * c and set(d.cores) <= free
        assert sorted(d.tasks) == sorted(i for ch in d.chains for i in ch)
        assert len(set(d.tasks)) == len(d.tasks)
    used = [c_ for s in plan.starts for c_ in s.cores] + [c_ for d in splits for c_ in d.cores]
    assert len(used) == len(set(used))  # no core given twice
    if splits:  # with the pieces running to their ends, the head's reservation is not later
        pieces = tuple(Running(500 + k, len(d.cores), 0.0, d.end, cores=d.cores) for k, d in enumerate(splits))
        started = tuple(Running(600 + k, len(s.cores), 0.0, 100.0, cores=s.cores) for k, s in enumerate(plan.starts))
        left = frozenset(free) - set(used)
        after = forecast(
            Snapshot(0.0, ncores, tuple(running) + pieces + started, (head,), Params(policy=policy), free=left)
        )
        assert after[head.id] <= plan.head.time


def test_the_pass_with_floating_resources_splits_the_same_way():
    base = blocked_scene(Policy.EASY, free=frozenset(range(4, 8)))
    multi = replace(base, floating={"lic": 2})
    [a] = [d for d in schedule(base).decisions if isinstance(d, StartTasks)]
    [b] = [d for d in schedule(multi).decisions if isinstance(d, StartTasks)]
    assert (a.chains, a.cores, a.end) == (b.chains, b.cores, b.end)


def test_a_window_before_a_fixed_reservation_is_a_window_like_any_other():
    # 8 free cores; a fixed reservation takes all 8 from 1 h to 2 h; job 2 (8 cores for 2 h) cannot
    # run before it and is the head; the splittable job's sub-tasks fill the hour before the reservation
    head = Waiting(2, 8, 2 * H)
    sp = Waiting(3, 8, 2 * H, split=SplitInfo(1, H, tuple(range(16))))
    resv = Resv(9, 8, H, start=H)
    for policy in (Policy.EASY, Policy.CHECKPOINT_BACKFILL, Policy.CONSERVATIVE):
        s = Snapshot(0.0, 8, (), (head, sp), Params(policy=policy), free=frozenset(range(8)), reservations=(resv,))
        [d] = [d for d in schedule(s).decisions if isinstance(d, StartTasks)]
        assert d.end == H and len(d.chains) == 8 and all(len(c) == 1 for c in d.chains)


# -- sub-tasks of their own sizes, and every window of the plan ------------------------------------


def test_fill_mixed_chains_hold_one_core_count_and_end_in_the_window():
    sizes = [(2, H), (1, 3 * H), (1, H / 2), (4, H), (1, H / 2), (2, H), (2, 2 * H), (1, 4 * H)]
    got = fill_mixed(range(8), sizes, 6, 3 * H)
    assert got == [(2, (0, 5)), (1, (1,)), (1, (2, 4)), (2, (6,))]
    # 3 (4 cores) found no cores left once 0, 1 and 2 had opened their chains; 7 (4 h) is longer than the window
    assert sum(c for c, _ in got) == 6


def test_fill_mixed_packs_chains_before_opening_new_ones():
    sizes = [(1, H)] * 6
    assert fill_mixed(range(6), sizes, 2, 3 * H) == [(1, (0, 1, 2)), (1, (3, 4, 5))]
    assert fill_mixed(range(6), sizes, 2, 2 * H) == [(1, (0, 1)), (1, (2, 3))]
    # the fullest chain it still fits in: the 2-hour one stays free for the 2-hour sub-task
    mixed = [(1, H), (1, 2 * H), (1, H), (1, 2 * H)]
    assert fill_mixed(range(4), mixed, 2, 2 * H) == [(1, (0, 2)), (1, (1,))]
    assert fill_mixed([], sizes, 2, 2 * H) == []
    assert fill_mixed(range(6), sizes, 0, 2 * H) == []


@settings(max_examples=300, deadline=None)
@given(
    sizes=st.lists(st.tuples(st.integers(1, 5), st.floats(1.0, 1000.0)), max_size=40),
    width=st.integers(0, 24),
    length=st.floats(0.0, 5000.0),
    data=st.data(),
)
def test_fill_mixed_properties(sizes, width, length, data):
    left = data.draw(st.lists(st.sampled_from(range(len(sizes))), unique=True) if sizes else st.just([]))
    got = fill_mixed(left, sizes, width, length)
    taken = [i for _, ch in got for i in ch]
    assert len(taken) == len(set(taken)) and set(taken) <= set(left)
    assert sum(c for c, _ in got) <= width
    for c, ch in got:
        assert ch and all(sizes[i][0] == c for i in ch)
        assert sum(sizes[i][1] for i in ch) <= length
    # a sub-task left out could not have opened a chain: no cores were left for it at the end
    room = width - sum(c for c, _ in got)
    for i in set(left) - set(taken):
        c, t = sizes[i]
        assert c > room or t > length


def stair_scene(policy=Policy.CONSERVATIVE, split=None):
    """8 cores; job 1 holds 4 until 2 h; job 2 needs 6 for 1 h (from 2 h); job 3 needs 8 for 1 h (from 3 h).

    The 4 free cores are two windows: 2 cores until 2 h, 2 more until 3 h.
    """
    running = [Running(1, 4, 0.0, 2 * H, cores=(0, 1, 2, 3))]
    sp = split or SplitInfo(1, H, tuple(range(20)))
    pend = [Waiting(2, 6, H), Waiting(3, 8, H), Waiting(4, 8, 5 * H, split=sp)]
    return snap(running, pend, policy, free=frozenset(range(4, 8)))


def test_every_window_of_a_falling_profile_is_filled():
    plan = schedule(stair_scene())
    tasks = [d for d in plan.decisions if isinstance(d, StartTasks)]
    assert [(d.chains, d.end) for d in tasks] == [
        (((0, 1, 2), (3, 4, 5)), 3 * H),  # the longest window first: 2 cores until 3 h
        (((6, 7), (8, 9)), 2 * H),  # then 2 cores until 2 h
    ]
    assert sorted(c for d in tasks for c in d.cores) == [4, 5, 6, 7]
    # the reservations stand: with the pieces running, every job's forecast is what it was
    before = forecast(stair_scene())
    pieces = tuple(Running(50 + k, len(d.cores), 0.0, d.end, cores=d.cores) for k, d in enumerate(tasks))
    after = forecast(replace(stair_scene(), running=stair_scene().running + pieces, free=frozenset()))
    assert after[2] == before[2] == 2 * H and after[3] == before[3] == 3 * H


def test_sub_tasks_of_their_own_sizes_fill_the_windows():
    sizes = ((2, 3 * H), (1, H), (1, H), (1, 2 * H), (2, H), (1, 4 * H))
    sp = SplitInfo(2, 4 * H, tuple(range(6)), sizes)
    plan = schedule(stair_scene(split=sp))
    tasks = [d for d in plan.decisions if isinstance(d, StartTasks)]
    assert [(d.chains, d.widths, d.end) for d in tasks] == [
        (((0,),), (2,), 3 * H),  # 2 cores until 3 h: the 3-hour 2-core sub-task
        (((1, 2), (3,)), (1, 1), 2 * H),  # 2 cores until 2 h: 1-core sub-tasks
    ]
    assert [len(d.cores) for d in tasks] == [2, 2]
    # 4 (2 cores, 1 h) found no cores left; 5 (4 h) is longer than every window
    assert not {4, 5} & {i for d in tasks for i in d.tasks}


@settings(max_examples=200, deadline=None)
@given(
    run=st.lists(st.tuples(st.integers(1, 4), st.floats(10.0, 5000.0)), min_size=1, max_size=4),
    later=st.lists(st.tuples(st.integers(1, 16), st.floats(10.0, 3000.0)), min_size=1, max_size=3),
    sizes=st.lists(st.tuples(st.integers(1, 3), st.floats(5.0, 3000.0)), min_size=1, max_size=30),
    mixed=st.booleans(),
    placed=st.booleans(),
    policy=st.sampled_from([Policy.EASY, Policy.CHECKPOINT_BACKFILL, Policy.CONSERVATIVE]),
)
def test_no_window_is_overfilled(run, later, sizes, mixed, placed, policy):
    ncores = 16
    running, core = [], 0
    for k, (w, e) in enumerate(run):
        running.append(Running(100 + k, w, 0.0, e, cores=tuple(range(core, core + w)) if placed else ()))
        core += w
    free = frozenset(range(core, ncores)) if placed else None
    n = len(sizes)
    if mixed:
        sp = SplitInfo(max(c for c, _ in sizes), max(t for _, t in sizes), tuple(range(n)), tuple(sizes))
    else:
        sp = SplitInfo(sizes[0][0], sizes[0][1], tuple(range(n)))
    jobs = [Waiting(1 + k, c, t) for k, (c, t) in enumerate(later)]
    whole = Waiting(99, ncores, sum(t for _, t in sizes), split=sp)
    scene = Snapshot(0.0, ncores, tuple(running), (*jobs, whole), Params(policy=policy), free=free)
    plan = schedule(scene)
    pieces = [d for d in plan.decisions if isinstance(d, StartTasks)]
    seen: list[int] = []
    for d in pieces:
        widths = d.widths or (sp.ncpus,) * len(d.chains)
        assert len(widths) == len(d.chains)
        if placed:
            assert len(d.cores) == sum(widths)
        for c, ch in zip(widths, d.chains):
            size = [sp.sizes[i] if sp.sizes else (sp.ncpus, sp.task_time) for i in ch]
            assert all(x == c for x, _ in size)  # each sub-task on exactly its own cores
            assert sum(t for _, t in size) <= d.end + 1e-6  # every chain ends within its piece's window
        seen += list(d.tasks)
    assert len(seen) == len(set(seen)) and set(seen) <= set(sp.left)  # each sub-task taken at most once
    used = [c for s in plan.starts for c in s.cores] + [c for d in pieces for c in d.cores]
    assert len(used) == len(set(used))
    if not pieces:
        return
    # with the pieces running to their ends, no reservation moves later: the windows held them
    ran = tuple(
        Running(
            500 + k, len(d.cores) if placed else sum(d.widths or (sp.ncpus,) * len(d.chains)), 0.0, d.end, cores=d.cores
        )
        for k, d in enumerate(pieces)
    )
    began = {s.job for s in plan.starts}
    started = tuple(
        Running(
            s.job,
            next(j.ncpus for j in jobs if j.id == s.job),
            0.0,
            next(j.estimate for j in jobs if j.id == s.job),
            cores=s.cores,
        )
        for s in plan.starts
    )
    left = None if free is None else free - set(used)
    rest = tuple(j for j in jobs if j.id not in began)
    before = forecast(
        replace(
            scene,
            running=tuple(running) + started,
            pending=rest,
            free=None if left is None else left | {c for d in pieces for c in d.cores},
        )
    )
    after = forecast(replace(scene, running=tuple(running) + started + ran, pending=rest, free=left))
    if policy is Policy.CONSERVATIVE:
        for j in rest:
            assert after[j.id] <= before[j.id] + 1e-6
    elif rest and plan.head is not None and plan.head.job == rest[0].id:
        assert after[rest[0].id] <= plan.head.time + 1e-6


def test_a_splittable_job_asking_for_gpus_is_never_split_it_runs_whole():
    devs = tuple(Device("gpu", i, 0) for i in range(4))
    base = blocked_scene(Policy.EASY, free=frozenset(range(4, 8)))
    asks = (dev.DeviceAsk("gpu", 2),)
    sp = replace(base.pending[1], devices=asks, resources=dev.slots(asks, devs))
    s = replace(base, pending=(base.pending[0], sp), devices=devs)
    assert not [d for d in schedule(s).decisions if isinstance(d, StartTasks)]  # the window is not filled
    # once it fits whole it starts whole, with its devices
    whole = replace(s, running=(), free=frozenset(range(8)), pending=(replace(sp, ncpus=4),))
    [st_] = schedule(whole).starts
    assert st_.job == 3 and len(st_.devices) == 2


# -- sub-tasks that ask for devices each (gsub --split --gpus-per-task) ------------------------------


def gpu_split_job(jid, wave, left, per=1, exclusive=False, ncpus=1, task_time=H, estimate=4 * H, devs=()):
    """A splittable job whose sub-tasks ask for ``per`` GPUs each: it asks for one wave's worth."""
    one = (dev.DeviceAsk("gpu", per, exclusive=exclusive),)
    asks = (dev.DeviceAsk("gpu", per * wave, exclusive=exclusive),)
    sp = SplitInfo(ncpus, task_time, tuple(left), devices=one)
    return Waiting(jid, wave * ncpus, estimate, split=sp, devices=asks, resources=dev.slots(asks, devs))


def test_a_window_takes_only_as_many_chains_as_gpus_are_free_each_with_its_own():
    devs = tuple(Device("gpu", i, 0) for i in range(4))
    running = [Running(1, 4, 0.0, 2 * H, cores=(0, 1, 2, 3), devices=(("gpu", 0), ("gpu", 1), ("gpu", 2)))]
    head = Waiting(2, 8, H)
    job = gpu_split_job(3, 4, range(16), devs=devs)
    s = replace(snap(running, [head, job], free=frozenset(range(4, 8))), devices=devs)
    plan = schedule(s)
    [st_] = [d for d in plan.decisions if isinstance(d, StartTasks)]
    assert st_.chains == ((0, 1),) and st_.devices == ((("gpu", 3),),)  # one GPU free: one chain
    assert len(st_.cores) == 1 and st_.end == 2 * H


def test_a_head_that_needs_the_gpus_keeps_them_from_the_window():
    devs = tuple(Device("gpu", i, 0) for i in range(2))
    running = [Running(1, 4, 0.0, 2 * H, cores=(0, 1, 2, 3))]
    head = Waiting(2, 8, H, devices=(dev.DeviceAsk("gpu", 2),), resources=dev.slots((dev.DeviceAsk("gpu", 2),), devs))
    job = gpu_split_job(3, 2, range(8), devs=devs)
    s = replace(snap(running, [head, job], free=frozenset(range(4, 8))), devices=devs)
    [st_] = [d for d in schedule(s).decisions if isinstance(d, StartTasks)]
    assert len(st_.chains) == 2 and {k for ch in st_.devices for k in ch} == {("gpu", 0), ("gpu", 1)}
    assert st_.end <= 2 * H  # the GPUs are back by the head's time
    # with a third GPU held until after the head's time, the head needs both free ones then: none for pieces
    running.append(Running(4, 0, 0.0, 5 * H, devices=(("gpu", 2),)))
    devs3 = (*devs, Device("gpu", 2, 0))
    head3 = replace(head, devices=(dev.DeviceAsk("gpu", 3),), resources=dev.slots((dev.DeviceAsk("gpu", 3),), devs3))
    s3 = replace(s, running=tuple(running), pending=(head3, job), devices=devs3)
    plan = schedule(s3)
    for d in plan.decisions:
        if isinstance(d, StartTasks):
            assert d.end <= 5 * H


def test_its_turn_starts_it_as_pieces_one_chain_each_on_distinct_gpus():
    devs = (Device("gpu", 0, 0), Device("gpu", 1, 1))
    job = gpu_split_job(3, 2, range(4), devs=devs, estimate=2 * H)
    s = replace(snap([], [job], free=frozenset(range(8))), devices=devs)
    plan = schedule(s)
    assert plan.starts == ()
    [st_] = [d for d in plan.decisions if isinstance(d, StartTasks)]
    assert st_.chains == ((0, 1), (2, 3))
    assert sorted(st_.devices) == [(("gpu", 0),), (("gpu", 1),)]
    assert len(st_.cores) == 2 and st_.end == 2 * H
    # a walltime that holds one sub-task per chain leaves the rest queued
    short = replace(s, pending=(replace(job, estimate=H),))
    [st_] = [d for d in schedule(short).decisions if isinstance(d, StartTasks)]
    assert st_.chains == ((0,), (1,))


@settings(max_examples=200, deadline=None)
@given(
    ngpus=st.integers(1, 4),
    share=st.integers(1, 2),
    held=st.lists(st.tuples(st.integers(0, 3), st.booleans()), max_size=4),
    per=st.integers(1, 2),
    exclusive=st.booleans(),
    ntasks=st.integers(1, 12),
    head_gpus=st.integers(0, 2),
    policy=st.sampled_from([Policy.EASY, Policy.CHECKPOINT_BACKFILL, Policy.CONSERVATIVE]),
    busy_until=st.floats(0.5 * H, 6 * H),
)
def test_pieces_never_hold_more_device_slots_than_are_free(
    ngpus, share, held, per, exclusive, ntasks, head_gpus, policy, busy_until
):
    devs = tuple(Device("gpu", i, i % 2, share=share) for i in range(ngpus))
    slots = {d.key: d.share for d in devs}
    running = []
    for k, (g, whole) in enumerate(held):  # jobs holding one GPU each, on no cores, while slots are left
        key = ("gpu", g % ngpus)
        n = share if whole else 1
        if slots[key] < n:
            continue
        slots[key] -= n
        running.append(Running(10 + k, 0, 0.0, busy_until, devices=(key,), whole_devices=whole))
    running.append(Running(1, 4, 0.0, busy_until, cores=(0, 1, 2, 3)))
    pending = []
    if head_gpus and head_gpus <= ngpus:
        a = (dev.DeviceAsk("gpu", head_gpus),)
        pending.append(Waiting(2, 8, H, devices=a, resources=dev.slots(a, devs)))
    else:
        pending.append(Waiting(2, 8, H))
    need = per * (share if exclusive else 1)
    wave = min(8, ngpus * share // need if per <= ngpus else 0)
    if wave < 1:
        return
    pending.append(gpu_split_job(3, wave, range(ntasks), per=per, exclusive=exclusive, devs=devs))
    s = replace(snap(running, pending, policy, free=frozenset(range(4, 8))), devices=devs)
    plan = schedule(s)
    pieces = [d for d in plan.decisions if isinstance(d, StartTasks)]
    assert not [d for d in plan.starts if d.job == 3]  # never whole
    use = dict.fromkeys(slots, 0)
    cores: list[int] = []
    tasks: list[int] = []
    for d in pieces:
        assert len(d.devices) == len(d.chains) and all(d.chains)
        assert len(d.cores) == len(d.chains)  # one core per chain
        for ch in d.devices:
            assert len(ch) == per == len(set(ch))  # distinct devices, as many as one sub-task asks
            for key in ch:
                use[key] += share if exclusive else 1
        cores.extend(d.cores)
        tasks.extend(d.tasks)
    for key, n in use.items():
        assert n <= slots[key], (key, use, slots)  # never more than the slots left free
    assert len(cores) == len(set(cores)) and set(cores) <= set(range(4, 8))
    assert len(tasks) == len(set(tasks)) and set(tasks) <= set(range(ntasks))
    other = [d for d in plan.starts if d.devices]
    for d in other:  # a head started beside the pieces gets devices not over-subscribed either
        for key in d.devices:
            use[key] += 1
        for key, n in use.items():
            assert n <= slots[key]


def test_on_a_map_each_chain_runs_on_the_board_of_its_gpu():
    from gridsched.host import topology

    m = topology.parse(
        '[[board]]\nid = 0\ncores = "0-3"\n[[board]]\nid = 1\ncores = "4-7"\n'
        '[[device]]\ntype = "gpu"\nindex = 0\nboard = 0\n[[device]]\ntype = "gpu"\nindex = 1\nboard = 1\n'
    )
    devs = m.devices
    board = {0: {0, 1, 2, 3}, 1: {4, 5, 6, 7}}
    # its turn: the whole start becomes a piece whose chains sit beside their GPUs
    job = gpu_split_job(3, 2, range(4), devs=devs, estimate=2 * H)
    s = replace(snap([], [job], free=frozenset(range(8))), devices=devs, machine=m)
    [st_] = [d for d in schedule(s).decisions if isinstance(d, StartTasks)]
    for (core,), (key,) in zip([st_.cores[:1], st_.cores[1:]], st_.devices, strict=True):
        assert core in board[key[1]], st_
    # a window: job 1 holds cores 0-1 and 4-5 until the head's time
    running = [Running(1, 4, 0.0, 2 * H, cores=(0, 1, 4, 5))]
    s = replace(snap(running, [Waiting(2, 8, H), job], free=frozenset({2, 3, 6, 7})), devices=devs, machine=m)
    [st_] = [d for d in schedule(s).decisions if isinstance(d, StartTasks)]
    assert len(st_.chains) == 2
    for (core,), (key,) in zip([st_.cores[:1], st_.cores[1:]], st_.devices, strict=True):
        assert core in board[key[1]], st_
