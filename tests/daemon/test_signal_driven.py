"""Signals before the walltime in the daemon, in process (stub executor, driven clock): gsub --signal
SIG@SECONDS (and #SBATCH --signal) is sent once, SECONDS before the walltime, and a daemon killed and started
again neither loses it nor sends it again.

Whom the signal reaches (every process of the job, or with B: its batch shell alone) is tested with real
jobs in test_begin_signal.py.
"""

from __future__ import annotations

import signal

import pytest

from tests.conftest import DEFAULT_CONFIG
from tests.daemon.driven import Driven


@pytest.fixture
def dr(stub_daemon) -> Driven:
    return Driven(stub_daemon(DEFAULT_CONFIG))


def usr1(dr: Driven, jid: int) -> int:
    """How many SIGUSR1 the daemon has sent job ``jid``."""
    return dr.d.ex.signals.count((jid, signal.SIGUSR1))


def first_signal_after_start(dr: Driven, jid: int) -> float:
    """Run until the job gets its SIGUSR1; the seconds from its start."""
    start = dr.job(jid)["start_time"]
    dr.run_until(lambda: usr1(dr, jid) > 0, 90, step=0.1)
    return dr.now - start


def test_signal_comes_seconds_before_the_walltime(dr):
    jid = dr.gsub("-t", "6s", "--signal", "USR1@4", "--wrap", "trap 'exit 0' USR1; sleep 30", work=None)
    assert dr.running(jid)
    assert 2.0 <= first_signal_after_start(dr, jid) <= 2.1  # 6 - 4 seconds after the start
    dr.finish(jid)  # its trap ends it before the walltime
    assert dr.state(jid) == "COMPLETED" and usr1(dr, jid) == 1


def test_sbatch_signal_directive(dr, tmp_path):
    script = tmp_path / "s.sh"
    script.write_text("#!/bin/sh\n#SBATCH --time=1 --signal=USR1@57\ntrap 'exit 0' USR1\nsleep 100\n")
    jid = dr.gsub(str(script), work=None)
    assert dr.job(jid)["walltime"] == 60
    assert 3.0 <= first_signal_after_start(dr, jid) <= 3.1  # 60 - 57 seconds after the start
    dr.finish(jid)
    assert dr.state(jid) == "COMPLETED"


def test_a_restart_neither_loses_nor_repeats_the_signal(dr, stub_daemon):
    jid = dr.gsub("-t", "8s", "--signal", "USR1@5", "--wrap", "trap 'echo got >> got' USR1; sleep 30", work=None)
    assert dr.running(jid)
    dr.run_to(1)
    dr.restart(stub_daemon, crash=True)  # before the signal is due (3 seconds after the start)
    assert 3.0 <= first_signal_after_start(dr, jid) <= 3.1
    dr.run_to(dr.now - dr.t0 + 0.5)
    dr.restart(stub_daemon, crash=True)  # after it was sent
    dr.run_until(lambda: dr.state(jid) == "TIMEOUT", 30)
    assert usr1(dr, jid) == 1
