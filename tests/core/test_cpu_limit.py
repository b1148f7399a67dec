"""The limit on the cores a user's running jobs may hold together ([limits] max_cpus_per_user, Slurm's
MaxTRESPerUser=cpu): a scheduling decision of the core's eligibility (gridsched.core.eligible).

Hand-worked on a machine of 16 cores with a limit of 4 cores per user.
"""

from __future__ import annotations

from gridsched.core.eligible import eligibility
from gridsched.core.policy import forecast_reasons, schedule
from gridsched.core.types import Params, Policy, Running, Snapshot, Waiting, WaitKind
from gridsched.protocol.reason_codes import code

LIMIT = 4


def snap(running=(), pending=(), *, limit=LIMIT, policy=Policy.EASY):
    return Snapshot(
        now=0.0,
        ncores=16,
        running=tuple(running),
        pending=tuple(pending),
        params=Params(policy=policy, max_cpus_per_user=limit),
    )


def test_jobs_start_while_their_user_stays_within_the_limit():
    # alice: 2 + 2 = 4 start, the third waits; bob is not held back by alice's use
    pending = [Waiting(1, 2, 60.0, user="alice"), Waiting(2, 2, 60.0, user="alice"), Waiting(3, 1, 60.0, user="alice")]
    pending.append(Waiting(4, 3, 60.0, user="bob"))
    plan = schedule(snap(pending=pending))
    assert [s.job for s in plan.starts] == [1, 2, 4]
    assert plan.reasons[3] == "user core limit: alice's jobs hold 4 cores; 1 more would be over the 4 a user may hold"


def test_running_jobs_count_and_a_job_that_fits_under_the_limit_starts():
    running = [Running(9, 3, 0.0, 100.0, user="alice")]
    pending = (Waiting(1, 2, 60.0, user="alice"), Waiting(2, 1, 60.0, user="alice"))
    plan = schedule(snap(running, pending))
    # 3 running + 2 would be 5: job 1 waits; job 2's one core keeps alice at 4
    assert [s.job for s in plan.starts] == [2]
    assert 1 in plan.reasons and 2 not in plan.reasons


def test_a_job_over_the_limit_by_itself_says_so():
    kept, reasons, _ = eligibility(snap(pending=(Waiting(1, 8, 60.0, user="alice"),)))
    assert kept == ()
    assert reasons[1] == "user core limit: it asks for 8 cores, more than a user's running jobs may hold (4)"


def test_the_reason_is_a_typed_wait_shown_as_slurm_s_code():
    running = [Running(9, 4, 0.0, 100.0, user="alice")]
    fc = forecast_reasons(snap(running, (Waiting(1, 1, 60.0, user="alice"),)))
    assert fc.reasons[1].kind is WaitKind.CPU_LIMIT
    assert code("PENDING", fc.reasons[1].text) == "QOSMaxCpuPerUserLimit"


def test_no_limit_changes_nothing():
    pending = tuple(Waiting(i, 4, 60.0, user="alice") for i in range(1, 5))
    for policy in Policy:
        plan = schedule(snap(pending=pending, limit=0, policy=policy))
        assert [s.job for s in plan.starts] == [1, 2, 3, 4] and not plan.reasons


def test_every_policy_keeps_the_limit():
    pending = tuple(Waiting(i, 2, 60.0, user="alice") for i in range(1, 5))
    for policy in Policy:
        plan = schedule(snap(pending=pending, policy=policy))
        assert [s.job for s in plan.starts] == [1, 2]
