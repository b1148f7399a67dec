"""grun jobs in the daemon, in process (stub executor, driven clock): what may be changed of a grun job that
waits.  grun itself (its terminal, streams, signals and walltime) runs against a real daemon in test_grun.py."""

from __future__ import annotations

import re

from tests.daemon.driven import Driven
from tests.daemon.test_grun import FULL


def test_a_pending_grun_job_cannot_be_made_rerunnable(stub_daemon):
    """galter refuses a rerunning checkpoint mode for a waiting grun job, and so does the daemon for the same
    request written by hand; it takes suspend. The daemon refuses a requeue request for it too."""
    dr = Driven(stub_daemon(FULL))  # two cores
    blocker = dr.submit(None, ncpus=2)
    assert dr.running(blocker)
    jid = dr.submit(0.0, interactive=True)  # a grun job, as grun writes it: it waits behind the blocker
    assert dr.state(jid) == "PENDING"
    r = dr.command("galter", str(jid), "--checkpoint", "requeue", check=False)
    assert (r.exit_code, r.stderr) == (
        1,
        f"galter: error: job {jid}: --checkpoint requeue: a grun job cannot be rerun "
        "(the rerun could not reconnect to grun)\n",
    )
    why = {
        "alter-signal": dr.refusal(dr.request("alter", jobs=[jid], changes={"checkpoint": "signal"})),
        "requeue-grun": dr.refusal(dr.request("requeue", jobs=[jid])),
    }
    assert "--checkpoint signal: a grun job cannot be rerun" in (why["alter-signal"] or ""), why
    assert "a grun job cannot be requeued" in (why["requeue-grun"] or ""), why
    assert dr.command("galter", str(jid), "--checkpoint", "suspend").exit_code == 0
    shown = dr.command("gstat", "-f", str(jid), turn=False).stdout
    assert re.search(r"^\s*checkpoint\s*[:=]?\s*suspend\s*$", shown, re.M), shown
    dr.finish(blocker)
    dr.run_until(lambda: dr.state(jid) == "COMPLETED", 10)
    assert dr.job(jid)["restarts"] == 0
