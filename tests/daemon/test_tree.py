"""Parent-child job trees with a real daemon: children, gwait --yield, resume, subtree cancel.

Parents that fill the machine without yielding, and the yield affinities, are tested in process (stub
executor, driven clock) in test_tree_driven.py."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from tests.conftest import BIN, wait_for

CONFIG = """
[scheduler]
policy = "easy"
yield_affinity = "{affinity}"
[jobs]
kill_grace = "1s"
[machine]
cores = 2
[daemon]
autostart = false
"""


def config(affinity: str = "descendant") -> str:
    return CONFIG.format(affinity=affinity)


def script(gs, name: str, body: str) -> Path:
    p = gs.work / name
    p.write_text(f"#!/bin/sh\nPATH={BIN}:$PATH\n{body}\n")
    p.chmod(0o755)
    return p


def rows(gs) -> dict[int, dict]:
    con = sqlite3.connect(f"file:{gs.spool / 'state.db'}?mode=ro", uri=True)
    try:
        out = {}
        for jid, state, cores, segs, spec in con.execute("SELECT id, state, cores, segments, spec FROM jobs"):
            out[jid] = {"state": state, "cores": cores, "segments": json.loads(segs), "spec": json.loads(spec)}
        return out
    finally:
        con.close()


def meta_yielded(gs) -> dict:
    con = sqlite3.connect(f"file:{gs.spool / 'state.db'}?mode=ro", uri=True)
    try:
        row = con.execute("SELECT value FROM meta WHERE key = 'yielded'").fetchone()
        return json.loads(row[0]) if row else {}
    finally:
        con.close()


def children_of(gs, parent: int) -> list[int]:
    return sorted(j for j, r in rows(gs).items() if r["spec"].get("parent") == parent)


def seg_cores(row: dict) -> set[str]:
    return {s["cores"] for s in row["segments"]}


PARENT = """
while [ ! -e "$GS_SUBMIT_DIR/go" ]; do sleep 0.05; done
gsub -N child -t 1m --wrap 'sleep 0.5' >/dev/null || exit 3
gsub -N child -t 1m --wrap 'sleep 0.5' >/dev/null || exit 3
gwait {flags} || exit 4
"""


def test_two_parents_filling_the_machine_complete_with_gwait_yield(make_gs):
    gs = make_gs(config())
    s = script(gs, "parent.sh", PARENT.format(flags="--yield"))
    a, b = gs.gsub("-t", "2m", str(s)), gs.gsub("-t", "2m", str(s))
    gs.wait_state(a, "RUNNING")
    gs.wait_state(b, "RUNNING")
    (gs.work / "go").write_text("")
    for p in (a, b):
        assert gs.wait_state(p, "COMPLETED", "FAILED", timeout=60)["state"] == "COMPLETED", gs.log()
    r = rows(gs)
    for p in (a, b):
        kids = children_of(gs, p)
        assert len(kids) == 2
        pcores = seg_cores(r[p])
        assert len(pcores) == 1
        for k in kids:
            assert r[k]["state"] == "COMPLETED"
            assert seg_cores(r[k]) == pcores  # each child ran on its own parent's core
    assert meta_yielded(gs) == {}


SUM = """
lo=$1; hi=$2; depth=$3; out=$4
if [ "$depth" -eq 0 ]; then
    s=0; i=$lo
    while [ "$i" -lt "$hi" ]; do s=$((s + i)); i=$((i + 1)); done
    echo $s > "$out"; exit 0
fi
mid=$(( (lo + hi) / 2 ))
d=$((depth - 1))
gsub -N sum -t 2m -o /dev/null "$0" "$lo" "$mid" "$d" "$out.0" >/dev/null || exit 3
gsub -N sum -t 2m -o /dev/null "$0" "$mid" "$hi" "$d" "$out.1" >/dev/null || exit 3
gwait --yield --children || exit 4
echo $(( $(cat "$out.0") + $(cat "$out.1") )) > "$out"
"""


def test_recursive_sum_three_levels_deep_on_two_cores(make_gs):
    gs = make_gs(config())
    s = script(gs, "sum.sh", SUM)
    out = gs.work / "total"
    root = gs.gsub("-N", "sum", "-t", "3m", str(s), "0", "1000", "3", str(out))
    assert gs.wait_state(root, "COMPLETED", "FAILED", timeout=90)["state"] == "COMPLETED", gs.log()
    assert int(out.read_text()) == sum(range(1000))
    r = rows(gs)
    assert len(r) == 1 + 2 + 4 + 8 and all(x["state"] == "COMPLETED" for x in r.values())
    depth = {root: 0}
    for jid in sorted(r):
        p = r[jid]["spec"].get("parent")
        if p is not None:
            depth[jid] = depth[p] + 1
    assert max(depth.values()) == 3
    # gstat --tree: every job under its parent, indented by its depth
    text = gs.run("gstat", "-a", "--tree", check=True).stdout.splitlines()
    assert text[0].split() == ["ID", "STATE", "CPUS", "CORES", "NAME"] and len(text) == 16
    assert text[1].split()[0] == str(root) and text[1].endswith("sum")
    for line in text[1:]:
        jid = int(line.split()[0])
        name = line[text[0].index("NAME") :]
        assert name.endswith("sum") and (len(name) - len("sum")) == 3 * depth[jid], line
    nested = json.loads(gs.run("gstat", "-a", "--tree", "--json", check=True).stdout)["trees"]
    assert [t["id"] for t in nested] == [root] and len(nested[0]["children"]) == 2
    full = dict(
        line.split(None, 1)
        for line in gs.run("gstat", "-f", str(root), check=True).stdout.splitlines()
        if len(line.split(None, 1)) == 2
    )
    kids = sorted(j for j in r if r[j]["spec"].get("parent") == root)
    assert full["children"] == ",".join(map(str, kids)) and full["yielded"] == "no"
    assert dict(
        line.split(None, 1)
        for line in gs.run("gstat", "-f", str(kids[0]), check=True).stdout.splitlines()
        if len(line.split(None, 1)) == 2
    )["parent"] == str(root)


def test_failed_parent_cancels_its_running_and_pending_subtree(make_gs):
    gs = make_gs(config())
    s = script(
        gs,
        "p.sh",
        """
gsub -N long -t 1m --wrap 'sleep 60' > "$GS_SUBMIT_DIR/kid1" || exit 3
gsub -N long -t 1m --wrap 'sleep 60' > "$GS_SUBMIT_DIR/kid2" || exit 3
while [ ! -s "$GS_SUBMIT_DIR/go" ]; do sleep 0.1; done
exit 7
""",
    )
    p = gs.gsub("-n", "1", "-t", "2m", str(s))
    k1 = wait_for(lambda: (gs.work / "kid1").exists() and (gs.work / "kid1").read_text().strip(), 15, "kid1")
    k1 = int(k1)
    gs.wait_state(k1, "RUNNING")  # on the second core
    k2 = int(wait_for(lambda: (gs.work / "kid2").exists() and (gs.work / "kid2").read_text().strip(), 15, "kid2"))
    wait_for(lambda: k2 in rows(gs), 15, "kid2 taken in")
    assert gs.job(k2)["state"] == "PENDING"
    (gs.work / "go").write_text("1")
    assert gs.wait_state(p, "FAILED")["exit_code"] == 7
    for k in (k1, k2):
        j = gs.wait_state(k, "CANCELLED")
        assert f"parent {p} ended FAILED" in j["reason"] or j["reason"] == "cancelled"
    assert gs.job(k2)["reason"] == f"parent {p} ended FAILED"


def test_recoverable_parent_keeps_its_subtree_held_until_gresume_tree(make_gs):
    gs = make_gs(config())
    s = script(
        gs,
        "p.sh",
        """
gsub -N kid -t 1m --wrap 'sleep 60' > "$GS_SUBMIT_DIR/kid1" || exit 3
gsub -N kid -t 1m --wrap 'true' > "$GS_SUBMIT_DIR/kid2" || exit 3
while [ ! -s "$GS_SUBMIT_DIR/go" ]; do sleep 0.1; done
exit 7
""",
    )
    p = gs.gsub("--recoverable", "-t", "2m", str(s))
    k1 = int(wait_for(lambda: (gs.work / "kid1").exists() and (gs.work / "kid1").read_text().strip(), 15, "kid1"))
    gs.wait_state(k1, "RUNNING")
    k2 = int(wait_for(lambda: (gs.work / "kid2").exists() and (gs.work / "kid2").read_text().strip(), 15, "kid2"))
    wait_for(lambda: k2 in rows(gs), 15, "kid2 taken in")
    (gs.work / "go").write_text("1")
    gs.wait_state(p, "FAILED")
    held = gs.wait_state(k2, "HELD")
    assert held["reason"].startswith(f"parent {p} ended FAILED")
    assert gs.job(k1)["state"] == "RUNNING"  # a running child goes on
    r = gs.run("gresume-tree", str(p), check=True)
    assert f"job {k2}: releasing" in r.stdout
    assert gs.wait_state(k2, "COMPLETED")["state"] == "COMPLETED"
    gs.run("gdel", str(k1), check=True)


def test_resume_waits_for_the_task_on_the_core_and_the_parent_keeps_its_cores(make_gs):
    gs = make_gs(config())
    s = script(
        gs,
        "r.sh",
        """
python3 -c 'import os; print(sorted(os.sched_getaffinity(0)))' > "$GS_SUBMIT_DIR/aff.before"
while [ ! -e "$GS_SUBMIT_DIR/go" ]; do sleep 0.05; done
gsub -N kid -t 1m --wrap 'while [ ! -e "$GS_SUBMIT_DIR/kid.stop" ]; do sleep 0.1; done' >/dev/null || exit 3
gyield || exit 3
while [ ! -e "$GS_SUBMIT_DIR/resume" ]; do sleep 0.1; done
gresume || exit 4
date +%s.%N > "$GS_SUBMIT_DIR/resumed"
python3 -c 'import os; print(sorted(os.sched_getaffinity(0)))' > "$GS_SUBMIT_DIR/aff.after"
""",
    )
    p = gs.gsub("-t", "2m", str(s))
    blocker = gs.gsub("-t", "2m", "--wrap", "sleep 60")  # the other core is taken
    gs.wait_state(blocker, "RUNNING")
    gs.wait_state(p, "RUNNING")
    (gs.work / "go").write_text("")
    kid = wait_for(lambda: children_of(gs, p), 15, "the child")[0]
    assert gs.wait_state(kid, "RUNNING")["cores"] == gs.job(p)["cores"]  # the child backfills the yielded core
    (gs.work / "resume").write_text("")
    wait_for(lambda: meta_yielded(gs).get(str(p), {}).get("resuming"), 15, "the resume request")
    deadline = time.monotonic() + 2.0  # the child still runs there: the parent is not resumed
    while time.monotonic() < deadline:
        assert not (gs.work / "resumed").exists()
        assert gs.job(kid)["state"] == "RUNNING"
        time.sleep(0.2)
    (gs.work / "kid.stop").write_text("")
    assert gs.wait_state(p, "COMPLETED")["state"] == "COMPLETED"
    end_kid = gs.job(kid)["end_time"]
    assert float((gs.work / "resumed").read_text()) >= end_kid
    assert (gs.work / "aff.after").read_text() == (gs.work / "aff.before").read_text()
    gs.run("gdel", str(blocker), check=True)


def test_bad_input(make_gs):
    gs = make_gs(config())
    for cmd in ("gwait", "gyield", "gresume"):
        r = gs.run(cmd)
        assert r.returncode == 1 and r.stderr.count("\n") == 1
        assert r.stderr.startswith(f"{cmd}: error: not inside a job"), r.stderr
    done = gs.gsub("-t", "1m", "--wrap", "true")
    gs.wait_state(done, "COMPLETED")
    r = gs.run("gsub", "--parent", str(done), "--wrap", "true")
    assert (
        r.returncode == 1
        and r.stderr == f"gsub: error: parent {done}: already COMPLETED, only a running job can be a parent\n"
    )
    r = gs.run("gsub", "--parent", "999", "--wrap", "true")
    assert r.returncode == 1 and "parent 999: no such job" in r.stderr
    r = gs.run("gsub", "--parent", str(done), "--no-parent", "--wrap", "true")
    assert r.returncode == 2 and "exclude each other" in r.stderr
    # a child asking for more cores than its root has: refused at submit, from inside the job
    s = script(gs, "big.sh", 'gsub -n 2 --wrap true 2> "$GS_SUBMIT_DIR/err"; echo $? > "$GS_SUBMIT_DIR/rc"')
    p = gs.gsub("-n", "1", "-t", "1m", str(s))
    gs.wait_state(p, "COMPLETED")
    assert (gs.work / "rc").read_text().strip() == "1"
    assert (gs.work / "err").read_text() == (
        f"gsub: error: job can never run: it asks for 2 cores, its tree (root job {p}) has 1\n"
    )


def test_another_users_parent_is_refused(make_gs):
    import os

    from gridsched.protocol.spool import Spool
    from gridsched.protocol.tree import TreeError, submit_keys

    gs = make_gs(config())
    s = script(gs, "hold.sh", 'while [ ! -e "$GS_SUBMIT_DIR/stop" ]; do sleep 0.1; done')
    p = gs.gsub("-t", "1m", str(s))
    gs.wait_state(p, "RUNNING")
    spool = Spool(gs.spool)
    assert submit_keys(spool, 1, os.getuid(), parent=p) == {"parent": p}
    with pytest.raises(TreeError, match=f"parent {p}: owned by .*, not you"):
        submit_keys(spool, 1, os.getuid() + 1, parent=p)
    # the daemon checks again: a hand-written request naming a job that does not exist fails with the reason
    jid = spool.next_id()
    spec = {
        "id": jid,
        "name": "x",
        "user": "",
        "uid": os.getuid(),
        "gid": os.getgid(),
        "ncpus": 1,
        "walltime": 60,
        "mem": None,
        "checkpoint": "none",
        "hold": False,
        "depend": "",
        "script": "#!/bin/sh\ntrue\n",
        "args": [],
        "workdir": str(gs.work),
        "stdout": "/dev/null",
        "stderr": "/dev/null",
        "env": {},
        "submit_time": time.time(),
        "submit_dir": str(gs.work),
        "parent": jid + 1000,
    }
    spool.submit(spec)  # written by hand: gsub would refuse it
    assert gs.wait_state(jid, "FAILED")["reason"] == f"parent {jid + 1000}: no such job"
    (gs.work / "stop").write_text("")


def test_gyield_and_gresume_several_times_in_one_job(make_gs):
    gs = make_gs(config())
    s = script(
        gs,
        "twice.sh",
        """
gsub --hold -N kid -t 1m --wrap true > "$GS_SUBMIT_DIR/kid" || exit 3
for round in 1 2 3; do
    gyield || exit 3
    gresume || exit 4
    echo $round >> "$GS_SUBMIT_DIR/rounds"
done
""",
    )
    p = gs.gsub("-t", "1m", str(s))
    assert gs.wait_state(p, "COMPLETED", "FAILED")["state"] == "COMPLETED", gs.log()
    assert (gs.work / "rounds").read_text().split() == ["1", "2", "3"]
    assert meta_yielded(gs) == {}
    gs.run("gdel", (gs.work / "kid").read_text().strip(), check=True)
    assert gs.log().count(f"job {p} yields cores") == 3 and gs.log().count(f"job {p} resumed") == 3


WALLTIME_PARENT = """
gsub -N kid -n 2 -t 1m --wrap 'sleep 8' > "$GS_SUBMIT_DIR/kid" || exit 3
gwait {flags} || exit 4
"""


def test_a_parent_lending_all_its_cores_is_not_charged_walltime_for_that_time(make_gs):
    gs = make_gs(config())
    s = script(gs, "p.sh", WALLTIME_PARENT.format(flags="--yield"))
    p = gs.gsub("-n", "2", "-t", "6s", str(s))  # 6 s of walltime; its child runs 8 s on its cores
    kid = int(wait_for(lambda: (gs.work / "kid").exists() and (gs.work / "kid").read_text().strip(), 15, "the kid"))
    assert gs.wait_state(kid, "COMPLETED", "CANCELLED", "FAILED", timeout=30)["state"] == "COMPLETED", gs.log()
    j = gs.wait_state(p, "COMPLETED", "TIMEOUT", "FAILED", timeout=30)
    assert j["state"] == "COMPLETED", gs.log()
    assert j["elapsed"] > 8.0  # it ran past its 6 s: the time it lent its cores was not counted
    assert f"job {p} resumed on its cores" in gs.log()


def test_a_parent_that_keeps_its_cores_is_killed_at_its_walltime(make_gs):
    gs = make_gs(config())
    s = script(gs, "p.sh", WALLTIME_PARENT.format(flags="").replace("-n 2", "-n 1"))
    p = gs.gsub("-n", "1", "-t", "6s", str(s))  # waits without yielding: its core stays its own
    kid = int(wait_for(lambda: (gs.work / "kid").exists() and (gs.work / "kid").read_text().strip(), 15, "the kid"))
    gs.wait_state(kid, "RUNNING")  # on the other core
    j = gs.wait_state(p, "COMPLETED", "TIMEOUT", "FAILED", timeout=30)
    assert j["state"] == "TIMEOUT", gs.log()
    assert j["elapsed"] < 8.0
    gs.wait_state(kid, "CANCELLED", timeout=15)  # its subtree goes with it
    assert f"job {p} TIMEOUT: cancelling its subtree (1 jobs)" in gs.log()
