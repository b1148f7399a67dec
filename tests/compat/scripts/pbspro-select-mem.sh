#!/bin/bash
#PBS -l select=1:ncpus=2:mem=2gb
# time limit
#PBS -l walltime=0:05:00
# queue to use
#PBS -q short_cpuQ
# gridsched corpus: replaced ls –lrt (an en dash, not a hyphen)
echo "ls –lrt"
echo "running on: " && hostname
