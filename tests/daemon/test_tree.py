"""Parent-child job trees with a real daemon: jobs that call gsub, gwait --yield, gwait --children, gyield and
gresume from inside, and the parent pinned to its cores again after lending them.

What the daemon decides for trees (parents that fill the machine without yielding, the yield affinities, a
resume waiting for the task on the core, the walltime of a lending parent, subtrees cancelled or held when a
parent ends, refused parents) is tested in process (stub executor, driven clock) in test_tree_driven.py."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tests.conftest import BIN

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


AFFINITY = "python3 -c 'import os; print(sorted(os.sched_getaffinity(0)))'"
PARENT = f"""
{AFFINITY} > "$GS_SUBMIT_DIR/aff.before.$GS_JOBID"
while [ ! -e "$GS_SUBMIT_DIR/go" ]; do sleep 0.05; done
gsub -N child -t 1m --wrap 'sleep 0.5' >/dev/null || exit 3
gsub -N child -t 1m --wrap 'sleep 0.5' >/dev/null || exit 3
gwait {{flags}} || exit 4
{AFFINITY} > "$GS_SUBMIT_DIR/aff.after.$GS_JOBID"
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
        # back from gwait --yield, the parent is pinned to the cores it had
        assert (gs.work / f"aff.after.{p}").read_text() == (gs.work / f"aff.before.{p}").read_text()
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
