#!/bin/bash
#PBS -l select=1:ncpus=8:mem=2gb -l place=pack:excl
# time limit
#PBS -l walltime=0:24:00
# queue to use
#PBS -q short_cpuQ

# gridsched corpus: replaced module load mpich-3.2
echo module load mpich-3.2
# gridsched corpus: replaced mpirun.actual -n 8 ./gsa 2 128000 100 0
echo gsa
