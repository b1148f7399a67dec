#!/bin/bash
#SBATCH --job-name=omp_demo
#SBATCH --account=project_2001234
#SBATCH --partition=small
#SBATCH --time=00:05:00
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=4

export OMP_NUM_THREADS=$SLURM_CPUS_PER_TASK
# gridsched corpus: replaced srun <OpenMP program>
echo "omp threads: $OMP_NUM_THREADS"
