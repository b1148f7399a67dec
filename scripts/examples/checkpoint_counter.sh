#!/bin/sh
# A checkpointable job: N units of work that survive preemption.
#
#   gsub --checkpoint signal -t 10m scripts/examples/checkpoint_counter.sh 100
#
# Each unit appends "unit K" to $LEDGER (default units.log in the working
# directory).  When gridsched asks the job to checkpoint (SIGUSR1 by default),
# it finishes the unit in hand, saves how many units are done in
# $GS_CHECKPOINT_DIR and exits with status 75: "saved, restart me".  When it is
# started again it reads that file and goes on from there, so every unit is
# done exactly once.
#
# The request may come more than once (a daemon restarted in the middle of a
# preemption asks again), and it goes to the whole job: to every command the
# script runs, too.  So the handler is set before the first command, the
# state is read with the shell's own `read`, and the signal is ignored while
# the state is saved (an ignored signal stays ignored in `mv`; a handled one
# would kill it half-way).  Status 75 is given only once the state is saved.
N=${1:-20}
UNIT=${UNIT_SECONDS:-0.2}
LEDGER=${LEDGER:-units.log}
STATE="$GS_CHECKPOINT_DIR/progress"

stop=0
trap 'stop=1' USR1
i=0
[ -f "$STATE" ] && read -r i < "$STATE"
i=${i:-0}
echo "start at unit $i (restart $GS_RESTART_COUNT)"

while [ "$i" -lt "$N" ]; do
    if [ "$stop" = 1 ]; then
        trap '' USR1
        { echo "$i" > "$STATE.tmp" && mv "$STATE.tmp" "$STATE"; } || exit 1
        echo "checkpointed at unit $i"
        exit 75
    fi
    sleep "$UNIT"
    i=$((i + 1))
    echo "unit $i" >> "$LEDGER"
done
rm -f "$STATE"
echo "done: $N units"
