"""The choices of the policy settings (``[scheduler]`` of the config, gsim's options) and the bounds of a
job's nice value and priority, without the settings' record types (:mod:`gridsched.core.params`).

Apart from them so that reading the config, as every command does, checks the choices without defining a
dataclass (gsub does not load :mod:`dataclasses`).
"""

from __future__ import annotations

from enum import Enum


class Policy(str, Enum):
    FCFS = "fcfs"
    EASY = "easy"
    CONSERVATIVE = "conservative"
    CHECKPOINT_BACKFILL = "checkpoint-backfill"


class YieldAffinity(str, Enum):
    """Which pending job may run on cores a yielding parent lends (see :mod:`gridsched.core.tree`)."""

    DESCENDANT = "descendant"  # only a job below the lender
    TREE = "tree"  # below the lender first, then any job of the lender's root tree
    NONE = "none"  # below the lender first, then its tree, then any job


class Predictor(str, Enum):
    SCALED = "scaled"  # estimate * p above the threshold
    USER_HISTORY = "user-history"  # mean of the user's last two run times (EASY++)
    USER_RATIO = "user-ratio"  # walltime times the user's learned ratio of run time to walltime


class BackfillOrder(str, Enum):
    """In which order easy and checkpoint-backfill try the jobs behind the head ([scheduler] backfill_order)."""

    QUEUE = "queue"  # the queue's (priority) order, as Slurm's backfill
    SHORTEST = "shortest"  # shortest estimate first, ties in queue order (EASY++'s shortest job backfilled first)


# gsub --nice (as Slurm's range) and --priority (an admin's)
NICE_MIN = -10000
NICE_MAX = 10000
ADMIN_MAX = 1_000_000_000
