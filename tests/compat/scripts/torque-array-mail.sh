#!/bin/sh
# PBS directives start here.
#PBS -N rumi-22r
#PBS -q batch 
#PBS -l walltime=23:59:00
#PBS -t 0-256
### Mail when the job aborts, begins, ends
#PBS -m abe
### Mail goes to
#PBS -M someone@example.org

cd $PBS_O_WORKDIR
# gridsched corpus: replaced ./rumi-22r ${PBS_ARRAYID}
echo "rumi ${PBS_ARRAYID}"




