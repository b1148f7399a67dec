"""Writing a script's directives the other way: ``#SBATCH`` (:func:`emit_slurm`) or ``#PBS``
(:func:`emit_pbs`) lines equivalent to the gsub options; and sbatch's output file name patterns."""

from __future__ import annotations

import math
import re
import shlex
from typing import Any

from gridsched.core.units import format_duration
from gridsched.submission.compat.reader import scan
from gridsched.submission.compat.rules import PREFIXES
from gridsched.submission.compat.values import Export

# -- output file names --------------------------------------------------------------------------

PATTERNS = "AajJNnstux%"
_PATTERN = re.compile(r"%(\d*)(.?)")


def unknown_patterns(template: str) -> list[str]:
    """The ``%`` patterns of an output file name that sbatch does not know (they stay as written)."""
    return [m.group() for m in _PATTERN.finditer(template) if m.group(2) not in PATTERNS or not m.group(2)]


def slurm_output(array: bool) -> str:
    """sbatch's default output file name."""
    return "slurm-%A_%a.out" if array else "slurm-%j.out"


# -- writing #SBATCH and #PBS -----------------------------------------------------------------


def _slurm_mem(n: int) -> str:
    if n % (1 << 20) == 0:
        return f"{n >> 20}M"
    return f"{math.ceil(n / 1024)}K"


def sbatch_lines(params: dict[str, Any]) -> list[str]:
    """``#SBATCH`` lines (and comments for what Slurm lacks) for the gsub options in ``params``.

    ``params`` holds the options that were set, by gsub parameter name.
    """
    q = shlex.quote
    out: list[str] = []
    if params.get("name") is not None:
        out.append(f"#SBATCH --job-name={q(params['name'])}")
    ncpus, ntasks, per = params.get("ncpus"), params.get("ntasks"), params.get("cpus_per_task")
    if ntasks is not None or per is not None:  # the job's own tasks (-n, if given, is their product)
        ntasks = ntasks or (ncpus // per if ncpus else 1)
        out += [f"#SBATCH --ntasks={ntasks}", f"#SBATCH --cpus-per-task={per or (ncpus or ntasks) // ntasks}"]
    elif ncpus is not None:
        out += ["#SBATCH --ntasks=1", f"#SBATCH --cpus-per-task={ncpus}"]
    if params.get("ntasks_per_node") is not None:
        out.append(f"#SBATCH --ntasks-per-node={params['ntasks_per_node']}")
    if params.get("hint") is not None:
        out.append(f"#SBATCH --hint={params['hint']}")
    if params.get("walltime") is not None:
        out.append(f"#SBATCH --time={format_duration(params['walltime'])}")
    if params.get("mem") is not None:
        out.append(f"#SBATCH --mem={_slurm_mem(params['mem']) if params['mem'] else 0}")
    if params.get("mem_per_cpu") is not None:
        out.append(f"#SBATCH --mem-per-cpu={_slurm_mem(params['mem_per_cpu'])}")
    if params.get("mem_per_gpu") is not None:
        out.append(f"#SBATCH --mem-per-gpu={_slurm_mem(params['mem_per_gpu'])}")
    for key, flag in (
        ("output", "--output"),
        ("error", "--error"),
        ("chdir", "--chdir"),
        ("account", "--account"),
        ("depend", "--dependency"),
        ("array", "--array"),
        ("begin", "--begin"),
        ("open_mode", "--open-mode"),
        ("signal", "--signal"),
    ):
        if params.get(key):
            out.append(f"#SBATCH {flag}={q(params[key])}")
    if params.get("estimate") is not None:
        out.append(f"# gridsched: dropped --estimate {format_duration(params['estimate'])} (--time-min differs)")
    if params.get("hold_jid"):
        out.append(f"# gridsched: dropped --hold-jid {q(params['hold_jid'])} (Slurm's dependencies name job ids)")
    if params.get("pe"):
        out.append(f"# gridsched: dropped --pe {q(params['pe'])} (Grid Engine's parallel environment; -n is kept)")
    if params.get("exclusive"):
        out.append("#SBATCH --exclusive")
    ex = params.get("export")
    if ex is not None:
        out.append(f"#SBATCH --export={q(ex.text())}")
    if params.get("mail_type") is not None:
        out.append(f"#SBATCH --mail-type={','.join(params['mail_type']) or 'NONE'}")
    if params.get("mail_user"):
        out.append(f"#SBATCH --mail-user={q(','.join(params['mail_user']))}")
    if params.get("get_user_env") is not None:
        out.append(f"#SBATCH --get-user-env={params['get_user_env'].text()}")
    if params.get("hold"):
        out.append("#SBATCH --hold")
    if params.get("wait"):
        out.append("#SBATCH --wait")
    out += _sbatch_devices(params)
    if params.get("nice"):
        out.append(f"#SBATCH --nice={params['nice']}")
    if params.get("priority") is not None:
        out.append(f"# gridsched: dropped --priority {params['priority']} (an operator's scontrol update in Slurm)")
    ck = params.get("checkpoint")
    if ck == "requeue":
        out.append("#SBATCH --requeue")
    elif ck == "none":
        out.append("#SBATCH --no-requeue")
    elif ck == "signal":
        sig, grace = params.get("_checkpoint_signal") or "USR1", params.get("_checkpoint_grace") or 30
        out.append(f"# gridsched: --checkpoint signal: SIG{sig} to the batch shell {grace} s before the time limit,")
        out.append("# and requeued when preempted (Slurm's PreemptMode=REQUEUE); exit 75 is not special to Slurm")
        out += [f"#SBATCH --signal=B:{sig}@{grace}", "#SBATCH --requeue"]
    elif ck is not None:
        out.append(f"# gridsched: dropped --checkpoint {ck} (no Slurm equivalent)")
    join = params.get("join")
    if join == "oe" and not params.get("error"):
        pass  # sbatch joins the error to the output when no --error is given
    elif join in ("oe", "eo"):
        out.append(f"# gridsched: dropped --join {join} (sbatch joins them when --error is not given)")
    return out


def _sbatch_devices(params: dict[str, Any]) -> list[str]:
    """``#SBATCH`` lines for gsub's device options (same names in Slurm, but --gpu-bind strict)."""
    q = shlex.quote
    out: list[str] = []
    if params.get("gpus"):
        out.append(f"#SBATCH --gpus={q(str(params['gpus']))}")
    if params.get("gpus_per_node"):
        out.append(f"#SBATCH --gpus-per-node={q(str(params['gpus_per_node']))}")
    if params.get("gpus_per_task") is not None:
        out.append(f"#SBATCH --gpus-per-task={params['gpus_per_task']}")
    if params.get("gres"):
        out.append(f"#SBATCH --gres={q(','.join(params['gres']))}")
    bind = params.get("gpu_bind")
    if bind == "strict":  # Slurm's way to require the cores beside the GPUs
        out.append("#SBATCH --gres-flags=enforce-binding")
    elif bind:
        out.append(f"#SBATCH --gpu-bind={bind}")
    if params.get("exclusive_gpu"):
        out.append("# gridsched: --exclusive-gpu: Slurm does not share a GPU unless the site configures sharding")
    return out


def _pbs_mem(n: int) -> str:
    if n % (1 << 30) == 0:
        return f"{n >> 30}gb"
    if n % (1 << 20) == 0:
        return f"{n >> 20}mb"
    return f"{math.ceil(n / 1024)}kb"


def pbs_lines(params: dict[str, Any]) -> list[str]:
    """``#PBS`` lines (PBS Pro; Torque reads them too but for -J) for the gsub options in ``params``."""
    q = shlex.quote
    out: list[str] = []
    if params.get("name") is not None:
        out.append(f"#PBS -N {q(params['name'])}")
    select = f"select=1:ncpus={params.get('ncpus') or 1}"
    mem = params.get("mem")
    if params.get("mem_per_cpu") is not None:
        mem = params["mem_per_cpu"] * (params.get("ncpus") or 1)
    ngpus = _gpu_count(params)
    if params.get("mem_per_gpu") is not None:  # PBS has no memory per GPU: the job's, of its GPUs
        mem = params["mem_per_gpu"] * (ngpus or 0)
    if mem:
        select += f":mem={_pbs_mem(mem)}"
    if ngpus:
        select += f":ngpus={ngpus}"
    if params.get("ncpus") is not None or mem or ngpus:
        out.append(f"#PBS -l {select}")
    if params.get("exclusive"):
        out.append("#PBS -l place=excl")
    ex = params.get("export")
    if ex is not None:
        if ex.all:
            out.append("#PBS -V")
        else:
            out.append("# gridsched: --export without ALL: PBS passes only its PBS_O_ variables and those -v names")
        listed = Export(True, ex.names, ex.values).text().removeprefix("ALL").lstrip(",")
        if listed:
            out.append(f"#PBS -v {q(listed)}")
    for key in ("gpus", "gpus_per_node"):
        if params.get(key) and ":" in str(params[key]):
            flag = f"--{key.replace('_', '-')} {q(str(params[key]))}"
            out.append(f"# gridsched: the GPU model of {flag} is a site resource in PBS")
    if params.get("gres") or params.get("gpu_bind") or params.get("exclusive_gpu"):
        out.append("# gridsched: dropped --gres/--gpu-bind/--exclusive-gpu (no PBS Pro equivalent)")
    if params.get("walltime") is not None:
        h, rest = divmod(int(params["walltime"]), 3600)
        out.append(f"#PBS -l walltime={h:02d}:{rest // 60:02d}:{rest % 60:02d}")
    for key, flag in (("output", "-o"), ("error", "-e")):
        if params.get(key):
            out.append(f"#PBS {flag} {q(params[key])}")
            if "%" in params[key]:
                out.append(f"# gridsched: PBS does not expand % patterns in {flag}")
    if params.get("join"):
        out.append(f"#PBS -j {params['join']}")
    if params.get("chdir"):
        out.append(f"#PBS -d {q(params['chdir'])}")
        out.append("# gridsched: -d is Torque's; PBS Pro starts in $HOME (cd to the directory in the script)")
    if params.get("depend"):
        out.append(f"#PBS -W depend={q(params['depend'])}")
    if params.get("array"):
        out.append(f"#PBS -J {q(params['array'])}")
    out += _pbs_mail(params)
    if params.get("hold"):
        out.append("#PBS -h")
    if params.get("wait"):
        out.append("#PBS -W block=true")
    if params.get("shell"):
        out.append(f"#PBS -S {q(params['shell'])}")
    ck = params.get("checkpoint")
    if ck == "requeue":
        out.append("#PBS -r y")
    elif ck == "none":
        out.append("#PBS -r n")
    elif ck is not None:
        out.append(f"# gridsched: dropped --checkpoint {ck} (no PBS equivalent)")
    for key in ("begin", "open_mode", "hint", "pe"):
        if params.get(key):
            out.append(f"# gridsched: dropped --{key.replace('_', '-')} {q(params[key])} (not translated to PBS)")
    if params.get("ntasks_per_node") is not None:
        out.append(f"# gridsched: dropped --ntasks-per-node {params['ntasks_per_node']} (not translated to PBS)")
    if params.get("signal"):
        out.append(f"# gridsched: dropped --signal {q(params['signal'])} (PBS has no signal before the walltime)")
    if params.get("hold_jid"):
        out.append(f"# gridsched: dropped --hold-jid {q(params['hold_jid'])} (PBS dependencies name job ids)")
    if params.get("estimate") is not None:
        h, rest = divmod(int(params["estimate"]), 3600)
        out.append(f"#PBS -l soft_walltime={h:02d}:{rest // 60:02d}:{rest % 60:02d}")
    return out


_PBS_MAIL = {"FAIL": "a", "BEGIN": "b", "END": "e"}


def _pbs_mail(params: dict[str, Any]) -> list[str]:
    """``#PBS -m`` and ``-M`` for --mail-type and --mail-user (PBS has no requeue or time limit mail)."""
    out: list[str] = []
    events = params.get("mail_type")
    if events is not None:
        letters = "".join(c for e, c in _PBS_MAIL.items() if e in events)
        if letters and "ARRAY_TASKS" in events:
            letters += "j"
        out.append(f"#PBS -m {letters or 'n'}")
        other = [e for e in events if e not in _PBS_MAIL and e != "ARRAY_TASKS"]
        if other:
            out.append(f"# gridsched: dropped --mail-type {','.join(other)} (no PBS mail event)")
    if params.get("mail_user"):
        out.append(f"#PBS -M {shlex.quote(','.join(params['mail_user']))}")
    if params.get("get_user_env") is not None:
        out.append("# gridsched: dropped --get-user-env (PBS jobs start from the login environment without it)")
    return out


def _gpu_count(params: dict[str, Any]) -> int:
    """The GPUs --gpus (or --gpus-per-node) or --gpus-per-task asks for (``H100:2`` is 2)."""
    gpus = params.get("gpus") or params.get("gpus_per_node")
    if gpus:
        try:
            return int(str(gpus).rsplit(":", 1)[-1])
        except ValueError:
            return 0
    if params.get("gpus_per_task") is not None:
        return int(params["gpus_per_task"]) * int(params.get("ntasks") or 1)
    return 0


def _emit(text: str, lines: list[str], shell: str | None) -> str:
    """``text`` with its header ``#GS`` and foreign directive lines replaced by ``lines``."""
    src = text.splitlines()
    drop = {n for p in ("#GS", *PREFIXES) for n, _ in scan(text, p)}
    head = src[0] if src and src[0].startswith("#!") else f"#!{shell or '/bin/sh'}"
    body = [ln for n, ln in enumerate(src, start=1) if n not in drop and not (n == 1 and ln.startswith("#!"))]
    return "\n".join([head, *lines, *body]) + "\n"


def emit_slurm(text: str, params: dict[str, Any]) -> str:
    """``text`` with its header directive lines replaced by ``#SBATCH`` lines for ``params``."""
    return _emit(text, sbatch_lines(params), params.get("shell"))


def emit_pbs(text: str, params: dict[str, Any]) -> str:
    """``text`` with its header directive lines replaced by ``#PBS`` lines for ``params``."""
    return _emit(text, pbs_lines(params), params.get("shell"))
