#!/bin/bash
#PBS -N mpi_ring
#PBS -l select=2:ncpus=4:mpiprocs=4
#PBS -l place=scatter
#PBS -l walltime=00:30:00
cd $PBS_O_WORKDIR
echo "ranks $(wc -l < $PBS_NODEFILE)"
# gridsched corpus: replaced mpiexec ./ring
