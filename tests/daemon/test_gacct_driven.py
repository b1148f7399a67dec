"""gacct on the job table of the daemon run in process (stub executor, driven clock): array tasks as ID_N.
What jobs used (MaxRSS, CPU time, OUT_OF_MEMORY) is measured with real jobs in test_gacct_usage.py."""

from __future__ import annotations

import json

from tests.conftest import DEFAULT_CONFIG
from tests.daemon.driven import Driven


def acct(dr: Driven, *args: str) -> dict[str, dict]:
    r = dr.command("gacct", "--json", *args, turn=False)
    return {j["jobid"]: j for j in json.loads(r.stdout)["jobs"]}


def test_array_tasks_listed_as_id_n(stub_daemon):
    dr = Driven(stub_daemon(DEFAULT_CONFIG))
    dr.default_work = None  # the tasks run until the test ends them
    arr = dr.gsub("-t", "1m", "-a", "1-3", "-N", "sweep", "--wrap", "exit $((GS_ARRAY_TASK_ID == 2))", work=None)
    other = dr.gsub("-t", "1m", "--wrap", "true")
    dr.run_until(lambda: all(dr.d.table.jobs.get(j) is not None for j in range(arr, arr + 3)), 10)
    for k, jid in enumerate(range(arr, arr + 3), start=1):
        assert dr.running(jid) and dr.d.table.jobs[jid].array_index == k
        dr.finish(jid, exit_code=1 if k == 2 else 0)  # task 2 exits 1, as its script does
    dr.run_until(lambda: dr.state(other) == "COMPLETED", 10)
    a = acct(dr, "-j", str(arr))
    assert sorted(a) == [f"{arr}_1", f"{arr}_2", f"{arr}_3"]
    assert a[f"{arr}_2"]["state"] == "FAILED" and a[f"{arr}_1"]["state"] == "COMPLETED"
    assert a[f"{arr}_3"]["array_id"] == arr and a[f"{arr}_3"]["array_index"] == 3
    assert list(acct(dr, "-j", f"{arr}_3")) == [f"{arr}_3"]
    r = dr.command("gacct", "-j", f"{arr}_[1-2],{other}", "-o", "jobid,jobname,state,exitcode", "-p", "-n", turn=False)
    assert r.stdout.splitlines() == [
        f"{arr}_1|sweep|COMPLETED|0:0|",
        f"{arr}_2|sweep|FAILED|1:0|",
        f"{other}|wrap|COMPLETED|0:0|",
    ]
    r = dr.command("gacct", "-j", str(arr), turn=False)  # the table too
    assert [ln.split()[0] for ln in r.stdout.splitlines()[1:]] == [f"{arr}_1", f"{arr}_2", f"{arr}_3"]
