#!/bin/bash
#PBS -N sweep
#PBS -t 1-4
#PBS -l nodes=1:ppn=2,walltime=00:30:00
#PBS -o sweep.log
echo "name $PBS_JOBNAME"
echo "index $PBS_ARRAYID"
