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
N=${1:-20}
UNIT=${UNIT_SECONDS:-0.2}
LEDGER=${LEDGER:-units.log}
STATE="$GS_CHECKPOINT_DIR/progress"

i=0
[ -f "$STATE" ] && i=$(cat "$STATE")
echo "start at unit $i (restart $GS_RESTART_COUNT)"

stop=0
trap 'stop=1' USR1
while [ "$i" -lt "$N" ]; do
    if [ "$stop" = 1 ]; then
        echo "$i" > "$STATE.tmp" && mv "$STATE.tmp" "$STATE"
        echo "checkpointed at unit $i"
        exit 75
    fi
    sleep "$UNIT"
    i=$((i + 1))
    echo "unit $i" >> "$LEDGER"
done
rm -f "$STATE"
echo "done: $N units"
