#!/bin/bash
#PBS -N joined
#PBS -j eo
#PBS -e job.err
#PBS -l walltime=00:05:00
echo "to standard output, which goes to the error file"
echo "to standard error" >&2
