#!/bin/bash
#PBS -P COMPENG
#PBS -q defaultQ 
#PBS -l select=1:ncpus=8:mpiprocs=8:mem=8Gb

#PBS -l walltime=1:00:00

cd $PBS_O_WORKDIR

# gridsched corpus: replaced module load gcc
echo module load gcc
# gridsched corpus: replaced mpirun -n 8 ./solver > output
echo solver > output

 exit 0

