"""gacct --swf on the history of a real daemon, read back by gsim's trace reader."""

from __future__ import annotations

from gridsched.sim import swf


def test_two_jobs_export_as_swf(gs):
    a = gs.gsub("-n", "2", "-t", "1m", "--wrap", "sleep 0.3")
    b = gs.gsub("-n", "1", "-t", "2m", "--wrap", "exit 3")
    gs.wait_state(a, "COMPLETED")
    gs.wait_state(b, "FAILED")
    r = gs.run("gacct", "--swf", check=True)
    lines = [ln.split() for ln in r.stdout.splitlines() if not ln.startswith(";")]
    assert len(lines) == 2 and all(len(f) == 18 for f in lines)
    by_id = {int(f[0]): f for f in lines}
    assert by_id[a][10] == "1" and by_id[b][10] == "0"  # status: completed, failed
    assert (by_id[a][7], by_id[a][8]) == ("2", "60") and (by_id[b][7], by_id[b][8]) == ("1", "120")
    assert "; MaxProcs: 8" in r.stdout  # the daemon's 8 declared cores
    path = gs.root / "trace.swf"
    path.write_text(r.stdout)
    trace = swf.read(str(path), strict=True)
    assert trace.ids == sorted([a, b]) and sorted(trace.size) == [1, 2]

    r = gs.run("gacct", "-s", "failed", check=True)
    assert [ln.split()[0] for ln in r.stdout.splitlines()[1:]] == [str(b)]
