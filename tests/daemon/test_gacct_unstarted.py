"""gacct folds an array's tasks that never started into one record, as sacct shows an array's pending part:
the tasks the daemon had made ahead of their start (a machine's worth at a time) and cancelled with the rest
are in the record, not a line each; a task cancelled on its own, at another time, keeps its line."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace

from click.testing import CliRunner

from gridsched.cli import gacct
from gridsched.daemon import actions, contexts
from gridsched.daemon.loop import Daemon
from tests.daemon.test_array_rest import CONFIG, CORES, end_running, request, rows, submit


def listed(d: Daemon, monkeypatch, *args: str) -> list[str]:
    d.settle(time.time(), force=True)
    monkeypatch.setenv("GRIDSCHED_SPOOL", str(d.spool.root))
    monkeypatch.setenv("GRIDSCHED_CONFIG", str(d.config_path))
    r = CliRunner().invoke(gacct.cli, list(args), catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return [ln.split("|")[0] if "|" in ln else ln.split()[0] for ln in r.output.splitlines()]


def made_unstarted(d: Daemon, aid: int) -> list[int]:
    return sorted(r["spec"]["array_index"] for r in rows(d, aid) if r["start_time"] is None)


def test_tasks_made_ahead_and_cancelled_with_the_array_are_in_its_record(stub_daemon, monkeypatch):
    d = stub_daemon(CONFIG)
    t = time.time()
    aid = submit(d, t, array="0-49", ncpus=CORES)  # one task at a time: the next one made ahead, waiting
    d.turn(t, scan=True)
    assert made_unstarted(d, aid) == [1], "task 1 made ahead of its start"
    assert end_running(d, t + 1) == 1
    d.turn(t + 1, scan=True)
    assert made_unstarted(d, aid) == [2], "task 1 runs, task 2 made ahead"
    request(d, "cancel", jobs=[], arrays=[aid])
    d.turn(t + 2, scan=True)
    end_running(d, t + 3)
    d.turn(t + 3, scan=True)
    assert listed(d, monkeypatch, "-n") == [f"{aid}_0", f"{aid}_[2-49]", f"{aid}_1"]
    (rec,) = (j for j in json.loads(CliRunner().invoke(gacct.cli, ["--json"]).output)["jobs"] if j.get("tasks"))
    assert (rec["jobid"], rec["tasks"], rec["state"]) == (f"{aid}_[2-49]", 48, "CANCELLED")
    assert listed(d, monkeypatch, "-n", "-j", f"{aid}_2") == [f"{aid}_[2-49]"]


def test_a_task_cancelled_on_its_own_earlier_keeps_its_line(stub_daemon, monkeypatch):
    d = stub_daemon(CONFIG)
    t = time.time()
    clock = {"now": t}  # the wall clock requests are served at (a cancellation's time)
    for module in (contexts, actions):
        monkeypatch.setattr(module, "time", SimpleNamespace(time=lambda: clock["now"]))
    aid = submit(d, t, array="0-9", ncpus=CORES)
    d.turn(t, scan=True)
    assert made_unstarted(d, aid) == [1]
    request(d, "cancel", jobs=[], tasks=[[aid, "1"]])  # on its own, while it waits
    clock["now"] = t + 2
    d.turn(t + 2, scan=True)
    assert made_unstarted(d, aid) == [1, 2, 3], "task 1 cancelled, tasks 2 and 3 made ahead"
    request(d, "cancel", jobs=[], arrays=[aid])  # the rest, 58 s later
    clock["now"] = t + 60
    d.turn(t + 60, scan=True)
    end_running(d, t + 61)
    d.turn(t + 61, scan=True)
    assert listed(d, monkeypatch, "-n", "-P", "-o", "jobid") == [f"{aid}_0", f"{aid}_[2-9]", f"{aid}_1"]
