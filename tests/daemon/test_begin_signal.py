"""Begin times and signals before the walltime against the real daemon: gsub --begin (and #PBS -a) keeps a
job waiting with the reason BeginTime; gsub --signal [B:]SIG@SECONDS is sent once, SECONDS before the
walltime, to every process of the job or (B:) to its batch shell alone, and a restart of the daemon
neither loses it nor sends it again.

Begin times and estimates shorter than the walltime are tested in process, on a driven clock, in
test_hold_begin_driven.py."""

from __future__ import annotations

from tests.conftest import wait_for

# The script writes when it started; its USR1 trap writes when the signal came and ends the job.
TRAP_USR1 = """#!/bin/sh
date +%s.%N > started
trap 'date +%s.%N > got; exit 0' USR1
i=0
while [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
"""

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

# Each USR1 adds a line; the job runs into its walltime.
COUNT_USR1 = """#!/bin/sh
trap 'echo got >> got' USR1
i=0
while [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
"""


def test_signal_comes_seconds_before_the_walltime(gs):
    script = gs.work / "s.sh"
    script.write_text(TRAP_USR1)
    jid = gs.gsub("-t", "6s", "--signal", "USR1@4", str(script))
    gs.wait_state(jid, "COMPLETED", timeout=30)  # the trap ended it before the walltime
    started = float((gs.work / "started").read_text())
    got = float((gs.work / "got").read_text())
    assert 1.0 <= got - started <= 3.5  # 6 - 4 seconds after the start (less the script's own start)


def test_sbatch_signal_directive(gs):
    script = gs.work / "s.sh"
    script.write_text(TRAP_USR1.replace("#!/bin/sh\n", "#!/bin/sh\n#SBATCH --time=1 --signal=USR1@57\n"))
    jid = gs.gsub(str(script))
    gs.wait_state(jid, "COMPLETED", timeout=30)
    got = float((gs.work / "got").read_text()) - float((gs.work / "started").read_text())
    assert 2.0 <= got <= 4.5  # 60 - 57 seconds after the start (less the script's own start)


def test_b_signals_the_batch_shell_alone(gs):
    script = gs.work / "s.sh"
    script.write_text(SHELL_AND_CHILD)
    shell_only = gs.gsub("-t", "5s", "--signal", "B:USR1@3", str(script))
    everyone = gs.gsub("-t", "5s", "--signal", "USR1@3", str(script))
    gs.wait_state(shell_only, "COMPLETED", timeout=30)
    gs.wait_state(everyone, "COMPLETED", timeout=30)
    assert (gs.work / f"shell-{shell_only}").exists() and not (gs.work / f"child-{shell_only}").exists()
    assert (gs.work / f"shell-{everyone}").exists() and (gs.work / f"child-{everyone}").exists()


def test_a_restart_neither_loses_nor_repeats_the_signal(gs):
    script = gs.work / "s.sh"
    script.write_text(COUNT_USR1)
    jid = gs.gsub("-t", "8s", "--signal", "USR1@5", str(script))
    gs.wait_state(jid, "RUNNING")
    gs.kill9()  # before the signal is due (3 seconds after the start)
    gs.start()
    wait_for(lambda: (gs.work / "got").exists(), 15, "the signal after the restart")
    gs.kill9()  # after it was sent
    gs.start()
    gs.wait_state(jid, "TIMEOUT", timeout=30)
    assert (gs.work / "got").read_text() == "got\n"


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

WAIT_GO = "i=0; while [ ! -e go ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done"
