#!/bin/sh
#$ -S /bin/sh
#$ -o stdout
#$ -j y
#$ -l h_vmem=1G
#$ -l h_rt=00:01:00
#$ -cwd
#$ -M someone@example.org
#$ -m abe
#$ -N vortex_tangle
#$ -pe smp 2
#$ -pe smp 2
export OMP_NUM_THREADS=$NSLOTS
echo "threads $OMP_NUM_THREADS"
# gridsched corpus: replaced mpiexec python run.py
mpiexec echo run
