#!/usr/bin/env python3
"""Time one scheduling pass of the policy core.

A 256-core machine in count-only mode with 200 running jobs and N pending jobs
(1,000 / 10,000 / 100,000).  Two queues:

* ``worst``: the head job needs 64 cores; every other pending job fits in the
  free cores now but neither ends by the shadow time (even shortened) nor fits
  in the extra cores, so the backfill step examines every job and starts none.
* ``mixed``: sizes and walltimes drawn like a parallel workload (powers of two,
  minutes to a day, half of the jobs checkpointable); the pass stops once the
  free cores are used up.

With ``--map`` the machine is a map of 8 boards of 32 cores and jobs are
placed: the running jobs hold their own cores, a quarter of the pending jobs
ask for ``--place board`` and a quarter for ``--place spread``.  With
``--extras`` the machine also has 2 floating licences (20 and 8 units, asked
for by one pending job in ten and one running job in five) and 3 reservations
(one active, holding 16 cores with no job in it yet, and two fixed ones, 1
and 6 hours from now).

With ``--gpus`` the map (implied) also has 16 GPUs, 2 on each board: a quarter
of the pending jobs ask for 1 to 4 of them, and a quarter of the running jobs
hold one.

With ``--memory`` every job asks for memory (1 to 4 GiB per core, as a
``mem`` floating resource in MiB: gridsched.core.memory) of a pool of 1 TiB, as
the daemon schedules ``--mem``; the running jobs hold about 90 % of it.

With ``--board-memory`` (implies ``--map`` and ``--memory``) each board also has its eighth of
the pool, so that every job's memory is also placed on the boards of its cores
(gridsched.core.board_memory): starts, the head's reservation and the forecast count it.

With ``--gpu-head`` (implies ``--gpus``) every GPU is held by a running job and
the head job of each queue asks for 2 of them, with the quarter of the queue
that asks for GPUs: the head's reservation waits for GPUs, and every job
backfilled past it is checked for leaving the head distinct GPUs then.

With ``--split N`` the job right behind the head of each queue is a
splittable job of N sub-tasks of their own sizes (1 to 4 cores, a minute to
an hour, as ``gsub --split-file`` submits them), which the forecast plans
sub-task by sub-task into the windows before its start and into that start;
``--split-same`` makes its sub-tasks alike (1 core, 10 minutes).

Prints the median of several runs of ``schedule`` (checkpoint-backfill unless
``--policy`` says otherwise), its median CPU time (``time.process_time``), and
the median of ``forecast``; ``--pending`` limits the queue lengths.  Targets: one pass with
10,000 pending jobs in at most 5 ms with the map, with and without extras.

    python scripts/bench_schedule.py [--runs 7] [--policy checkpoint-backfill] [--map] [--extras] [--gpus]
                                     [--gpu-head] [--memory] [--pending 10000] [--split N [--split-same]]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from dataclasses import replace

from gridsched.core import devices as dev
from gridsched.core import topology
from gridsched.core.memory import MEMORY
from gridsched.core.placement import Request
from gridsched.core.policy import forecast, schedule
from gridsched.core.types import BackfillOrder, Params, Policy, Resv, Running, Snapshot, SplitInfo, Waiting

NCORES = 256
NRUNNING = 200


def running_jobs(rng: random.Random, used: int) -> tuple[Running, ...]:
    """``NRUNNING`` jobs holding ``used`` cores in all, ending over the next day."""
    sizes = [1] * NRUNNING
    for _ in range(used - NRUNNING):
        sizes[rng.randrange(NRUNNING)] += 1
    out = []
    for i, n in enumerate(sizes):
        start = -rng.uniform(0, 3600)
        est = rng.uniform(600, 86400)
        if est + start <= 0:
            est = -start + 60
        out.append(Running(100_000_000 + i, n, start, est, backfilled=i % 3 == 0, preemptable=i % 2 == 0))
    return tuple(out)


def worst_queue(npending: int) -> tuple[Waiting, ...]:
    head = Waiting(1, 64, 3600.0)
    rest = tuple(Waiting(2 + i, 8, 10 * 86400.0, preemptable=i % 2 == 0) for i in range(npending - 1))
    return (head,) + rest


def mixed_queue(rng: random.Random, npending: int) -> tuple[Waiting, ...]:
    out = []
    for i in range(npending):
        n = min(NCORES, 2 ** rng.choice([0, 0, 1, 2, 3, 4, 5, 6, 7]))
        est = rng.choice([300.0, 900.0, 3600.0, 4 * 3600.0, 12 * 3600.0, 86400.0])
        out.append(Waiting(1 + i, n, est, preemptable=rng.random() < 0.5, user=f"u{i % 50}"))
    return tuple(out)


BOARDS = 8
LICENCES = {"lic_a": 20, "lic_b": 8}


def on_map(running: tuple[Running, ...], queue: tuple[Waiting, ...], rng: random.Random, extras: bool):
    """The same jobs on a map of ``BOARDS`` boards: running jobs get cores, pending ones requirements.

    With ``extras``: licences on some jobs, and 16 free cores held by an active reservation.
    Returns (machine, running, queue, free cores, reservations).
    """
    per = NCORES // BOARDS
    machine = topology.make([topology.board(b, range(b * per, (b + 1) * per)) for b in range(BOARDS)], range(NCORES))
    nxt = 0
    placed = []
    for k, r in enumerate(running):
        res = (("lic_a", 2),) if extras and k % 5 == 0 else ()
        placed.append(replace(r, cores=tuple(range(nxt, nxt + r.ncpus)), resources=res))
        nxt += r.ncpus
    free = frozenset(range(nxt, NCORES))
    resvs: tuple[Resv, ...] = ()
    if extras:
        held = tuple(sorted(free)[:16])
        free = free - set(held)
        resvs = (
            Resv(900_000_001, 16, 7200.0, (), None, True, held, 7200.0),
            Resv(900_000_002, 64, 3600.0, (("lic_b", 4),), 3600.0),
            Resv(900_000_003, 128, 3600.0, (), 6 * 3600.0),
        )
    out = []
    for k, w in enumerate(queue):
        how = ("pack", "board", "spread", "pack")[k % 4]
        n = min(w.ncpus, per) if how == "board" else w.ncpus
        res = (("lic_a", 1),) if extras and k % 10 == 3 else ()
        out.append(replace(w, ncpus=n, place=Request(n, how), resources=res))
    return machine, tuple(placed), tuple(out), free, resvs


GPUS = 16


def with_gpus(machine, running: tuple[Running, ...], queue: tuple[Waiting, ...]):
    """``GPUS`` GPUs, 2 per board; a quarter of the running jobs hold one (the GPU of their first core's
    board, while one is left), a quarter of the pending jobs ask for 1 to 4.  Returns (devices, running, queue)."""
    per = GPUS // BOARDS
    devs = tuple(topology.Device("gpu", i, i // per) for i in range(GPUS))
    free = {d.key: d for d in devs}
    run = []
    for k, r in enumerate(running):
        if k % 4 == 0 and r.cores:
            b = machine.board_of(r.cores[0]).id
            key = next((d.key for d in free.values() if d.board == b), None)
            if key is not None:
                del free[key]
                r = replace(r, devices=(key,), resources=dev.merge(r.resources, dev.held((key,), devs, False)))
        run.append(r)
    out = []
    for k, w in enumerate(queue):
        if k % 4 == 1:
            asks = (dev.DeviceAsk("gpu", 1 + (k // 4) % 4),)
            w = replace(w, devices=asks, resources=dev.merge(w.resources, dev.slots(asks, devs)))
        out.append(w)
    return devs, tuple(run), tuple(out)


def gpu_head(devs, running: tuple[Running, ...], queue: tuple[Waiting, ...]):
    """Every GPU held (those still free go to running jobs without one, on the GPU's board when one is
    there) and the head asking for 2.  Returns (running, queue)."""
    held = {k for r in running for k in r.devices}
    free = [d for d in devs if d.key not in held]
    run = list(running)
    for d in free:
        k = next((i for i, r in enumerate(run) if not r.devices), None)
        if k is None:
            break
        r = run[k]
        run[k] = replace(r, devices=(d.key,), resources=dev.merge(r.resources, dev.held((d.key,), devs, False)))
    head = queue[0]
    asks = (dev.DeviceAsk("gpu", 2),)
    base = tuple((n, x) for n, x in head.resources if not n.startswith(dev.PREFIX))
    head = replace(head, devices=asks, resources=dev.merge(base, dev.slots(asks, devs)))
    return tuple(run), (head, *queue[1:])


MEMORY_POOL = 1 << 20  # MiB: 1 TiB


def with_memory(running: tuple[Running, ...], queue: tuple[Waiting, ...]):
    """Every job asking for 1 to 4 GiB per core (by its position); returns (running, queue)."""

    def ask(res: tuple[tuple[str, int], ...], n: int, k: int) -> tuple[tuple[str, int], ...]:
        return dev.merge(res, ((MEMORY, n * 1024 * (1 + k % 4)),))

    run = tuple(replace(r, resources=ask(r.resources, r.ncpus, k)) for k, r in enumerate(running))
    held = sum(x for r in run for n, x in r.resources if n == MEMORY)
    scale = MEMORY_POOL * 0.9 / held  # the running jobs hold about 90 % of the pool
    run = tuple(
        replace(r, resources=tuple((n, max(1, int(x * scale)) if n == MEMORY else x) for n, x in r.resources))
        for r in run
    )
    return run, tuple(replace(w, resources=ask(w.resources, w.ncpus, k)) for k, w in enumerate(queue))


def board_memory(machine: topology.MachineMap) -> topology.MachineMap:
    """``machine`` with each board holding its share of the memory pool (in bytes)."""
    per = (MEMORY_POOL << 20) // len(machine.boards)
    return topology.make(
        [replace(b, memory=per) for b in machine.boards], machine.host_cpus, machine.distance, machine.devices
    )


def split_job(rng: random.Random, n: int, same: bool) -> Waiting:
    """A splittable job of ``n`` sub-tasks (of their own sizes unless ``same``), one wave of the machine, for a
    walltime that covers them (also with the core of an earlier release, which has no planning of them)."""
    if same:
        return Waiting(10**7, min(n, NCORES), 600.0 * -(-n // NCORES), split=SplitInfo(1, 600.0, tuple(range(n))))
    sizes = tuple((rng.choice((1, 2, 4)), float(rng.randint(60, 3600))) for _ in range(n))
    wave = min(NCORES, sum(c for c, _ in sizes))
    sp = SplitInfo(max(c for c, _ in sizes), max(t for _, t in sizes), tuple(range(n)), sizes)
    work = sum(c * t for c, t in sizes) / wave + max(t for _, t in sizes)  # at least the time they take
    return Waiting(10**7, wave, work, split=sp)


def median_ms(fn, snap: Snapshot, runs: int) -> tuple[float, float]:
    """The median wall-clock and CPU time of ``runs`` calls, in ms."""
    times = []
    cpu = []
    for _ in range(runs):
        c0 = time.process_time()
        t0 = time.perf_counter()
        fn(snap)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(times) * 1000, statistics.median(cpu) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7, help="runs per measurement (median reported)")
    ap.add_argument("--policy", default="checkpoint-backfill", choices=[p.value for p in Policy])
    ap.add_argument("--no-forecast", action="store_true", help="skip timing forecast()")
    ap.add_argument("--map", action="store_true", help=f"{BOARDS} boards, jobs placed")
    ap.add_argument("--extras", action="store_true", help="with --map: 2 licences and 3 reservations")
    ap.add_argument("--gpus", action="store_true", help=f"the map with {GPUS} GPUs, a quarter of the jobs asking")
    ap.add_argument("--gpu-head", action="store_true", help="with --gpus: all GPUs held, the head asking for 2")
    ap.add_argument("--memory", action="store_true", help="every job asks for memory of a 1 TiB pool")
    ap.add_argument("--board-memory", action="store_true", help="with --memory: each board has its eighth of it")
    ap.add_argument(
        "--pending", type=int, action="append", help="queue length (repeatable; default 1,000, 10,000 and 100,000)"
    )
    ap.add_argument(
        "--backfill-order",
        default="queue",
        choices=[o.value for o in BackfillOrder],
        help="the order of the jobs behind the head (the shipped configuration's: shortest)",
    )
    ap.add_argument("--split", type=int, metavar="N", help="a splittable job of N sub-tasks behind each head")
    ap.add_argument("--split-same", action="store_true", help="with --split: sub-tasks alike (1 core, 10 min)")
    args = ap.parse_args()
    if args.gpu_head:
        args.gpus = True
    if args.gpus:
        args.map = True
    if args.board_memory:
        args.map = args.memory = True
    rng = random.Random(20240601)
    params = Params(policy=Policy(args.policy), backfill_order=BackfillOrder(args.backfill_order))
    running = running_jobs(rng, NCORES - (32 if args.extras else 16))  # 16 cores free
    what = f"{BOARDS}-board map, placed" if args.map else "count-only"
    if args.extras:
        what += ", 2 licences, 3 reservations"
    if args.gpus:
        what += f", {GPUS} GPUs"
    if args.gpu_head:
        what += " all held, the head asking for 2"
    if args.memory:
        what += ", memory asked by every job"
    if args.board_memory:
        what += ", placed on the boards' memory"
    if args.split:
        what += f", a splittable job of {args.split:,} {'alike ' if args.split_same else ''}sub-tasks"
    order = params.backfill_order.value
    print(
        f"policy {params.policy.value}, backfill order {order}, {NCORES} cores ({what}), {NRUNNING} running, "
        f"median of {args.runs} runs"
    )
    print(f"{'queue':<7}{'pending':>9}{'schedule ms':>14}{'cpu ms':>9}{'starts':>8}{'forecast ms':>14}")
    for npending in args.pending or (1_000, 10_000, 100_000):
        runs = args.runs if npending <= 10_000 else max(3, args.runs // 2)
        for name, queue in (("worst", worst_queue(npending)), ("mixed", mixed_queue(rng, npending))):
            if args.split:
                queue = (queue[0], split_job(rng, args.split, args.split_same), *queue[1:])
            snap = Snapshot(now=0.0, ncores=NCORES, running=running, pending=queue, params=params)
            if args.map:
                machine, run, q, free, resvs = on_map(running, queue, rng, args.extras)
                snap = replace(
                    snap,
                    running=run,
                    pending=q,
                    free=free,
                    machine=machine,
                    floating=LICENCES if args.extras else {},
                    reservations=resvs,
                )
                if args.gpus:
                    devs, run2, q2 = with_gpus(machine, run, q)
                    if args.gpu_head:
                        run2, q2 = gpu_head(devs, run2, q2)
                    snap = replace(snap, running=run2, pending=q2, devices=devs, machine=replace(machine, devices=devs))
            if args.memory:
                run3, q3 = with_memory(snap.running, snap.pending)
                snap = replace(snap, running=run3, pending=q3, floating={**snap.floating, MEMORY: MEMORY_POOL})
                if args.board_memory and snap.machine is not None:
                    snap = replace(snap, machine=board_memory(snap.machine))
            ms, cpu = median_ms(schedule, snap, runs)
            nstart = len(schedule(snap).starts)
            if args.no_forecast:
                fc = "-"
            else:
                fc = f"{median_ms(forecast, snap, max(1, runs // 2))[0]:.1f}"
            print(f"{name:<7}{npending:>9,}{ms:>14.2f}{cpu:>9.2f}{nstart:>8}{fc:>14}")


if __name__ == "__main__":
    main()
