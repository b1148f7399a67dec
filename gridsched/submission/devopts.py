"""gsub's device options (--gpus, --gpus-per-node, --gpus-per-task, --gres, --gpu-bind, --exclusive-gpu): their
definition, and the ``devices`` of a job's spec they make, checked against the machine."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from gridsched.core.devices import DeviceAsk

F = TypeVar("F", bound=Callable[..., Any])

BIND_CHOICES = ("closest", "strict", "none")
PARAMS = ("gpus", "gpus_per_node", "gpus_per_task", "gres", "gpu_bind", "exclusive_gpu")  # --ntasks is gsub's own


def device_options(f: F) -> F:
    """The device options of gsub (also read from #GS lines)."""
    import click  # here: a submission that gsub reads without click checks its devices with this module

    opts = [
        click.option(
            "--gpus",
            metavar="[MODEL:]N",
            help="N GPUs (of MODEL, as the topology file or nvidia-smi names it) for the job; it sees only "
            "them (CUDA_VISIBLE_DEVICES and the like).",
        ),
        click.option(
            "--gpus-per-node",
            metavar="[MODEL:]N",
            help="N GPUs on the node, as sbatch --gpus-per-node: on one machine the job's GPUs, as --gpus "
            "(given both, they must agree); the job sees SLURM_GPUS_PER_NODE.",
        ),
        click.option(
            "--gpus-per-task",
            type=int,
            metavar="N",
            help="N GPUs for each of the job's tasks (needs --ntasks): N times the tasks in all. "
            "For a splittable job (gsub --split): N GPUs for each sub-task, which sees only its own.",
        ),
        click.option(
            "--gres",
            multiple=True,
            metavar="NAME[:MODEL][:N]",
            help="N devices of the declared type NAME (gpu, fpga, ...), as Slurm's --gres; may be repeated.",
        ),
        click.option(
            "--gpu-bind",
            type=click.Choice(BIND_CHOICES),
            help="closest (the default): cores on the GPUs' boards when they fit there; strict: wait until "
            "they do; none: any cores.",
        ),
        click.option(
            "--exclusive-gpu",
            is_flag=True,
            default=None,
            help="Take whole GPUs: no other job shares them (where [devices.gpu] share lets several jobs).",
        ),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def asked(p: dict[str, Any]) -> bool:
    """Whether the submission asks for devices."""
    return bool(p.get("gpus") or p.get("gpus_per_node") or p.get("gpus_per_task") is not None or p.get("gres"))


def device_spec(cfg: Any, machine: Any, p: dict[str, Any]) -> list[dict[str, Any]]:
    """The spec's ``devices`` for the options in ``p``; raises ``ValueError`` with the line gsub prints."""
    from gridsched.protocol.device_asks import asks_to_spec

    asks, extra = device_asks(cfg, machine, p)
    out = asks_to_spec(asks)
    if extra:
        out[0].update(extra)
    return out


def device_asks(cfg: Any, machine: Any, p: dict[str, Any]) -> tuple[list[DeviceAsk], dict[str, int]]:
    """The devices the options in ``p`` ask for, checked against ``machine``, and the ``per_task`` and ``tasks``
    of --gpus-per-task (empty without it); raises ``ValueError`` with the line gsub prints."""
    from gridsched.core.devices import DeviceAsk
    from gridsched.protocol.device_asks import AskError, parse_gpus, parse_gres, refusal

    asks: list[DeviceAsk] = []
    bind = p.get("gpu_bind") or "closest"
    extra: dict[str, int] = {}
    try:
        given = [(f"--{k.replace('_', '-')}", str(p[k])) for k in ("gpus", "gpus_per_node") if p.get(k)]
        if given and p.get("gpus_per_task") is not None:
            raise AskError(f"{given[0][0]} and --gpus-per-task exclude each other")
        got = {flag: parse_gpus(v, flag) for flag, v in given}
        if len(set(got.values())) > 1:  # one node: the job's GPUs and the node's are the same
            both = f"--gpus {p['gpus']} and --gpus-per-node {p['gpus_per_node']}"
            raise AskError(f"{both}: this is one machine, so they must agree")
        if got:
            model, n = next(iter(got.values()))
            asks.append(DeviceAsk("gpu", n, model, bind))
        if p.get("gpus_per_task") is not None:
            per = int(p["gpus_per_task"])
            if per < 1:
                raise AskError(f"--gpus-per-task {per}: at least 1 device is needed")
            if not p.get("ntasks"):
                raise AskError(f"--gpus-per-task {per}: needs a task count (--ntasks)")
            asks.append(DeviceAsk("gpu", per * int(p["ntasks"]), "", bind))
            extra = {"per_task": per, "tasks": int(p["ntasks"])}
        for g in p.get("gres") or ():
            dtype, model, n = parse_gres(str(g))
            if any(a.type == dtype for a in asks):
                raise AskError(f"--gres {g}: {dtype} devices are already asked for")
            asks.append(DeviceAsk(dtype, n, model, bind))
    except AskError as e:
        raise ValueError(str(e)) from None
    excl = p.get("exclusive_gpu")
    asks = [
        DeviceAsk(a.type, a.count, a.model, a.bind, bool(excl) if excl is not None else cfg.exclusive(a.type))
        for a in asks
    ]
    why = refusal(asks, machine.devices)
    if why:
        raise ValueError(why)
    return asks, extra
