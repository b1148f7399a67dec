#!/bin/sh
#GS -N hello
#GS -n 1
#GS -t 1m
# A first job: says where it runs.
echo "hello from job $GS_JOBID ($GS_JOBNAME) on core(s) $GS_CORES"
grep Cpus_allowed_list /proc/self/status
