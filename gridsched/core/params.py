"""The policy settings (``[scheduler]`` of the config, gsim's options): the policy, the predictor, the
yield affinity and the parameters of the pass.

Apart from :mod:`gridsched.core.types` (which holds them too) so that reading the config, as every
command does, does not build the core's many record types.
"""

from __future__ import annotations

from gridsched.core.choices import ADMIN_MAX as ADMIN_MAX
from gridsched.core.choices import NICE_MAX as NICE_MAX
from gridsched.core.choices import NICE_MIN as NICE_MIN
from gridsched.core.choices import BackfillOrder as BackfillOrder
from gridsched.core.choices import Policy as Policy
from gridsched.core.choices import Predictor as Predictor
from gridsched.core.choices import YieldAffinity as YieldAffinity
from gridsched.core.record import record


@record
class PriorityParams:
    """``[priority]`` of the config: the weights of Slurm's multifactor priority (see
    :mod:`gridsched.core.priority`).  All weights 0 (the default): the queue is in submission order,
    changed only by ``nice`` and admin priorities."""

    weight_age: float = 0.0
    weight_job_size: float = 0.0
    weight_fairshare: float = 0.0
    max_age: float = 7 * 86400.0  # seconds
    half_life: float = 7 * 86400.0  # seconds; 0: usage never decays
    favor_small: bool = False

    @property
    def weighted(self) -> bool:
        return bool(self.weight_age or self.weight_job_size or self.weight_fairshare)


@record
class Params:
    """Policy settings, from ``[scheduler]`` of the config or gsim's options."""

    policy: Policy = Policy.CHECKPOINT_BACKFILL
    p: float = 0.2
    threshold: float = 1800.0
    predictor: Predictor = Predictor.SCALED
    # checkpoint-backfill only.  False (the default): a backfilled job that
    # outlives its shortened estimate counts at its user estimate end, and the
    # head keeps its reservation from pass to pass (``Snapshot.head``).  True:
    # the naive reading -- such a job counts as ending now and the head's
    # reservation is recomputed on every pass, which lets preemptions cascade.
    cascade: bool = False
    # checkpoint-backfill: the head makes room (preempts the backfilled jobs that would have to give way at its
    # reservation time anyway) as soon as what cannot be preempted has freed enough, not at that time.  Off by
    # default: on the shared logs it checkpoints about twice as many jobs for no gain (docs/results.md).
    early_room: bool = False
    # A checkpointable job may start although it would still run at the start of
    # a fixed reservation; it is preempted then (``[reservations]`` of the config).
    preempt_for_fixed: bool = False
    # Which pending job may run on cores a yielding parent lends ([scheduler] yield_affinity).
    yield_affinity: YieldAffinity = YieldAffinity.DESCENDANT
    # A job whose dependencies can never be met is cancelled (True) or waits with the reason
    # ([dependencies] cancel_never_satisfied; see gridsched.core.eligible).
    cancel_never_satisfied: bool = False
    # The queue's order ([priority] of the config; gridsched.core.priority).
    priority: PriorityParams = PriorityParams()
    # easy and checkpoint-backfill: the order in which the jobs behind the head are tried
    backfill_order: BackfillOrder = BackfillOrder.QUEUE
    # The most cores a user's running jobs may hold together ([limits] max_cpus_per_user; 0: no limit): a job
    # that would take its user beyond it waits (gridsched.core.eligible), as under Slurm's MaxTRESPerUser=cpu.
    max_cpus_per_user: int = 0
