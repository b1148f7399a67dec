"""Signals before the walltime against the real daemon, with real jobs: gsub --signal [B:]SIG@SECONDS reaches
every process of the job or (B:) its batch shell alone.

When the signal is sent (SECONDS before the walltime, #SBATCH --signal too, once, across a restart of the
daemon) is tested in process, on a driven clock, in test_signal_driven.py; begin times and estimates shorter
than the walltime in test_hold_begin_driven.py."""

from __future__ import annotations

# A child of the batch shell that traps USR1 too; the shell ends once it got the signal and the child had
# a second to get it as well.
SHELL_AND_CHILD = """#!/bin/sh
sh -c 'trap "echo child > child-$GS_JOBID; exit 0" USR1; i=0; while [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done' &
trap 'echo shell > shell-$GS_JOBID' USR1
i=0
while [ ! -e shell-$GS_JOBID ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
i=0
while [ ! -e child-$GS_JOBID ] && [ $i -lt 10 ]; do sleep 0.1; i=$((i+1)); done
kill %1 2>/dev/null
exit 0
"""


def test_b_signals_the_batch_shell_alone(gs):
    script = gs.work / "s.sh"
    script.write_text(SHELL_AND_CHILD)
    shell_only = gs.gsub("-t", "5s", "--signal", "B:USR1@3", str(script))
    everyone = gs.gsub("-t", "5s", "--signal", "USR1@3", str(script))
    gs.wait_state(shell_only, "COMPLETED", timeout=30)
    gs.wait_state(everyone, "COMPLETED", timeout=30)
    assert (gs.work / f"shell-{shell_only}").exists() and not (gs.work / f"child-{shell_only}").exists()
    assert (gs.work / f"shell-{everyone}").exists() and (gs.work / f"child-{everyone}").exists()


EASY_TWO_CORES = """
[scheduler]
policy = "easy"
[jobs]
kill_grace = "1s"
[machine]
cores = 2
[daemon]
autostart = false
"""
