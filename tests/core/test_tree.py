"""Parent-child trees in the core: lent cores, affinity, the pool pass, preemption order."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gridsched.core import tree
from gridsched.core.policy import schedule
from gridsched.core.types import HeadReservation, Lent, Params, Plan, Policy, Running, Snapshot, Waiting, YieldAffinity

FCFS = Params(policy=Policy.FCFS)


def snap(running, pending, lent=(), parents=None, free=(), ncores=2, params=FCFS, **kw) -> Snapshot:
    return Snapshot(
        now=100.0,
        ncores=ncores,
        running=tuple(running),
        pending=tuple(pending),
        params=params,
        free=frozenset(free),
        parents=dict(parents or {}),
        lent=tuple(lent),
        **kw,
    )


def run(jid, cores, start=0.0, est=1000.0, **kw) -> Running:
    return Running(jid, len(cores), start, est, tuple(cores), **kw)


def wait(jid, n=1, est=10.0, **kw) -> Waiting:
    return Waiting(jid, n, est, **kw)


def starts(plan: Plan) -> dict[int, tuple[int, ...]]:
    return {s.job: s.cores for s in plan.starts}


def test_ancestors_and_root_stop_at_a_cycle():
    parents = {4: 3, 3: 2, 2: 1}
    assert tree.ancestors(parents, 4) == (3, 2, 1)
    assert tree.root(parents, 4) == 1 and tree.root(parents, 1) == 1
    assert tree.ancestors({1: 2, 2: 1}, 1) == (2,)


def test_two_parents_filling_the_machine_deadlock_without_lending_and_not_with_it():
    running = [run(1, [0]), run(2, [1])]
    pending = [wait(3), wait(4), wait(5), wait(6)]
    parents = {3: 1, 4: 1, 5: 2, 6: 2}
    assert starts(schedule(snap(running, pending, parents=parents))) == {}
    lent = [Lent(1, frozenset({0})), Lent(2, frozenset({1}))]
    plan = schedule(snap(running, pending, lent, parents))
    assert starts(plan) == {3: (0,), 5: (1,)}  # each on its own parent's core
    assert all(s.backfilled for s in plan.starts)


def test_a_lent_core_is_busy_while_a_task_runs_on_it_and_nested_yield_lends_it_again():
    parents = {2: 1, 3: 2, 4: 1}
    running = [run(1, [0]), run(2, [0])]  # 2 runs on its parent's lent core 0
    lent = [Lent(1, frozenset({0}))]
    s = snap(running, [wait(3), wait(4)], lent, parents)
    assert tree.lent_free(s) == {1: frozenset()}
    assert tree.lent_tasks(s) == {2}
    assert starts(schedule(s)) == {}
    s2 = snap(running, [wait(3), wait(4)], lent + [Lent(2, frozenset({0}))], parents)
    assert tree.lent_free(s2) == {1: frozenset(), 2: frozenset({0})}
    assert tree.lent_tasks(s2) == {2}  # 1 is not a task on lent cores: the lenders below it are its own
    assert starts(schedule(s2)) == {3: (0,)}  # the grandchild, not 4, which may use only 1's cores


@pytest.mark.parametrize(
    "affinity, expect",
    [
        (YieldAffinity.DESCENDANT, {}),
        (YieldAffinity.TREE, {11: (0,)}),
        (YieldAffinity.NONE, {11: (0,)}),
    ],
)
def test_affinity_for_a_job_of_the_same_tree(affinity, expect):
    parents = {2: 1, 11: 2}  # 11 is below 2, the sibling branch of 3 under root 1
    running = [run(1, [1]), run(3, [0])]
    parents[3] = 1
    lent = [Lent(3, frozenset({0}))]
    s = snap(running, [wait(11)], lent, parents, params=replace(FCFS, yield_affinity=affinity))
    assert starts(schedule(s)) == expect


@pytest.mark.parametrize(
    "affinity, expect",
    [
        (YieldAffinity.DESCENDANT, {}),
        (YieldAffinity.TREE, {}),
        (YieldAffinity.NONE, {9: (0,)}),
    ],
)
def test_affinity_for_a_job_of_another_tree(affinity, expect):
    s = snap(
        [run(1, [0]), run(2, [1])],
        [wait(9)],
        [Lent(1, frozenset({0}))],
        {},
        params=replace(FCFS, yield_affinity=affinity),
    )
    assert starts(schedule(s)) == expect


def test_under_none_only_a_root_of_another_tree_runs_on_lent_cores():
    # root 1 lends core 0; root 5 computes on core 1 with a pending child 6 (1 core, it would fit); 9 is a root
    params = replace(FCFS, yield_affinity=YieldAffinity.NONE)
    s = snap([run(1, [0]), run(5, [1])], [wait(6), wait(9)], [Lent(1, frozenset({0}))], {6: 5}, params=params)
    assert [w.id for w in tree.candidates(s, 1)] == [9]
    assert tree.may_use(s, wait(6), tree.lent_free(s)) == frozenset()
    assert tree.may_use(s, wait(9), tree.lent_free(s)) == {1}
    assert starts(schedule(s)) == {9: (0,)}
    # 6 is not a guest even when 9 is gone: its cores are its own root's
    assert starts(schedule(replace(s, pending=(wait(6),)))) == {}


def test_a_job_goes_on_lent_cores_only_if_the_stack_order_puts_it_on_top():
    # root 1 and its child 2 started at this very instant (now=100) and lend: 1 cores 0-1, 2 core 0
    params = replace(FCFS, yield_affinity=YieldAffinity.NONE)
    parents = {2: 1}
    running = [run(1, [0, 1], start=100.0), run(2, [0], start=100.0)]
    lent = [Lent(1, frozenset({0, 1})), Lent(2, frozenset({0}))]
    s = snap(running, [wait(7, 2)], lent, parents, params=params)
    # a root 7 started on core 0 now would be under 2 (same start, 2 is deeper): it must not go there
    assert tree.tops([*running, run(7, [0, 1], start=100.0)], parents) == {0: 2, 1: 7}
    assert not tree.on_top(s, wait(7, 2), 2) and tree.on_top(s, wait(7, 2), 1)
    plan = schedule(s)
    assert starts(plan) == {} and plan.wake_at == math.nextafter(100.0, math.inf)  # a daemon tries again then
    # 2's own child is deeper: it goes on top at once
    assert starts(schedule(replace(s, pending=(wait(8),), parents={**parents, 8: 2}))) == {8: (0,)}
    # once the clock has moved, 7 is on top of both cores
    later = replace(s, now=101.0)
    plan = schedule(later)
    assert starts(plan) == {7: (0, 1)} and plan.wake_at is None
    assert tree.tops([*running, run(7, [0, 1], start=101.0)], parents) == {0: 7, 1: 7}


def test_descendants_come_before_other_jobs_even_under_none():
    params = replace(FCFS, yield_affinity=YieldAffinity.NONE)
    s = snap([run(1, [0]), run(2, [1])], [wait(9), wait(10)], [Lent(1, frozenset({0}))], {10: 1}, params=params)
    assert starts(schedule(s)) == {10: (0,)}


def test_deepest_first_then_smallest_pending_subtree():
    # root 1 lends core 0; pending: 5 (child of 1), 6 (grandchild via running 2), 7 (child of 1, with a pending child 8)
    parents = {2: 1, 5: 1, 6: 2, 7: 1, 8: 7}
    running = [run(1, [0]), run(2, [1])]
    lent = [Lent(1, frozenset({0}))]
    order = [w.id for w in tree.candidates(snap(running, [wait(5), wait(7), wait(6), wait(8)], lent, parents), 1)]
    assert order == [6, 8, 5, 7]  # depth 2 first (queue order among them), then 5 (subtree 1) before 7 (subtree 2)


def test_a_job_that_fits_a_lent_core_is_not_started_in_the_pool_too():
    s = snap([run(1, [0])], [wait(2), wait(3)], [Lent(1, frozenset({0}))], {2: 1}, free={1})
    plan = schedule(s)
    assert starts(plan) == {2: (0,), 3: (1,)}
    assert len(plan.starts) == 2


def test_a_job_too_large_for_the_lent_cores_goes_to_the_pool():
    s = snap([run(1, [0])], [wait(2, 2)], [Lent(1, frozenset({0}))], {2: 1}, free={1, 2}, ncores=3)
    assert starts(schedule(s)) == {2: (1, 2)}


def test_jobs_with_floating_resources_or_a_reservation_never_use_lent_cores():
    pending = [wait(2, resources=(("lic", 1),)), wait(3, bind=7)]
    s = snap([run(1, [0])], pending, [Lent(1, frozenset({0}))], {2: 1, 3: 1})
    assert tree.lend(s) == ()


def test_a_job_asking_for_memory_uses_lent_cores_and_the_lenders_memory():
    # the pool's memory is all held by the lender: the child runs on its lent core all the same (job 3,
    # with a licence, does not)
    pending = [wait(2, resources=(("mem", 4096),)), wait(3, resources=(("lic", 1), ("mem", 1)))]
    lender = run(1, [0], resources=(("mem", 8192),))
    s = snap([lender], pending, [Lent(1, frozenset({0}))], {2: 1, 3: 1}, floating={"mem": 8192, "lic": 1})
    assert starts(schedule(s)) == {2: (0,)}


def test_tasks_on_lent_cores_and_lenders_are_never_preempted_for_the_head():
    params = Params(policy=Policy.CHECKPOINT_BACKFILL)
    running = [
        run(1, [0, 1], backfilled=True, preemptable=True),  # lender, backfilled
        run(2, [0], backfilled=True, preemptable=True),  # its child on a lent core
        run(3, [2], backfilled=True, preemptable=True),  # an ordinary backfilled job
    ]
    s = snap(
        running,
        [wait(9, 3)],
        [Lent(1, frozenset({0, 1}))],
        {2: 1},
        ncores=3,
        params=params,
        head=HeadReservation(9, 50.0),
    )
    plan = schedule(s)
    assert {p.job for p in plan.preempts} <= {3}
    assert 1 not in {p.job for p in plan.preempts} and 2 not in {p.job for p in plan.preempts}
    view = tree.pool_view(s)
    assert [r.id for r in view.running] == [1, 3] and not view.running[0].preemptable and not view.lent


def test_preemption_order_leaves_first_deepest_then_latest():
    parents = {2: 1, 3: 2, 4: 1}
    cands = [
        run(1, [0], start=5),
        run(2, [1], start=9),
        run(3, [2], start=1),
        run(4, [3], start=3),
        run(5, [4, 5], start=2),
    ]
    s = snap([], [], parents=parents)
    assert [r.id for r in tree.preempt_order(s, cands)] == [3, 4, 5, 2, 1]
    # without trees: most cores first, then most recently started
    assert [r.id for r in tree.preempt_order(snap([], []), cands)] == [5, 2, 1, 4, 3]


def test_preemption_in_the_policy_takes_leaves_first():
    params = Params(policy=Policy.CHECKPOINT_BACKFILL)
    running = [
        run(1, [0, 1], start=50, backfilled=True, preemptable=True),  # a parent of 2 cores
        run(2, [2], start=10, backfilled=True, preemptable=True),
    ]  # its child, a leaf
    s = snap(running, [wait(9, 2)], (), {2: 1}, free={3}, ncores=4, params=params, head=HeadReservation(9, 0.0))
    assert [p.job for p in schedule(s).preempts] == [2]


# -- properties -----------------------------------------------------------------


@st.composite
def forests(draw):
    """A machine of running roots (some lending, some with a child on their lent cores) and pending jobs."""
    ncores = draw(st.integers(2, 8))
    cores = list(range(ncores))
    running: list[Running] = []
    lent: list[Lent] = []
    parents: dict[int, int] = {}
    jid = 1
    i = 0
    while i < ncores and draw(st.booleans()):
        n = draw(st.integers(1, min(3, ncores - i)))
        mine = cores[i : i + n]
        i += n
        running.append(run(jid, mine, start=draw(st.integers(0, 99))))
        if draw(st.booleans()):
            lent.append(Lent(jid, frozenset(mine)))
            if draw(st.booleans()):
                k = draw(st.integers(1, n))
                child = jid + 1
                parents[child] = jid
                running.append(run(child, mine[:k]))
                if draw(st.booleans()):
                    lent.append(Lent(child, frozenset(mine[:k])))
                jid += 1
        jid += 1
    free = frozenset(cores[i:])
    live = [r.id for r in running]
    pending = []
    for _ in range(draw(st.integers(0, 8))):
        pending.append(wait(jid, draw(st.integers(1, 3)), float(draw(st.integers(1, 50)))))
        if live and draw(st.booleans()):
            parents[jid] = draw(st.sampled_from(live))
        jid += 1
    affinity = draw(st.sampled_from(list(YieldAffinity)))
    policy = draw(st.sampled_from([Policy.FCFS, Policy.EASY, Policy.CHECKPOINT_BACKFILL]))
    return Snapshot(
        now=100.0,
        ncores=ncores,
        running=tuple(running),
        pending=tuple(pending),
        params=Params(policy=policy, yield_affinity=affinity),
        free=free,
        parents=parents,
        lent=tuple(lent),
    )


@settings(max_examples=300, deadline=None)
@given(forests())
def test_lent_cores_go_to_allowed_jobs_and_no_core_is_given_twice(s):
    plan = schedule(s)
    free_lent = tree.lent_free(s)
    lent_now = frozenset().union(*free_lent.values()) if free_lent else frozenset()
    seen: set[int] = set()
    jobs = [d.job for d in plan.starts]
    assert len(jobs) == len(set(jobs))
    by_id = {w.id: w for w in s.pending}
    for d in plan.starts:
        assert len(d.cores) == by_id[d.job].ncpus
        assert not seen & set(d.cores)
        seen.update(d.cores)
        on_lent = set(d.cores) & lent_now
        if on_lent:
            assert set(d.cores) <= lent_now  # never split between lent cores and the pool
            allowed = tree.may_use(s, by_id[d.job], free_lent)
            if not set(d.cores) <= frozenset().union(*(free_lent[p] for p in allowed)):
                # Not by the affinity: then by the rule that unstalls a tree (module docstring of
                # gridsched.core.tree, "Deadlock freedom"), which this check long left out: a tree whose
                # running jobs all lend pools the free lent cores of all its lenders (e.g. a child on the
                # core its sibling lends, both children of a root whose core the sibling sits on).
                top = tree.root(s.parents, d.job)
                lenders = {lent.parent for lent in s.lent}
                assert all(r.id in lenders for r in s.running if tree.root(s.parents, r.id) == top)
                mine = [c for p, c in tree.lent_free(s, resuming=True).items() if tree.root(s.parents, p) == top]
                assert set(d.cores) <= frozenset().union(*mine)
            if s.params.yield_affinity is YieldAffinity.DESCENDANT:
                assert allowed <= set(tree.ancestors(s.parents, d.job))
        else:
            assert set(d.cores) <= s.free
    # a pending job that may use a free lent core holding it is never left waiting while it sits idle
    left = {p: c - seen for p, c in free_lent.items()}
    for w in s.pending:
        if w.id not in jobs and w.ncpus == 1:
            assert not any(left[p] for p in tree.may_use(s, w, left))


@settings(max_examples=200, deadline=None)
@given(forests())
def test_nothing_running_on_lent_cores_is_preempted(s):
    plan = schedule(s)
    protected = tree.lent_tasks(s) | {lent.parent for lent in s.lent}
    assert not protected & {p.job for p in plan.preempts}
