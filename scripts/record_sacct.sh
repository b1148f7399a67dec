#!/bin/bash
# Record tests/sim/data/slurm-localhost.sacct from a real Slurm with accounting.
#
# Starts, in a private run directory, a throwaway single-node Slurm with
# accounting: MariaDB (own datadir, TCP on 127.0.0.1 only), munged (own key
# and socket), slurmdbd (Slurm 22.05 has no option to keep it off other
# addresses; it answers munge-authenticated requests only), slurmctld and
# slurmd (on 127.0.0.1 only); registers the cluster; runs a small workload
# that ends in every state gsim's sacct reader handles; writes
#   sacct --parsable2 --allusers --starttime ... --format=JobID,Submit,Start,End,
#         Elapsed,Timelimit,AllocCPUS,ReqCPUS,ReqMem,User,State,AllocTRES
# to the output file; then stops everything it started and removes the run
# directory.  Needs root and Debian's packages (installed with apt if missing):
# slurm-wlm, slurmdbd, munge, mariadb-server.  Takes about two minutes (the
# TIMEOUT job alone waits for Slurm's one-minute minimum time limit).
#
# Environment overrides:
#   GS_SACCT_RUN=/tmp/gs-sacct-slurm   run directory (wiped at start and end)
#   GS_SACCT_PORT=6827                 slurmctld port; slurmd, slurmdbd and
#                                      MariaDB use the next three
#   GS_SACCT_OUT=FILE                  output (default tests/sim/data/slurm-localhost.sacct)
#   GS_SACCT_KEEP=1                    keep the run directory (logs) after the daemons stop
#
# The workload (the job ids Slurm gave in the recorded file; the tests name them):
#   1  TIMEOUT        1 CPU, --time=1, sleeps past its limit
#   2  COMPLETED      1 CPU, --time=2, sleep 2
#   3  COMPLETED      4 CPUs, --time=5, sleep 4
#   4  COMPLETED      6 CPUs, --time=00:10:00, sleep 3
#   5  COMPLETED      2 CPUs, --time=3, two srun steps (steps 5.0 and 5.1)
#   6  FAILED         1 CPU, exits 3
#   7  OUT_OF_MEMORY  1 CPU, --mem=64M, writes 512 MiB (task/cgroup ConstrainRAMSpace)
#   8  COMPLETED      array --array=1-3, 1 CPU each: tasks 8_1, 8_2, 8_3
#   9  CANCELLED      cancelled while running (scancel)
#   10 CANCELLED      held, cancelled while pending: never eligible, so sacct's
#                     --starttime selection leaves it out of the file
#   11 COMPLETED      1 CPU, run as user nobody
#   14 CANCELLED      16 CPUs, cancelled while it waited for the TIMEOUT job's
#                     CPU: never started (Slurm records its Start equal to its
#                     End, with an empty AllocTRES); 12 and 13 went to the
#                     array's tasks
# sacct lists 13 jobs (the array's 3 tasks each a line), and their steps.
set -u
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/.." && pwd)"
R="${GS_SACCT_RUN:-/tmp/gs-sacct-slurm}"
PORT="${GS_SACCT_PORT:-6827}"
OUT="${GS_SACCT_OUT:-$REPO/tests/sim/data/slurm-localhost.sacct}"
CTLD_PORT=$PORT
SLURMD_PORT=$((PORT + 1))
DBD_PORT=$((PORT + 2))
DB_PORT=$((PORT + 3))
NODE=gsrec          # also names slurmd's cgroups (slurm_gsrec): apart from any other slurmd here
CLUSTER=gsrecord
FORMAT=JobID,Submit,Start,End,Elapsed,Timelimit,AllocCPUS,ReqCPUS,ReqMem,User,State,AllocTRES
T_START=$(date +%s)

die() { echo "record_sacct.sh: $*" >&2; exit 1; }
say() { echo "record_sacct.sh: $*" >&2; }

[ "$(id -u)" = 0 ] || die "run as root (slurmd, slurmdbd and the jobs' cgroups need it)"
case "$R" in /tmp/?*|/var/tmp/?*) ;; *) die "GS_SACCT_RUN must be under /tmp or /var/tmp";; esac
export PATH="$PATH:/usr/sbin:/usr/bin"

need=""
for b in munged mungekey slurmctld slurmd slurmdbd sacct sacctmgr sbatch mariadbd mariadb-install-db; do
    command -v "$b" >/dev/null 2>&1 || need=1
done
if [ -n "$need" ]; then
    command -v apt-get >/dev/null || die "missing Slurm, munge or MariaDB and no apt-get"
    say "installing slurm-wlm slurmdbd munge mariadb-server (Debian packages)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        slurm-wlm slurmdbd munge mariadb-server mariadb-client >/dev/null \
        || die "apt-get install failed (run apt-get update?)"
fi

for p in "$CTLD_PORT" "$SLURMD_PORT" "$DBD_PORT" "$DB_PORT"; do
    if ss -Hltn "sport = :$p" 2>/dev/null | grep -q .; then
        die "port $p already in use (set GS_SACCT_PORT)"
    fi
done

# stop_pid PIDFILE COMM : TERM the pid in PIDFILE if its /proc comm is COMM; KILL after 20 s.
stop_pid() {
    local pf="$1" comm="$2" pid i
    [ -s "$pf" ] || return 0
    pid="$(cat "$pf")"
    if [ -n "$pid" ] && [ -r "/proc/$pid/comm" ] && [ "$(cat "/proc/$pid/comm")" = "$comm" ]; then
        kill -TERM "$pid" 2>/dev/null
        for i in $(seq 200); do
            [ -d "/proc/$pid" ] || break
            sleep 0.1
        done
        [ -d "/proc/$pid" ] && { say "$comm ($pid) did not exit, sending KILL"; kill -KILL "$pid" 2>/dev/null; }
    fi
    rm -f "$pf"
}

cleanup() {
    local d
    if [ -s "$R/slurmctld.pid" ] && [ -r "$R/slurm.conf" ]; then
        SLURM_CONF="$R/slurm.conf" timeout 10 scancel -u root >/dev/null 2>&1
        SLURM_CONF="$R/slurm.conf" timeout 10 scancel -u nobody >/dev/null 2>&1
        for i in $(seq 40); do                 # up to 10 s for the jobs to go
            [ -z "$(SLURM_CONF="$R/slurm.conf" timeout 5 squeue -h -o %i 2>/dev/null)" ] && break
            sleep 0.25
        done
    fi
    stop_pid "$R/slurmd.pid" slurmd
    stop_pid "$R/slurmctld.pid" slurmctld
    stop_pid "$R/slurmdbd.pid" slurmdbd
    stop_pid "$R/db/mariadbd.pid" mariadbd
    stop_pid "$R/munge/munged.pid" munged
    # slurmd's cgroups for this node, deepest first (empty once the jobs are gone)
    for d in /sys/fs/cgroup/*/slurm_"$NODE"; do
        [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
    done
    if [ -n "${GS_SACCT_KEEP:-}" ] && [ "${1:-}" != start ]; then
        say "run directory kept: $R"
    else
        rm -rf "$R"
    fi
}
trap 'cleanup end' EXIT
trap 'exit 130' INT TERM

# From scratch (a previous run interrupted hard may have left daemons behind).
cleanup start
mkdir -p "$R"/{munge,state,spool,log,work,db} || die "cannot create $R"
chmod 755 "$R" "$R/munge" "$R/work"

# --- MariaDB: own datadir, TCP on loopback, no system option files
DBPASS="$(head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')"
mariadb-install-db --no-defaults --datadir="$R/db/data" --user=root \
    --auth-root-authentication-method=socket --skip-test-db >"$R/log/mariadb-install.log" 2>&1 \
    || die "mariadb-install-db failed, see $R/log/mariadb-install.log"
mariadbd --no-defaults --user=root --datadir="$R/db/data" --socket="$R/db/mysqld.sock" \
    --port="$DB_PORT" --bind-address=127.0.0.1 --skip-name-resolve \
    --pid-file="$R/db/mariadbd.pid" --log-error="$R/log/mariadbd.log" \
    --innodb-buffer-pool-size=128M --innodb-log-file-size=64M \
    --innodb-lock-wait-timeout=900 </dev/null >/dev/null 2>&1 &
ok=""
for i in $(seq 150); do                        # up to 30 s
    mariadb-admin --no-defaults --socket="$R/db/mysqld.sock" ping >/dev/null 2>&1 && { ok=1; break; }
    sleep 0.2
done
[ -n "$ok" ] || die "MariaDB did not start: $(tail -3 "$R/log/mariadbd.log" 2>/dev/null)"
mariadb --no-defaults --socket="$R/db/mysqld.sock" -u root <<EOF || die "cannot create the slurm database user"
CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$DBPASS';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
EOF

# --- munge: own key and socket
mungekey -c -f -k "$R/munge/munge.key" 2>/dev/null \
    || dd if=/dev/urandom of="$R/munge/munge.key" bs=1 count=1024 2>/dev/null
chmod 600 "$R/munge/munge.key"
MSOCK="$R/munge/munge.socket.2"
munged --key-file="$R/munge/munge.key" --socket="$MSOCK" --pid-file="$R/munge/munged.pid" \
    --log-file="$R/log/munged.log" --seed-file="$R/munge/munged.seed" || die "munged failed"
munge -S "$MSOCK" -n | unmunge -S "$MSOCK" >/dev/null || die "munge round trip failed"

# --- configuration
cat >"$R/slurmdbd.conf" <<EOF
AuthType=auth/munge
AuthInfo=socket=$MSOCK
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=root
PidFile=$R/slurmdbd.pid
LogFile=$R/log/slurmdbd.log
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=$DBPASS
StorageLoc=slurm_acct_db
EOF
chmod 600 "$R/slurmdbd.conf"

cat >"$R/slurm.conf" <<EOF
ClusterName=$CLUSTER
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$MSOCK
CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
StateSaveLocation=$R/state
SlurmdSpoolDir=$R/spool
SlurmctldPidFile=$R/slurmctld.pid
SlurmdPidFile=$R/slurmd.pid
SlurmctldLogFile=$R/log/slurmctld.log
SlurmdLogFile=$R/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
ProctrackType=proctrack/cgroup
TaskPlugin=task/cgroup
SwitchType=switch/none
MpiDefault=none
ReturnToService=2
KillWait=5
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1,bf_resolution=1
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=100
PriorityType=priority/basic
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$DBD_PORT
AccountingStoragePass=$MSOCK
JobAcctGatherType=jobacct_gather/cgroup
JobAcctGatherFrequency=task=1
JobCompType=jobcomp/none
SlurmdParameters=config_overrides
NodeName=$NODE NodeHostname=localhost NodeAddr=127.0.0.1 Port=$SLURMD_PORT CPUs=16 Sockets=1 CoresPerSocket=16 ThreadsPerCore=1 RealMemory=16000 State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
cat >"$R/cgroup.conf" <<EOF
CgroupPlugin=cgroup/v1
CgroupMountpoint=/sys/fs/cgroup
CgroupAutomount=yes
ConstrainCores=no
ConstrainRAMSpace=yes
ConstrainSwapSpace=yes
AllowedSwapSpace=0
EOF
export SLURM_CONF="$R/slurm.conf"
unset SLURM_CLUSTERS SLURM_JOB_ID SBATCH_ACCOUNT SLURM_ACCOUNT

# --- daemons: slurmdbd (reads slurmdbd.conf beside $SLURM_CONF), the cluster, slurmctld, slurmd
slurmdbd 2>"$R/log/slurmdbd.err" \
    || die "slurmdbd failed: $(tail -3 "$R/log/slurmdbd.log" "$R/log/slurmdbd.err" 2>/dev/null)"
ok=""
end=$((SECONDS + 30))
while [ $SECONDS -lt $end ]; do
    timeout 5 sacctmgr -n list cluster >/dev/null 2>"$R/log/sacctmgr.err" && { ok=1; break; }
    sleep 0.2
done
[ -n "$ok" ] || die "slurmdbd does not answer: $(tail -3 "$R/log/sacctmgr.err" "$R/log/slurmdbd.log" 2>/dev/null)"
sacctmgr -i add cluster "$CLUSTER" >/dev/null || die "sacctmgr add cluster failed"
sacctmgr -i add account gsrec Description=recording Organization=gridsched >/dev/null \
    || die "sacctmgr add account failed"
sacctmgr -i add user root,nobody DefaultAccount=gsrec >/dev/null || die "sacctmgr add user failed"

slurmctld -f "$SLURM_CONF" || die "slurmctld failed: $(tail -3 "$R/log/slurmctld.log")"
ok=""
for i in $(seq 150); do
    timeout 5 scontrol ping 2>/dev/null | grep -q UP && { ok=1; break; }
    sleep 0.2
done
[ -n "$ok" ] || die "slurmctld does not answer: $(tail -3 "$R/log/slurmctld.log")"
slurmd -f "$SLURM_CONF" -N "$NODE" || die "slurmd failed: $(tail -3 "$R/log/slurmd.log")"
state=""
for i in $(seq 120); do                        # up to 30 s
    state="$(timeout 5 sinfo -h -n "$NODE" -o %T 2>/dev/null)"
    [ "$state" = idle ] && break
    sleep 0.25
done
[ "$state" = idle ] || die "node not idle after 30 s (state '$state'): $(tail -3 "$R/log/slurmd.log")"
say "slurm with accounting up after $(($(date +%s) - T_START)) s"

# --- the workload
W="$R/work"
T0=$(date +%s)
sub() { sbatch --parsable --chdir="$W" --output=/dev/null --error=/dev/null "$@" | cut -d';' -f1; }
# wait_state JOB STATE SECONDS : until squeue shows JOB in STATE (R, PD, ...)
wait_state() {
    local i
    for i in $(seq $(($3 * 4))); do
        [ "$(squeue -h -j "$1" -o %t 2>/dev/null)" = "$2" ] && return 0
        sleep 0.25
    done
    die "job $1 not in state $2 after $3 s"
}

j_timeout=$(sub -n1 --time=1 --job-name=timeout --wrap 'sleep 300')
j_small=$(sub -n1 --time=2 --job-name=small --wrap 'sleep 2')
j_four=$(sub -n4 --time=5 --job-name=four --wrap 'sleep 4')
j_six=$(sub -n6 --time=00:10:00 --job-name=six --wrap 'sleep 3')
j_steps=$(sub -n2 --time=3 --job-name=steps --wrap 'srun -n2 sleep 1; srun -n1 true')
j_failed=$(sub -n1 --time=2 --job-name=failed --wrap 'sleep 1; exit 3')
j_oom=$(sub -n1 --time=2 --mem=64M --job-name=oom \
    --wrap "python3 -c 'x = b\"x\" * (512 << 20); print(len(x))'")
j_array=$(sub -n1 --time=2 --array=1-3 --job-name=array --wrap 'sleep 2')
j_cancel=$(sub -n1 --time=5 --job-name=cancel-running --wrap 'sleep 120')
j_held=$(sub -n1 --time=5 --hold --job-name=cancel-pending --wrap 'sleep 1')
j_nobody=$(sub -n1 --time=2 --uid=nobody --chdir=/tmp --job-name=other-user --wrap 'sleep 1')
say "submitted: timeout=$j_timeout small=$j_small four=$j_four six=$j_six steps=$j_steps" \
    "failed=$j_failed oom=$j_oom array=$j_array cancel=$j_cancel held=$j_held nobody=$j_nobody"

wait_state "$j_cancel" R 60
sleep 3                                         # let it run a little before it is cancelled
scancel "$j_cancel"
wait_state "$j_held" PD 10
scancel "$j_held"
# A job cancelled while it waited for CPUs: all 16, once only the TIMEOUT job is left.
for i in $(seq 240); do                        # up to 60 s
    [ "$(squeue -h -o %i)" = "$j_timeout" ] && break
    sleep 0.25
done
j_big=$(sub -n16 --time=2 --job-name=cancel-waiting --wrap 'sleep 1')
wait_state "$j_big" PD 10
sleep 1
scancel "$j_big"

# Until every job has ended (the TIMEOUT one last: one minute plus the limit check).
for i in $(seq 600); do                        # up to 150 s
    [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break
    sleep 0.25
done
[ -z "$(squeue -h -o %i)" ] || die "jobs still queued: $(squeue -h)"

# Until the accounting records are in slurmdbd: 13 jobs (12 submits, the array
# of 3, less the held one), none in a state that is not final.
START="$(date -d "@$((T0 - 60))" +%Y-%m-%dT%H:%M:%S)"
acct() { sacct --parsable2 --allusers --starttime "$START" --format="$FORMAT"; }
ok=""
for i in $(seq 120); do                        # up to 30 s
    rows="$(acct 2>/dev/null | awk -F'|' 'NR > 1 && $1 !~ /\./')"
    n="$(printf '%s\n' "$rows" | grep -c .)"
    if [ "$n" = 13 ] && ! printf '%s\n' "$rows" | grep -qE '\|(PENDING|RUNNING|REQUEUED)\|'; then
        ok=1
        break
    fi
    sleep 0.25
done
[ -n "$ok" ] || die "accounting has $n jobs, not 13 ended: $rows"
mkdir -p "$(dirname "$OUT")"
acct >"$OUT.tmp" || die "sacct failed"
mv "$OUT.tmp" "$OUT"
grep -q 'OUT_OF_MEMORY' "$OUT" || say "note: no OUT_OF_MEMORY job: memory is not enforced here"
say "cancelled while waiting: $j_big"
say "wrote $OUT ($(grep -c . "$OUT") lines); workload $(($(date +%s) - T0)) s," \
    "total $(($(date +%s) - T_START)) s"
