#!/bin/bash
# The checks of gridsched on a machine with real NVIDIA GPUs, in one run of a few minutes (as root, from the
# source tree): what nvidia-smi reports and what the daemon discovers from it; a job's CUDA_VISIBLE_DEVICES
# (its GPU's index, as Slurm gives it) and the GPUs the job can open (its own GPU's node opens, another
# job's is refused, /dev/nvidiactl and /dev/nvidia-uvm stay usable); two one-GPU jobs at once; and, where
# torch can be imported, a CUDA program that sees exactly its GPU.  Each check prints PASS or FAIL with what
# it saw; the exit status is the number of checks that failed (0: all passed).  Where no NVIDIA GPU answers,
# it says so and exits 77.
#
#   bash scripts/gpu_check.sh [--system USER] [OUTDIR]
#       OUTDIR: where the report and the jobs' files go (default a new directory under /tmp);
#       --system USER: the daemon in system mode (root) and the jobs submitted by USER, an existing
#       ordinary user, as on a shared machine (the source tree is copied where USER can read it).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
user=
if [ "${1:-}" = --system ]; then
    user=${2:?--system needs a user}
    id -u "$user" >/dev/null || exit 1
    shift 2
fi
out=${1:-$(mktemp -d /tmp/gpu-check.XXXXXX)}
mkdir -p "$out"
chmod 755 "$out"
work="$out/work"  # the jobs' script and files: USER's in system mode
mkdir -p "$work"
[ -n "$user" ] && chown "$user" "$work"
report="$out/report.txt"
: > "$report"
say() { echo "$*" | tee -a "$report"; }
failed=0
check() {  # check NAME CONDITION-EXIT-STATUS WHAT-WAS-SEEN
    if [ "$2" = 0 ]; then say "PASS $1: $3"; else say "FAIL $1: $3"; failed=$((failed + 1)); fi
}

py=${PYTHON:-}
if [ -z "$py" ]; then
    if [ -x "$root/.venv/bin/python" ]; then py="$root/.venv/bin/python"; else py=python3; fi
fi
if [ -n "$user" ]; then  # a copy of the package USER can read (the source tree may be under root's home)
    mkdir -p "$out/src" && cp -r "$root/gridsched" "$out/src/" && chmod -R a+rX "$out/src"
    export PYTHONPATH="$out/src${PYTHONPATH:+:$PYTHONPATH}"
else
    export PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}"
fi
say "gridsched GPU check, $(date -u +%FT%TZ), $(uname -srm), python $($py -c 'import sys; print(sys.version.split()[0])')"
if ! "$py" -c "import click, rich, psutil, tomli_w" 2>>"$report"; then
    say "FAIL: gridsched's dependencies cannot be imported by $py (set PYTHON, or carry a built .venv)"
    exit 1
fi
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >>"$report" 2>&1; then
    say "no NVIDIA GPU answers here (nvidia-smi is missing or fails): nothing checked"
    exit 77
fi
ngpu=$(nvidia-smi -L | grep -c '^GPU ')
nvidia-smi --query-gpu=index,uuid,name,memory.total,pci.bus_id --format=csv,noheader >>"$report"
say "nvidia-smi: $ngpu GPUs"

gsroot() { "$py" -m "gridsched.cli.$1" "${@:2}"; }  # the admin's commands
if [ -n "$user" ]; then  # USER's commands: USER's ids and groups, the environment kept
    gs() {
        "$py" -c 'import os, pwd, sys
p = pwd.getpwnam(sys.argv[1])
os.initgroups(p.pw_name, p.pw_gid); os.setgid(p.pw_gid); os.setuid(p.pw_uid)
os.environ.update(HOME=p.pw_dir, USER=p.pw_name, LOGNAME=p.pw_name)
os.execvp(sys.argv[2], sys.argv[2:])' "$user" "$py" -m "gridsched.cli.$1" "${@:2}"
    }
else
    gs() { gsroot "$@"; }
fi
spool="$out/spool"
cat >"$out/gridsched.toml" <<EOF
[daemon]
autostart = false
system = $([ -n "$user" ] && echo true || echo false)
[devices]
enforce = "auto"
EOF
export GRIDSCHED_SPOOL="$spool" GRIDSCHED_CONFIG="$out/gridsched.toml"
if [ -n "$user" ]; then
    say "system mode: the daemon as root, the jobs submitted by $user (uid $(id -u "$user"))"
    "$py" -m gridsched.cli.gschedd run --system --spool "$spool" --config "$out/gridsched.toml" >"$out/gschedd.out" 2>&1 &
else
    "$py" -m gridsched.cli.gschedd run >"$out/gschedd.out" 2>&1 &
fi
daemon=$!
trap 'gsroot gschedd stop >/dev/null 2>&1; sleep 1; kill $daemon 2>/dev/null' EXIT
for _ in $(seq 100); do [ -S "$spool/gschedd.sock" ] && break; sleep 0.1; done

info=$(gsroot gctl info 2>&1)
echo "$info" >>"$report"
found=$(echo "$info" | grep -ci 'nvidia-smi')
check "discovery" "$([ "$found" -gt 0 ] && echo 0 || echo 1)" "gctl info names nvidia-smi as the devices' source ($found lines)"
gsroot gctl topology >>"$report" 2>&1

# the job: what it is told, what nvidia-smi shows it, which device nodes it may open, and torch if present
cat >"$work/job.sh" <<'EOF'
#!/bin/bash
echo "CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-unset}"
echo "RUNAS=$(id -un)"
echo "SEEN=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')"
for n in /dev/nvidia[0-9]* /dev/nvidiactl /dev/nvidia-uvm; do
    [ -e "$n" ] || continue
    if exec 3<"$n" 2>/dev/null; then echo "OPEN $n ok"; exec 3<&-; else echo "OPEN $n refused"; fi
done
python3 - <<'PY' 2>/dev/null || echo "TORCH none"
import torch
n = torch.cuda.device_count()
print("TORCH", n, torch.cuda.get_device_name(0) if n else "")
x = torch.ones(1, device="cuda") * 2 if n else None
print("TORCH_RAN", float(x.item()) if x is not None else "no")
PY
sleep "${HOLD:-0}"
EOF
chmod +x "$work/job.sh"
wait_end() {  # wait_end ID: until the job has ended (at most 120 s)
    case "$1" in '' | *[!0-9]*) echo "NOT_SUBMITTED"; return;; esac
    for _ in $(seq 600); do
        st=$(gs gstat -a --json 2>/dev/null | "$py" -c "import json,sys; print(next((j['state'] for j in json.load(sys.stdin)['jobs'] if j['id']==$1), ''))")
        case "$st" in COMPLETED|FAILED|CANCELLED|TIMEOUT|OUT_OF_MEMORY) echo "$st"; return;; esac
        sleep 0.2
    done
    echo "UNFINISHED"
}

cd "$work" || exit 1
one=$(gs gsub -t 5 --gpus 1 -o "$work/one.out" -N one "$work/job.sh" | tail -1)
check "one-GPU job ends" "$([ "$(wait_end "$one")" = COMPLETED ] && echo 0 || echo 1)" "job $one"
text=$(cat "$work/one.out" 2>/dev/null)
echo "$text" >>"$report"
if [ -n "$user" ]; then
    ran=$(echo "$text" | sed -n 's/^RUNAS=//p')
    check "the job ran as $user" "$([ "$ran" = "$user" ] && echo 0 || echo 1)" "it ran as '$ran'"
fi
own=$(gs gstat -a --json | "$py" -c "import json,sys; print(next(j.get('devices','') for j in json.load(sys.stdin)['jobs'] if j['id']==$one))")
say "job $one held: $own"
idx=$(echo "$own" | sed -n 's/.*gpu:\([0-9]*\).*/\1/p')
cvd=$(echo "$text" | sed -n 's/^CUDA_VISIBLE_DEVICES=//p')
check "CUDA_VISIBLE_DEVICES is its GPU's index" "$([ -n "$idx" ] && [ "$cvd" = "$idx" ] && echo 0 || echo 1)" \
    "'$cvd', the job holds gpu:$idx (Slurm without device constraints gives the GPU's index)"
seen=$(echo "$text" | sed -n 's/^SEEN=//p')
say "INFO nvidia-smi -L in the job lists $seen GPUs (device isolation refuses the others' nodes, not their listing)"
refused_other=0
for n in /dev/nvidia[0-9]*; do
    [ -e "$n" ] || continue
    k=${n#/dev/nvidia}
    line=$(echo "$text" | grep "^OPEN $n ")
    if [ "$k" = "$idx" ]; then
        check "its own GPU's node opens" "$(echo "$line" | grep -q ' ok$' && echo 0 || echo 1)" "$line"
    else
        echo "$line" | grep -q ' refused$' || refused_other=1
    fi
done
if ! ls /dev/nvidia[0-9]* >/dev/null 2>&1; then
    say "SKIP device nodes: no /dev/nvidiaN here"
elif [ "$ngpu" -gt 1 ]; then
    check "other GPUs' nodes are refused" "$refused_other" "$(echo "$text" | grep '^OPEN /dev/nvidia[0-9]' | tr '\n' ';')"
fi
for n in /dev/nvidiactl /dev/nvidia-uvm; do
    line=$(echo "$text" | grep "^OPEN $n ")
    [ -n "$line" ] && check "$n stays usable" "$(echo "$line" | grep -q ' ok$' && echo 0 || echo 1)" "$line"
done
if echo "$text" | grep -q '^TORCH [0-9]'; then
    t=$(echo "$text" | grep '^TORCH ' | head -1)
    check "torch sees exactly its GPU" "$(echo "$t" | grep -q '^TORCH 1 ' && echo 0 || echo 1)" "$t; $(echo "$text" | grep TORCH_RAN)"
else
    say "SKIP torch: not importable by the job's python3"
fi

# a job that asked for no GPU: what it is told, and whether the GPUs' nodes are closed to it
none=$(gs gsub -t 5 -o "$work/none.out" -N none "$work/job.sh" | tail -1)
wait_end "$none" >/dev/null
ntext=$(cat "$work/none.out" 2>/dev/null)
echo "$ntext" >>"$report"
say "INFO a job without --gpus: $(echo "$ntext" | grep -E '^(CUDA_VISIBLE_DEVICES|TORCH )' | tr '\n' ';')"
iso=$(echo "$info" | grep '^device access:')
nodes_open=$(echo "$ntext" | grep -c '^OPEN /dev/nvidia[0-9]* ok$')
if ! ls /dev/nvidia[0-9]* >/dev/null 2>&1; then
    :
elif echo "$iso" | grep -qE 'cgroup (v1 devices controller|v2 device program)'; then
    check "a job without GPUs is refused every GPU's node" "$([ "$nodes_open" = 0 ] && echo 0 || echo 1)" \
        "$nodes_open opened; $iso"
else
    say "INFO device isolation is not on here ($iso): a job without GPUs opened $nodes_open GPU nodes"
fi

# more GPUs than the machine has: refused at submission with one line
too=$((ngpu + 1))
msg=$(gs gsub -t 5 --gpus "$too" "$work/job.sh" 2>&1)
rc=$?
check "--gpus $too is refused at submission" "$([ "$rc" != 0 ] && [ "$(echo "$msg" | wc -l)" = 1 ] && echo 0 || echo 1)" "exit $rc: $msg"

if [ "$ngpu" = 1 ]; then  # the only GPU held: a second one-GPU job waits for the first to end
    a=$(HOLD=4 gs gsub -t 30 --gpus 1 -o "$work/a.out" -N a "$work/job.sh" | tail -1)
    b=$(gs gsub -t 30 --gpus 1 -o "$work/b.out" -N b "$work/job.sh" | tail -1)
    wait_end "$a" >/dev/null
    wait_end "$b" >/dev/null
    times=$(gs gstat -a --json | "$py" -c "
import json, sys
j = {x['id']: x for x in json.load(sys.stdin)['jobs']}
a, b = j.get(int('${a:-0}' or 0)), j.get(int('${b:-0}' or 0))
print(f\"{a['end_time']:.3f} {b['start_time']:.3f}\" if a and b and a['end_time'] and b['start_time'] else 'none')")
check "a second one-GPU job waits for the only GPU" \
    "$(echo "$times" | "$py" -c 'import sys; t = sys.stdin.read().split(); sys.exit(0 if len(t) == 2 and float(t[1]) >= float(t[0]) else 1)'; echo $?)" \
    "first ended at / second started at: $times"
fi

if [ "$ngpu" -gt 1 ]; then  # two one-GPU jobs at once: distinct GPUs, each told its own
    a=$(HOLD=5 gs gsub -t 30 --gpus 1 -o "$work/a.out" -N a "$work/job.sh" | tail -1)
    b=$(HOLD=5 gs gsub -t 30 --gpus 1 -o "$work/b.out" -N b "$work/job.sh" | tail -1)
    wait_end "$a" >/dev/null
    wait_end "$b" >/dev/null
    da=$(gs gstat -a --json | "$py" -c "import json,sys; print(next(j.get('devices','') for j in json.load(sys.stdin)['jobs'] if j['id']==$a))")
    db=$(gs gstat -a --json | "$py" -c "import json,sys; print(next(j.get('devices','') for j in json.load(sys.stdin)['jobs'] if j['id']==$b))")
    ca=$(sed -n 's/^CUDA_VISIBLE_DEVICES=//p' "$work/a.out")
    cb=$(sed -n 's/^CUDA_VISIBLE_DEVICES=//p' "$work/b.out")
    check "two one-GPU jobs get distinct GPUs" "$([ -n "$da" ] && [ "$da" != "$db" ] && echo 0 || echo 1)" "$da / $db"
    ia=$(echo "$da" | sed -n 's/.*gpu:\([0-9]*\).*/\1/p')
    ib=$(echo "$db" | sed -n 's/.*gpu:\([0-9]*\).*/\1/p')
    check "each is told its own GPU's index" "$([ "$ca" = "$ia" ] && [ "$cb" = "$ib" ] && echo 0 || echo 1)" \
        "'$ca' / '$cb' for gpu:$ia / gpu:$ib (Slurm 22.05 gives two such jobs 0 and 1)"
fi

say "log: $spool/gschedd.log; report: $report"
say "$failed checks failed"
exit "$failed"
