#!/bin/bash
#PBS -l select=1:ncpus=4:ompthreads=4
#PBS -l walltime=1:00:00
cd $PBS_O_WORKDIR
echo "threads $OMP_NUM_THREADS cpus $NCPUS"
