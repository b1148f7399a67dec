#!/bin/bash

#SBATCH --job-name=hybrid
#SBATCH --output=hybrid_job.txt
#SBATCH --ntasks=8
#SBATCH --cpus-per-task=5
#SBATCH --nodes=2
#SBATCH --time=10:00

export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK

# gridsched corpus: replaced mpirun hello_hybrid.mpi
echo hello_hybrid
