#!/bin/bash
# Finish the setup of ../shared/tools/gridengine-localhost for the corpus (run as root after its start.sh,
# which stops at the queue: the packaged queue template names parallel environments "make smp mpi" that
# the fresh cell does not define).  Makes the parallel environments and queues the corpus scripts name,
# the site resources they request (gpu, tmem, m_mem_free), and all.q on localhost, all of 16 slots.
# Idempotent; prints "ready" when the queue instance is up.  Stop with the shared tool's stop.sh.
set -u
NSN=sgeanchor
SLOTS="${GS_SGE_SLOTS:-16}"
die() { echo "sge_localhost.sh: $*" >&2; exit 1; }
[ -r /var/lib/gridengine/default/common/settings.sh ] || die "Grid Engine is not installed (run its start.sh)"
. /var/lib/gridengine/default/common/settings.sh
NS=(ip netns exec "$NSN")
"${NS[@]}" qstat >/dev/null 2>&1 || die "no qmaster answers in namespace $NSN (run the shared start.sh first)"
T="$(mktemp -d)"; trap 'rm -rf "$T"' EXIT

for pe in make smp mpi orte ompi openmpi gpu-titanx; do
    "${NS[@]}" qconf -sp "$pe" >/dev/null 2>&1 && continue
    printf 'pe_name %s\nslots 9999\nuser_lists NONE\nxuser_lists NONE\nstart_proc_args /bin/true\nstop_proc_args /bin/true\nallocation_rule $pe_slots\ncontrol_slaves FALSE\njob_is_first_task TRUE\nurgency_slots min\naccounting_summary FALSE\nqsort_args NONE\n' "$pe" > "$T/pe"
    "${NS[@]}" qconf -Ap "$T/pe" >/dev/null || die "cannot add parallel environment $pe"
done

# site resources the corpus requests: requestable, not consumable (nothing is counted)
"${NS[@]}" qconf -sc > "$T/c" || die "qconf -sc failed"
for r in "gpu gpu INT <= YES NO 0 0" "tmem tmem MEMORY <= YES NO 0 0" "m_mem_free mmf MEMORY <= YES NO 0 0"; do
    grep -q "^${r%% *} " "$T/c" || echo "$r" >> "$T/c"
done
"${NS[@]}" qconf -Mc "$T/c" >/dev/null 2>&1 || true
# the host offers them (a requested value is compared with the host's): 4 GPUs, as the corpus machine
"${NS[@]}" qconf -rattr exechost complex_values gpu=4,tmem=64G,m_mem_free=64G localhost >/dev/null \
    || die "cannot set the host's complex values"

for q in all.q gpu.q corei7b mps_amd.q; do
    "${NS[@]}" qconf -sq "$q" >/dev/null 2>&1 && continue
    "${NS[@]}" qconf -sq > "$T/q"
    sed -i -e "s/^qname .*/qname $q/" -e "s/^hostlist .*/hostlist localhost/" -e "s/^slots .*/slots $SLOTS/" \
        -e "s#^tmpdir .*#tmpdir /tmp#" -e "s/^pe_list .*/pe_list make smp mpi orte ompi openmpi gpu-titanx/" \
        -e "s/^shell_start_mode .*/shell_start_mode unix_behavior/" -e "s/^load_thresholds .*/load_thresholds NONE/" "$T/q"
    "${NS[@]}" qconf -Aq "$T/q" >/dev/null || die "cannot add queue $q"
done
for q in all.q gpu.q corei7b mps_amd.q; do  # a loaded machine must not put the queues in alarm
    "${NS[@]}" qconf -rattr queue load_thresholds NONE "$q" >/dev/null 2>&1
done
for i in $(seq 60); do
    "${NS[@]}" qstat -f 2>/dev/null | awk '/^all.q@localhost/ && NF==5 {ok=1} END{exit !ok}' && { echo ready; exit 0; }
    sleep 0.5
done
die "all.q@localhost did not come up: $("${NS[@]}" qstat -f 2>&1 | grep all.q)"
