"""The records of the configuration: :class:`Config` (what :func:`gridsched.protocol.config.load` returns),
:class:`Tuning` and :class:`DeviceConfig`, frozen dataclasses (the daemon's tuner replaces a ``Config``'s
``params``).

Apart from :mod:`gridsched.protocol.config`, which names them (loading this module when first asked for
one), so that a command that reads the configuration as :class:`gridsched.protocol.config.PlainSettings` (gsub)
does not load :mod:`dataclasses`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gridsched.core.params import Params
from gridsched.core.units import format_duration
from gridsched.protocol.config import Settings
from gridsched.protocol.jobs import Checkpoint


@dataclass(frozen=True, slots=True)
class Config(Settings):
    """The configuration in force: the file's path and its checked values, the policy settings and the
    tuning built (a class with a docstring: a dataclass without one is given its signature as one, which
    costs every command that loads this)."""

    path: str
    params: Params
    default_walltime: int
    max_walltime: int
    default_ncpus: int
    kill_grace: int
    checkpoint: Checkpoint
    checkpoint_signal: str
    checkpoint_grace: int
    cores: int
    cpus: str
    spool: str
    autostart: bool
    log_level: str
    compat_env: bool = True
    system: bool = False
    floating: dict[str, int] = field(default_factory=dict)  # [resources.floating]
    resv_max_duration: int = 7 * 86400  # [reservations] max_duration
    topology: str = ""  # topology file (relative to the config file's directory); "" = the host's
    cancel_never_satisfied: bool = False
    max_array_size: int = 4_000_001  # [jobs] max_array_size: array indices are below it
    # [devices.TYPE]: per device type, how many jobs may hold one device at once (share, default 1) and
    # whether whole-device requests are the default (exclusive, default false)
    devices: dict[str, DeviceConfig] = field(default_factory=dict)
    # [devices] enforce: isolate jobs from the device nodes they do not hold ("auto": where the host allows it;
    # "required": a job that cannot be isolated fails, in system mode; "off")
    device_enforce: str = "auto"
    # [devices] visible: what CUDA_VISIBLE_DEVICES names, "index" (as Slurm) or "uuid" (the GPUs' UUIDs)
    device_visible: str = "index"
    tmpdir: str = ""  # [jobs] tmpdir: where jobs' private directories are made; "" = the system's
    max_processes: int = 2048  # [jobs] max_processes: pids.max of each job's pids cgroup; 0 = no cap
    # the machine's memory as a pool of the scheduling pass (MiB): [machine] memory_reserved is left to the
    # system; a job without --mem asks for [jobs] default_mem_per_cpu per core (0: none)
    memory_reserved: int = 0
    default_mem_per_cpu: int = 0
    # scheduler.p / threshold / predictor = "auto" and the tune_* keys: what the daemon tunes, how often
    tuning: Tuning = field(default_factory=lambda: Tuning())
    mail_sendmail: str = ""  # [mail] sendmail: absolute path of the sendmail program; "" = no mail
    mail_from: str = ""  # [mail] from: the From: of the messages; "" = gridsched@HOST
    mail_timeout: int = 30  # [mail] timeout: seconds a sendmail may run
    # [reservations] users: who besides the admins may create reservations ("*": everyone), and their caps
    # (0: none): live reservations at once, cores held together, duration of one
    resv_users: tuple[str, ...] = ()
    resv_max_per_user: int = 0
    resv_max_cores_per_user: int = 0
    resv_max_duration_per_user: int = 0
    # [limits] (0: none): a user's jobs queued, held or running at once; tasks of one array.  The running
    # cores per user limit is a scheduling decision: params.max_cpus_per_user.
    max_submit_jobs_per_user: int = 0
    max_array_tasks: int = 0


@dataclass(frozen=True, slots=True)
class Tuning:
    """The settings of ``[scheduler]`` that are ``"auto"``: chosen by the tuner from the machine's history."""

    p: bool = False
    threshold: bool = False
    predictor: bool = False
    every: int = 6 * 3600  # tune_every
    window: int = 14 * 86400  # tune_window
    objective: str = "mix"  # tune_objective
    margin: float = 0.02  # tune_margin
    warmup: int = 7 * 86400  # tune_warmup: replayed before the window as its backlog, not scored

    backfill_order: bool = False

    @property
    def active(self) -> bool:
        return self.p or self.threshold or self.predictor or self.backfill_order

    def describe(self) -> str:
        what = [k for k in ("p", "threshold", "predictor", "backfill_order") if getattr(self, k)]
        return (
            f"{', '.join(what)} auto: tuned every {format_duration(self.every)} over the jobs of the last "
            f"{format_duration(self.window)} (after {format_duration(self.warmup)} of warm-up), "
            f"objective {self.objective}, margin {self.margin:.0%}"
        )


@dataclass(frozen=True, slots=True)
class DeviceConfig:
    """``[devices.TYPE]`` of the configuration."""

    share: int = 1
    exclusive: bool = False
