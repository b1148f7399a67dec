"""B's own job directory: links, FIFOs and swaps planted where the root daemon reads, links and chowns.

A job's directory (``jobs/ID``) holds its script, its private part (environment,
paths) and its checkpoint directory; B may be able to write it while the job
waits.  Whatever B puts there, root must not write, chown, link or read a file
of someone else's through it, must not block on it, and must not hand B
someone else's data (root's or A's environment).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.conftest import wait_for
from tests.security.conftest import TERMINAL, Targets, check_intact, spawn_as

NAMES = ("script", "private.json", "checkpoint", "task-script")


def swap(path: str, target: str | None) -> str:
    """Put a symbolic link to ``target`` (or, for None, a FIFO) at ``path``, as an attacker does: ok or why not."""
    d, name = os.path.split(path)
    tmp = os.path.join(d, f".x-{name}-{os.getpid()}")
    try:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        if target is None:
            os.mkfifo(tmp)
        else:
            os.symlink(target, tmp)
        if os.path.isdir(path) and not os.path.islink(path):
            os.rename(path, os.path.join(d, f".old-{name}-{time.time_ns()}"))
        os.rename(tmp, path)
        return "ok"
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return e.strerror or str(e)


def leaked(where: Path, tokens: tuple[str, ...]) -> list[str]:
    """Files under ``where`` holding any of ``tokens``."""
    out = []
    for p in where.rglob("*"):
        try:
            if p.is_file() and not p.is_symlink():
                text = p.read_text(errors="replace")
                out += [f"{p}: {t}" for t in tokens if t in text]
        except OSError:
            pass
    return out


def test_job_directory_race(fresh):
    """B submits jobs (plain, arrays) with gsub and, for ~10 s, swaps script, private.json, checkpoint and
    task-script in every job directory it can write for links to root's files, while the daemon takes the
    jobs in and starts them."""
    system = fresh()
    a, b = system.a, system.b
    targets = Targets(system.base, a).snapshot()
    jobs = system.spool_dir / "jobs"
    stop = system.base / "stop-swapping"
    first = system.next_id()
    plan = {
        "script": str(targets.shadow),
        "private.json": str(targets.rootjson),
        "checkpoint": str(targets.dir),
        "task-script": str(targets.crontab),
    }

    def swapper() -> dict[str, int]:
        n = {name: 0 for name in NAMES} | {"tries": 0, "dirs seen": 0}
        done: set[tuple[int, str]] = set()
        deadline = time.monotonic() + 30
        while not stop.exists() and time.monotonic() < deadline:
            for jid in range(first, first + 2000):
                jdir = jobs / str(jid)
                if not os.access(jdir, os.W_OK):
                    continue
                n["dirs seen"] += 1
                for name in NAMES:
                    if (jid, name) in done:
                        continue
                    n["tries"] += 1
                    target = plan[name] if jid % 3 else (str(targets.shadow) if name != "checkpoint" else plan[name])
                    if swap(str(jdir / name), target) == "ok":
                        n[name] += 1
                        done.add((jid, name))
        return n

    child = spawn_as(b, swapper)
    script = f"env > {b.home}/env.$GS_JOBID"
    submitted = 0
    try:
        t_end = time.monotonic() + 10
        while time.monotonic() < t_end:
            r = system.cmd(b, "gsub", "-t", "30s", "--wrap", script)
            r2 = system.cmd(b, "gsub", "-t", "30s", "--array", "0-39", "--wrap", script)
            r3 = system.cmd(b, "gsub", "-t", "30s", "--split", "4", "--task-time", "5s", "--wrap", script)
            submitted += sum(x.rc == 0 for x in (r, r2, r3))
    finally:
        stop.touch()
        counts = child.result(60)
    print(f"B submitted {submitted} times; swaps that succeeded: {counts}")
    assert "ok" in counts, counts
    if system.alive():
        system.settle(timeout=30)
    targets.check()
    assert not leaked(b.home, ("root-token-5ac2", "a-token-91f3")), leaked(b.home, ("root-token-5ac2", "a-token-91f3"))
    check_intact(system, targets, probe_timeout=20)


HELD_CASES = {
    # name: (file in the job directory, what B puts there: a target key, "fifo", or "a-private")
    "private.json -> root's file": ("private.json", "shadow"),
    "private.json -> root's JSON file": ("private.json", "rootjson"),
    "private.json -> A's private.json": ("private.json", "a-private"),
    "private.json is a FIFO": ("private.json", "fifo"),
    "script is a FIFO": ("script", "fifo"),
    "script -> root's file": ("script", "shadow"),
    "checkpoint -> root's directory": ("checkpoint", "dir"),
}


@pytest.mark.parametrize("case", list(HELD_CASES))
def test_held_job_directory(fresh, case):
    """B holds a job, rearranges its directory at leisure, then releases it."""
    name, what = HELD_CASES[case]
    system = fresh()
    a, b = system.a, system.b
    targets = Targets(system.base, a).snapshot()
    ja = system.gsub(
        a,
        "--hold",
        "-o",
        str(system.shared / "a-out.%j"),
        "-e",
        str(system.shared / "a-err.%j"),
        "--wrap",
        "env",
        extra_env={"A_TOKEN": "a-token-91f3"},
    )
    system.wait_state(ja, "HELD")
    jb = system.gsub(b, "--hold", "-t", "30s", "--wrap", f'env > {b.home}/env.$GS_JOBID; touch "$GS_CHECKPOINT_DIR/x"')
    system.wait_state(jb, "HELD")
    jdir = system.spool_dir / "jobs" / str(jb)
    target = {
        "shadow": str(targets.shadow),
        "rootjson": str(targets.rootjson),
        "dir": str(targets.dir),
        "a-private": str(system.spool_dir / "jobs" / str(ja) / "private.json"),
        "fifo": None,
    }[what]
    done = spawn_as(b, swap, str(jdir / name), target).result()
    print(f"B's swap of {name} in its held job {jb}: {done}")  # refused: the rest must hold all the same
    r = system.cmd(b, "grls", str(jb))
    assert r.rc == 0, r
    try:
        system.wait_state(jb, *TERMINAL, timeout=15)
    except AssertionError as e:
        print(f"B's job did not end: {str(e)[:300]}")
    targets.check()
    found = leaked(b.home, ("root-token-5ac2", "a-token-91f3")) + leaked(system.shared, ("root-token-5ac2",))
    found += [f for f in leaked(system.shared, ("a-token-91f3",)) if os.stat(f.split(":")[0]).st_uid != a.uid]
    found += [
        f"{p} (A's output path, written by B's job)"
        for p in system.shared.iterdir()
        if p.name.startswith("a-") and p.lstat().st_uid == b.uid
    ]
    assert not found, f"B got someone else's data: {found}"
    check_intact(system, targets, probe_timeout=15)


def test_split_job_pieces_do_not_link_through_b_s_links(fresh):
    """A splittable job waits with its directory B's; when the scheduler takes sub-tasks out of it (a piece),
    the piece's files are made from the parent's.  B has replaced those with links to root's files."""
    system = fresh({"scheduler": {"policy": "easy"}})
    a, b = system.a, system.b
    targets = Targets(system.base, a).snapshot()
    blocker = system.gsub(b, "-n", "3", "-t", "40s", "--wrap", "sleep 40")
    system.wait_state(blocker, "RUNNING")
    head = system.gsub(b, "-n", "4", "-t", "10s", "--wrap", "true")
    sp = system.gsub(b, "--hold", "--split", "4", "--task-time", "5s", "-n", "1", "--wrap", "true")
    system.wait_state(sp, "HELD")
    jdir = system.spool_dir / "jobs" / str(sp)
    res = {
        n: spawn_as(b, swap, str(jdir / n), str(t)).result()
        for n, t in (("script", targets.crontab), ("task-script", targets.shadow))
    }
    print("B's swaps in its held splittable job:", res)
    assert system.cmd(b, "grls", str(sp)).rc == 0
    # the scheduler backfills the free core with pieces of the split job: wait until one exists (10 s at most)
    try:
        wait_for(lambda: [r for r in system.rows().values() if r["id"] > sp], 10, "a piece of the split job")
    except AssertionError:
        pass
    pieces = [r["id"] for r in system.rows().values() if r["id"] > sp]
    print("pieces taken out:", pieces)
    targets.check()
    system.cmd(b, "gdel", str(blocker), str(head), str(sp))
    check_intact(system, targets, probe_timeout=20)
