#!/bin/sh
#GS -N hello
#GS -n 1
#GS -t 1m
#GS -o hello.out
#GS -j oe
# A first job: says where it runs.  Its output and errors go to one file,
# hello.out, which the next run replaces.
echo "hello from job $GS_JOBID ($GS_JOBNAME) on core(s) $GS_CORES"
grep Cpus_allowed_list /proc/self/status
