"""Loading and checking ``gridsched.toml``.

Every key is checked; an invalid value is refused with the key, the value and
why (:class:`ConfigError`).  The result is a small frozen :class:`Config` (:func:`load`), or the same
values as :class:`PlainSettings` (:func:`load_settings`), which a command reads without loading
:mod:`dataclasses`.
"""

from __future__ import annotations

import os
import re
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from gridsched.core.choices import BackfillOrder, Policy, Predictor, YieldAffinity
from gridsched.core.units import UnitError, parse_duration, parse_size
from gridsched.protocol.jobs import CHECKPOINT_MODES, Checkpoint

E = TypeVar("E", bound=Enum)

PACKAGED = Path(__file__).parents[1] / "data" / "gridsched.toml"
SYSTEM = Path("/etc/gridsched/gridsched.toml")
MAX_PROCESSES = 4_194_304  # the kernel's largest pid_max


class ConfigError(Exception):
    pass


class Settings:
    """The configuration's values, as every reader of it may read them: the fields of :class:`Config` (with
    their meaning there) or of :class:`PlainSettings`, which have them all."""

    __slots__ = ()

    path: str
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
    compat_env: bool
    system: bool
    floating: dict[str, int]
    resv_max_duration: int
    topology: str
    cancel_never_satisfied: bool
    max_array_size: int
    devices: dict[str, DeviceConfig]
    device_enforce: str
    device_visible: str
    tmpdir: str
    max_processes: int
    memory_reserved: int
    default_mem_per_cpu: int
    mail_sendmail: str
    mail_from: str
    mail_timeout: int
    resv_users: tuple[str, ...]
    resv_max_per_user: int
    resv_max_cores_per_user: int
    resv_max_duration_per_user: int
    max_submit_jobs_per_user: int
    max_array_tasks: int

    if TYPE_CHECKING:  # fields of Config, properties of PlainSettings

        @property
        def params(self) -> Params: ...

        @property
        def tuning(self) -> Tuning: ...

    @property
    def max_cpus_per_user(self) -> int:
        """``[limits] max_cpus_per_user`` (``params.max_cpus_per_user``; 0: no limit)."""
        return self.params.max_cpus_per_user

    def share(self, dtype: str) -> int:
        dc = self.devices.get(dtype)
        return dc.share if dc is not None else 1

    def exclusive(self, dtype: str) -> bool:
        dc = self.devices.get(dtype)
        return dc.exclusive if dc is not None else False


class PlainSettings(Settings):
    """The configuration in force as a command reads it: every value checked as for :class:`Config`, the
    policy settings (``params``) and the tuning built only when asked for.  gsub reads its configuration so,
    without loading :mod:`dataclasses` (whose records :class:`Config`, ``Params`` and ``Tuning`` are).
    Frozen."""

    __slots__ = (
        "path",
        "default_walltime",
        "max_walltime",
        "default_ncpus",
        "kill_grace",
        "checkpoint",
        "checkpoint_signal",
        "checkpoint_grace",
        "cores",
        "cpus",
        "spool",
        "autostart",
        "log_level",
        "compat_env",
        "system",
        "floating",
        "resv_max_duration",
        "topology",
        "cancel_never_satisfied",
        "max_array_size",
        "devices",
        "device_enforce",
        "device_visible",
        "tmpdir",
        "max_processes",
        "memory_reserved",
        "default_mem_per_cpu",
        "mail_sendmail",
        "mail_from",
        "mail_timeout",
        "resv_users",
        "resv_max_per_user",
        "resv_max_cores_per_user",
        "resv_max_duration_per_user",
        "max_submit_jobs_per_user",
        "max_array_tasks",
        "_params_kw",
        "_tuning_args",
    )

    _params_kw: dict[str, Any]
    _tuning_args: tuple[Any, ...]

    def __init__(self, values: dict[str, Any]) -> None:
        """``values``: every field (``_params_kw``: the keywords of ``params``, with its ``priority`` as
        keywords; ``_tuning_args``: the arguments of ``tuning``), as :func:`_values` gives them."""
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"cannot assign to field {name!r}: the configuration is frozen")

    def __reduce__(self) -> tuple[Any, ...]:  # copied and pickled through __init__, which sets the fields
        return PlainSettings, ({n: getattr(self, n) for n in PlainSettings.__slots__},)

    @property
    def params(self) -> Params:
        return _make_params(self._params_kw)

    @property
    def max_cpus_per_user(self) -> int:
        return int(self._params_kw["max_cpus_per_user"])

    @property
    def tuning(self) -> Tuning:
        from gridsched.protocol.config_record import Tuning

        return Tuning(*self._tuning_args)


if TYPE_CHECKING:
    from gridsched.core.params import Params
    from gridsched.protocol.config_record import Config as Config
    from gridsched.protocol.config_record import DeviceConfig as DeviceConfig
    from gridsched.protocol.config_record import Tuning as Tuning
else:

    def __getattr__(name: str) -> Any:
        """:class:`Config`, :class:`Tuning` and :class:`DeviceConfig`: loaded when first asked for
        (:mod:`.config_record`)."""
        if name in ("Config", "Tuning", "DeviceConfig"):
            from gridsched.protocol import config_record

            return getattr(config_record, name)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


TUNE_EVERY_MIN = 60
TUNE_EVERY_MAX = 365 * 86400
TUNE_WARMUP_MAX = 365 * 86400
TUNE_OBJECTIVES = ("bsld", "wait", "mix")
PUBLISHED_P = 0.2
PUBLISHED_THRESHOLD = 1800
PUBLISHED_PREDICTOR = "scaled"
PUBLISHED_ORDER = "queue"


DEVICE_TYPE = r"[a-z][a-z0-9_]{0,31}\Z"  # compiled when a [devices.TYPE] table is read


DEVICE_ENFORCE = ("auto", "required", "off")


def _enforce(table: Any, path: str) -> str:
    """``[devices] enforce``: ``auto`` (the default), ``required`` or ``off``."""
    v = table.get("enforce", "auto") if isinstance(table, dict) else "auto"
    if v not in DEVICE_ENFORCE:
        raise ConfigError(f"{path}: devices.enforce = {v!r}: must be one of {', '.join(map(repr, DEVICE_ENFORCE))}")
    return str(v)


DEVICE_VISIBLE = ("index", "uuid")


def _visible(table: Any, path: str) -> str:
    """``[devices] visible``: ``index`` (the default) or ``uuid``."""
    v = table.get("visible", "index") if isinstance(table, dict) else "index"
    if v not in DEVICE_VISIBLE:
        raise ConfigError(f"{path}: devices.visible = {v!r}: must be one of {', '.join(map(repr, DEVICE_VISIBLE))}")
    return str(v)


def _devices(table: Any, path: str) -> dict[str, DeviceConfig]:
    """``[devices.TYPE]`` tables: ``share = N`` (N >= 1), ``exclusive = true|false`` (and ``enforce``, read by
    :func:`_enforce`)."""
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [devices] must hold [devices.TYPE] tables such as [devices.gpu]")
    out = {}
    for dtype, t in table.items():
        if dtype in ("enforce", "visible"):
            continue
        if not re.match(DEVICE_TYPE, dtype) or not isinstance(t, dict):
            raise ConfigError(f"{path}: devices.{dtype}: must be a table [devices.TYPE] with a lower-case TYPE")
        for k in t:
            if k not in ("share", "exclusive"):
                raise ConfigError(f"{path}: unknown key devices.{dtype}.{k} (known: share, exclusive)")
        share = t.get("share", 1)
        if not isinstance(share, int) or isinstance(share, bool) or not 1 <= share <= 1024:
            raise ConfigError(f"{path}: devices.{dtype}.share = {share!r}: must be a whole number from 1 to 1024")
        excl = t.get("exclusive", False)
        if not isinstance(excl, bool):
            raise ConfigError(f"{path}: devices.{dtype}.exclusive = {excl!r}: must be true or false")
        from gridsched.protocol.config_record import DeviceConfig  # a dataclass: only for such a table

        out[dtype] = DeviceConfig(share, excl)
    return out


def _defaults() -> dict[str, Any]:
    """The packaged defaults, a fresh copy of each table: from their compiled form
    (:mod:`.config_defaults`, no TOML to parse) while the packaged file is the one it was made from."""
    from gridsched.protocol import config_defaults

    with open(PACKAGED, "rb") as f:
        data = f.read()
    if stamp(data) == config_defaults.STAMP:
        tables = config_defaults.DEFAULTS
    else:  # the packaged file was changed after the compiled form was made
        import tomllib

        tables = tomllib.loads(data.decode())
    return {k: dict(v) if isinstance(v, dict) else v for k, v in tables.items()}


def stamp(data: bytes) -> tuple[int, int]:
    """What tells one version of the packaged file from another: its size and CRC-32."""
    from binascii import crc32

    return len(data), crc32(data)


def defaults_current() -> bool:
    """Whether :mod:`.config_defaults` is what :func:`compiled_defaults` makes of the packaged file now."""
    current = Path(__file__).with_name("config_defaults.py")
    return current.is_file() and current.read_text() == compiled_defaults()


def compiled_defaults() -> str:
    """The source of :mod:`gridsched.protocol.config_defaults`: the packaged file's tables as Python values
    (``python scripts/gen_man.py`` writes it when it is stale: :func:`defaults_current`), laid out as
    ``ruff format`` lays them out."""
    import tomllib

    data = PACKAGED.read_bytes()
    return (
        '"""The packaged gridsched.toml, parsed: what every command would otherwise parse at its start.\n\n'
        "Generated by ``python scripts/gen_man.py`` from gridsched/data/gridsched.toml; do not edit.\n"
        '"""\n\n'
        "from typing import Any\n\n"
        f"STAMP = {stamp(data)!r}\n"
        f"DEFAULTS: dict[str, Any] = {_literal(tomllib.loads(data.decode()), 0)}\n"
    )


def _literal(value: Any, depth: int) -> str:
    """``value`` (what TOML gives: tables, arrays, strings, numbers, booleans) as a Python literal, one item
    a line with a trailing comma."""
    import json

    pad, inner = "    " * depth, "    " * (depth + 1)
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = "".join(
            f"{inner}{json.dumps(k, ensure_ascii=False)}: {_literal(v, depth + 1)},\n" for k, v in value.items()
        )
        return "{\n" + items + pad + "}"
    if isinstance(value, list):
        if not value:
            return "[]"
        return "[\n" + "".join(f"{inner}{_literal(v, depth + 1)},\n" for v in value) + pad + "]"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (bool, int, float)):
        return repr(value)
    raise TypeError(f"{type(value).__name__} in the packaged configuration")


def find(explicit: str | None = None, spool: str | Path | None = None) -> Path:
    """The config file in force (see the lookup order in the packaged file)."""
    if explicit:
        return Path(explicit)
    env = os.environ.get("GRIDSCHED_CONFIG")
    if env:
        return Path(env)
    if spool is not None:
        p = Path(spool) / "gridsched.toml"
        if p.is_file():
            return p
    if SYSTEM.is_file():
        return SYSTEM
    return PACKAGED


def load(explicit: str | None = None, spool: str | Path | None = None) -> Config:
    """The configuration in force (the file :func:`find` names), checked."""
    return parse(*_read(explicit, spool))


def load_settings(explicit: str | None = None, spool: str | Path | None = None) -> PlainSettings:
    """What :func:`load` gives, as :class:`PlainSettings`: checked alike, refused alike."""
    return parse_settings(*_read(explicit, spool))


def _read(explicit: str | None, spool: str | Path | None) -> tuple[dict[str, Any], str]:
    """The tables of the file in force (none for the packaged defaults) and its path."""
    path = find(explicit, spool)
    if path == PACKAGED:  # the defaults alone: nothing to parse
        return {}, str(path)
    import tomllib  # only for a file of the admin's or the user's

    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except OSError as e:
        raise ConfigError(f"{path}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: {e}") from None
    return data, str(path)


class _Tables:
    """The configuration's tables, defaults filled in, and how their values are read and refused."""

    def __init__(self, base: dict[str, dict[str, Any]], path: str) -> None:
        self.base, self.path = base, path

    def get(self, table: str, key: str, kind: type) -> Any:
        v = self.base[table][key]
        if kind is float and isinstance(v, int) and not isinstance(v, bool):
            v = float(v)
        if not isinstance(v, kind) or (kind is int and isinstance(v, bool)):
            raise ConfigError(f"{self.path}: {table}.{key} = {v!r}: must be a {kind.__name__}")
        return v

    def bad(self, table: str, key: str, why: str) -> ConfigError:
        return ConfigError(f"{self.path}: {table}.{key} = {self.base[table][key]!r}: {why}")

    def duration(self, table: str, key: str) -> int:
        v = self.base[table][key]
        if isinstance(v, int) and not isinstance(v, bool):
            if v <= 0:
                raise self.bad(table, key, "must be positive")
            return v
        if not isinstance(v, str):
            raise self.bad(table, key, 'must be a duration such as "30m"')
        try:
            return parse_duration(v)
        except UnitError as e:
            raise self.bad(table, key, str(e).split(": ", 1)[-1]) from None

    def duration_or_zero(self, table: str, key: str) -> int:
        """A duration, where 0 (a number or ``"0"``) means none."""
        v = self.base[table][key]
        if (isinstance(v, int) and not isinstance(v, bool) and v == 0) or v == "0":
            return 0
        return self.duration(table, key)

    def auto(self, key: str) -> bool:
        v = self.base["scheduler"][key]
        return isinstance(v, str) and v.strip().lower() == "auto"

    def choice_or_auto(self, key: str, kind: type[E], published: str) -> tuple[E, bool]:
        """A ``[scheduler]`` choice among ``kind``'s values, or ``"auto"`` (then ``published`` until tuned)."""
        is_auto = self.auto(key)
        try:
            return kind(published if is_auto else self.get("scheduler", key, str)), is_auto
        except ValueError:
            choices = ", ".join(x.value for x in kind)
            raise self.bad("scheduler", key, f'must be one of {choices}, or "auto"') from None

    def mebibytes(self, table: str, key: str) -> int:
        """A memory size in MiB (a size such as ``"4G"``, or a number of MiB), where 0 means none."""
        v = self.base[table][key]
        if (isinstance(v, int) and not isinstance(v, bool) and v == 0) or v == "0":
            return 0
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            v = str(v)
        if not isinstance(v, str):
            raise self.bad(table, key, 'must be a memory size such as "4G", or "0"')
        try:
            n = parse_size(v)
        except UnitError as e:
            raise self.bad(table, key, str(e).split(": ", 1)[-1]) from None
        return -(-n // (1 << 20))

    def cap(self, table: str, key: str) -> int:
        v = self.get(table, key, int)
        if not 0 <= v <= 2**31:
            raise self.bad(table, key, "must be a whole number from 0 (no limit) to 2147483648")
        return int(v)


def parse(data: dict[str, Any], path: str = "<config>") -> Config:
    """The configuration of ``data`` (the tables of the file at ``path``), checked."""
    from gridsched.protocol.config_record import Config, Tuning

    values = _values(data, path)
    params, tuning = _make_params(values.pop("_params_kw")), Tuning(*values.pop("_tuning_args"))
    return Config(params=params, tuning=tuning, **values)


def parse_settings(data: dict[str, Any], path: str = "<config>") -> PlainSettings:
    """What :func:`parse` gives, as :class:`PlainSettings`."""
    return PlainSettings(_values(data, path))


def _values(data: dict[str, Any], path: str) -> dict[str, Any]:
    """The checked values of the configuration's fields (see :class:`PlainSettings`), checked in one order
    whatever is built of them, so that the first value refused is the same."""
    base = _defaults()
    data = dict(data)
    device_table = data.pop("devices", {})
    devices = _devices(device_table, path)
    device_enforce = _enforce(device_table, path)
    device_visible = _visible(device_table, path)
    for table, values in data.items():
        if table not in base or not isinstance(values, dict):
            raise ConfigError(f"{path}: unknown table [{table}]")
        for key in values:
            if key not in base[table]:
                raise ConfigError(f"{path}: unknown key {table}.{key}")
        base[table] = {**base[table], **values}
    r = _Tables(base, path)
    get, duration, cap = r.get, r.duration, r.cap
    jobs = _jobs(r)
    machine = _machine(r)
    level = get("daemon", "log_level", str)
    if level not in ("debug", "info", "warning", "error"):
        raise r.bad("daemon", "log_level", "must be debug, info, warning or error")
    resv_users = base["reservations"]["users"]
    if not isinstance(resv_users, list) or not all(
        isinstance(u, str) and u and len(u) <= 256 and not any(ord(c) < 32 for c in u) for u in resv_users
    ):
        raise r.bad("reservations", "users", 'must be a list of user names, or ["*"] for every user')
    return dict(
        path=path,
        _params_kw=_params(r),
        **jobs,
        **machine,
        spool=get("daemon", "spool", str),
        autostart=get("daemon", "autostart", bool),
        log_level=level,
        compat_env=get("compat", "env", bool),
        system=_system(get("daemon", "system", bool), get("daemon", "autostart", bool), path),
        floating=_floating(base["resources"].get("floating"), path),
        devices=devices,
        device_enforce=device_enforce,
        device_visible=device_visible,
        resv_max_duration=duration("reservations", "max_duration"),
        resv_users=tuple(resv_users),
        resv_max_per_user=cap("reservations", "max_per_user"),
        resv_max_cores_per_user=cap("reservations", "max_cores_per_user"),
        resv_max_duration_per_user=r.duration_or_zero("reservations", "max_duration_per_user"),
        max_submit_jobs_per_user=cap("limits", "max_submit_jobs_per_user"),
        max_array_tasks=cap("limits", "max_array_tasks"),
        _tuning_args=_tuning(r),
        mail_sendmail=_sendmail(get("mail", "sendmail", str), path),
        mail_from=_mail_from(get("mail", "from", str), path),
        mail_timeout=duration("mail", "timeout"),
    )


def _make_params(kw: dict[str, Any]) -> Params:
    """The policy settings of :func:`_params`'s keywords."""
    from gridsched.core.params import Params, PriorityParams

    return Params(**{**kw, "priority": PriorityParams(**kw["priority"])})


def _params(r: _Tables) -> dict[str, Any]:
    """``[scheduler]``'s policy and its settings, with the priority and the per-user core limit: the
    keywords of ``Params`` (its ``priority``'s too), checked."""
    get, bad = r.get, r.bad
    try:
        policy = Policy(get("scheduler", "policy", str))
    except ValueError:
        raise bad("scheduler", "policy", "must be one of " + ", ".join(p.value for p in Policy)) from None
    p = PUBLISHED_P if r.auto("p") else get("scheduler", "p", float)
    if not 0.0 < p < 1.0:
        raise bad("scheduler", "p", 'must be between 0 and 1, both excluded, or "auto"')
    threshold_v = r.base["scheduler"]["threshold"]
    if r.auto("threshold"):
        threshold = PUBLISHED_THRESHOLD
    elif isinstance(threshold_v, (int, float)) and not isinstance(threshold_v, bool) and threshold_v == 0:
        threshold = 0
    else:
        threshold = r.duration("scheduler", "threshold")
    predictor, _ = r.choice_or_auto("predictor", Predictor, PUBLISHED_PREDICTOR)
    order, _ = r.choice_or_auto("backfill_order", BackfillOrder, PUBLISHED_ORDER)
    try:
        affinity = YieldAffinity(get("scheduler", "yield_affinity", str))
    except ValueError:
        choices = ", ".join(x.value for x in YieldAffinity)
        raise bad("scheduler", "yield_affinity", "must be one of " + choices) from None
    return dict(
        policy=policy,
        p=p,
        threshold=float(threshold),
        predictor=predictor,
        backfill_order=order,
        preempt_for_fixed=get("reservations", "preempt_for_fixed", bool),
        yield_affinity=affinity,
        cancel_never_satisfied=get("jobs", "cancel_never_satisfied", bool),
        priority=_priority(r.base, get, bad, r.duration),
        max_cpus_per_user=r.cap("limits", "max_cpus_per_user"),
    )


def _tuning(r: _Tables) -> tuple[Any, ...]:
    """``[scheduler]``'s settings left to the tuner (``"auto"``) and how it tunes them: the arguments of
    ``Tuning``, checked."""
    bad = r.bad
    tune_every = r.duration("scheduler", "tune_every")
    if not TUNE_EVERY_MIN <= tune_every <= TUNE_EVERY_MAX:
        raise bad("scheduler", "tune_every", "must be from a minute to a year")
    tune_window = r.duration("scheduler", "tune_window")
    objective = r.get("scheduler", "tune_objective", str)
    if objective not in TUNE_OBJECTIVES:
        raise bad("scheduler", "tune_objective", "must be one of " + ", ".join(TUNE_OBJECTIVES))
    margin = r.get("scheduler", "tune_margin", float)
    if not 0.0 <= margin < 1.0:
        raise bad("scheduler", "tune_margin", "must be from 0 to 1 (a fraction; 1 excluded)")
    warmup = r.duration_or_zero("scheduler", "tune_warmup")
    if warmup > TUNE_WARMUP_MAX:
        raise bad("scheduler", "tune_warmup", "must be at most a year")
    return (  # the choices themselves were checked with the policy's settings (_params)
        r.auto("p"),
        r.auto("threshold"),
        r.auto("predictor"),
        tune_every,
        tune_window,
        objective,
        margin,
        warmup,
        r.auto("backfill_order"),
    )


def _jobs(r: _Tables) -> dict[str, Any]:
    """``[jobs]``: the fields of :class:`Config` it gives."""
    get, bad, duration = r.get, r.bad, r.duration
    default_wt = duration("jobs", "default_walltime")
    max_wt = duration("jobs", "max_walltime")
    if default_wt > max_wt:
        raise bad("jobs", "default_walltime", "longer than jobs.max_walltime")
    ncpus = get("jobs", "default_ncpus", int)
    if ncpus <= 0:
        raise bad("jobs", "default_ncpus", "must be positive")
    ckpt = get("jobs", "checkpoint", str)
    if ckpt not in CHECKPOINT_MODES:
        raise bad("jobs", "checkpoint", "must be one of " + ", ".join(CHECKPOINT_MODES))
    sig = get("jobs", "checkpoint_signal", str).upper().removeprefix("SIG")
    import _signal  # type: ignore[import-not-found]  # the signal numbers, without the signal module's enums

    if not hasattr(_signal, "SIG" + sig) or sig in ("KILL", "STOP"):
        raise bad("jobs", "checkpoint_signal", "not a signal a job can catch")
    max_array = get("jobs", "max_array_size", int)
    if not 1 <= max_array <= 4_000_001:
        raise bad("jobs", "max_array_size", "must be a whole number from 1 to 4000001")
    max_processes = get("jobs", "max_processes", int)
    if not 0 <= max_processes <= MAX_PROCESSES:
        raise bad("jobs", "max_processes", f"must be a whole number from 0 (no cap) to {MAX_PROCESSES}")
    return dict(
        default_walltime=default_wt,
        max_walltime=max_wt,
        default_ncpus=ncpus,
        kill_grace=duration("jobs", "kill_grace"),
        checkpoint=Checkpoint(ckpt),
        checkpoint_signal=sig,
        checkpoint_grace=duration("jobs", "checkpoint_grace"),
        cancel_never_satisfied=get("jobs", "cancel_never_satisfied", bool),
        max_array_size=max_array,
        tmpdir=_tmpdir(get("jobs", "tmpdir", str), r.path),
        max_processes=max_processes,
        default_mem_per_cpu=r.mebibytes("jobs", "default_mem_per_cpu"),
    )


def _machine(r: _Tables) -> dict[str, Any]:
    """``[machine]``: the fields of :class:`Config` it gives."""
    cores = r.get("machine", "cores", int)
    if cores < 0 or cores > 65536:
        raise r.bad("machine", "cores", "must be 0 (the host's) or a number of cores up to 65536")
    cpus = r.get("machine", "cpus", str)
    if cpus:
        from gridsched.core import cpuset

        try:
            if not cpuset.parse(cpus):
                raise cpuset.CpuListError("empty")
        except cpuset.CpuListError as e:
            raise r.bad("machine", "cpus", f"not a cpu list ({e})") from None
    return dict(
        cores=cores,
        cpus=cpus,
        topology=r.get("machine", "topology", str),
        memory_reserved=r.mebibytes("machine", "memory_reserved"),
    )


def _sendmail(value: str, path: str) -> str:
    if value and not os.path.isabs(value):
        raise ConfigError(f"{path}: mail.sendmail = {value!r}: must be an absolute path (or empty: no mail)")
    return value


def _mail_from(value: str, path: str) -> str:
    if value:
        from gridsched.protocol.requests import parse_mail_user

        try:
            if "," in value:
                raise ValueError(value)
            parse_mail_user(value)
        except ValueError:
            raise ConfigError(f"{path}: mail.from = {value!r}: must be one plain mail address") from None
    return value


def _tmpdir(value: str, path: str) -> str:
    if value and not os.path.isabs(value):
        raise ConfigError(f"{path}: jobs.tmpdir = {value!r}: must be an absolute path (or empty: the system's)")
    return value


FLOATING_NAME = r"[A-Za-z][A-Za-z0-9_.-]*\Z"  # compiled when a [resources.floating] table is read


def _floating(table: Any, path: str) -> dict[str, int]:
    """``[resources.floating]``: resource name -> units the machine has."""
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: resources.floating must be a table of NAME = COUNT")
    out = {}
    for name, n in table.items():
        from gridsched.core.memory import MEMORY  # only for a table with resources (a module with a dataclass)

        if not re.match(FLOATING_NAME, name):
            raise ConfigError(
                f"{path}: resources.floating.{name}: not a resource name "
                "(a letter, then letters, digits, '_', '.', '-')"
            )
        if name == MEMORY:
            raise ConfigError(
                f"{path}: resources.floating.{name}: the name is the machine's memory (see machine.memory_reserved)"
            )
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ConfigError(f"{path}: resources.floating.{name} = {n!r}: must be a whole number of at least 1")
        out[name] = n
    return dict(sorted(out.items()))


def _system(system: bool, autostart: bool, path: str) -> bool:
    if system and autostart:
        raise ConfigError(
            f"{path}: daemon.system = true needs daemon.autostart = false "
            "(users must not start daemons of their own on the system spool)"
        )
    return system


def _priority(base: dict[str, Any], get: Any, bad: Any, duration: Any) -> dict[str, Any]:
    """``[priority]``: the weights (numbers from 0 to 1e9) and settings of the multifactor priority, the
    keywords of ``PriorityParams``."""
    weights = {}
    for key in ("weight_age", "weight_job_size", "weight_fairshare"):
        w = get("priority", key, float)
        if not 0.0 <= w <= 1e9:
            raise bad("priority", key, "must be a number from 0 to 1000000000")
        weights[key] = w
    hl = base["priority"]["half_life"]
    zero = isinstance(hl, (int, float)) and not isinstance(hl, bool) and hl == 0
    return dict(
        max_age=float(duration("priority", "max_age")),
        half_life=0.0 if zero else float(duration("priority", "half_life")),
        favor_small=get("priority", "favor_small", bool),
        **weights,
    )
